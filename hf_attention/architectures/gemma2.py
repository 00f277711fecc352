"""Gemma 2: Gemma 3's layer without QK-norm, with one rotation for every layer; sliding-window and full layers
alternate (the even layers slide); attention scores capped by c·tanh(s / c) after the scaling and before the mask
(`attn_logit_softcapping`), the final logits by the same cap (`final_logit_softcapping`); q·k scaled by
`query_pre_attn_scalar`^(-1/2); "sandwich" RMSNorms with gain 1 + w; embeddings × √E; a tanh-GELU gate."""

from transformers import Gemma2Config, Gemma2ForCausalLM, Gemma2ForSequenceClassification, PretrainedConfig

from ..modeling.activations import GATED_ACTIVATIONS, PLAIN_ACTIVATIONS
from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, activation, decoder_head
from .gemma3 import GEMMA3_NORMS, IDLE_WINDOW
from .llama import copy_layers, decoder_config, layer_types_of, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, WINDOW, TinyReference
from .weights import Weights, unsupported


def to_ours(model: Gemma2ForCausalLM | Gemma2ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Gemma2ForSequenceClassification)
    if c.use_bidirectional_attention:
        raise unsupported("Gemma 2 use_bidirectional_attention=True (non-causal attention modules)")
    # The classifier (transformers' generic one) never caps: its config's final_logit_softcapping acts on no output.
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        hidden_act=activation(c.hidden_activation, "hidden_activation", gated=True),
        norm_position="sandwich",
        norm_type="offset_rmsnorm",
        scale_embeddings=True,
        query_pre_attn_scalar=c.query_pre_attn_scalar,
        attn_logit_softcapping=c.attn_logit_softcapping,
        final_logit_softcapping=c.final_logit_softcapping,
        **layer_types_of(c),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Gemma 2"),
    )
    copy_layers(w, c.num_hidden_layers, norms=GEMMA3_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    fields = reference_fields(c)
    # the gate's kernel as ACT2FN names it (tanh-GELU: Gemma's own name, the kernel ours runs)
    fields.pop("hidden_act")
    gate = PLAIN_ACTIVATIONS[GATED_ACTIVATIONS.get(c.hidden_act, "gelu_new")]
    return Gemma2Config(
        **fields,
        hidden_activation=gate,
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        query_pre_attn_scalar=c.query_pre_attn_scalar if c.query_pre_attn_scalar is not None else c.head_dim,
        attn_logit_softcapping=c.attn_logit_softcapping,
        final_logit_softcapping=c.final_logit_softcapping,
        sliding_window=c.sliding_window if c.sliding_window is not None else IDLE_WINDOW,  # (see IDLE_WINDOW)
        layer_types=c.attention_types(),
        rope_parameters=reference_rope(c),
    )


# Four layers: the default pattern makes layers 0 and 2 sliding, 1 and 3 full. head_dim 24 is not hidden / heads (16)
# and query_pre_attn_scalar (20) is not head_dim, so a 1/sqrt(head_dim) scaling shows. The caps are below the tiny
# model's largest scores (|s| ≤ 0.25) and logits (|z| ≤ 0.9), so that each bends them: Gemma 2's own 50 and 30 would
# change them by less than the tolerance.
TINY_REFERENCES = {
    "gemma2": TinyReference(
        Gemma2ForCausalLM,
        lambda **extra: Gemma2Config(
            **{**DECODER, "num_hidden_layers": 4, "head_dim": 24},
            sliding_window=WINDOW,
            query_pre_attn_scalar=20,
            attn_logit_softcapping=0.1,
            final_logit_softcapping=0.5,
            **extra,
        ),
    )
}
TINY_REFERENCES["gemma2_classifier"] = TINY_REFERENCES["gemma2"].classifier(Gemma2ForSequenceClassification)

ARCHITECTURE = Architecture(
    name="gemma2",
    model_type="gemma2",
    classes={
        HFAttentionForCausalLM: Gemma2ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Gemma2ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", Gemma2ForSequenceClassification), ("", Gemma2ForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Gemma 2",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="its converter needs a SentencePiece `tokenizer.model` ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no: its Gemma 2 loader ignores the caps, the windows and query_pre_attn_scalar",
    ),
)
