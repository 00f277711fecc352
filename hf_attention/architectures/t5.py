"""T5: a pre-norm RMSNorm encoder-decoder with unscaled dot products, relative position buckets and no biases."""

from transformers import PretrainedConfig, T5Config, T5ForConditionalGeneration

from ..modeling.configuration_hf_attention import HFAttentionConfigBase, HFAttentionSeq2SeqConfig
from ..modeling.modeling_hf_attention import HFAttentionForSeq2SeqLM
from .base import PLAIN, Architecture, ConversionRow, activation, our_token_ids, their_token_ids
from .tiny import PARITY_VOCAB, TinyReference
from .weights import Weights, tied


def to_ours(model: T5ForConditionalGeneration, w: Weights):
    c = model.config
    config = _our_config(c, w)
    w.copy("model.shared", "shared")
    mlp = (
        (("gate_proj", "wi_0"), ("up_proj", "wi_1"), ("down_proj", "wo"))
        if c.is_gated_act
        else (("fc1", "wi"), ("fc2", "wo"))
    )
    for stack, num_layers in (("encoder", c.num_layers), ("decoder", c.num_decoder_layers)):
        _stack_weights(w, stack, num_layers, mlp)
    if not config.tie_word_embeddings:
        w.copy("lm_head", "lm_head", names=("weight",))
    return HFAttentionForSeq2SeqLM, config, {}


def _our_config(c, w: Weights) -> HFAttentionSeq2SeqConfig:
    """T5 as our encoder-decoder: pre-norm RMSNorm, unscaled dot products, relative position buckets, no biases."""
    return HFAttentionSeq2SeqConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        encoder_layers=c.num_layers,
        decoder_layers=c.num_decoder_layers,
        num_attention_heads=c.num_heads,
        head_dim=c.d_kv,
        intermediate_size=c.d_ff,
        hidden_act=activation(c.dense_act_fn, "feed_forward_proj", gated=c.is_gated_act, written=c.feed_forward_proj),
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
        tie_word_embeddings=tied(w, "lm_head.weight", "shared.weight", c.tie_word_embeddings),
        **their_token_ids(c, decoder_start_token_id=getattr(c, "decoder_start_token_id", None)),
    )


def _stack_weights(w: Weights, stack: str, num_layers: int, mlp: tuple[tuple[str, str], ...]) -> None:
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


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # T5's feed_forward_proj: "act" or "gated-act"; "gated-gelu" means the tanh gelu (gelu_new), kept for old configs.
    projection = {"swiglu": "gated-silu", "geglu_new": "gated-gelu"}.get(c.hidden_act, c.hidden_act)
    return T5Config(
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        d_kv=c.head_dim,
        d_ff=c.intermediate_size,
        num_layers=c.encoder_layers,
        num_decoder_layers=c.decoder_layers,
        num_heads=c.num_attention_heads,
        relative_attention_num_buckets=c.relative_attention_num_buckets,
        relative_attention_max_distance=c.relative_attention_max_distance,
        dropout_rate=c.hidden_dropout_prob,
        initializer_factor=c.initializer_range,  # from_hf reads it back into initializer_range
        layer_norm_epsilon=c.layer_norm_eps,
        feed_forward_proj=projection if projection in (*PLAIN, "gated-silu", "gated-gelu") else "relu",
        # T5 always ties its head; whether the decoder output is scaled by d_model**-0.5 is read from this flag.
        tie_word_embeddings=c.scale_lm_head_input,
        **our_token_ids(c, seq2seq=True),
    )


# Relative position buckets: attention sees only the distances between tokens, so no table, and left padding changes
# nothing.


def parity_config(**extra) -> T5Config:
    return T5Config(
        vocab_size=PARITY_VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=37,
        num_layers=2,
        num_heads=4,
        dropout_rate=0.0,
        decoder_start_token_id=0,
        **extra,
    )


PARITY_REFERENCES = {
    "t5": TinyReference(T5ForConditionalGeneration, parity_config),
    "t5_v1_1": TinyReference(
        T5ForConditionalGeneration,
        lambda: parity_config(feed_forward_proj="gated-gelu", tie_word_embeddings=False),
        generates=False,
    ),
    # HF 5.23's T5 sizes its generation cache by the encoder depth and fails on a deeper decoder: not generated.
    "t5_deeper_decoder": TinyReference(
        T5ForConditionalGeneration, lambda: parity_config(num_decoder_layers=3), generates=False
    ),
}

ARCHITECTURE = Architecture(
    name="t5",
    model_type="t5",
    classes={HFAttentionForSeq2SeqLM: T5ForConditionalGeneration},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", T5ForConditionalGeneration),),
    parity_references=PARITY_REFERENCES,
    docs=ConversionRow(
        title="T5",
        from_hf="test_parity_hf.py",
        to_hf="test_to_hf.py",
        generate="test_parity_hf.py",
        llama_cpp="(encoder-decoder)",
        ctranslate2="not measured",
    ),
)
