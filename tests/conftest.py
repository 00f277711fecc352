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
