"""BERT: a post-norm encoder with learned positions, token types and a norm over the embeddings; with or without its
masked-LM head."""

from transformers import BertConfig, BertForMaskedLM, BertModel, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase, HFAttentionEncoderConfig
from ..modeling.modeling_hf_attention import HFAttentionEncoderModel, HFAttentionForMaskedLM
from .base import (
    FROM_THE_FIRST_COLUMN,
    PLAIN,
    POSITION_IDS,
    Architecture,
    ConversionRow,
    activation,
    build_config,
    our_token_ids,
    their_token_ids,
)
from .tiny import PARITY_VOCAB, TinyReference
from .weights import Weights, tied, unsupported

# The ids of [CLS] and [SEP]: not fields of BertConfig, which keeps them as extra ones when given.
_MARKERS = ("cls_token_id", "sep_token_id")


def to_ours(model: BertModel | BertForMaskedLM, w: Weights):
    c = model.config
    if c.is_decoder or c.add_cross_attention:
        raise unsupported("BERT used as a decoder (is_decoder / add_cross_attention)")
    masked_lm = isinstance(model, BertForMaskedLM)
    prefix = "bert." if masked_lm else ""
    config = _our_config(c, w, masked_lm=masked_lm, word_embeddings=f"{prefix}embeddings.word_embeddings.weight")
    _encoder_weights(w, c.num_hidden_layers, src=prefix, dst="model.encoder" if masked_lm else "encoder")
    # The pooler (dense + tanh over [CLS]) serves only next-sentence prediction; no hf_attention output uses it.
    dropped = {"pooler.": "BERT's pooler has no counterpart in HFAttentionEncoderModel"}
    if masked_lm:
        dropped |= _lm_head_weights(w, config)
    return (HFAttentionForMaskedLM if masked_lm else HFAttentionEncoderModel), config, dropped


def _our_config(c, w: Weights, *, masked_lm: bool, word_embeddings: str) -> HFAttentionEncoderConfig:
    """BERT as our encoder: post-norm, learned positions, token types and a norm over the embeddings."""
    return build_config(
        HFAttentionEncoderConfig,
        c,
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        hidden_act=activation(c.hidden_act, "hidden_act"),
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
        tie_word_embeddings=tied(w, "cls.predictions.decoder.weight", word_embeddings, c.tie_word_embeddings),
        # (an export of ours writes them when set)
        **their_token_ids(c, **{name: getattr(c, name, None) for name in _MARKERS}),
    )


def _encoder_weights(w: Weights, num_layers: int, *, src: str, dst: str) -> None:
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


def _lm_head_weights(w: Weights, config: HFAttentionEncoderConfig) -> dict[str, str]:
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


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    ids = our_token_ids(c, markers=True)
    return BertConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        hidden_act=c.hidden_act if c.hidden_act in PLAIN else "gelu",
        max_position_embeddings=c.max_position_embeddings,
        type_vocab_size=max(c.type_vocab_size, 1),  # BERT always adds row 0 of its token-type table
        layer_norm_eps=c.layer_norm_eps,
        hidden_dropout_prob=c.hidden_dropout_prob,
        attention_probs_dropout_prob=c.attention_dropout,
        classifier_dropout=getattr(c, "classifier_dropout", None),
        initializer_range=c.initializer_range,
        tie_word_embeddings=c.tie_word_embeddings,
        # cls/sep as extra fields, and only when set: a BERT config without them stays as BERT writes it
        **{name: value for name, value in ids.items() if name not in _MARKERS or value is not None},
    )


def parity_config() -> BertConfig:
    return BertConfig(
        vocab_size=PARITY_VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


PARITY_REFERENCES = {
    "bert": TinyReference(BertModel, parity_config),
    "bert_mlm": TinyReference(BertForMaskedLM, parity_config),
}

ARCHITECTURE = Architecture(
    name="bert",
    model_type="bert",
    classes={HFAttentionEncoderModel: BertModel, HFAttentionForMaskedLM: BertForMaskedLM},
    to_ours=to_ours,
    reference_config=reference_config,
    # Checkpoints saved with an MLM head (BertForMaskedLM, BertForPreTraining) load with it; others as BertModel.
    checkpoint_classes=(("MaskedLM", BertForMaskedLM), ("PreTraining", BertForMaskedLM), ("", BertModel)),
    position_table=True,
    left_padding_note=f"{FROM_THE_FIRST_COLUMN}: {POSITION_IDS}.",
    parity_references=PARITY_REFERENCES,
    docs=ConversionRow(
        title="BERT",
        heads="base, masked LM",
        from_hf="test_parity_hf.py",
        to_hf="test_to_hf.py",
        generate="(encoder)",
        llama_cpp="(encoder)",
        ctranslate2="(encoder)",
    ),
)
