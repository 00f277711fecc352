"""What an architecture module declares (`Architecture`), and the config helpers every one of them shares.

Each module of this folder describes one standard architecture in both directions: the converter that reads a reference
model into ours (`to_ours`, used by `from_hf`) and the builder of the reference config that describes one of our
configs (`reference_config`, used by `to_hf`, which then runs the same converter on the reference it built, so that
import and export read one table of correspondences). The record below is all that conversion/from_hf.py and to_hf.py
know of an architecture: adding one is a module that defines its record and a line in the registry (`__init__.py`).

The record is frozen and its later fields have defaults, so that a new need (a check of a reference before anything
is converted, say) is a field with a default here and a line in the modules that use it.
"""

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from transformers import PretrainedConfig, PreTrainedModel

from ..modeling.activations import ACTIVATION_SYNONYMS, PLAIN_ACTIVATIONS, hidden_act_of
from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .tiny import TinyReference
from .weights import Weights, unsupported

logger = logging.getLogger(__name__)

# reference model, its tensors → (our model class, our config, reference tensors dropped: name prefix → why)
Converter = Callable[[PreTrainedModel, Weights], tuple[type[PreTrainedModel], HFAttentionConfigBase, dict[str, str]]]


@dataclass(frozen=True)
class ConversionRow:
    """One row of docs/conversion.md's table: the architecture and its heads, then what each column says."""

    title: str  # the architecture's name in prose: "Qwen3", "Gemma 3"
    from_hf: str  # the tests that prove `from_hf` / `convert`
    to_hf: str  # the tests that prove `to_hf` / `export --to`
    generate: str  # which decoding strategies give the reference's tokens, and where
    llama_cpp: str  # what llama.cpp does with an export (docs/deploy.md)
    ctranslate2: str  # what CTranslate2 does with an export
    detail: str = ""  # what follows the name in the table: " text", ", plain and LongRoPE"
    heads: str = ""  # the heads converted: "LM, classifier"

    def markdown(self) -> str:
        name = self.title + self.detail + (f" ({self.heads})" if self.heads else "")
        cells = (name, self.from_hf, self.to_hf, self.generate, self.llama_cpp, self.ctranslate2)
        return "| " + " | ".join(cells) + " |"


@dataclass(frozen=True)
class Architecture:
    """One standard architecture, as both directions of the conversion see it."""

    # What `to_hf(model, to=...)` and `hf-attention export --to` call it.
    name: str
    # The `model_type` of its configs: how `load_reference` recognises a checkpoint and the card names an export.
    model_type: str
    # Our class → its class with the same head. Exact classes only: a subclass may change the forward pass in ways a
    # weight copy cannot see.
    classes: Mapping[type[PreTrainedModel], type[PreTrainedModel]]
    # Its model → ours (reads the reference through `Weights`).
    to_ours: Converter
    # Our config → its config; a value it cannot take is replaced by the one it has, and to_hf names the difference.
    reference_config: Callable[[HFAttentionConfigBase], PretrainedConfig]
    # How `load_reference` picks the class for a checkpoint: the first (part of a saved class name, class) whose part
    # is in the checkpoint's `architectures` ("" matches every checkpoint).
    checkpoint_classes: tuple[tuple[str, type[PreTrainedModel]], ...]
    # Whether its positions are the rows of a table of max_position_embeddings (Marian computes its sinusoids once,
    # into such a table): an export takes no longer input, even from a model of ours that computes any position.
    position_table: bool = False
    # What the exported model card says about rows padded on the left (None: padding changes nothing).
    left_padding_note: str | None = None
    # The tiny random references the parity tests of today's architectures build of it (tiny.py: case name → class and
    # config), run by tests/test_modern_parity.py and the tests that read tests/modern_references.py.
    tiny_references: Mapping[str, TinyReference] = field(default_factory=dict)
    # Its references in the first parity suite (tests/test_parity_hf.py: every hidden state and attention weight at
    # 1e-4, greedy and beam generation with and without cache, the Auto classes), at that suite's sizes (tiny.py).
    parity_references: Mapping[str, TinyReference] = field(default_factory=dict)
    # Its row of docs/conversion.md's table (a test checks the page against the registry): what is converted, and
    # what generate(), llama.cpp and CTranslate2 were shown to do with it.
    docs: ConversionRow | None = None

    def checkpoint_class(self, saved_as: str) -> type[PreTrainedModel]:
        """The class to load a checkpoint of this architecture with, from its `architectures` (joined by spaces)."""
        return next(cls for part, cls in self.checkpoint_classes if part in saved_as)


# ---------------------------------------------------------------------------------------------------------------------
# Reading a reference config (the import)


def activation(name: str, field: str, *, gated: bool = False, written: str | None = None) -> str:
    """Our `hidden_act` for a reference's ACT2FN name (its gate's, for a gated network): activations.py's table.
    `written`: the field's value as the user wrote it, when `name` was derived from it (T5's "gated-relu" → "relu")."""
    hidden_act = hidden_act_of(name, gated=gated)
    if hidden_act is None:
        kind = "gated activation" if gated else "activation"
        known = (*PLAIN_ACTIVATIONS, *ACTIVATION_SYNONYMS)
        supported = [known_name for known_name in known if hidden_act_of(known_name, gated=gated)]
        raise unsupported(
            f"{field}={written or name!r} ({kind} {name!r}; supported: {', '.join(supported)})",
            f"choose one of the supported {kind}s",
        )
    return hidden_act


# Special ids that no forward pass reads from the config (bos, eos; an encoder's cls and sep): generate() reads its
# generation config, which from_hf copies unchanged. One outside the vocabulary is no logit's index (generation never
# produces it) and no embedding row (an input holding it fails in the reference as in ours), so transformers only warns
# of it, and the converted config holds None in its place: the same logits and tokens.
MARKER_IDS = ("bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")


def their_token_ids(config: PretrainedConfig, *, reads_pad: bool = True, **extra) -> dict:
    """The special-token ids of a reference config (T5 has no bos_token_id at all), with `extra` ids of its own
    (decoder_start_token_id, cls_token_id, ...), each in the vocabulary or None.

    An id outside [0, vocab_size) becomes None with a warning where the model never reads it (`MARKER_IDS`; the pad
    id when not `reads_pad`: a causal LM's forward pass ignores it); where the model reads it (a classifier's or an
    encoder-decoder's pad id, the decoder's start), it is refused in the source's words.
    """
    names = ("pad_token_id", "bos_token_id", "eos_token_id")
    ids = {**{name: getattr(config, name, None) for name in names}, **extra}
    return {name: _inside_vocabulary(config, name, value, reads_pad=reads_pad) for name, value in ids.items()}


def _inside_vocabulary(config: PretrainedConfig, name: str, value, *, reads_pad: bool):
    vocab_size = config.vocab_size
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    outside = [token for token in values if isinstance(token, int) and not 0 <= token < vocab_size]
    if not outside:
        return value
    source = f"{type(config).__name__}.{name}={value!r}"
    if isinstance(value, (list, tuple)):
        source += f" holds {', '.join(map(str, outside))}, which {'is' if len(outside) == 1 else 'are'}"
    else:
        source += " is"
    if name in MARKER_IDS or (name == "pad_token_id" and not reads_pad):
        kept = [token for token in values if token not in outside]
        converted = (kept or None) if isinstance(value, (list, tuple)) else None
        logger.warning(
            "from_hf: %s outside the vocabulary [0, vocab_size=%d): no token of this model can be that id, and no "
            "forward pass reads it; converted as %s=%r (the same logits; generate() reads the generation config, "
            "which is copied as it is).",
            source,
            vocab_size,
            name,
            converted,
        )
        return converted
    use = (
        "the decoder's first input, looked up in the embedding"
        if name == "decoder_start_token_id"
        else "read by the model (a sequence classifier finds each row's last real token with it; an encoder-decoder "
        "pads the decoder inputs it builds from labels with it)"
    )
    raise ValueError(
        f"from_hf: {source} outside the vocabulary [0, vocab_size={vocab_size}), and this id is {use}, so the "
        f"model cannot be converted exactly. Set config.{name} to the token's id in [0, {vocab_size}) (or resize the "
        "embeddings to hold it: model.resize_token_embeddings) before converting."
    )


def build_config(
    config_class: type[HFAttentionConfigBase], source: PretrainedConfig, **fields
) -> HFAttentionConfigBase:
    """Our config from the fields a converter read off `source`. The converters check what they know in the source's
    words first; a refusal left to our config still says which source it came from."""
    try:
        return config_class(**fields)
    except ValueError as error:
        raise ValueError(
            f"from_hf: the {type(source).__name__} gives hf_attention's {config_class.__name__} a value it refuses, "
            f"so the model cannot be converted: {error}"
        ) from None


def their_labels(config: PretrainedConfig) -> dict:
    """A classifier's labels and loss kind (num_labels follows from id2label)."""
    return {"id2label": dict(config.id2label), "label2id": dict(config.label2id), "problem_type": config.problem_type}


def decoder_head(w: Weights, config: HFAttentionConfigBase, lm_head: str, *, classifier: bool) -> type:
    """The class and head weights of a decoder reference: an LM head (copied when untied) or a classifier `score`."""
    if classifier:
        w.copy("score", "score")
        return HFAttentionDecoderForSequenceClassification
    if not config.tie_word_embeddings:
        w.copy("lm_head", lm_head)
    return HFAttentionForCausalLM


# ---------------------------------------------------------------------------------------------------------------------
# Writing a reference config (the export)

PLAIN = tuple(PLAIN_ACTIVATIONS)  # the activations every reference names as we do


def our_token_ids(c: HFAttentionConfigBase, *, seq2seq: bool = False, markers: bool = False) -> dict:
    """The special-token ids a reference config takes from ours; `markers`: an encoder's cls and sep too, which
    ModernBERT's config has (None written as None: the class's defaults may lie outside a small vocabulary)."""
    ids = {"pad_token_id": c.pad_token_id, "bos_token_id": c.bos_token_id, "eos_token_id": c.eos_token_id}
    if seq2seq:
        ids["decoder_start_token_id"] = c.decoder_start_token_id
    if markers:
        ids |= {name: getattr(c, name, None) for name in ("cls_token_id", "sep_token_id")}
    return ids


def our_labels(c: HFAttentionConfigBase) -> dict:
    """A classifier's labels and loss kind (every config has labels; only classifiers use them)."""
    id2label = dict(c.id2label or {})
    label2id = dict(c.label2id or {label: index for index, label in id2label.items()})
    return {"id2label": id2label, "label2id": label2id, "problem_type": c.problem_type}


# How an architecture that counts positions from a row's first column gets ours, which count from the row's first real
# token (the attention mask), in the exported card; Llama and T5 see only the distances between tokens.
FROM_THE_FIRST_COLUMN = (
    "On a row padded on the left it numbers positions from the first column, where hf-attention numbers them from the "
    "first real token"
)
POSITION_IDS = "pass `position_ids` (the attention mask's cumulative sum minus 1) for the same logits"
NO_POSITION_IDS = "and takes no `position_ids`: pad on the right for the same logits and tokens"
