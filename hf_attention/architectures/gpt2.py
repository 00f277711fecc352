"""GPT-2: a pre-norm decoder with learned positions, GELU and Conv1D projections (q, k and v packed in one)."""

from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase, HFAttentionDecoderConfig
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import (
    FROM_THE_FIRST_COLUMN,
    PLAIN,
    POSITION_IDS,
    Architecture,
    ConversionRow,
    activation,
    build_config,
    decoder_head,
    our_labels,
    our_token_ids,
    their_labels,
    their_token_ids,
)
from .tiny import PARITY_SPECIAL, PARITY_VOCAB, TinyReference
from .weights import Weights, tied, unsupported


def to_ours(model: GPT2LMHeadModel | GPT2ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, GPT2ForSequenceClassification)
    if c.scale_attn_by_inverse_layer_idx:
        raise unsupported("GPT-2 with scale_attn_by_inverse_layer_idx=True (scores scaled by 1/(layer+1))")
    if c.add_cross_attention:
        raise unsupported("GPT-2 with add_cross_attention=True")
    # reorder_and_upcast_attn only changes the order of fp32 operations (a mixed-precision safeguard): same maths.
    config = build_config(
        HFAttentionDecoderConfig,
        c,
        vocab_size=c.vocab_size,
        hidden_size=c.n_embd,
        num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head,
        intermediate_size=c.n_inner or 4 * c.n_embd,
        hidden_act=activation(c.activation_function, "activation_function"),
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
        tie_word_embeddings=tied(w, "lm_head.weight", "transformer.wte.weight", c.tie_word_embeddings),
        **their_token_ids(c, reads_pad=classifier),  # only the classifier reads it (each row's last real token)
        **(their_labels(c) if classifier else {}),
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
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return GPT2Config(
        vocab_size=c.vocab_size,
        n_embd=c.hidden_size,
        n_layer=c.num_hidden_layers,
        n_head=c.num_attention_heads,
        n_inner=c.intermediate_size,
        activation_function=c.hidden_act if c.hidden_act in PLAIN else "gelu_new",
        n_positions=c.max_position_embeddings,
        scale_attn_weights=c.attention_score != "dot",
        layer_norm_epsilon=c.layer_norm_eps,
        resid_pdrop=c.hidden_dropout_prob,
        embd_pdrop=c.hidden_dropout_prob,
        attn_pdrop=c.attention_dropout,
        initializer_range=c.initializer_range,
        tie_word_embeddings=c.tie_word_embeddings,
        **our_token_ids(c),
        **our_labels(c),
    )


def parity_config(**extra) -> GPT2Config:
    return GPT2Config(
        vocab_size=PARITY_VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=PARITY_SPECIAL,
        eos_token_id=PARITY_SPECIAL,
        pad_token_id=0,
        **extra,
    )


PARITY_REFERENCES = {
    "gpt2": TinyReference(GPT2LMHeadModel, parity_config),
    "gpt2_classifier": TinyReference(GPT2ForSequenceClassification, lambda: parity_config(num_labels=3)),
}

ARCHITECTURE = Architecture(
    name="gpt2",
    model_type="gpt2",
    classes={
        HFAttentionForCausalLM: GPT2LMHeadModel,
        HFAttentionDecoderForSequenceClassification: GPT2ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", GPT2ForSequenceClassification), ("", GPT2LMHeadModel)),
    position_table=True,
    left_padding_note=f"{FROM_THE_FIRST_COLUMN}: {POSITION_IDS}. `generate()` passes them itself: the same tokens.",
    parity_references=PARITY_REFERENCES,
    docs=ConversionRow(
        title="GPT-2",
        heads="LM, classifier",
        from_hf="test_parity_hf.py",
        to_hf="test_to_hf.py",
        generate="test_parity_hf.py",
        llama_cpp="tests/test_tokenizer_placeholders.py, docs/deploy.md",
        ctranslate2="test_ctranslate2.py",
    ),
)
