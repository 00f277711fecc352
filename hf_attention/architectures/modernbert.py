"""ModernBERT: a pre-norm encoder with rotary positions (one base for the global layers, another for the local
ones), local attention (a window of `local_attention` + 1 keys) on all layers but every
`global_attn_every_n_layers`-th, a GeGLU feed-forward network, no biases, bias-free LayerNorms, a norm over the
embeddings in place of the first layer's attention norm, and BERT's dense → GELU → norm prediction head."""

from transformers import (
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
    ModernBertModel,
    PretrainedConfig,
)

from ..modeling.activations import GATED_ACTIVATIONS, PLAIN_ACTIVATIONS, gate_activation, hidden_act_of
from ..modeling.configuration_hf_attention import HFAttentionConfigBase, HFAttentionEncoderConfig
from ..modeling.modeling_hf_attention import (
    HFAttentionEncoderModel,
    HFAttentionForMaskedLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
)
from .base import (
    Architecture,
    ConversionRow,
    activation,
    build_config,
    our_labels,
    our_token_ids,
    their_labels,
    their_token_ids,
)
from .tiny import BOS, EOS, PAD, VOCAB, WINDOW, TinyReference
from .weights import Weights, tied, unsupported

# Their classes with a head (dense → GELU → norm, then a linear layer) → ours.
_HEADS = {
    ModernBertForMaskedLM: HFAttentionForMaskedLM,
    ModernBertForSequenceClassification: HFAttentionForSequenceClassification,
    ModernBertForTokenClassification: HFAttentionForTokenClassification,
}


def to_ours(model: ModernBertModel, w: Weights):
    c = model.config
    head = type(model) in _HEADS
    masked_lm = isinstance(model, ModernBertForMaskedLM)
    classifier = head and not masked_lm
    hidden_act = activation(c.hidden_activation, "hidden_activation", gated=True)
    full, local = c.rope_parameters["full_attention"], c.rope_parameters["sliding_attention"]
    for kind, rope in (("global", full), ("local", local)):
        if rope.get("rope_type", "default") != "default":
            raise unsupported(f"ModernBERT {kind} layers with rope_type={rope['rope_type']!r} (only 'default')")
    # Our heads apply the feed-forward gate's activation: the head's must compute the same function. Names are
    # compared by what they compute (activations.py's synonyms: gelu_pytorch_tanh is gelu_new, swish is silu).
    if head and hidden_act_of(c.classifier_activation, gated=False) != gate_activation(hidden_act):
        raise unsupported(
            f"ModernBERT classifier_activation={c.classifier_activation!r} with hidden_activation="
            f"{c.hidden_activation!r} (the head's activation must compute the feed-forward gate's function, "
            f"{c.hidden_activation!r})"
        )
    if masked_lm and model.sparse_prediction:  # what forward() reads (set from the config when it was built)
        raise ValueError(
            f"from_hf: ModernBertConfig.sparse_prediction=True (sparse_pred_ignore_index="
            f"{model.sparse_pred_ignore_index}): given labels, ModernBertForMaskedLM returns logits only for the "
            f"positions whose label is not {model.sparse_pred_ignore_index}, flattened to (positions, vocab_size), "
            "and its loss leaves the others out; hf_attention's masked LM returns (batch, length, vocab_size) logits "
            "with the loss over labels != -100, so the model cannot be converted exactly. The weights are the same "
            "either way: set model.sparse_prediction = False (and config.sparse_prediction = False), or load it with "
            "from_pretrained(..., sparse_prediction=False), then convert; give labels -100 at the positions to leave "
            "out of the loss."
        )
    types = list(c.layer_types)
    sliding = "sliding_attention" in types
    config = build_config(
        HFAttentionEncoderConfig,
        c,
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        hidden_act=hidden_act,
        max_position_embeddings=c.max_position_embeddings,
        position_encoding="rotary",
        rope_theta=full["rope_theta"],
        local_rope_theta=local["rope_theta"] if sliding else None,
        # |i − j| <= local_attention // 2: our window counts the keys less than W away
        sliding_window=c.local_attention // 2 + 1 if sliding else None,
        layer_types=types if sliding else None,
        norm_position="pre",
        norm_type="layernorm",
        norm_bias=c.norm_bias,
        layer_norm_eps=c.norm_eps,
        scale_embeddings=False,
        embedding_norm=True,
        first_attention_norm=False,
        final_norm=True,
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        hidden_dropout_prob=c.mlp_dropout,
        attention_dropout=c.attention_dropout,
        initializer_range=c.initializer_range,
        lm_head_transform=masked_lm,
        classifier_transform=classifier,
        classifier_pooling={"cls": "first", "mean": "mean"}[c.classifier_pooling],
        classifier_dropout=c.classifier_dropout,
        head_transform_bias=c.classifier_bias,
        lm_head_bias=masked_lm and c.decoder_bias,
        tie_word_embeddings=masked_lm
        and tied(w, "decoder.weight", "model.embeddings.tok_embeddings.weight", c.tie_word_embeddings),
        **their_token_ids(c, cls_token_id=c.cls_token_id, sep_token_id=c.sep_token_id),
        **(their_labels(c) if classifier else {}),
    )
    encoder = "model.encoder" if head else "encoder"
    base = "model." if head else ""  # ModernBertModel's own names have no prefix
    w.copy(f"{encoder}.embed_tokens", f"{base}embeddings.tok_embeddings")
    w.copy(f"{encoder}.embedding_norm", f"{base}embeddings.norm")
    heads, head_dim = c.num_attention_heads, config.head_dim
    for i in range(c.num_hidden_layers):
        src, dst = f"{base}layers.{i}", f"{encoder}.layers.{i}"
        # Wqkv's rows are [q | k | v], each H·D; Wi's [activated input: F | gate: F] (the first half is activated,
        # our gate_proj). Views, so that an export writes into them.
        for name, tensor in zip(
            ("q", "k", "v"), w.get(f"{src}.attn.Wqkv.weight").split(heads * head_dim), strict=True
        ):
            w.out[f"{dst}.self_attn.{name}_proj.weight"] = tensor
        if f"{src}.attn.Wqkv.bias" in w:
            for name, bias in zip(
                ("q", "k", "v"), w.get(f"{src}.attn.Wqkv.bias").split(heads * head_dim), strict=True
            ):
                w.out[f"{dst}.self_attn.{name}_proj.bias"] = bias
        w.copy(f"{dst}.self_attn.o_proj", f"{src}.attn.Wo")
        gate, up = w.get(f"{src}.mlp.Wi.weight").chunk(2)
        w.out[f"{dst}.mlp.gate_proj.weight"], w.out[f"{dst}.mlp.up_proj.weight"] = gate, up
        if f"{src}.mlp.Wi.bias" in w:
            w.out[f"{dst}.mlp.gate_proj.bias"], w.out[f"{dst}.mlp.up_proj.bias"] = w.get(f"{src}.mlp.Wi.bias").chunk(2)
        w.copy(f"{dst}.mlp.down_proj", f"{src}.mlp.Wo")
        if i > 0:  # layer 0's attention norm is the embedding norm
            w.copy(f"{dst}.self_attn_norm", f"{src}.attn_norm")
        w.copy(f"{dst}.mlp_norm", f"{src}.mlp_norm")
    w.copy(f"{encoder}.norm", f"{base}final_norm")
    if masked_lm:
        w.copy("lm_head_transform.dense", "head.dense")
        w.copy("lm_head_transform.norm", "head.norm")
        w.copy("lm_head", "decoder", names=("bias",) if config.tie_word_embeddings else ("weight", "bias"))
    elif classifier:
        w.copy("classifier_transform.dense", "head.dense")
        w.copy("classifier_transform.norm", "head.norm")
        w.copy("classifier", "classifier")
    return (_HEADS[type(model)] if head else HFAttentionEncoderModel), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    types = c.attention_types()
    window = c.sliding_window or 1
    full_every = next((i for i, kind in enumerate(types) if i and kind == "full_attention"), len(types))
    # The kernel our layers run for the gate (gelu_new runs as gelu_pytorch_tanh): the export computes the same bits,
    # and a source's "gelu_pytorch_tanh" comes back by that name.
    gate = PLAIN_ACTIVATIONS[GATED_ACTIVATIONS.get(c.hidden_act, "gelu")]
    return ModernBertConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        hidden_activation=gate,
        classifier_activation=gate,
        max_position_embeddings=c.max_position_embeddings,
        local_attention=2 * (window - 1),
        global_attn_every_n_layers=full_every,
        layer_types=types,
        global_rope_theta=float(c.rope_theta),
        local_rope_theta=float(c.local_rope_theta if c.local_rope_theta is not None else c.rope_theta),
        norm_eps=c.layer_norm_eps,
        norm_bias=c.norm_bias,
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        classifier_bias=c.head_transform_bias,
        classifier_pooling={"first": "cls", "mean": "mean"}[getattr(c, "classifier_pooling", "first")],
        classifier_dropout=getattr(c, "classifier_dropout", None) or 0.0,
        decoder_bias=c.lm_head_bias,
        mlp_dropout=c.hidden_dropout_prob,
        attention_dropout=c.attention_dropout,
        initializer_range=c.initializer_range,
        tie_word_embeddings=c.tie_word_embeddings,
        **our_token_ids(c, markers=True),
        **our_labels(c),
    )


def _tiny_config(**extra) -> ModernBertConfig:
    # Layer 0 global, layers 1-2 local; a local layer sees |i - j| <= local_attention // 2 = 4, exceeded by 24 tokens.
    return ModernBertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=64,
        local_attention=WINDOW,
        global_attn_every_n_layers=3,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        cls_token_id=BOS,
        sep_token_id=EOS,
        **extra,
    )


_MASKED_LM = TinyReference(ModernBertForMaskedLM, _tiny_config)
TINY_REFERENCES = {
    "modernbert": _MASKED_LM,
    "modernbert_base": TinyReference(ModernBertModel, _tiny_config),
    "modernbert_classifier": _MASKED_LM.classifier(ModernBertForSequenceClassification),
    # mean pooling (the classifier above reads the first token) and the per-token classifier
    "modernbert_mean_classifier": _MASKED_LM.classifier(
        ModernBertForSequenceClassification, classifier_pooling="mean"
    ),
    "modernbert_token_classifier": _MASKED_LM.classifier(ModernBertForTokenClassification),
}

ARCHITECTURE = Architecture(
    name="modernbert",
    model_type="modernbert",
    classes={
        HFAttentionEncoderModel: ModernBertModel,
        **{ours: theirs for theirs, ours in _HEADS.items()},
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("MaskedLM", ModernBertForMaskedLM),
        ("ForSequenceClassification", ModernBertForSequenceClassification),
        ("ForTokenClassification", ModernBertForTokenClassification),
        ("", ModernBertModel),
    ),
    left_padding_note=(
        "It numbers positions from a row's first column (it assumes padding on the right), where hf-attention numbers "
        "them from the first real token: pad on the right for the same outputs"
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="ModernBERT",
        heads="base, masked LM, sequence and token classifiers",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="(encoder)",
        llama_cpp="(encoder)",
        ctranslate2="(encoder)",
    ),
)
