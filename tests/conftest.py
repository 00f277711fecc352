"""Shared fixtures: tiny configs (vocab 99, hidden 32, 2 layers, 4 heads / 2 kv heads) for the three families."""

import pytest
import torch

import hf_attention

TINY = {"vocab_size": 99, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "hidden_dropout_prob": 0.0}


def tiny_config(family: str, **overrides):
    """A tiny config of `family` ("encoder", "decoder" or "seq2seq") with `overrides` applied."""
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


POSITION_ENCODINGS = ("sinusoidal", "learned", "rotary", "alibi", "relative", "none")


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
