"""Hypothesis strategies for tests/test_fuzz.py: configs (every knob, valid and invalid values; the recurrent
family's too), model inputs and their malformed variants, generation options, command lines and the destinations of
the writing commands.

Sizes stay tiny (hidden 8-16, 1-2 layers, vocab 40, up to 6 tokens) so that a few hundred examples run in a minute.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from hf_attention.modeling.configuration_hf_attention import (
    HIDDEN_ACTS,
    NORM_POSITIONS,
    NORM_TYPES,
    POSITION_ENCODINGS,
    SINUSOIDAL_LAYOUTS,
)
from hf_attention.modeling.configuration_recurrent import NO_ATTENTION, RECURRENT_CELLS
from hf_attention.modeling.scores import SCORES

VOCAB = 40
FAMILIES = ("encoder", "decoder", "seq2seq")


@st.composite
def valid_configs(draw, families=FAMILIES) -> tuple[str, dict]:
    """(family, config keyword arguments) that the config must accept."""
    family = draw(st.sampled_from(families))
    heads = draw(st.sampled_from((1, 2, 4)))
    kv_heads = draw(st.sampled_from([k for k in (1, 2, 4) if heads % k == 0]))
    head_dim = draw(st.sampled_from((None, 2, 4, 6)))  # even: rotary rotates pairs
    hidden = heads * 4 if head_dim is None else draw(st.sampled_from((8, 12, 16)))  # even: sinusoids come in pairs
    position = draw(st.sampled_from(POSITION_ENCODINGS))
    score = draw(st.sampled_from(tuple(SCORES)))
    fields = {
        "vocab_size": VOCAB,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": draw(st.sampled_from((8, 16))),
        "hidden_act": draw(st.sampled_from(HIDDEN_ACTS)),
        "max_position_embeddings": 32,
        "attention_score": score,
        "position_encoding": position,
        "norm_position": draw(st.sampled_from(NORM_POSITIONS)),
        "norm_type": draw(st.sampled_from(NORM_TYPES)),
        "scale_embeddings": draw(st.booleans()),
        "attention_bias": draw(st.booleans()),
        "mlp_bias": draw(st.booleans()),
        "embedding_norm": draw(st.booleans()),
        "final_norm": draw(st.sampled_from((None, True, False))),
        "position_offset": draw(st.sampled_from((0, 2))) if position == "learned" else 0,
        "sinusoidal_layout": draw(st.sampled_from(SINUSOIDAL_LAYOUTS)),
        "rope_theta": draw(st.sampled_from((100.0, 10000.0))),
        "relative_attention_num_buckets": draw(st.sampled_from((8, 32))),
        "relative_attention_max_distance": draw(st.sampled_from((20, 128))),
        "hidden_dropout_prob": 0.0,
        "initializer_range": draw(st.sampled_from((0.02, 0.3))),
        "tie_word_embeddings": draw(st.booleans()),
        "lm_head_bias": draw(st.booleans()),
        "lm_head_transform": draw(st.booleans()),
        "scale_lm_head_input": draw(st.booleans()),
        "attn_implementation": "eager" if not SCORES[score].dot_product else draw(st.sampled_from(("eager", "sdpa"))),
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if family == "encoder":
        fields["type_vocab_size"] = draw(st.sampled_from((0, 2)))
        fields["num_hidden_layers"] = draw(st.sampled_from((1, 2)))
    elif family == "decoder":
        fields["num_hidden_layers"] = draw(st.sampled_from((1, 2)))
    else:
        fields["encoder_layers"] = draw(st.sampled_from((1, 2)))
        fields["decoder_layers"] = draw(st.sampled_from((1, 2)))
        fields["decoder_start_token_id"] = 1
    return family, fields


@st.composite
def valid_recurrent_configs(draw) -> dict:
    """Keyword arguments of `HFAttentionRecurrentConfig` that it must accept: every cell, score (and none), width and
    depth the family offers, at tiny sizes."""
    return {
        "vocab_size": VOCAB,
        "hidden_size": draw(st.sampled_from((8, 12, 16))),
        "embedding_size": draw(st.sampled_from((None, 6, 8))),
        "encoder_layers": draw(st.sampled_from((1, 2))),
        "decoder_layers": draw(st.sampled_from((1, 2))),
        "cell": draw(st.sampled_from(RECURRENT_CELLS)),
        "bidirectional_encoder": draw(st.booleans()),
        "attention_score": draw(st.sampled_from((*SCORES, NO_ATTENTION))),
        "dropout": 0.0,
        "initializer_range": draw(st.sampled_from((0.1, 0.3))),
        "tie_word_embeddings": draw(st.booleans()),
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }


# field → values the config must refuse with a ValueError (or TypeError) naming the field
INVALID_VALUES = {
    "vocab_size": [0, -3, 2.5, "100", None],
    "hidden_size": [0, -8, 7.0, "16"],
    "num_attention_heads": [0, -1, 1.5],
    "num_key_value_heads": [0, -2, 3],  # 3 does not divide 4 heads
    "head_dim": [0, -4, 2.5],
    "intermediate_size": [0, -1, "64"],
    "max_position_embeddings": [0, -5],
    "hidden_act": ["tanhh", "", 3, None],
    "attention_score": ["cosine", "", None, 1],
    "position_encoding": ["absolute", "RoPE", None, 0],
    "norm_position": ["middle", None],
    "norm_type": ["batchnorm", None],
    "scale_embeddings": ["yes", 1, None],
    "attention_bias": ["false", 0.0],
    "final_norm": ["auto", 2],
    "type_vocab_size": [-1, 1.5],
    "position_offset": [-1, "2"],
    "sinusoidal_layout": ["spiral", None],
    "rope_theta": [0, -1.0, "big"],
    "relative_attention_num_buckets": [0, -2, 1],
    "relative_attention_max_distance": [0, -1, 2],
    "layer_norm_eps": [0, -1e-5, "tiny"],
    "hidden_dropout_prob": [-0.1, 1.5, "half"],
    "attention_dropout": [-0.5, 2],
    "initializer_range": [-0.02, "0.02"],
    "pad_token_id": [-1, 40, 2.5, "0"],
    "bos_token_id": [99, -7],
    "eos_token_id": [[1, 40], 100, "2"],
    "tie_word_embeddings": ["true", None],
    "lm_head_bias": [2, "no"],
    "freeze_lm_head_bias": [True],  # without lm_head_bias: nothing to freeze
}


@st.composite
def invalid_configs(draw) -> tuple[str, dict, str]:
    """(family, config fields with one invalid value, the field that must be named)."""
    family, fields = draw(valid_configs())
    field = draw(st.sampled_from(sorted(INVALID_VALUES)))
    value = draw(st.sampled_from(INVALID_VALUES[field]))
    fields = {**fields, field: value}
    if field == "num_key_value_heads":
        fields["num_attention_heads"], fields["hidden_size"], fields["head_dim"] = 4, 16, None
    if field == "freeze_lm_head_bias":
        fields["lm_head_bias"] = False
    if field in ("relative_attention_num_buckets", "relative_attention_max_distance"):
        fields["position_encoding"] = "relative"
    return family, fields, field


@dataclass(frozen=True)
class Batch:
    """Rows of real token ids and how they are padded."""

    rows: list[list[int]]
    side: str  # "left" or "right"

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(map(len, self.rows))
        pad = [width - len(r) for r in self.rows]
        if self.side == "left":
            ids = [[0] * p + r for p, r in zip(pad, self.rows, strict=True)]
            mask = [[0] * p + [1] * len(r) for p, r in zip(pad, self.rows, strict=True)]
        else:
            ids = [r + [0] * p for p, r in zip(pad, self.rows, strict=True)]
            mask = [[1] * len(r) + [0] * p for p, r in zip(pad, self.rows, strict=True)]
        return torch.tensor(ids), torch.tensor(mask)


def batches(max_rows: int = 3, max_length: int = 6, sides=("left", "right")) -> st.SearchStrategy[Batch]:
    row = st.lists(st.integers(3, VOCAB - 1), min_size=1, max_size=max_length)
    return st.builds(Batch, st.lists(row, min_size=1, max_size=max_rows), st.sampled_from(sides))


def decoder_inputs(ids: torch.Tensor) -> torch.Tensor:
    """The same three decoder inputs for every row of `ids`: the start token and two more."""
    return torch.tensor([[1, 5, 7]]).expand(ids.shape[0], -1)


# Malformed model inputs: (the argument whose name the error must carry, a function of (ids, mask) → inputs)
MALFORMED_INPUTS = {
    "input_ids": [
        lambda ids, mask: {"input_ids": ids.float()},
        lambda ids, mask: {"input_ids": ids.bool()},
        lambda ids, mask: {"input_ids": ids[0]},
        lambda ids, mask: {"input_ids": ids[None]},
        lambda ids, mask: {"input_ids": ids + VOCAB},
        lambda ids, mask: {"input_ids": -ids - 1},
        lambda ids, mask: {"input_ids": ids.tolist()},
        lambda ids, mask: {"input_ids": ids[:, :0]},
    ],
    "attention_mask": [
        lambda ids, mask: {"input_ids": ids, "attention_mask": mask[:, 1:] if mask.shape[1] > 1 else mask[:0]},
        lambda ids, mask: {"input_ids": ids, "attention_mask": mask[:1].repeat(ids.shape[0] + 1, 1)},
        lambda ids, mask: {"input_ids": ids, "attention_mask": mask[0]},
        lambda ids, mask: {"input_ids": ids, "attention_mask": mask[:, None, None].expand(-1, 1, 2, -1)},
        lambda ids, mask: {"input_ids": ids, "attention_mask": mask.tolist()},
        # a 0/1 integer 4-D mask of the right shape: neither boolean (True = attend) nor additive (0 = attend)
        lambda ids, mask: {"input_ids": ids, "attention_mask": (mask[:, None, :, None] * mask[:, None, None, :])},
    ],
    "position_ids": [
        lambda ids, mask: {"input_ids": ids, "position_ids": torch.arange(ids.shape[1] + 1)[None]},
        lambda ids, mask: {"input_ids": ids, "position_ids": torch.arange(ids.shape[1]).float()[None]},
        lambda ids, mask: {"input_ids": ids, "position_ids": torch.arange(ids.shape[1])},
        lambda ids, mask: {"input_ids": ids, "position_ids": torch.arange(ids.shape[1])[None].repeat(3, 1)[:, None]},
    ],
    "inputs_embeds": [
        lambda ids, mask: {"inputs_embeds": torch.zeros(ids.shape[0], ids.shape[1], 3)},
        lambda ids, mask: {"inputs_embeds": torch.zeros(ids.shape[0], ids.shape[1], dtype=torch.long)},
        lambda ids, mask: {"inputs_embeds": torch.zeros(2, 2, 2, 2)},
    ],
    "token_type_ids": [
        lambda ids, mask: {"input_ids": ids, "token_type_ids": torch.full_like(ids, 7)},
        lambda ids, mask: {"input_ids": ids, "token_type_ids": torch.zeros_like(ids).float()},
        lambda ids, mask: {"input_ids": ids, "token_type_ids": torch.zeros_like(ids)[:, :-1]},
        lambda ids, mask: {"input_ids": ids, "token_type_ids": -torch.ones_like(ids)},
    ],
    "cache": [
        lambda ids, mask: {"input_ids": ids, "cache": ((torch.zeros(1), torch.zeros(1)),), "use_cache": True},
        lambda ids, mask: {"input_ids": ids, "cache": "cache", "use_cache": True},
    ],
    "labels": [
        lambda ids, mask: {"input_ids": ids, "labels": ids[:, :-1] if ids.shape[1] > 1 else ids[:0]},
        lambda ids, mask: {"input_ids": ids, "labels": ids.float()},
        lambda ids, mask: {"input_ids": ids, "labels": ids + VOCAB},
        lambda ids, mask: {"input_ids": ids, "labels": ids - 200},
    ],
}


def _left_padded(ids: torch.Tensor, mask: torch.Tensor) -> dict:
    pad = torch.zeros_like(ids[:, :1])
    return {"input_ids": torch.cat([pad, ids], 1), "attention_mask": torch.cat([pad, mask], 1)}


# What the recurrent family is also given (MALFORMED_INPUTS apply to it too): bad decoder inputs, and sources its
# encoder cannot pack (no rows, padding before the tokens, a row without tokens)
RECURRENT_MALFORMED_INPUTS = {
    "decoder_input_ids": [
        lambda ids, mask: {"input_ids": ids, "decoder_input_ids": decoder_inputs(ids)[:, :0]},
        lambda ids, mask: {"input_ids": ids, "decoder_input_ids": decoder_inputs(ids) + VOCAB},
        lambda ids, mask: {"input_ids": ids, "decoder_input_ids": -decoder_inputs(ids)},
        lambda ids, mask: {"input_ids": ids, "decoder_input_ids": decoder_inputs(ids)[0]},
        lambda ids, mask: {"input_ids": ids, "decoder_input_ids": decoder_inputs(ids).float()},
        lambda ids, mask: {"input_ids": ids, "decoder_input_ids": decoder_inputs(ids).tolist()},
        lambda ids, mask: {"input_ids": ids, "decoder_input_ids": decoder_inputs(ids[:1].repeat(len(ids) + 1, 1))},
    ],
    "input_ids": [
        lambda ids, mask: {"input_ids": ids[:0], "decoder_input_ids": decoder_inputs(ids[:0])},
    ],
    "attention_mask": [
        _left_padded,
        lambda ids, mask: {"input_ids": ids, "attention_mask": torch.cat([torch.zeros_like(mask[:1]), mask[1:]])},
    ],
}


def malformed_inputs(recurrent: bool = False) -> st.SearchStrategy[tuple[str, object]]:
    """(argument, a function of (ids, mask) → inputs that are wrong in that argument); with `recurrent`, also the
    recurrent family's own cases."""
    tables = (MALFORMED_INPUTS, RECURRENT_MALFORMED_INPUTS) if recurrent else (MALFORMED_INPUTS,)
    return st.sampled_from([(name, make) for table in tables for name, makers in table.items() for make in makers])


# generate() options: valid ones, and some that transformers itself refuses with a ValueError
GENERATION_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "max_new_tokens": st.integers(1, 5),
        "num_beams": st.sampled_from((1, 2, 3)),
        "do_sample": st.booleans(),
        "top_k": st.sampled_from((0, 1, 5)),
        "top_p": st.sampled_from((0.5, 0.9, 1.0)),
        "temperature": st.sampled_from((0.5, 1.0, 1.5)),
        "repetition_penalty": st.sampled_from((1.0, 1.3)),
        "no_repeat_ngram_size": st.sampled_from((0, 2)),
        "length_penalty": st.sampled_from((0.5, 1.0)),
        "use_cache": st.booleans(),
        "eos_token_id": st.sampled_from((None, 2, [2, 5])),
        "min_new_tokens": st.integers(0, 3),
    },
)


# Flags of `python -m training.train` and values that are out of range or of the wrong kind
TRAIN_FLAGS = {
    "--objective": ["causal_lm", "masked_lm", "translation", "summaries"],
    "--model_type": ["hf_attention", "gpt2", "bert", "nonsense"],
    "--max_steps": ["-1", "0", "2", "x"],
    "--num_train_epochs": ["0", "-1", "1"],
    "--learning_rate": ["0", "-1e-3", "1e-3", "fast"],
    "--per_device_train_batch_size": ["0", "-2", "4"],
    "--gradient_accumulation_steps": ["0", "2"],
    "--eval_steps": ["-1", "0", "10"],
    "--save_steps": ["-1", "0"],
    "--logging_steps": ["0", "1"],
    "--warmup_steps": ["-5", "0"],
    "--mlm_probability": ["0", "1.5", "0.15"],
    "--block_size": ["1", "64"],
    "--vocab_size": ["0", "300"],
    "--report_to": ["wandb", "none"],
    "--mixed_precision": ["fp8", "no"],
    "--model_config": ['{"hidden_size": -1}', "[1]", "{bad", '{"num_attention_heads": 3}', '{"position_encoding": 1}'],
    "--resume_from_checkpoint": ["latest", "nowhere"],
}


@st.composite
def train_command_lines(draw) -> list[str]:
    """A command line with one to four flags, at least one of them out of range (a run that would start is not the
    point here: each example must be refused before data is read)."""
    flags = draw(st.lists(st.sampled_from(sorted(TRAIN_FLAGS)), min_size=1, max_size=4, unique=True))
    return [item for flag in flags for item in (flag, draw(st.sampled_from(TRAIN_FLAGS[flag])))]


# Where a writing command is pointed: layout name → the destination as typed, from the current folder. The current
# folder is work/here inside a fresh root that also holds the source, src/; each example lays out only its own case.
DESTINATION_LAYOUTS = {
    "missing": "out",
    "missing, deeper": "new/deeper/out",
    "empty": "empty",
    "foreign files": "mine",
    "a checkpoint and foreign files": "mixed",
    "a config without weights": "noweights",
    "a file": "afile",
    "under a file": "afile/out",
    "the current folder": ".",
    "a parent of the current folder": "..",
    "the source": "../../src",
    "inside the source": "../../src/out",
    "a checkpoint": "old",
    "an earlier demo's output": "demo",
}
WRITING_COMMANDS = ("convert", "export", "demo", "refresh-code")


@st.composite
def destination_cases(draw) -> tuple[str, str, bool]:
    """(command, layout, whether --overwrite is given); refresh-code has no --overwrite."""
    command = draw(st.sampled_from(WRITING_COMMANDS))
    layout = draw(st.sampled_from(sorted(DESTINATION_LAYOUTS)))
    return command, layout, command != "refresh-code" and draw(st.booleans())
