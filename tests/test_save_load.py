"""save_pretrained → from_pretrained is bit-exact, and a checkpoint loads as remote code without hf_attention."""

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import build
from safetensors import safe_open
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

import hf_attention
from hf_attention import (
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionRecurrentForSeq2SeqLM,
)
from hf_attention.commands.refresh_code import closure_files
from hf_attention.modeling import modeling_hf_attention as modeling
from hf_attention.modeling.modeling_hf_attention import AUTO_CLASSES, auto_map_of

CASES = [
    ("decoder", HFAttentionForCausalLM, AutoModelForCausalLM, {"position_encoding": "rotary"}),
    ("encoder", HFAttentionForMaskedLM, AutoModelForMaskedLM, {"position_encoding": "learned", "type_vocab_size": 2}),
    ("seq2seq", HFAttentionForSeq2SeqLM, AutoModelForSeq2SeqLM, {"position_encoding": "relative"}),
    ("recurrent", HFAttentionRecurrentForSeq2SeqLM, AutoModelForSeq2SeqLM, {"cell": "lstm"}),
]


def model_inputs(family: str) -> dict:
    ids = torch.tensor([[5, 17, 33, 8, 61], [7, 21, 3, 0, 0]])
    inputs = {"input_ids": ids, "attention_mask": (ids != 0).long()}  # right-padded, as the recurrent encoder needs
    if family in ("seq2seq", "recurrent"):
        inputs["decoder_input_ids"] = torch.tensor([[1, 9, 4], [1, 30, 2]])
    return inputs


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize(("family", "cls", "auto", "overrides"), CASES)
def test_save_load_bit_exact(tmp_path, family, cls, auto, overrides, tied):
    model = build(cls, family, tie_word_embeddings=tied, **overrides)
    model.save_pretrained(tmp_path)
    loaded = auto.from_pretrained(tmp_path)
    assert type(loaded) is cls
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    with torch.no_grad():
        assert torch.equal(model(**model_inputs(family)).logits, loaded(**model_inputs(family)).logits)
    lm_head_saved = "lm_head.weight" in set(safe_open(tmp_path / "model.safetensors", "pt").keys())  # noqa: SIM118
    assert lm_head_saved is not tied  # a tied head is re-tied on load, not stored twice
    if tied:
        assert loaded.lm_head.weight.data_ptr() == loaded.get_input_embeddings().weight.data_ptr()


def memory_layout(tensor: torch.Tensor) -> tuple:
    """Everything besides the values by which a CPU kernel may pick its code path: dtype, shape, strides, offset,
    and where the data starts relative to a 64-byte boundary."""
    return tensor.dtype, tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), tensor.data_ptr() % 64


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_load_gives_the_layout_of_a_built_model(tmp_path, cell, tied):
    """Loaded recurrent weights lie in memory as a built model's do, not at the safetensors file's offsets: the LSTM
    hands its weights to oneDNN by address, and on some CPUs (AMD Zen 4) a misaligned copy of the same values gave
    other last bits. Deterministic on every CPU, unlike the bit-exact comparison that shows the effect."""
    model = build(HFAttentionRecurrentForSeq2SeqLM, "recurrent", cell=cell, tie_word_embeddings=tied)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    built = dict(model.named_parameters(remove_duplicate=False))
    for name, parameter in loaded.named_parameters(remove_duplicate=False):
        assert memory_layout(parameter) == memory_layout(built[name]), name
    for name, rnn in loaded.named_modules():
        if isinstance(rnn, torch.nn.RNNBase):  # the weights the kernels read are the parameters themselves
            assert [w.data_ptr() for w in rnn._flat_weights] == [p.data_ptr() for p in rnn.parameters()], name


@pytest.mark.parametrize(("family", "cls", "auto", "overrides"), CASES)
def test_checkpoint_has_code_and_full_auto_map(tmp_path, family, cls, auto, overrides):
    """The folder holds what `hf-attention refresh-code` would write: the whole closure and the family's full
    auto_map, whose entries name the modules that define the classes."""
    build(cls, family, **overrides).save_pretrained(tmp_path)
    files = set(os.listdir(tmp_path))
    assert {name for name in files if name.endswith(".py")} == set(closure_files()) and "model.safetensors" in files
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    model_type = cls.config_class.model_type
    assert auto_map == auto_map_of(model_type) and set(auto_map) == {"AutoConfig", *AUTO_CLASSES[model_type]}
    for auto_name, model_class in AUTO_CLASSES[model_type].items():
        assert auto_map[auto_name] == f"{model_class.__module__.rsplit('.', 1)[-1]}.{model_class.__name__}"


def test_every_public_class_is_found_in_the_file_that_defines_it():
    """`inspect.getsource` (and so debuggers' "go to definition" and docs generators) finds each public class in its
    own file: no class claims to live in another module than the one that defines it."""
    public = {name: getattr(module, name) for module in (hf_attention, modeling) for name in module.__all__}
    classes = [obj for obj in public.values() if inspect.isclass(obj)]
    assert HFAttentionForCausalLM in classes and len(classes) > 20
    for public_class in classes:
        assert re.match(rf"class {public_class.__name__}\b", inspect.getsource(public_class)), public_class
        assert inspect.getsourcefile(public_class) == sys.modules[public_class.__module__].__file__


def test_save_pretrained_with_push_to_hub_uploads_the_code(tmp_path, monkeypatch):
    """`save_pretrained(push_to_hub=True)` uploads from inside transformers' save: the closure is in the upload."""
    import transformers.modeling_utils
    from transformers.utils.hub import PushToHubMixin

    uploaded = []

    def record_upload(self, working_dir, repo_id, files_timestamps, **kwargs):
        changed = [
            name
            for name in os.listdir(working_dir)
            if name not in files_timestamps or os.path.getmtime(Path(working_dir) / name) > files_timestamps[name]
        ]
        uploaded.extend(changed)

    hub = SimpleNamespace(create_repo=lambda repo_id, **kwargs: SimpleNamespace(repo_id=repo_id))
    card = SimpleNamespace(save=lambda path: None)
    monkeypatch.setattr(transformers.modeling_utils, "hf_api", lambda: hub)
    monkeypatch.setattr(transformers.modeling_utils, "create_and_tag_model_card", lambda *args, **kwargs: card)
    monkeypatch.setattr(PushToHubMixin, "_upload_modified_files", record_upload)
    build(HFAttentionForCausalLM, "decoder").save_pretrained(tmp_path / "model", push_to_hub=True)
    assert set(closure_files()) | {"config.json", "model.safetensors"} <= set(uploaded)


REMOTE_SCRIPT = textwrap.dedent("""
    import sys, json, torch
    sys.modules["hf_attention"] = None  # make the package unimportable: only the checkpoint's code may be used
    import transformers
    folder, auto_name, inputs_path, out_path = sys.argv[1:5]
    inputs = torch.load(inputs_path)
    auto_map = json.load(open(f"{folder}/config.json"))["auto_map"]
    loaded = {}
    for name in sorted(auto_map):  # every Auto class the checkpoint names
        model = getattr(transformers, name).from_pretrained(folder, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        loaded[name] = type(model).__name__
    model = getattr(transformers, auto_name).from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        torch.save(model(**inputs).logits, out_path)
    print(json.dumps(loaded))
""")


def remote_code_env(folder) -> dict:
    """The environment of a fresh interpreter that loads a checkpoint's own code: offline, with a dynamic-module
    cache and a home of its own in `folder` (no copy of hf_attention's modules from an earlier run)."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(folder),
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(folder / "modules"),
        **thread_env(),
    }


def thread_env() -> dict:
    """The torch thread count of this process for a child (OMP_NUM_THREADS, where the suite's workers set it): the
    same computation on another number of threads may add its sums in another order, and bit-exact comparisons
    between the two processes would compare that instead of the code."""
    return {"OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"]} if "OMP_NUM_THREADS" in os.environ else {}


@pytest.mark.slow
@pytest.mark.parametrize(("family", "cls", "auto", "overrides"), CASES)
def test_remote_code_load_in_fresh_process(tmp_path, family, cls, auto, overrides):
    """Without hf_attention, every Auto class of the family loads the checkpoint from its own code, and the head
    computes the logits of the model that saved it."""
    checkpoint = tmp_path / "checkpoint"
    model = build(cls, family, **overrides)
    model.save_pretrained(checkpoint)
    inputs = model_inputs(family)
    torch.save(inputs, tmp_path / "inputs.pt")
    (tmp_path / "remote.py").write_text(REMOTE_SCRIPT)
    env = remote_code_env(tmp_path)
    result = subprocess.run(
        [sys.executable, "remote.py", str(checkpoint), auto.__name__, "inputs.pt", "logits.pt"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    config_class = cls.config_class
    expected = {
        auto_name: model_class.__name__ for auto_name, model_class in AUTO_CLASSES[config_class.model_type].items()
    }
    assert report == {"AutoConfig": config_class.__name__, **expected}
    with torch.no_grad():
        assert torch.equal(torch.load(tmp_path / "logits.pt"), model(**inputs).logits)


def test_closure_imports_only_stdlib_torch_transformers_and_siblings():
    import ast
    import pathlib

    import hf_attention

    package = pathlib.Path(hf_attention.__file__).parent / "modeling"
    allowed = {"torch", "transformers", *sys.stdlib_module_names}
    names = [Path(name).stem for name in closure_files()]  # every file a checkpoint ships, found by its imports
    assert {"configuration_hf_attention", "modeling_hf_attention", "stack", "builders", "pretrained"} <= set(names)
    for name in names:
        tree = ast.parse((package / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module is not None, f"{name}: 'from . import' is not copied with remote code"
                if node.level:
                    assert node.level == 1 and "." not in node.module, f"{name}: import beyond a flat sibling"
                else:
                    assert node.module.split(".")[0] in allowed, f"{name} imports {node.module}"
            elif isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in allowed for a in node.names), f"{name} imports {node.names}"


def test_base_auto_model_loads_head_checkpoint(tmp_path):
    build(HFAttentionForSeq2SeqLM, "seq2seq").save_pretrained(tmp_path)
    base = AutoModel.from_pretrained(tmp_path)
    assert type(base).__name__ == "HFAttentionSeq2SeqModel"
