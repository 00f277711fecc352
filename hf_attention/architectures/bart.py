"""BART: a post-norm encoder-decoder with learned positions (offset by 2) and a norm over the embeddings.

Marian is the same network with sinusoidal positions and no embedding norm, so marian.py builds on the pieces here
that both share (`bart_like_config`, `bart_like_weights`, `bart_like_fields`).
"""

from transformers import BartConfig, BartForConditionalGeneration, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase, HFAttentionSeq2SeqConfig
from ..modeling.modeling_hf_attention import HFAttentionForSeq2SeqLM
from .base import (
    FROM_THE_FIRST_COLUMN,
    NO_POSITION_IDS,
    PLAIN,
    Architecture,
    ConversionRow,
    activation,
    our_token_ids,
    their_token_ids,
)
from .tiny import BART_SIZES, TinyReference
from .weights import Weights, tied, unsupported


def to_ours(model: BartForConditionalGeneration, w: Weights):
    config = bart_like_config(model.config, w, position_encoding="learned", position_offset=2, embedding_norm=True)
    bart_like_weights(w, config)
    for stack in ("encoder", "decoder"):
        w.copy(f"model.{stack}.position", f"model.{stack}.embed_positions")
        w.copy(f"model.{stack}.embedding_norm", f"model.{stack}.layernorm_embedding")
    return HFAttentionForSeq2SeqLM, config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # transformers 5 dropped BART's mBART-style options from BartConfig; tools written for transformers 4 still read
    # them (CTranslate2's converter fails without normalize_before), so the export says what they are.
    return BartConfig(
        activation_function=c.hidden_act if c.hidden_act in PLAIN else "gelu",
        normalize_before=False,
        add_final_layer_norm=False,
        **bart_like_fields(c),
    )


# ---------------------------------------------------------------------------------------------------------------------
# What BART and Marian share


def bart_like_config(c, w: Weights, **knobs) -> HFAttentionSeq2SeqConfig:
    """Our config for BART or Marian, which differ only in embeddings (`knobs`)."""
    if c.encoder_attention_heads != c.decoder_attention_heads or c.encoder_ffn_dim != c.decoder_ffn_dim:
        name = type(c).__name__
        raise unsupported(
            f"an encoder and a decoder of different widths ({name}.encoder_attention_heads="
            f"{c.encoder_attention_heads}, decoder_attention_heads={c.decoder_attention_heads}, encoder_ffn_dim="
            f"{c.encoder_ffn_dim}, decoder_ffn_dim={c.decoder_ffn_dim})",
            "hf_attention's encoder-decoder gives both stacks the same heads and feed-forward width: only a model "
            "whose encoder_* and decoder_* values are equal converts",
        )
    for option in ("add_final_layer_norm", "normalize_before"):  # mBART-style options a BART config may carry
        if getattr(c, option, False):
            raise unsupported(f"{type(c).__name__} with {option}=True")
    # encoder/decoder_layerdrop skip layers only in training; inference is the same network.
    return HFAttentionSeq2SeqConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        encoder_layers=c.encoder_layers,
        decoder_layers=c.decoder_layers,
        num_attention_heads=c.encoder_attention_heads,
        intermediate_size=c.encoder_ffn_dim,
        hidden_act=activation(c.activation_function, "activation_function"),
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
        tie_word_embeddings=tied(w, "lm_head.weight", "model.shared.weight", c.tie_word_embeddings),
        **their_token_ids(c, decoder_start_token_id=c.decoder_start_token_id),
        **knobs,
    )


def bart_like_weights(w: Weights, config: HFAttentionSeq2SeqConfig) -> None:
    """The shared embedding, both stacks' layers and the LM head of BART or Marian (not their positions)."""
    w.copy("model.shared", "model.shared")
    # One embedding for both stacks, as ours; untied (tie_word_embeddings=False) transformers holds each stack's as a
    # tensor of its own, which must then hold the same values.
    for stack in ("encoder", "decoder"):
        w.repeat(f"model.{stack}.embed_tokens.weight", "model.shared.weight")
    _layers(w, "model.encoder", "model.encoder", config.encoder_layers, cross=False)
    _layers(w, "model.decoder", "model.decoder", config.decoder_layers, cross=True)
    w.out["lm_head.bias"] = w.get("final_logits_bias")[0]  # (1, V) → (V,)
    if not config.tie_word_embeddings:
        w.copy("lm_head", "lm_head")


def _layers(w: Weights, src: str, dst: str, num_layers: int, *, cross: bool) -> None:
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


def bart_like_fields(c: HFAttentionConfigBase) -> dict:
    """The fields of a BART or Marian config that our config fills alike (all but the activation and embeddings)."""
    return {
        "vocab_size": c.vocab_size,
        "d_model": c.hidden_size,
        "encoder_layers": c.encoder_layers,
        "decoder_layers": c.decoder_layers,
        "encoder_attention_heads": c.num_attention_heads,
        "decoder_attention_heads": c.num_attention_heads,
        "encoder_ffn_dim": c.intermediate_size,
        "decoder_ffn_dim": c.intermediate_size,
        "max_position_embeddings": c.max_position_embeddings,
        "scale_embedding": c.scale_embeddings,
        "dropout": c.hidden_dropout_prob,
        "attention_dropout": c.attention_dropout,
        "activation_dropout": c.activation_dropout,
        "init_std": c.initializer_range,
        "tie_word_embeddings": c.tie_word_embeddings,
        "forced_eos_token_id": None,  # generation follows our generation config, which forces nothing
        **our_token_ids(c, seq2seq=True),
    }


PARITY_REFERENCES = {"bart": TinyReference(BartForConditionalGeneration, lambda: BartConfig(**BART_SIZES))}

ARCHITECTURE = Architecture(
    name="bart",
    model_type="bart",
    classes={HFAttentionForSeq2SeqLM: BartForConditionalGeneration},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", BartForConditionalGeneration),),
    position_table=True,
    left_padding_note=f"{FROM_THE_FIRST_COLUMN}, {NO_POSITION_IDS}.",
    parity_references=PARITY_REFERENCES,
    docs=ConversionRow(
        title="BART",
        from_hf="test_parity_hf.py",
        to_hf="test_to_hf.py",
        generate="test_parity_hf.py",
        llama_cpp="(encoder-decoder)",
        ctranslate2="test_ctranslate2.py",
    ),
)
