"""Configurations of the three Transformer families of hf-attention: encoder, decoder and encoder-decoder.

Every knob is declared once, in the table of knobs.py: its default, its check, its idea and what `to_hf` does with
it. The classes here read that table for their constructors (each family takes its knobs from it), their field checks
and their docstrings, and add what involves several fields (`_validate_knobs`). Variant choices are plain strings
checked against tuples or against the registries `scores.SCORES` and `positional.POSITIONAL_ENCODINGS`, whose classes
also say what they need from a config (so a new variant is one class and one registry entry), and against the tables
of norms.py and activations.py, which the layers build from. So `config.json` stays JSON and a typo fails at
construction time with an error that names the field, the value and what is allowed. Every field of ours is type- and
range-checked whenever it is set (booleans must be real booleans, numbers real numbers, not strings), so a
hand-edited `config.json` fails on load with the same errors. Keys we do not know are stored on the config, as
`PretrainedConfig` does.

This file is shipped with every checkpoint (remote code). It imports the standard library, `transformers` and the
registries and the knob table (knobs.py, scores.py, positional.py, norms.py, activations.py), which import only
torch (loaded by transformers anyway) and transformers' init functions and activation table; never the modeling code.
"""

from transformers import PretrainedConfig

from .activations import HIDDEN_ACTS
from .attention_backends import softcap_refusal
from .field_checks import CheckedFields, check_positive, check_token_ids
from .knobs import (  # the allowed values, for callers (the checks themselves live in the table)
    CLASSIFIER_POOLINGS,
    KNOBS,
    LAYER_TYPES,
    NORM_POSITIONS,
    QK_NORMS,
    SINUSOIDAL_LAYOUTS,
    document_constructor,
    field_checks,
    knobs_of,
    position_encodings,
)
from .norms import NORMS
from .positional import POSITIONAL_ENCODINGS
from .rope_scaling import ROPE_SCALINGS
from .scores import SCORES, dot_product_scores

# The registered names, for parameter lists and docs (the checks read the registries themselves).
ATTENTION_SCORES = tuple(SCORES)
POSITION_ENCODINGS = position_encodings()
NORM_TYPES = tuple(NORMS)
ROPE_TYPES = tuple(ROPE_SCALINGS)

# Checks of single fields, run whenever one is set (in __init__, when a config.json is loaded, and on assignment), as
# transformers' own configs validate their fields on assignment: every knob's check (knobs.py). Checks across fields
# run in `_validate_knobs`.
FIELD_CHECKS = field_checks()
__all__ = [  # the names of this module, re-exported allowed values included
    "ATTENTION_SCORES",
    "CLASSIFIER_POOLINGS",
    "FIELD_CHECKS",
    "HIDDEN_ACTS",
    "KNOBS",
    "LAYER_TYPES",
    "NORM_POSITIONS",
    "NORM_TYPES",
    "POSITION_ENCODINGS",
    "QK_NORMS",
    "ROPE_TYPES",
    "SINUSOIDAL_LAYOUTS",
    "HFAttentionConfigBase",
    "HFAttentionDecoderConfig",
    "HFAttentionEncoderConfig",
    "HFAttentionSeq2SeqConfig",
]


class HFAttentionConfigBase(CheckedFields, PretrainedConfig):
    """Knobs shared by the three families: every field of `knobs.KNOBS` that all of them have, listed under
    Args below from that table (each family adds its own).
    """

    keys_to_ignore_at_inference = ["cache", "past_key_values"]  # the cache's name from transformers 5.24, and before
    _field_checks = FIELD_CHECKS
    # The stacks this family builds: True = bidirectional (encoder), False = causal (decoder). The positional scheme
    # checks the config for each (T5's relative buckets need a different minimum in each direction).
    _stack_directions = (True, False)

    family: str | None = None  # the family whose knobs (knobs.KNOBS) the config has; None: the shared ones

    def __init__(self, **kwargs):
        """Every knob of the family from `kwargs` or its default (knobs.py); other keys go to PretrainedConfig."""
        values = {name: kwargs.pop(name, knob.default) for name, knob in knobs_of(self.family).items()}
        # What a None default stands for, written into the config (HF caches read num_key_value_heads directly).
        if values["num_key_value_heads"] is None:
            values["num_key_value_heads"] = values["num_attention_heads"]
        if values["final_norm"] is None:
            values["final_norm"] = values["norm_position"] == "pre"
        values["rope_scaling_options"] = dict(values["rope_scaling_options"] or {})
        values["nope_layers"] = list(values["nope_layers"] or [])
        if values.get("layer_types") is not None:
            values["layer_types"] = list(values["layer_types"])
        # None when it is the same as attention_bias: one value per computation, so that configs compare equal
        if values["attention_output_bias"] == values["attention_bias"]:
            values["attention_output_bias"] = None
        for name, value in values.items():
            setattr(self, name, value)  # checked on assignment (FIELD_CHECKS)
        self._check_token_ids()  # before PretrainedConfig's own check, which only warns
        self._check_layer_types_length()  # before transformers' own check, which raises no ValueError
        super().__init__(**kwargs)
        self._validate_knobs()

    @property
    def logit_scale(self) -> float | None:
        """The factor on the vocabulary logits when `scale_lm_head_input` is the only head option, else None.

        Clients that project the last hidden state themselves (TRL's fused LM head) read this name, as for Cohere's
        models: (s·h)Wᵀ = s·(hWᵀ) holds without a bias, so they compute this model's logits.
        """
        plain_head = not self.lm_head_bias and not self.lm_head_transform and self.final_logit_softcapping is None
        if self.scale_lm_head_input and plain_head:
            return self.hidden_size**-0.5
        return None

    @property
    def position_limit(self) -> int | None:
        """Most positions an input may have (a learned table's rows), or None when the positional scheme takes any
        length. Read by the seq2seq pipeline, whose file is shipped alone and cannot import the registry."""
        scheme = POSITIONAL_ENCODINGS.get(self.position_encoding)  # None for NO_POSITIONAL_ENCODING
        return None if scheme is None else scheme.position_limit(self)

    def head_options_outside_the_projection(self) -> str | None:
        """The head options a client that computes logits as logit_scale · (h Wᵀ + b) from the last hidden state
        cannot reproduce (named for its error message), or None."""
        if self.lm_head_transform:
            return "lm_head_transform=True (a dense → activation → norm transform before the vocabulary projection)"
        if self.final_logit_softcapping is not None:
            return (
                f"final_logit_softcapping={self.final_logit_softcapping} (a tanh cap after the vocabulary projection)"
            )
        if self.scale_lm_head_input and self.lm_head_bias:
            return (
                "scale_lm_head_input=True with lm_head_bias=True (the scale applies before the bias, so it is not "
                "a factor on the logits)"
            )
        return None

    def _validate_knobs(self) -> None:
        """Raise ValueError naming the field, the value and what is allowed, before any module is built.

        Single fields were checked when they were set (`FIELD_CHECKS`, from knobs.py); this checks how they fit
        together.
        """
        if self.freeze_lm_head_bias and not self.lm_head_bias:
            raise ValueError("freeze_lm_head_bias=True needs lm_head_bias=True: there is no bias to freeze.")
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(
                    f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                    f"{self.num_attention_heads}; choose a multiple or set head_dim explicitly."
                )
            # Derived values are written into the config: HF caches read `head_dim` directly.
            self.head_dim = self.hidden_size // self.num_attention_heads
        check_positive("head_dim", self.head_dim)
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} is not divisible by num_key_value_heads="
                f"{self.num_key_value_heads}; each key/value head must serve a whole group of query heads."
            )
        scheme = POSITIONAL_ENCODINGS.get(self.position_encoding)  # None for NO_POSITIONAL_ENCODING
        if scheme is not None:
            for bidirectional in self._stack_directions:
                scheme.check_config(self, bidirectional=bidirectional)
        self._validate_rotary_knobs()
        self._validate_layer_knobs()
        self._validate_attention_knobs()
        requested = getattr(self, "_attn_implementation_internal", None)
        if isinstance(requested, str):
            self.check_attention_implementation(requested)

    def _validate_rotary_knobs(self) -> None:
        """The rotary knobs act only with rotary positions; a scaling's options are checked by the scaling."""
        rotary_knobs = {
            "rope_type": (self.rope_type, "default"),
            "rope_scaling_options": (self.rope_scaling_options, {}),
            "longrope_recompute_cache": (self.longrope_recompute_cache, False),
            "partial_rotary_factor": (self.partial_rotary_factor, 1.0),
            "local_rope_theta": (self.local_rope_theta, None),
            "nope_layers": (self.nope_layers, []),
        }
        if self.position_encoding != "rotary":
            for field, (value, default) in rotary_knobs.items():
                if value != default:
                    raise ValueError(
                        f"{field}={value!r} needs position_encoding='rotary' (got {self.position_encoding!r})."
                    )
            return
        rotary_dim = int(self.head_dim * self.partial_rotary_factor)
        if rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(
                f"partial_rotary_factor={self.partial_rotary_factor} rotates int(head_dim={self.head_dim} × factor) = "
                f"{rotary_dim} dimensions of each head; rotation needs an even number >= 2."
            )
        ROPE_SCALINGS[self.rope_type].check_options(self.rope_scaling_options, rotary_dim=rotary_dim)
        if self.longrope_recompute_cache and self.rope_type != "longrope":
            raise ValueError(
                f"longrope_recompute_cache=True needs rope_type='longrope' (got {self.rope_type!r}): it rotates the "
                "cached keys again when LongRoPE switches to its long factors."
            )
        layers = self.layer_count()
        outside = [index for index in self.nope_layers if layers is None or index >= layers]
        if outside:
            raise ValueError(
                f"nope_layers={self.nope_layers!r} names layers that do not exist (the model has {layers} layers)."
            )
        if self.local_rope_theta is not None and "sliding_attention" not in self.attention_types():
            raise ValueError(
                f"local_rope_theta={self.local_rope_theta} rotates the sliding-window layers, and none is one: set "
                "sliding_window (and layer_types)."
            )

    def _check_layer_types_length(self) -> None:
        layers = getattr(self, "num_hidden_layers", None)
        if getattr(self, "layer_types", None) is not None and layers is not None and len(self.layer_types) != layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for {layers} layers; give one per layer."
            )

    def _validate_layer_knobs(self) -> None:
        """Per-layer attention types: one per layer, and a window for the sliding ones."""
        # Both fields belong to the encoder and decoder families; an encoder-decoder config holds them only when
        # they were given (or read from an older config.json), and then only None is allowed.
        layer_types, sliding_window = getattr(self, "layer_types", None), getattr(self, "sliding_window", None)
        if layer_types is not None:
            layers = self.layer_count()
            if layers is None:
                raise ValueError(
                    f"layer_types={layer_types!r} is for the encoder and decoder families, whose layers form one "
                    "stack; leave it None here."
                )
            self._check_layer_types_length()
            if "sliding_attention" in layer_types and sliding_window is None:
                raise ValueError("layer_types has 'sliding_attention' layers but sliding_window is None: set it.")
        if sliding_window is not None and self.layer_count() is None:
            raise ValueError(
                f"sliding_window={sliding_window} is for the encoder and decoder families; the encoder-decoder "
                "family has no windowed layers."
            )
        if not self.first_attention_norm and self.norm_position != "pre":
            raise ValueError(
                f"first_attention_norm=False needs norm_position='pre' (got {self.norm_position!r}): it drops the "
                "norm on the first layer's input, which only pre-norm layers have."
            )
        if not self.norm_bias and self.norm_type != "layernorm":
            raise ValueError(f"norm_bias=False is for norm_type='layernorm'; {self.norm_type!r} has no bias.")

    def _validate_attention_knobs(self) -> None:
        if self.query_pre_attn_scalar is not None and self.attention_score != "scaled_dot":
            raise ValueError(
                f"query_pre_attn_scalar={self.query_pre_attn_scalar} sets the scale of the 'scaled_dot' score; "
                f"attention_score={self.attention_score!r} has its own."
            )

    def layer_count(self) -> int | None:
        """Layers of the one stack of an encoder or decoder (None for the encoder-decoder family's two stacks)."""
        return getattr(self, "num_hidden_layers", None) if not self.is_encoder_decoder else None

    def attention_types(self) -> list[str]:
        """Each layer's attention type: `layer_types`, or the same for every layer (sliding when a window is set)."""
        if getattr(self, "layer_types", None) is not None:
            return list(self.layer_types)
        kind = "sliding_attention" if getattr(self, "sliding_window", None) is not None else "full_attention"
        return [kind] * (self.layer_count() or 0)

    def feed_forward_types(self) -> list[str]:
        """Each layer's feed-forward network, by its name in `layer_plan.FEED_FORWARDS`: "dense" for every layer (the
        one kind there is; a mixture-of-experts kind will be chosen per layer here from its knobs)."""
        return ["dense"] * (self.layer_count() or 0)

    def check_attention_implementation(self, implementation: str) -> None:
        """Raise ValueError when the attention score cannot run on the backend `implementation`: fused kernels such
        as SDPA compute q·k themselves, so a score that is not a dot product needs the eager backend ("paged|eager"
        is the name continuous batching gives it)."""
        refusal = softcap_refusal(implementation, self.attn_logit_softcapping)
        if refusal is not None:
            raise ValueError(refusal)
        if implementation not in ("eager", "paged|eager") and not SCORES[self.attention_score].dot_product:
            raise ValueError(
                f"attention_score={self.attention_score!r} needs attn_implementation='eager' (got "
                f"{implementation!r}): fused kernels such as SDPA only compute dot-product scores "
                f"{dot_product_scores()}."
            )

    def _check_token_ids(self) -> None:
        check_token_ids(self)


class HFAttentionEncoderConfig(HFAttentionConfigBase):
    """Bidirectional encoder (BERT-like): token classification, sequence classification and masked LM."""

    model_type = "hf_attention_encoder"
    family = "encoder"
    _stack_directions = (True,)

    def __init__(self, **kwargs):
        kwargs.setdefault("is_decoder", False)
        super().__init__(**kwargs)


class HFAttentionDecoderConfig(HFAttentionConfigBase):
    """Causal decoder (GPT-like) for language modelling and generation."""

    model_type = "hf_attention_decoder"
    family = "decoder"
    _stack_directions = (False,)

    def __init__(self, **kwargs):
        kwargs.setdefault("is_decoder", True)
        super().__init__(**kwargs)


class HFAttentionSeq2SeqConfig(HFAttentionConfigBase):
    """Encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017)."""

    model_type = "hf_attention_seq2seq"
    family = "seq2seq"

    def __init__(self, **kwargs):
        kwargs["is_encoder_decoder"] = True
        super().__init__(**kwargs)
        if self.decoder_start_token_id is None:  # the decoder starts from bos unless told otherwise
            self.decoder_start_token_id = self.bos_token_id
        self._check_token_ids()


def _document_knobs(config_class: type[HFAttentionConfigBase]) -> None:
    """The class's docstring lists its knobs from the table (a family's own only, after the shared ones of the base),
    and its signature names them all."""
    listed = knobs_of(config_class.family)
    if config_class.family is not None:
        listed = {name: knob for name, knob in listed.items() if name not in knobs_of(None)}
    note = "" if config_class.family is None else "\n        **kwargs: The knobs of `HFAttentionConfigBase`."
    document_constructor(config_class, knobs_of(config_class.family), listed, note)


for _config_class in (
    HFAttentionConfigBase,
    HFAttentionEncoderConfig,
    HFAttentionDecoderConfig,
    HFAttentionSeq2SeqConfig,
):
    _document_knobs(_config_class)
