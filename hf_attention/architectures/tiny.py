"""The tiny random references the tests build of each architecture (never downloaded), at two sets of sizes.

Each architecture module lists its references (`Architecture.tiny_references`): one HF class and a tiny config chosen
so that every feature that sets the architecture apart is exercised by a 24-token batch: sliding windows of 8 tokens,
RoPE variants whose original length (16) is exceeded, layers of both kinds where an architecture mixes them. The
parity tests build every reference of the registry, so adding an architecture adds its tests. The first parity suite
(GPT-2, Llama, BERT, BART, Marian, T5: `Architecture.parity_references`) keeps the smaller sizes it was written at.
"""

from collections.abc import Callable
from dataclasses import dataclass

from transformers import PretrainedConfig, PreTrainedModel

VOCAB = 128
PAD, BOS, EOS = 0, 1, 2  # real tokens are drawn from 3 … VOCAB-1, so no row holds a special token by chance
WINDOW = 8  # every sliding window: a 24-token batch crosses it
ORIGINAL_LENGTH = 16  # the trained length of the RoPE variants that depend on it: a 24-token batch exceeds it
LENGTH = 24  # the forward batch's width
NUM_LABELS = 3
THETA = 10000.0

SPECIAL = {"pad_token_id": PAD, "bos_token_id": BOS, "eos_token_id": EOS}
DECODER = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    **SPECIAL,
}


# The sizes of the first parity suite (tests/test_parity_hf.py: GPT-2, Llama, BERT, BART, Marian, T5), every output
# compared, hidden states and attention weights included, on right-padded batches of 9 tokens: a 99-token vocabulary
# whose last id (98) serves as the special token where an architecture needs one apart from 0.
PARITY_VOCAB = 99
PARITY_SPECIAL = PARITY_VOCAB - 1
BART_SIZES = {
    "vocab_size": PARITY_VOCAB,
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 37,
    "decoder_ffn_dim": 37,
    "max_position_embeddings": 64,
    "dropout": 0.0,
}


@dataclass(frozen=True)
class TinyReference:
    """An HF class and the tiny config the tests build it from (with random weights, every one moved from its
    initial value). `config(**extra)` takes config fields to add (a classifier's `num_labels`)."""

    model_class: type[PreTrainedModel]
    config: Callable[..., PretrainedConfig]
    # Whether the generation tests run it (when its class generates at all): False where the reference's own
    # generate() fails on that config.
    generates: bool = True

    def classifier(self, model_class: type[PreTrainedModel], **extra) -> "TinyReference":
        """The sequence (or token) classifier `model_class` on this config, with NUM_LABELS labels."""
        make = self.config
        return TinyReference(model_class, lambda: make(num_labels=NUM_LABELS, **extra))
