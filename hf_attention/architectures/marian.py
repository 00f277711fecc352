"""Marian: BART's network (bart.py) with fixed sinusoidal positions, no embedding norm and one shared vocabulary."""

import torch
from transformers import MarianConfig, MarianMTModel, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForSeq2SeqLM
from ..modeling.positional import SinusoidalPositionalEmbedding
from .bart import bart_like_config, bart_like_fields, bart_like_weights
from .base import FROM_THE_FIRST_COLUMN, NO_POSITION_IDS, PLAIN, Architecture, ConversionRow
from .tiny import BART_SIZES, PARITY_SPECIAL, TinyReference
from .weights import Weights, unsupported


def to_ours(model: MarianMTModel, w: Weights):
    c = model.config
    if not c.share_encoder_decoder_embeddings or (c.decoder_vocab_size or c.vocab_size) != c.vocab_size:
        raise unsupported(
            f"Marian with separate source and target vocabularies (MarianConfig.share_encoder_decoder_embeddings="
            f"{c.share_encoder_decoder_embeddings}, decoder_vocab_size={c.decoder_vocab_size}, vocab_size="
            f"{c.vocab_size})",
            "hf_attention's encoder-decoder shares one embedding between source and target: only a Marian model "
            "with share_encoder_decoder_embeddings=True and one vocabulary converts",
        )
    config = bart_like_config(c, w, position_encoding="sinusoidal", sinusoidal_layout="concat")
    bart_like_weights(w, config)
    # Marian's sinusoid tables are fixed, not learned: check they are the ones we compute instead of copying them.
    sinusoid = SinusoidalPositionalEmbedding(embedding_dim=c.d_model, layout="concat")
    for stack in ("encoder", "decoder"):
        table = w.get(f"model.{stack}.embed_positions.weight")
        expected = sinusoid(torch.arange(table.shape[0])[None])[0].to(table.dtype)
        if not torch.allclose(table.float(), expected.float(), atol=1e-4):
            raise unsupported(f"Marian with a {stack} position table that is not the standard sinusoid")
    return HFAttentionForSeq2SeqLM, config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    activation = c.hidden_act if c.hidden_act in PLAIN else "swish"
    return MarianConfig(activation_function=activation, share_encoder_decoder_embeddings=True, **bart_like_fields(c))


PARITY_REFERENCES = {
    "marian": TinyReference(
        MarianMTModel,
        lambda: MarianConfig(
            **BART_SIZES,
            pad_token_id=PARITY_SPECIAL,
            decoder_start_token_id=PARITY_SPECIAL,
            eos_token_id=1,
            forced_eos_token_id=1,
            scale_embedding=True,
            activation_function="swish",
        ),
    )
}

ARCHITECTURE = Architecture(
    name="marian",
    model_type="marian",
    classes={HFAttentionForSeq2SeqLM: MarianMTModel},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", MarianMTModel),),
    # Marian computes its sinusoids once, into a table of max_position_embeddings rows.
    position_table=True,
    left_padding_note=f"{FROM_THE_FIRST_COLUMN}, {NO_POSITION_IDS}.",
    parity_references=PARITY_REFERENCES,
    docs=ConversionRow(
        title="Marian",
        from_hf="test_parity_hf.py",
        to_hf="test_to_hf.py",
        generate="test_parity_hf.py",
        llama_cpp="(encoder-decoder)",
        ctranslate2="not measured",
    ),
)
