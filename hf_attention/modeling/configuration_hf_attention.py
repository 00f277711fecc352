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

from .activations import GATED_ACTIVATIONS, HIDDEN_ACTS, LEARNED_ACTIVATIONS
from .attention_backends import sinks_refusal, softcap_refusal
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
# The knobs of a mixture of experts' router outputs: held only by configs with experts (see __init__).
ROUTER_OUTPUT_KNOBS = ("output_router_logits", "router_aux_loss_coef")
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
        if values.get("moe_intermediate_size") == values["intermediate_size"]:
            values["moe_intermediate_size"] = None
        if values.get("num_experts", 0) is None:
            # A dense decoder has no routers: like Llama's config, it has no router fields either (clients such as
            # TRL take a config with `output_router_logits` for a mixture of experts and ask it for router scores).
            for name in ROUTER_OUTPUT_KNOBS:
                if values[name] == KNOBS[name].default:
                    del values[name]
        for name, value in values.items():
            setattr(self, name, value)  # checked on assignment (FIELD_CHECKS)
        self._check_token_ids()  # before PretrainedConfig's own check, which only warns
        self._check_layer_types_length()  # before transformers' own check, which raises no ValueError
        super().__init__(**kwargs)
        self._validate_knobs()

    @property
    def logit_scale(self) -> float | None:
        """The factor on the vocabulary logits when `scale_lm_head_input`, `logits_scaling` and `logit_multiplier`
        are the only head options (and one is set), else None.

        Clients that project the last hidden state themselves (TRL's fused LM head) read this name, as for Cohere's
        models: (s·h)Wᵀ = s·(hWᵀ) holds without a bias, so they compute this model's logits.
        """
        plain_head = not self.lm_head_bias and not self.lm_head_transform and self.final_logit_softcapping is None
        scale = (self.hidden_size**-0.5 if self.scale_lm_head_input else 1.0) / self.logits_scaling
        scale *= self.logit_multiplier  # Cohere's logit_scale
        if scale != 1.0 and plain_head:
            return scale
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
        if self.logits_scaling != 1.0 and self.lm_head_bias:
            raise ValueError(
                f"logits_scaling={self.logits_scaling} divides the projection's input, (h / L)Wᵀ = (hWᵀ) / L, which "
                "leaves a bias undivided: set lm_head_bias=False, or leave logits_scaling at 1.0."
            )
        if self.logit_multiplier != 1.0 and self.lm_head_bias:
            raise ValueError(
                f"logit_multiplier={self.logit_multiplier} multiplies the projection's input, (m·h)Wᵀ = m·(hWᵀ), "
                "which leaves a bias unscaled: set lm_head_bias=False, or leave logit_multiplier at 1.0."
            )
        self._validate_latent_attention_knobs()  # first: it gives head_dim its latent-attention value
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
        self._validate_query_key_tuning_knobs()
        self._validate_layer_knobs()
        self._validate_attention_knobs()
        self._validate_experts_knobs()
        self._validate_activation_knobs()
        self._validate_linear_attention_knobs()
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
            # (decoder knobs: the other families' configs do not have them)
            "rope_interleave": (getattr(self, "rope_interleave", False), False),
            "rope_in_float32": (getattr(self, "rope_in_float32", False), False),
            "rotated_qk_norm": (getattr(self, "rotated_qk_norm", False), False),
            "attn_temperature_tuning": (getattr(self, "attn_temperature_tuning", False), False),
            "qk_norm_after_rotation": (getattr(self, "qk_norm_after_rotation", False), False),
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

    def _validate_query_key_tuning_knobs(self) -> None:
        """Llama 4's norm after the rotation acts on the layers that rotate, its temperature on the NoPE layers
        (query_key_tuning.py): each needs such a layer, and the temperature's numbers act only with it on."""
        if not getattr(self, "attn_temperature_tuning", False):
            for field in ("floor_scale", "attn_scale"):
                value, default = getattr(self, field, KNOBS[field].default), KNOBS[field].default
                if value != default:
                    raise ValueError(
                        f"{field}={value!r} sets the temperature of attn_temperature_tuning, which is False: set "
                        f"attn_temperature_tuning=True, or leave {field} at {default!r}."
                    )
        elif not self.nope_layers:
            raise ValueError(
                "attn_temperature_tuning=True scales the queries of the nope_layers, and nope_layers is empty: name "
                "the layers without rotation in nope_layers (Llama 4: every fourth), or leave it False."
            )
        layers = self.layer_count() or 0
        if getattr(self, "rotated_qk_norm", False) and len(set(self.nope_layers)) >= layers:
            raise ValueError(
                f"rotated_qk_norm=True normalises the rotated queries and keys, and nope_layers={self.nope_layers!r} "
                "leaves no layer that rotates: leave it False, or rotate some layers."
            )
        if getattr(self, "qk_norm_after_rotation", False):  # Hunyuan's weighted norms, moved after the rotation
            if self.qk_norm != "head":
                raise ValueError(
                    f"qk_norm_after_rotation=True moves the qk_norm='head' norms after the rotation, and "
                    f"qk_norm={self.qk_norm!r}: set qk_norm='head', or leave qk_norm_after_rotation False."
                )
            if getattr(self, "rotated_qk_norm", False):
                raise ValueError(
                    "qk_norm_after_rotation=True and rotated_qk_norm=True would both normalise the rotated queries "
                    "and keys: choose one (Hunyuan: the weighted norms; Llama 4: the weightless one)."
                )
        length, default = getattr(self, "llama_4_scaling_length", None), KNOBS["llama_4_scaling_length"].default
        if getattr(self, "llama_4_scaling_beta", None) is None and length not in (None, default):
            raise ValueError(
                f"llama_4_scaling_length={length!r} sets the step of llama_4_scaling_beta's query scale, which is "
                f"None (off): set llama_4_scaling_beta (Ministral 3: 0.1), or leave llama_4_scaling_length at "
                f"{default!r}."
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
        self._validate_chunk_knobs()
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
        if getattr(self, "parallel_block", False) and self.family != "decoder":
            raise ValueError(
                "parallel_block=True makes parallel decoder layers without cross-attention; it is for the decoder "
                "family (HFAttentionDecoderConfig)."
            )
        if getattr(self, "parallel_block", False) and self.norm_position != "pre":
            raise ValueError(
                f"parallel_block=True needs norm_position='pre' (got {self.norm_position!r}): both sublayers read "
                "the one norm of the layer's input, x + Attn(Norm(x)) + MLP(Norm(x))."
            )

    def _validate_chunk_knobs(self) -> None:
        """Chunked attention (Llama 4): `chunked_attention` layers in a decoder, with a chunk size, and a chunk size
        only where some layer is chunked."""
        chunk, types = getattr(self, "attention_chunk_size", None), self.attention_types()
        if "chunked_attention" in types and self.family != "decoder":
            raise ValueError(
                "layer_types has 'chunked_attention' layers, whose queries see the earlier keys of their chunk (a "
                "causal mask); they are for the decoder family (HFAttentionDecoderConfig)."
            )
        if "chunked_attention" in types and chunk is None:
            raise ValueError(
                "layer_types has 'chunked_attention' layers but attention_chunk_size is None: set it (Llama 4: 8192)."
            )
        if chunk is not None and "chunked_attention" not in types:
            raise ValueError(
                f"attention_chunk_size={chunk} sizes the chunks of the 'chunked_attention' layers, and layer_types "
                "has none: name them in layer_types, or leave attention_chunk_size None."
            )

    def _validate_attention_knobs(self) -> None:
        if self.query_pre_attn_scalar is not None and self.attention_score != "scaled_dot":
            raise ValueError(
                f"query_pre_attn_scalar={self.query_pre_attn_scalar} sets the scale of the 'scaled_dot' score; "
                f"attention_score={self.attention_score!r} has its own."
            )
        if self.attention_multiplier is not None and self.attention_score != "scaled_dot":
            raise ValueError(
                f"attention_multiplier={self.attention_multiplier} sets the scale of the 'scaled_dot' score; "
                f"attention_score={self.attention_score!r} has its own."
            )
        if self.attention_multiplier is not None and self.query_pre_attn_scalar is not None:
            raise ValueError(
                f"attention_multiplier={self.attention_multiplier} and query_pre_attn_scalar="
                f"{self.query_pre_attn_scalar} both set the scale of q·k (the number itself, or its -1/2 power): "
                "set one of them."
            )

    def _validate_linear_attention_knobs(self) -> None:
        """The sizes of the `linear_attention` (Gated DeltaNet) layers: None becomes the value it stands for, written
        into the config as `head_dim` is; each key head must serve a whole group of value heads. Set without such a
        layer, or in an encoder (the recurrence reads left to right only), they are refused."""
        sizes = ("linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim", "linear_value_head_dim")
        sizes += ("linear_conv_kernel_dim",)
        if "linear_attention" not in self.attention_types():
            for field in sizes:
                if getattr(self, field, None) is not None:
                    raise ValueError(
                        f"{field}={getattr(self, field)!r} sizes the 'linear_attention' layers, and layer_types has "
                        "none: name them in layer_types, or leave it None."
                    )
            return
        if self.family != "decoder":
            raise ValueError(
                "layer_types has 'linear_attention' layers, which read the sequence left to right only (a causal "
                "recurrence); they are for the decoder family (HFAttentionDecoderConfig)."
            )
        if self.linear_num_value_heads is None:
            self.linear_num_value_heads = self.num_attention_heads
        if self.linear_num_key_heads is None:
            self.linear_num_key_heads = self.linear_num_value_heads
        if self.linear_key_head_dim is None:
            self.linear_key_head_dim = self.head_dim
        if self.linear_value_head_dim is None:
            self.linear_value_head_dim = self.head_dim
        if self.linear_conv_kernel_dim is None:
            self.linear_conv_kernel_dim = 4  # Qwen3-Next's and Qwen3.5's short convolution
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(
                f"linear_num_value_heads={self.linear_num_value_heads} is not divisible by linear_num_key_heads="
                f"{self.linear_num_key_heads}; each query/key head must serve a whole group of value heads."
            )

    def _validate_latent_attention_knobs(self) -> None:
        """Multi-head latent attention (`kv_lora_rank`, latent_attention.py): its sizes, and the plain attention's
        knobs it has no use for. A None size becomes the value it stands for, written into the config: v_head_dim
        that of qk_nope_head_dim, and head_dim, the width of the rotary tables, qk_rope_head_dim (as transformers'
        DeepSeek-V3 config writes it), so it runs before head_dim is derived from the width."""
        rank = getattr(self, "kv_lora_rank", None)
        if rank is None:
            for field in ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, field, None) is not None:
                    raise ValueError(
                        f"{field}={getattr(self, field)!r} sizes the latent attention layers, and kv_lora_rank is "
                        f"None: set kv_lora_rank (the rank of the key/value latent), or leave {field} None."
                    )
            return
        if self.family != "decoder":
            raise ValueError(
                f"kv_lora_rank={rank} makes latent attention layers, which are for the decoder family "
                "(HFAttentionDecoderConfig)."
            )
        for field in ("qk_nope_head_dim", "qk_rope_head_dim"):
            if getattr(self, field) is None:
                raise ValueError(
                    f"kv_lora_rank={rank} needs {field}: each query/key head of a latent attention layer has "
                    "qk_nope_head_dim dims decompressed from the latent and qk_rope_head_dim rotated ones "
                    "(DeepSeek-V3: 128 and 64)."
                )
        rope = self.qk_rope_head_dim
        if self.head_dim is None:
            self.head_dim = rope
        elif self.head_dim != rope:
            raise ValueError(
                f"head_dim={self.head_dim} must equal qk_rope_head_dim={rope} with kv_lora_rank: it is the width of "
                "the rotary tables, which turn the qk_rope_head_dim dims of each head. Leave head_dim None."
            )
        if self.v_head_dim is None:
            self.v_head_dim = self.qk_nope_head_dim
        if self.num_key_value_heads != self.num_attention_heads:
            raise ValueError(
                f"num_key_value_heads={self.num_key_value_heads} must equal num_attention_heads="
                f"{self.num_attention_heads} with kv_lora_rank: every head decompresses its own key and value from "
                "the one shared latent."
            )
        if self.position_encoding == "rotary":
            if rope % 2:
                raise ValueError(f"qk_rope_head_dim={rope} must be even: RoPE turns pairs of dims.")
            if self.partial_rotary_factor != 1.0:
                raise ValueError(
                    f"partial_rotary_factor={self.partial_rotary_factor} must be 1.0 with kv_lora_rank: "
                    "qk_rope_head_dim says how many dims of each head rotate."
                )
        elif self.rope_interleave:
            raise ValueError(
                f"rope_interleave=True needs position_encoding='rotary' (got {self.position_encoding!r})."
            )
        unused = {  # the plain attention's choices, which a latent attention layer does not make
            "attention_score": (self.attention_score, "scaled_dot"),
            "query_pre_attn_scalar": (self.query_pre_attn_scalar, None),
            "attention_multiplier": (self.attention_multiplier, None),
            "qk_norm": (self.qk_norm, "none"),
            "attn_logit_softcapping": (self.attn_logit_softcapping, None),
            "sliding_window": (self.sliding_window, None),
            "attention_sinks": (getattr(self, "attention_sinks", False), False),
            "attention_output_gate": (getattr(self, "attention_output_gate", False), False),
            "attention_chunk_size": (getattr(self, "attention_chunk_size", None), None),
            "rotated_qk_norm": (getattr(self, "rotated_qk_norm", False), False),
            "attn_temperature_tuning": (getattr(self, "attn_temperature_tuning", False), False),
            "rope_in_float32": (getattr(self, "rope_in_float32", False), False),
            "llama_4_scaling_beta": (getattr(self, "llama_4_scaling_beta", None), None),
        }
        for field, (value, default) in unused.items():
            if value != default:
                raise ValueError(
                    f"{field}={value!r} is not available with kv_lora_rank={rank}: latent attention layers scale "
                    "q·k by (qk_nope_head_dim + qk_rope_head_dim)^-1/2 and normalise their latents, with no score "
                    f"cap, window, sinks or output gate, rotated in the model's dtype. Leave {field} at {default!r}."
                )

    def layer_count(self) -> int | None:
        """Layers of the one stack of an encoder or decoder (None for the encoder-decoder family's two stacks)."""
        return getattr(self, "num_hidden_layers", None) if not self.is_encoder_decoder else None

    def attention_types(self) -> list[str]:
        """Each layer's attention type: `layer_types`, or the same for every layer (sliding when a window is set)."""
        if getattr(self, "layer_types", None) is not None:
            return list(self.layer_types)
        kind = "full_attention"
        if getattr(self, "sliding_window", None) is not None:
            kind = "sliding_attention"
        elif getattr(self, "attention_chunk_size", None) is not None:  # as transformers' caches read such a config
            kind = "chunked_attention"
        return [kind] * (self.layer_count() or 0)

    def feed_forward_types(self) -> list[str]:
        """Each layer's feed-forward network, by its name in `layer_plan.FEED_FORWARDS`: "mixture_of_experts" for
        every layer when `num_experts` is set, but those of `mlp_only_layers`; else "dense"."""
        layers = self.layer_count() or 0
        if getattr(self, "num_experts", None) is None:
            return ["dense"] * layers
        dense = set(self.mlp_only_layers or [])
        return ["dense" if index in dense else "mixture_of_experts" for index in range(layers)]

    def _validate_activation_knobs(self) -> None:
        """A learned activation's start values (xIELU's `xielu_*`) are set only with it, and start it where its
        parameters can be: α_n = β + softplus(a_n) exceeds β."""
        learned = LEARNED_ACTIVATIONS.get(self.hidden_act)
        for name, activation in LEARNED_ACTIVATIONS.items():
            if activation is learned:
                continue
            for field in activation.CONFIG_FIELDS.values():
                value, default = getattr(self, field, KNOBS[field].default), KNOBS[field].default
                if value != default:
                    raise ValueError(
                        f"{field}={value!r} starts the learned activation {name!r}, and hidden_act="
                        f"{self.hidden_act!r} is another: set hidden_act={name!r}, or leave {field} at {default!r}."
                    )
        if self.hidden_act == "xielu" and self.xielu_alpha_n_init <= self.xielu_beta:
            raise ValueError(
                f"xielu_alpha_n_init={self.xielu_alpha_n_init} must exceed xielu_beta={self.xielu_beta}: xIELU's "
                "negative piece has the scale alpha_n = beta + softplus(a_n), always above beta."
            )

    def _validate_experts_knobs(self) -> None:
        """The mixture of experts: k of X experts, gated experts, dense layers that exist, each router's knobs set
        only for the routers that read them (and its own check), GPT-OSS's unit with SwiGLU, a gate with its shared
        expert."""
        experts = getattr(self, "num_experts", None)
        if experts is None:
            if getattr(self, "mlp_only_layers", None):
                raise ValueError(
                    f"mlp_only_layers={self.mlp_only_layers!r} keeps some layers dense among experts, and "
                    "num_experts=None makes every layer dense: set num_experts, or leave mlp_only_layers None."
                )
            return
        if self.num_experts_per_tok > experts:
            raise ValueError(
                f"num_experts_per_tok={self.num_experts_per_tok} chooses more experts per token than "
                f"num_experts={experts}; it must be between 1 and num_experts."
            )
        if self.hidden_act not in GATED_ACTIVATIONS:
            raise ValueError(
                f"num_experts={experts} makes gated experts (act(x W_gate) * x W_up), and hidden_act="
                f"{self.hidden_act!r} is not gated; use one of {', '.join(map(repr, GATED_ACTIVATIONS))}."
            )
        outside = [index for index in self.mlp_only_layers or [] if index >= self.num_hidden_layers]
        if outside:
            raise ValueError(
                f"mlp_only_layers={self.mlp_only_layers!r} names layers that do not exist (the model has "
                f"{self.num_hidden_layers} layers)."
            )
        from .mixture_of_experts import ROUTER_KNOBS, ROUTERS  # the router kinds' own knobs and checks

        kind = ROUTERS[self.router]
        for field in ROUTER_KNOBS:
            value, default = getattr(self, field), KNOBS[field].default
            if field not in kind.reads and value != default:
                readers = [name for name, other in ROUTERS.items() if field in other.reads]
                raise ValueError(
                    f"{field}={value!r} is read by the router{'s' if len(readers) > 1 else ''} "
                    f"{', '.join(map(repr, readers))} only, and router={self.router!r} does not read it: leave it "
                    f"{default!r} or choose one of those routers."
                )
        if kind.check is not None:
            kind.check(self)
        if self.swiglu_alpha is not None and self.hidden_act != "swiglu":
            raise ValueError(
                f"swiglu_alpha={self.swiglu_alpha} makes GPT-OSS's SwiGLU experts, (up + 1) * gate * sigmoid(alpha * "
                f"gate), and hidden_act={self.hidden_act!r} names another gate; set hidden_act='swiglu'."
            )
        if self.shared_expert_gate and self.shared_expert_intermediate_size is None:
            raise ValueError(
                "shared_expert_gate=True gates the shared expert, and shared_expert_intermediate_size=None makes "
                "none: set its width, or leave shared_expert_gate False."
            )

    def check_attention_implementation(self, implementation: str) -> None:
        """Raise ValueError when the attention score cannot run on the backend `implementation`: fused kernels such
        as SDPA compute q·k themselves, so a score that is not a dot product needs the eager backend ("paged|eager"
        is the name continuous batching gives it)."""
        refusal = softcap_refusal(implementation, self.attn_logit_softcapping) or sinks_refusal(
            implementation, getattr(self, "attention_sinks", False)
        )
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
