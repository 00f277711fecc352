"""Load real pretrained weights into the from-scratch code: GPT-2, Llama, BERT, BART, Marian and T5.

`from_hf(model)` reads an instance of one of the reference classes below, builds the hf_attention config that
describes the same network (every difference from the 2017 paper is a named config knob, never a special case here),
copies the weights under our module names and returns the equivalent hf_attention model:

| reference class                        | hf_attention class        |
|----------------------------------------|---------------------------|
| GPT2LMHeadModel, LlamaForCausalLM      | HFAttentionForCausalLM    |
| GPT2ForSequenceClassification,         | HFAttentionDecoderFor-    |
| LlamaForSequenceClassification         | SequenceClassification    |
| BertModel                              | HFAttentionEncoderModel   |
| BertForMaskedLM                        | HFAttentionForMaskedLM    |
| BartForConditionalGeneration,          | HFAttentionForSeq2SeqLM   |
| MarianMTModel, T5ForConditionalGeneration |                        |

Every parameter of the new model gets a value from the reference (no silently random weights), every reference
weight is used or explicitly dropped with a reason, and options the code cannot express raise a ValueError that names
them. `hf-attention convert SRC DST` does the same for a checkpoint folder (or Hub id) and writes a checkpoint that
loads with the Auto classes, by the rules of destinations.py: never over the source or the current folder, and over an
existing checkpoint at DST only with `--overwrite`.

This module is outside the remote-code closure: it may import anything.
"""

import argparse
import copy
import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor
from transformers import (
    AutoConfig,
    AutoTokenizer,
    BartForConditionalGeneration,
    BertForMaskedLM,
    BertModel,
    GPT2ForSequenceClassification,
    GPT2LMHeadModel,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
    MarianMTModel,
    PreTrainedModel,
    T5ForConditionalGeneration,
)

from .activations import ACTIVATION_SYNONYMS, PLAIN_ACTIVATIONS, hidden_act_of
from .configuration_hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionSeq2SeqConfig,
)
from .destinations import check_destination
from .modeling_hf_attention import (
    HFAttentionDecoderForSequenceClassification,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
)
from .paths import TOKENIZER_FILES, check_checkpoint
from .positional import SinusoidalPositionalEmbedding

logger = logging.getLogger(__name__)


def _unsupported(what: str) -> ValueError:
    return ValueError(f"from_hf: {what} is not supported by hf_attention; the model cannot be converted exactly.")


def _activation(name: str, field: str, *, gated: bool = False) -> str:
    """Our `hidden_act` for a reference's ACT2FN name (its gate's, for a gated network): activations.py's table."""
    hidden_act = hidden_act_of(name, gated=gated)
    if hidden_act is None:
        kind = "gated activation" if gated else "activation"
        known = (*PLAIN_ACTIVATIONS, *ACTIVATION_SYNONYMS)
        supported = [known_name for known_name in known if hidden_act_of(known_name, gated=gated)]
        raise _unsupported(f"{field}={name!r} ({kind}; supported: {', '.join(supported)})")
    return hidden_act


class _Weights:
    """Reads reference tensors by name and remembers which were used, so that none is forgotten."""

    def __init__(self, model: PreTrainedModel):
        self.tensors = model.state_dict()
        self.used: set[str] = set()
        self.out: dict[str, Tensor] = {}
        # Reference tensor → the reference tensor whose values it repeats (see `repeat`).
        self.repeats: dict[str, str] = {}

    def __contains__(self, key: str) -> bool:
        return key in self.tensors

    def get(self, key: str) -> Tensor:
        self.used.add(key)
        return self.tensors[key]

    def copy(self, ours: str, theirs: str, names: tuple[str, ...] = ("weight", "bias")) -> None:
        """Copy `theirs.<name>` to `ours.<name>` for each name present (a module without bias has none)."""
        for name in names:
            if f"{theirs}.{name}" in self.tensors:
                self.out[f"{ours}.{name}"] = self.get(f"{theirs}.{name}")

    def repeat(self, key: str, source: str) -> None:
        """Reference tensor `key` must hold the values of reference tensor `source`, which is mapped to one of ours.

        A reference that ties them holds one tensor under both names; untied (`tie_word_embeddings=False`),
        transformers gives each name a tensor of its own (BART's encoder and decoder embeddings beside `shared`). The
        import accepts the copies when they are equal, and the export writes `source`'s values into them."""
        if key in self.tensors:
            self.repeats[key] = source

    def repeats_its_source(self, key: str) -> bool:
        source = self.repeats.get(key)
        return source is not None and torch.equal(self.tensors[key], self.tensors[source])

    def check_all_used(self, dropped: dict[str, str]) -> None:
        """Raise unless every reference tensor was copied, aliases a copied one, repeats one (`repeat`), or is in
        `dropped` (prefix → why)."""
        used_storage = {(self.tensors[k].data_ptr(), self.tensors[k].shape) for k in self.used}
        left = []
        for key, tensor in self.tensors.items():
            if key in self.used or (tensor.data_ptr(), tensor.shape) in used_storage or self.repeats_its_source(key):
                continue  # tied weights appear under several names
            reason = next((why for prefix, why in dropped.items() if key.startswith(prefix)), None)
            if reason is not None:
                logger.warning("from_hf: dropping %s (%s).", key, reason)
            elif key in self.repeats:
                raise _unsupported(
                    f"a model whose {key} differs from {self.repeats[key]} (hf_attention holds them as one tensor)"
                )
            else:
                left.append(key)
        if left:
            raise _unsupported(f"a model with weights that have no counterpart ({', '.join(left[:8])})")


def _tied(weights: _Weights, head: str, embedding: str, flag: bool) -> bool:
    """Whether the reference really shares its output matrix with the input embedding."""
    if head not in weights:
        return True
    a, b = weights.tensors[head], weights.tensors[embedding]
    return bool(flag) and (a.data_ptr() == b.data_ptr() or torch.equal(a, b))


def _token_ids(config, **extra) -> dict:
    """The special-token ids of a reference config (T5 has no bos_token_id at all)."""
    names = ("pad_token_id", "bos_token_id", "eos_token_id")
    return {**{name: getattr(config, name, None) for name in names}, **extra}


def _labels(config) -> dict:
    """A classifier's labels and loss kind (num_labels follows from id2label)."""
    return {"id2label": dict(config.id2label), "label2id": dict(config.label2id), "problem_type": config.problem_type}


def _decoder_head(model: PreTrainedModel, w: _Weights, config: HFAttentionDecoderConfig, lm_head: str):
    """The class and head weights of a decoder reference: an LM head (copied when untied) or a classifier `score`."""
    if isinstance(model, (GPT2ForSequenceClassification, LlamaForSequenceClassification)):
        w.copy("score", "score")
        return HFAttentionDecoderForSequenceClassification
    if not config.tie_word_embeddings:
        w.copy("lm_head", lm_head)
    return HFAttentionForCausalLM


# ---------------------------------------------------------------------------------------------------------------------
# Decoders


def _gpt2(model: GPT2LMHeadModel | GPT2ForSequenceClassification, w: _Weights):
    c = model.config
    classifier = isinstance(model, GPT2ForSequenceClassification)
    if c.scale_attn_by_inverse_layer_idx:
        raise _unsupported("GPT-2 with scale_attn_by_inverse_layer_idx=True (scores scaled by 1/(layer+1))")
    if c.add_cross_attention:
        raise _unsupported("GPT-2 with add_cross_attention=True")
    # reorder_and_upcast_attn only changes the order of fp32 operations (a mixed-precision safeguard): same maths.
    config = HFAttentionDecoderConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.n_embd,
        num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head,
        intermediate_size=c.n_inner or 4 * c.n_embd,
        hidden_act=_activation(c.activation_function, "activation_function"),
        max_position_embeddings=c.n_positions,
        attention_score="scaled_dot" if c.scale_attn_weights else "dot",
        position_encoding="learned",
        norm_position="pre",
        norm_type="layernorm",
        scale_embeddings=False,
        final_norm=True,
        layer_norm_eps=c.layer_norm_epsilon,
        hidden_dropout_prob=c.resid_pdrop,
        attention_dropout=c.attn_pdrop,
        initializer_range=c.initializer_range,
        tie_word_embeddings=_tied(w, "lm_head.weight", "transformer.wte.weight", c.tie_word_embeddings),
        **_token_ids(c),
        **(_labels(c) if classifier else {}),
    )
    w.copy("model.decoder.embed_tokens", "transformer.wte")
    w.copy("model.decoder.position", "transformer.wpe")
    for i in range(c.n_layer):
        src, dst = f"transformer.h.{i}", f"model.decoder.layers.{i}"
        # GPT-2's Conv1D stores (in, out): transpose to nn.Linear's (out, in); c_attn packs q, k and v.
        for name, weight, bias in zip(
            ("q_proj", "k_proj", "v_proj"),
            w.get(f"{src}.attn.c_attn.weight").t().chunk(3, dim=0),
            w.get(f"{src}.attn.c_attn.bias").chunk(3),
            strict=True,
        ):
            w.out[f"{dst}.self_attn.{name}.weight"], w.out[f"{dst}.self_attn.{name}.bias"] = weight, bias
        for ours, theirs in (("self_attn.o_proj", "attn.c_proj"), ("mlp.fc1", "mlp.c_fc"), ("mlp.fc2", "mlp.c_proj")):
            w.out[f"{dst}.{ours}.weight"] = w.get(f"{src}.{theirs}.weight").t()
            w.out[f"{dst}.{ours}.bias"] = w.get(f"{src}.{theirs}.bias")
        w.copy(f"{dst}.self_attn_norm", f"{src}.ln_1")
        w.copy(f"{dst}.mlp_norm", f"{src}.ln_2")
    w.copy("model.decoder.norm", "transformer.ln_f")
    return _decoder_head(model, w, config, "lm_head"), config, {}


def _llama(model: LlamaForCausalLM | LlamaForSequenceClassification, w: _Weights):
    c = model.config
    classifier = isinstance(model, LlamaForSequenceClassification)
    rope = dict(getattr(c, "rope_parameters", None) or {})
    if rope.get("rope_type", "default") != "default":
        raise _unsupported(f"Llama rope_parameters rope_type={rope['rope_type']!r} (only 'default' RoPE)")
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise _unsupported(f"Llama partial_rotary_factor={rope['partial_rotary_factor']}")
    config = HFAttentionDecoderConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        intermediate_size=c.intermediate_size,
        hidden_act=_activation(c.hidden_act, "hidden_act", gated=True),
        max_position_embeddings=c.max_position_embeddings,
        position_encoding="rotary",
        rope_theta=rope.get("rope_theta", getattr(c, "rope_theta", 10000.0)),
        norm_position="pre",
        norm_type="rmsnorm",
        scale_embeddings=False,
        final_norm=True,
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        layer_norm_eps=c.rms_norm_eps,
        hidden_dropout_prob=0.0,
        attention_dropout=c.attention_dropout,
        initializer_range=c.initializer_range,
        tie_word_embeddings=_tied(w, "lm_head.weight", "model.embed_tokens.weight", c.tie_word_embeddings),
        **_token_ids(c),
        **(_labels(c) if classifier else {}),
    )
    w.copy("model.decoder.embed_tokens", "model.embed_tokens")
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w.copy(f"{dst}.self_attn.{name}", f"{src}.self_attn.{name}")
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.copy(f"{dst}.mlp.{name}", f"{src}.mlp.{name}")
        w.copy(f"{dst}.self_attn_norm", f"{src}.input_layernorm")
        w.copy(f"{dst}.mlp_norm", f"{src}.post_attention_layernorm")
    w.copy("model.decoder.norm", "model.norm")
    return _decoder_head(model, w, config, "lm_head"), config, {}


# ---------------------------------------------------------------------------------------------------------------------
# Encoder


def _bert(model: BertModel | BertForMaskedLM, w: _Weights):
    c = model.config
    if c.is_decoder or c.add_cross_attention:
        raise _unsupported("BERT used as a decoder (is_decoder / add_cross_attention)")
    masked_lm = isinstance(model, BertForMaskedLM)
    prefix = "bert." if masked_lm else ""
    config = _bert_config(c, w, masked_lm=masked_lm, word_embeddings=f"{prefix}embeddings.word_embeddings.weight")
    _bert_encoder_weights(w, c.num_hidden_layers, src=prefix, dst="model.encoder" if masked_lm else "encoder")
    # The pooler (dense + tanh over [CLS]) serves only next-sentence prediction; no hf_attention output uses it.
    dropped = {"pooler.": "BERT's pooler has no counterpart in HFAttentionEncoderModel"}
    if masked_lm:
        dropped |= _bert_lm_head_weights(w, config)
    return (HFAttentionForMaskedLM if masked_lm else HFAttentionEncoderModel), config, dropped


def _bert_config(c, w: _Weights, *, masked_lm: bool, word_embeddings: str) -> HFAttentionEncoderConfig:
    """BERT as our encoder: post-norm, learned positions, token types and a norm over the embeddings."""
    return HFAttentionEncoderConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        hidden_act=_activation(c.hidden_act, "hidden_act"),
        max_position_embeddings=c.max_position_embeddings,
        position_encoding="learned",
        norm_position="post",
        norm_type="layernorm",
        scale_embeddings=False,
        embedding_norm=True,
        final_norm=False,
        type_vocab_size=c.type_vocab_size,
        layer_norm_eps=c.layer_norm_eps,
        hidden_dropout_prob=c.hidden_dropout_prob,
        attention_dropout=c.attention_probs_dropout_prob,
        initializer_range=c.initializer_range,
        classifier_dropout=c.classifier_dropout,
        lm_head_transform=masked_lm,
        lm_head_bias=masked_lm,
        tie_word_embeddings=_tied(w, "cls.predictions.decoder.weight", word_embeddings, c.tie_word_embeddings),
        **_token_ids(c),
    )


def _bert_encoder_weights(w: _Weights, num_layers: int, *, src: str, dst: str) -> None:
    """The embeddings and layers of a BERT encoder whose names start with `src` ("bert." inside BertForMaskedLM)."""
    w.copy(f"{dst}.embed_tokens", f"{src}embeddings.word_embeddings")
    w.copy(f"{dst}.position", f"{src}embeddings.position_embeddings")
    w.copy(f"{dst}.token_type_embeddings", f"{src}embeddings.token_type_embeddings")
    w.copy(f"{dst}.embedding_norm", f"{src}embeddings.LayerNorm")
    for i in range(num_layers):
        s, d = f"{src}encoder.layer.{i}", f"{dst}.layers.{i}"
        for ours, theirs in (("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value")):
            w.copy(f"{d}.self_attn.{ours}", f"{s}.attention.self.{theirs}")
        w.copy(f"{d}.self_attn.o_proj", f"{s}.attention.output.dense")
        w.copy(f"{d}.self_attn_norm", f"{s}.attention.output.LayerNorm")
        w.copy(f"{d}.mlp.fc1", f"{s}.intermediate.dense")
        w.copy(f"{d}.mlp.fc2", f"{s}.output.dense")
        w.copy(f"{d}.mlp_norm", f"{s}.output.LayerNorm")


def _bert_lm_head_weights(w: _Weights, config: HFAttentionEncoderConfig) -> dict[str, str]:
    """BertForMaskedLM's head: the transform, the bias and, untied, the output matrix. Returns what it drops (why)."""
    w.copy("lm_head_transform.dense", "cls.predictions.transform.dense")
    w.copy("lm_head_transform.norm", "cls.predictions.transform.LayerNorm")
    # The bias BERT adds is the decoder's; tied, `cls.predictions.bias` is that same tensor. Untied, it is a
    # tensor of its own that the forward never reads: the export gives it the decoder's values, the import
    # drops it when they differ.
    w.out["lm_head.bias"] = w.get("cls.predictions.decoder.bias")
    w.repeat("cls.predictions.bias", "cls.predictions.decoder.bias")
    if not config.tie_word_embeddings:
        w.copy("lm_head", "cls.predictions.decoder", names=("weight",))
    return {"cls.predictions.bias": "an untied BertForMaskedLM adds cls.predictions.decoder.bias, not this one"}


# ---------------------------------------------------------------------------------------------------------------------
# Encoder-decoders


def _bart_layers(w: _Weights, src: str, dst: str, num_layers: int, *, cross: bool) -> None:
    """BART-style layers (BART, Marian): q/k/v/out_proj, fc1/fc2 and a norm after each block."""
    blocks = [("self_attn", "self_attn", "self_attn_layer_norm")]
    if cross:
        blocks.append(("cross_attn", "encoder_attn", "encoder_attn_layer_norm"))
    for i in range(num_layers):
        s, d = f"{src}.layers.{i}", f"{dst}.layers.{i}"
        for ours, theirs, norm in blocks:
            for name in ("q_proj", "k_proj", "v_proj"):
                w.copy(f"{d}.{ours}.{name}", f"{s}.{theirs}.{name}")
            w.copy(f"{d}.{ours}.o_proj", f"{s}.{theirs}.out_proj")
            w.copy(f"{d}.{ours}_norm", f"{s}.{norm}")
        w.copy(f"{d}.mlp.fc1", f"{s}.fc1")
        w.copy(f"{d}.mlp.fc2", f"{s}.fc2")
        w.copy(f"{d}.mlp_norm", f"{s}.final_layer_norm")


def _bart_like_config(c, w: _Weights, **knobs) -> HFAttentionSeq2SeqConfig:
    """Config shared by BART and Marian, which differ only in embeddings (`knobs`)."""
    if c.encoder_attention_heads != c.decoder_attention_heads or c.encoder_ffn_dim != c.decoder_ffn_dim:
        raise _unsupported(
            f"different encoder and decoder widths (attention heads {c.encoder_attention_heads} vs "
            f"{c.decoder_attention_heads}, ffn dims {c.encoder_ffn_dim} vs {c.decoder_ffn_dim})"
        )
    for option in ("add_final_layer_norm", "normalize_before"):  # mBART-style options a BART config may carry
        if getattr(c, option, False):
            raise _unsupported(f"{type(c).__name__} with {option}=True")
    # encoder/decoder_layerdrop skip layers only in training; inference is the same network.
    return HFAttentionSeq2SeqConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        encoder_layers=c.encoder_layers,
        decoder_layers=c.decoder_layers,
        num_attention_heads=c.encoder_attention_heads,
        intermediate_size=c.encoder_ffn_dim,
        hidden_act=_activation(c.activation_function, "activation_function"),
        max_position_embeddings=c.max_position_embeddings,
        norm_position="post",
        norm_type="layernorm",
        final_norm=False,
        scale_embeddings=bool(c.scale_embedding),
        layer_norm_eps=1e-5,
        hidden_dropout_prob=c.dropout,
        attention_dropout=c.attention_dropout,
        activation_dropout=c.activation_dropout,
        initializer_range=c.init_std,
        lm_head_bias=True,
        freeze_lm_head_bias=True,  # HF keeps final_logits_bias as a buffer: used, never trained
        tie_word_embeddings=_tied(w, "lm_head.weight", "model.shared.weight", c.tie_word_embeddings),
        **_token_ids(c, decoder_start_token_id=c.decoder_start_token_id),
        **knobs,
    )


def _bart_like_weights(w: _Weights, config: HFAttentionSeq2SeqConfig) -> None:
    w.copy("model.shared", "model.shared")
    # One embedding for both stacks, as ours; untied (tie_word_embeddings=False) transformers holds each stack's as a
    # tensor of its own, which must then hold the same values.
    for stack in ("encoder", "decoder"):
        w.repeat(f"model.{stack}.embed_tokens.weight", "model.shared.weight")
    _bart_layers(w, "model.encoder", "model.encoder", config.encoder_layers, cross=False)
    _bart_layers(w, "model.decoder", "model.decoder", config.decoder_layers, cross=True)
    w.out["lm_head.bias"] = w.get("final_logits_bias")[0]  # (1, V) → (V,)
    if not config.tie_word_embeddings:
        w.copy("lm_head", "lm_head")


def _bart(model: BartForConditionalGeneration, w: _Weights):
    config = _bart_like_config(model.config, w, position_encoding="learned", position_offset=2, embedding_norm=True)
    _bart_like_weights(w, config)
    for stack in ("encoder", "decoder"):
        w.copy(f"model.{stack}.position", f"model.{stack}.embed_positions")
        w.copy(f"model.{stack}.embedding_norm", f"model.{stack}.layernorm_embedding")
    return HFAttentionForSeq2SeqLM, config, {}


def _marian(model: MarianMTModel, w: _Weights):
    c = model.config
    if not c.share_encoder_decoder_embeddings or (c.decoder_vocab_size or c.vocab_size) != c.vocab_size:
        raise _unsupported("Marian with separate source and target vocabularies (share_encoder_decoder_embeddings)")
    config = _bart_like_config(c, w, position_encoding="sinusoidal", sinusoidal_layout="concat")
    _bart_like_weights(w, config)
    # Marian's sinusoid tables are fixed, not learned: check they are the ones we compute instead of copying them.
    sinusoid = SinusoidalPositionalEmbedding(embedding_dim=c.d_model, layout="concat")
    for stack in ("encoder", "decoder"):
        table = w.get(f"model.{stack}.embed_positions.weight")
        expected = sinusoid(torch.arange(table.shape[0])[None])[0].to(table.dtype)
        if not torch.allclose(table.float(), expected.float(), atol=1e-4):
            raise _unsupported(f"Marian with a {stack} position table that is not the standard sinusoid")
    return HFAttentionForSeq2SeqLM, config, {}


def _t5(model: T5ForConditionalGeneration, w: _Weights):
    c = model.config
    config = _t5_config(c, w)
    w.copy("model.shared", "shared")
    mlp = (
        (("gate_proj", "wi_0"), ("up_proj", "wi_1"), ("down_proj", "wo"))
        if c.is_gated_act
        else (("fc1", "wi"), ("fc2", "wo"))
    )
    for stack, num_layers in (("encoder", c.num_layers), ("decoder", c.num_decoder_layers)):
        _t5_stack_weights(w, stack, num_layers, mlp)
    if not config.tie_word_embeddings:
        w.copy("lm_head", "lm_head", names=("weight",))
    return HFAttentionForSeq2SeqLM, config, {}


def _t5_config(c, w: _Weights) -> HFAttentionSeq2SeqConfig:
    """T5 as our encoder-decoder: pre-norm RMSNorm, unscaled dot products, relative position buckets, no biases."""
    return HFAttentionSeq2SeqConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        encoder_layers=c.num_layers,
        decoder_layers=c.num_decoder_layers,
        num_attention_heads=c.num_heads,
        head_dim=c.d_kv,
        intermediate_size=c.d_ff,
        hidden_act=_activation(c.dense_act_fn, "feed_forward_proj", gated=c.is_gated_act),
        attention_score="dot",
        position_encoding="relative",
        relative_attention_num_buckets=c.relative_attention_num_buckets,
        relative_attention_max_distance=c.relative_attention_max_distance,
        norm_position="pre",
        norm_type="rmsnorm",
        final_norm=True,
        scale_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        layer_norm_eps=c.layer_norm_epsilon,
        hidden_dropout_prob=c.dropout_rate,
        attention_dropout=c.dropout_rate,
        activation_dropout=c.dropout_rate,
        initializer_range=c.initializer_factor,
        # Original T5 rescales the decoder output by d_model**-0.5 before its tied head; v1.1 does not.
        scale_lm_head_input=bool(getattr(c, "scale_decoder_outputs", c.tie_word_embeddings)),
        tie_word_embeddings=_tied(w, "lm_head.weight", "shared.weight", c.tie_word_embeddings),
        **_token_ids(c, decoder_start_token_id=getattr(c, "decoder_start_token_id", None)),
    )


def _t5_stack_weights(w: _Weights, stack: str, num_layers: int, mlp: tuple[tuple[str, str], ...]) -> None:
    """One T5 stack ("encoder" or "decoder"): its blocks, each a list of sub-layers ending with the feed-forward one,
    and its final norm. T5's projections and norms have no bias."""
    # One relative-bias table per stack, stored in the first block and shared by all layers.
    w.copy(
        f"model.{stack}.position.relative_attention_bias",
        f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias",
        names=("weight",),
    )
    blocks = [("self_attn", "SelfAttention")] + ([("cross_attn", "EncDecAttention")] if stack == "decoder" else [])
    for i in range(num_layers):
        s, d = f"{stack}.block.{i}", f"model.{stack}.layers.{i}"
        for j, (ours, theirs) in enumerate(blocks):
            for name in ("q", "k", "v", "o"):
                w.copy(f"{d}.{ours}.{name}_proj", f"{s}.layer.{j}.{theirs}.{name}", names=("weight",))
            w.copy(f"{d}.{ours}_norm", f"{s}.layer.{j}.layer_norm", names=("weight",))
        ff = len(blocks)
        for ours, theirs in mlp:
            w.copy(f"{d}.mlp.{ours}", f"{s}.layer.{ff}.DenseReluDense.{theirs}", names=("weight",))
        w.copy(f"{d}.mlp_norm", f"{s}.layer.{ff}.layer_norm", names=("weight",))
    w.copy(f"model.{stack}.norm", f"{stack}.final_layer_norm", names=("weight",))


# Exact classes only: a subclass may change the forward pass in ways a weight copy cannot see.
CONVERTERS: dict[type, Callable] = {
    GPT2LMHeadModel: _gpt2,
    GPT2ForSequenceClassification: _gpt2,
    LlamaForCausalLM: _llama,
    LlamaForSequenceClassification: _llama,
    BertModel: _bert,
    BertForMaskedLM: _bert,
    BartForConditionalGeneration: _bart,
    MarianMTModel: _marian,
    T5ForConditionalGeneration: _t5,
}


def from_hf(model: PreTrainedModel) -> PreTrainedModel:
    """Build the hf_attention model equivalent to a Hugging Face reference model, with its weights.

    Args:
        model: An instance of GPT2LMHeadModel, LlamaForCausalLM, GPT2ForSequenceClassification,
            LlamaForSequenceClassification, BertModel, BertForMaskedLM, BartForConditionalGeneration, MarianMTModel or
            T5ForConditionalGeneration.

    Returns:
        The hf_attention model (same dtype, device, attention backend and generation config), in the reference's
        train/eval mode.

    Raises:
        ValueError: For another model class, or an option of a supported one that hf_attention cannot express.
    """
    convert = CONVERTERS.get(type(model))
    if convert is None:
        supported = ", ".join(cls.__name__ for cls in CONVERTERS)
        raise ValueError(f"from_hf: {type(model).__name__} is not supported; supported classes are {supported}.")
    weights = _Weights(model)
    model_class, config, dropped = convert(model, weights)
    weights.check_all_used(dropped)
    parameter = next(model.parameters())
    converted = model_class(config).to(dtype=parameter.dtype, device=parameter.device)
    implementation = model.config._attn_implementation
    if implementation in ("eager", "sdpa"):
        converted.set_attn_implementation(implementation)
    _load(converted, weights.out)
    if model.can_generate():
        converted.generation_config = copy.deepcopy(model.generation_config)
    return converted.train(model.training)


def _load(model: PreTrainedModel, state_dict: dict[str, Tensor]) -> None:
    """Load `state_dict` and prove that every parameter and buffer of `model` received a reference value."""
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    if unexpected:
        raise RuntimeError(f"from_hf produced weights the model does not have: {unexpected}")
    ours = model.state_dict()
    loaded = {ours[key].data_ptr() for key in state_dict}
    untouched = [key for key in missing if ours[key].data_ptr() not in loaded]  # a tied alias counts as loaded
    if untouched:
        raise RuntimeError(f"from_hf left these weights at their random initialisation: {untouched}")
    # Two reference tensors loaded into one tied parameter would silently overwrite each other: check every value.
    changed = [key for key, value in state_dict.items() if not torch.equal(ours[key], value.to(ours[key].dtype))]
    if changed:
        raise RuntimeError(f"from_hf: weights changed while loading (tied to another tensor?): {changed}")


# ---------------------------------------------------------------------------------------------------------------------
# Command line: hf-attention convert SRC DST

# model_type → (class for checkpoints with an LM head, class otherwise)
_REFERENCE_CLASSES = {
    "gpt2": (GPT2LMHeadModel, GPT2LMHeadModel),
    "llama": (LlamaForCausalLM, LlamaForCausalLM),
    "bert": (BertForMaskedLM, BertModel),
    "bart": (BartForConditionalGeneration, BartForConditionalGeneration),
    "marian": (MarianMTModel, MarianMTModel),
    "t5": (T5ForConditionalGeneration, T5ForConditionalGeneration),
}
# model_type → class for checkpoints saved as sequence classifiers
_CLASSIFIER_CLASSES = {"gpt2": GPT2ForSequenceClassification, "llama": LlamaForSequenceClassification}


def load_reference(source: str) -> PreTrainedModel:
    """Load a GPT-2, Llama, BERT, BART, Marian or T5 checkpoint (folder or Hub id) with the class `from_hf` takes.

    BERT checkpoints saved with an MLM head (`BertForMaskedLM`, `BertForPreTraining`) load as BertForMaskedLM,
    others as BertModel; GPT-2 and Llama checkpoints saved as sequence classifiers load as their
    ForSequenceClassification class.
    """
    config = AutoConfig.from_pretrained(source)
    if config.model_type not in _REFERENCE_CLASSES:
        raise ValueError(
            f"{source}: model_type {config.model_type!r} is not supported; supported: {', '.join(_REFERENCE_CLASSES)}."
        )
    with_head, without_head = _REFERENCE_CLASSES[config.model_type]
    architectures = " ".join(config.architectures or [])
    if "ForSequenceClassification" in architectures and config.model_type in _CLASSIFIER_CLASSES:
        return _CLASSIFIER_CLASSES[config.model_type].from_pretrained(source, dtype="auto")
    has_head = config.model_type != "bert" or "MaskedLM" in architectures or "PreTraining" in architectures
    return (with_head if has_head else without_head).from_pretrained(source, dtype="auto")


def convert_checkpoint(source: str, destination: str | os.PathLike, *, overwrite: bool = False) -> PreTrainedModel:
    """Convert a reference checkpoint into an hf_attention checkpoint (weights, config, generation config and, when
    the source has one that loads, its tokenizer).

    The checkpoint is written to a temporary folder next to `destination` and renamed into place once complete, so
    that a failure never leaves a half-written checkpoint.

    Raises:
        ValueError: Before loading anything, when `source` is a local path that is not a checkpoint folder, or when
            `destination` is not UTF-8, is the source, inside it or holds it, is the current folder or holds it, is
            a file, or is a non-empty folder (replaced only when it holds only a checkpoint and `overwrite` is true);
            and before the swap, when the folder was filled meanwhile.
    """
    source = check_checkpoint(source, argument="source")
    target = check_destination(destination, source=source, overwrite=overwrite)
    _check_weight_files(source)
    converted = from_hf(load_reference(source))

    def write(folder: Path) -> None:
        converted.save_pretrained(folder)
        # AutoTokenizer builds an empty tokenizer for a folder without tokenizer files: check for them first.
        if os.path.isdir(source) and not any(os.path.exists(os.path.join(source, name)) for name in TOKENIZER_FILES):
            logger.warning("No tokenizer copied: %s holds no tokenizer files.", source)
            return
        try:
            AutoTokenizer.from_pretrained(source).save_pretrained(folder)
        except (OSError, ValueError, TypeError) as error:  # e.g. a Hub repo with weights only: not an error
            logger.warning("No tokenizer copied from %s: %s", source, error)

    target.write(write)
    return converted


def _check_weight_files(source: str) -> None:
    """Raise ValueError naming the file when a safetensors file of a local source cannot be read (truncated, not
    safetensors): transformers' own error names neither the file nor the cause."""
    if not os.path.isdir(source):
        return
    for path in sorted(Path(source).glob("*.safetensors")):
        try:
            with safe_open(path, framework="pt") as weights:
                weights.keys()
        except (SafetensorError, OSError) as error:
            raise ValueError(
                f"source weights {path} cannot be read ({error}); the file is damaged or was not copied whole."
            ) from None


def add_convert_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `hf-attention convert SRC DST`."""
    parser = subparsers.add_parser(
        "convert",
        help="import a GPT-2, Llama, BERT, BART, Marian or T5 checkpoint into hf_attention",
        description="Convert a Hugging Face GPT-2, Llama, BERT, BART, Marian or T5 checkpoint into an hf_attention "
        "checkpoint with the same outputs, loadable with the Auto classes.",
    )
    parser.add_argument("source", help="local checkpoint folder, or a Hub id when the network is available")
    parser.add_argument(
        "destination",
        help="new or empty folder to write the hf_attention checkpoint to (not the source, nor the current folder or "
        "one holding it)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DESTINATION if it holds a model checkpoint and nothing else (any other file is refused, "
        "naming it); the new checkpoint is written beside it and swapped in when complete, keeping the folder's "
        "permissions",
    )
    parser.set_defaults(run=_run_convert)


def _run_convert(args: argparse.Namespace) -> int:
    model = convert_checkpoint(args.source, args.destination, overwrite=args.overwrite)
    print(f"Wrote {type(model).__name__} ({model.num_parameters():,} parameters) to {args.destination}")
    return 0
