"""Shared fixtures: tiny configs (vocab 99, hidden 32, 2 layers, 4 heads / 2 kv heads) for the three Transformer
families, and one for the recurrent family (vocab 99, hidden 16, 2 layers).

The suite runs on every core with pytest-xdist (`-n 2` on the project's 2-core machines): each worker computes with
one torch thread, and the processes its tests start inherit that (OMP_NUM_THREADS), so that the workers do not
starve each other. Every test is independent of the worker it runs on and of the tests before it: outputs go to
pytest's own temporary folders, never to a shared one.
"""

import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

import hf_attention
from hf_attention.modeling import configuration_hf_attention

TINY = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
}


TINY_RECURRENT = {"vocab_size": 99, "hidden_size": 16, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0}


def tiny_config(family: str, **overrides):
    """A tiny config of `family` ("encoder", "decoder", "seq2seq" or "recurrent") with `overrides` applied."""
    if family == "recurrent":
        return hf_attention.HFAttentionRecurrentConfig(**{**TINY_RECURRENT, **overrides})
    fields = {**TINY, **overrides}
    if family == "encoder":
        fields.setdefault("num_hidden_layers", 2)
        return hf_attention.HFAttentionEncoderConfig(**fields)
    if family == "decoder":
        fields.setdefault("num_hidden_layers", 2)
        return hf_attention.HFAttentionDecoderConfig(**fields)
    fields.setdefault("encoder_layers", 2)
    fields.setdefault("decoder_layers", 2)
    return hf_attention.HFAttentionSeq2SeqConfig(**fields)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# Every name the config accepts for position_encoding: the registered schemes and "none".
POSITION_ENCODINGS = configuration_hf_attention.POSITION_ENCODINGS


def export_candidates(model_class) -> str:
    """The architectures a model of `model_class` may export as, in the registry's order, as `to_hf`'s messages list
    them ("gpt2/llama/..."): read from the registry, so that a new architecture needs no change here."""
    from hf_attention.architectures import REGISTRY

    return "/".join(architecture.name for architecture in REGISTRY.values() if model_class in architecture.classes)


def build(model_class, family: str, **overrides):
    """A tiny model of `model_class` in eval mode, built from `tiny_config(family, **overrides)`."""
    return model_class(tiny_config(family, **overrides)).eval()


def left_pad(rows: list[list[int]], pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token rows into (ids, mask)."""
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def right_pad(rows: list[list[int]], pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token rows into (ids, mask)."""
    width = max(map(len, rows))
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return ids, mask


# --- Text fixtures (generation, pipelines, heatmaps): tokenizers trained on pydoc text, tiny saved checkpoints ---


@pytest.fixture(scope="session")
def pydoc_texts() -> list[str]:
    """A few hundred paragraphs of real English (Python's documentation topics)."""
    from text_fixtures import pydoc_paragraphs

    return pydoc_paragraphs()


@pytest.fixture(scope="session")
def trained_tokenizer(pydoc_texts):
    """`trained_tokenizer(family)`: a byte-level BPE tokenizer for the family's objective, trained once per session."""
    from text_fixtures import make_tokenizer

    cache = {}

    def get(family: str):
        if family not in cache:
            cache[family] = make_tokenizer(family, pydoc_texts)
        return cache[family]

    return get


@pytest.fixture(scope="session")
def saved_checkpoint(trained_tokenizer, tmp_path_factory):
    """`saved_checkpoint(model_class, family, **overrides)`: folder with a tiny random model and its tokenizer."""
    from text_fixtures import save_tiny_checkpoint

    cache = {}

    def get(model_class, family: str, **overrides):
        key = (model_class.__name__, family, tuple(sorted(overrides.items())))
        if key not in cache:
            directory = tmp_path_factory.mktemp(model_class.__name__)
            cache[key] = save_tiny_checkpoint(model_class, family, trained_tokenizer(family), directory, **overrides)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def sources(tmp_path_factory) -> dict:
    """Saved models the writing commands read (never written): a tiny GPT-2 (a `convert` source) and a tiny
    hf-attention decoder that exports as Llama (an `export` source)."""
    from test_parity_hf import build_reference
    from test_to_hf import LLAMA

    root = tmp_path_factory.mktemp("sources")
    build_reference("gpt2").save_pretrained(root / "gpt2")
    build(hf_attention.HFAttentionForCausalLM, "decoder", **LLAMA).eval().save_pretrained(root / "ours")
    return {"convert": root / "gpt2", "export": root / "ours"}


def pytest_configure(config):
    # The marks of transformers' own model tests (tests/test_transformers_model_tests.py runs them).
    for name in (
        "accelerate_tests",
        "flash_attn_test",
        "flash_attn_3_test",
        "flash_attn_4_test",
        "torch_compile_test",
    ):
        config.addinivalue_line("markers", f"{name}: a mark of transformers' model tests")
