"""Configurations of the three hf-attention families: encoder, decoder and encoder-decoder.

One shared base holds every knob; each family adds its layer counts and its `model_type`. Variant choices are plain
strings checked against the tuples below, or, for the attention score and the positional encoding, against the
registries `scores.SCORES` and `positional.POSITIONAL_ENCODINGS`, whose classes also say what they need from a config
(so a new variant is one class and one registry entry), and for the norm and the activation against the tables of
norms.py and activations.py, which the layers build from. So `config.json` stays JSON and a typo fails at construction
time with an error that names the field, the value and what is allowed. Every field of ours is type- and
range-checked whenever it is set (booleans must be real booleans, numbers real numbers, not strings), so a
hand-edited `config.json` fails on load with the same errors. Keys we do not know are stored on the config, as
`PretrainedConfig` does.

This file is shipped with every checkpoint (remote code). It imports the standard library, `transformers` and the
registries, scores.py, positional.py, norms.py and activations.py, which import only torch (loaded by transformers
anyway) and transformers' init functions and activation table; never the modeling code.
"""

from transformers import PretrainedConfig

from .activations import HIDDEN_ACTS
from .field_checks import (
    CheckedFields,
    check_at_least_zero,
    check_bool,
    check_choice,
    check_fraction,
    check_greater_than_zero,
    check_layer_indices,
    check_non_negative,
    check_optional_bool,
    check_options,
    check_positive,
    check_probability,
    check_token_id_type,
    check_token_ids,
    optional,
)
from .norms import NORMS
from .positional import NO_POSITIONAL_ENCODING, POSITIONAL_ENCODINGS
from .rope_scaling import ROPE_SCALINGS
from .scores import SCORES, dot_product_scores


def _position_encodings() -> tuple[str, ...]:
    return (*POSITIONAL_ENCODINGS, NO_POSITIONAL_ENCODING)


# The registered names, for parameter lists and docs (with activations.HIDDEN_ACTS, imported above); the checks below
# read the registries themselves.
ATTENTION_SCORES = tuple(SCORES)
POSITION_ENCODINGS = _position_encodings()
NORM_POSITIONS = ("post", "pre", "sandwich", "output")
NORM_TYPES = tuple(NORMS)
ROPE_TYPES = tuple(ROPE_SCALINGS)
# Per-layer attention types, named as transformers 5 names them in `layer_types` (so its caches read them too).
LAYER_TYPES = ("full_attention", "sliding_attention")
QK_NORMS = ("none", "head", "projection")
SINUSOIDAL_LAYOUTS = ("interleaved", "concat")
CLASSIFIER_POOLINGS = ("mean", "first")


def _check_layer_types(field: str, value) -> None:
    if value is None:
        return
    if not isinstance(value, (list, tuple)) or not all(kind in LAYER_TYPES for kind in value):
        raise ValueError(
            f"{field}={value!r} must be None or a list with one entry per layer, each one of "
            f"{', '.join(map(repr, LAYER_TYPES))}."
        )


# Checks of single fields, run whenever one is set (in __init__, when a config.json is loaded, and on assignment),
# as transformers' own configs validate their fields on assignment. Checks across fields run in `_validate_knobs`.
FIELD_CHECKS = {
    **dict.fromkeys(
        (
            "vocab_size",
            "hidden_size",
            "num_attention_heads",
            "num_key_value_heads",
            "intermediate_size",
            "max_position_embeddings",
            "relative_attention_num_buckets",
            "relative_attention_max_distance",
            "num_hidden_layers",
            "encoder_layers",
            "decoder_layers",
        ),
        check_positive,
    ),
    "head_dim": optional(check_positive),
    "sliding_window": optional(check_positive),
    **dict.fromkeys(("type_vocab_size", "position_offset"), check_non_negative),
    **dict.fromkeys(
        ("hidden_dropout_prob", "activation_dropout", "attention_dropout", "label_smoothing"), check_probability
    ),
    "classifier_dropout": optional(check_probability),
    **dict.fromkeys(("rope_theta", "layer_norm_eps"), check_greater_than_zero),
    **dict.fromkeys(
        ("local_rope_theta", "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"),
        optional(check_greater_than_zero),
    ),
    "partial_rotary_factor": lambda field, value: check_fraction(field, value),
    **dict.fromkeys(("initializer_range", "unlikelihood_weight"), check_at_least_zero),
    **dict.fromkeys(
        (
            "scale_embeddings",
            "attention_bias",
            "mlp_bias",
            "embedding_norm",
            "use_cache",
            "tie_word_embeddings",
            "lm_head_bias",
            "freeze_lm_head_bias",
            "lm_head_transform",
            "scale_lm_head_input",
            "norm_bias",
            "first_attention_norm",
            "head_transform_bias",
            "classifier_transform",
            "longrope_recompute_cache",
        ),
        check_bool,
    ),
    **dict.fromkeys(("final_norm", "attention_output_bias"), check_optional_bool),
    **dict.fromkeys(("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"), check_token_id_type),
    "attention_score": lambda field, value: check_choice(field, value, tuple(SCORES)),
    "position_encoding": lambda field, value: check_choice(field, value, _position_encodings()),
    "norm_position": lambda field, value: check_choice(field, value, NORM_POSITIONS),
    "norm_type": lambda field, value: check_choice(field, value, tuple(NORMS)),
    "hidden_act": lambda field, value: check_choice(field, value, HIDDEN_ACTS),
    "sinusoidal_layout": lambda field, value: check_choice(field, value, SINUSOIDAL_LAYOUTS),
    "classifier_pooling": lambda field, value: check_choice(field, value, CLASSIFIER_POOLINGS),
    "rope_type": lambda field, value: check_choice(field, value, tuple(ROPE_SCALINGS)),
    "rope_scaling_options": lambda field, value: check_options(field, value),
    "qk_norm": lambda field, value: check_choice(field, value, QK_NORMS),
    "layer_types": lambda field, value: _check_layer_types(field, value),
    "nope_layers": lambda field, value: check_layer_indices(field, value),
}


class HFAttentionConfigBase(CheckedFields, PretrainedConfig):
    """Knobs shared by the three families.

    Args:
        vocab_size: Size of the token vocabulary.
        hidden_size: Model width d_model (E).
        num_attention_heads: Query heads H.
        num_key_value_heads: Key/value heads K for grouped-query attention; `None` means K = H (multi-head).
        head_dim: Width of one head D; `None` means hidden_size // num_attention_heads.
        intermediate_size: Inner width of the position-wise feed-forward network.
        hidden_act: `relu`, `gelu`, `gelu_new`, `silu`, or the gated `swiglu` / `geglu` (Shazeer 2020); `geglu_new`
            gates with the tanh-approximated `gelu_new` (T5 v1.1's "gated-gelu").
        max_position_embeddings: Longest sequence the `learned` table covers (other schemes extrapolate).
        attention_score: `scaled_dot` softmax(QKᵀ/√D)V (Vaswani 2017), `dot` unscaled (T5), `additive`
            wᵀtanh(W_q q + W_k k) (Bahdanau 2015), `gaussian` kernel −‖q−k‖²/(2σ²) (Nadaraya–Watson).
        position_encoding: `sinusoidal`, `learned`, `rotary` (Su 2021), `alibi` (Press 2022), `relative` (T5
            buckets, Raffel 2020) or `none`.
        norm_position: `post` (Add & Norm of the 2017 paper), `pre` (GPT-2 / Llama), `sandwich` (a norm before the
            sublayer and one on its output, before the residual add: Gemma 2/3) or `output` (only the norm on the
            sublayer's output, x + Norm(Sublayer(x)): OLMo 2).
        norm_type: `layernorm`, `rmsnorm` (Zhang & Sennrich 2019) or `offset_rmsnorm` (RMSNorm with gain 1 + w,
            w starting at 0: Gemma).
        scale_embeddings: Multiply token embeddings by √hidden_size (paper §3.4).
        attention_bias: Biases on the q/k/v/o projections.
        mlp_bias: Biases on the feed-forward projections.
        embedding_norm: A norm right after the embeddings (BERT, BART).
        final_norm: A norm after the last layer; `None` means "yes for pre-norm, no for post-norm".
        type_vocab_size: Number of token-type (segment) embeddings; 0 disables them (BERT uses 2).
        position_offset: Added to position ids before the learned-table lookup (BART reserves 2 rows).
        sinusoidal_layout: `interleaved` (sin, cos, sin, … as in the paper) or `concat` ([sin…, cos…], Marian).
        rope_theta: Base of the rotary frequencies.
        rope_type: How the rotary frequencies stretch to contexts longer than training's (`ROPE_SCALINGS`):
            `default` (none), `linear` (position interpolation, Chen et al. 2023), `dynamic` (NTK-aware, recomputed
            once the input outgrows max_position_embeddings), `yarn` (Peng et al. 2023), `llama3` (Llama 3.1's
            per-wavelength blend), `longrope` (Phi-3's per-frequency factors, Ding et al. 2024).
        rope_scaling_options: That scaling's numbers, named as transformers names them (`factor`,
            `original_max_position_embeddings`, `low_freq_factor`, `high_freq_factor`, `beta_fast`, `beta_slow`,
            `mscale`, `mscale_all_dim`, `attention_factor`, `truncate`, `short_factor`, `long_factor`).
        longrope_recompute_cache: With `longrope`, generate() runs the step at which the sequence first grows past
            the original length without its cache, so that the cached keys, rotated with the short factors, are
            rotated again with the long ones (Phi-3's generate()). Default False: cached keys keep their rotation.
        partial_rotary_factor: The share of each head's dimensions that rotate (the first int(D · factor); the rest
            carry no position: GPT-NeoX, Phi-4-mini). Default 1.0.
        local_rope_theta: Base of the rotary frequencies of the sliding-window layers (Gemma 3: 10 000 locally,
            10⁶ globally; ModernBERT); None: the same rotation as the full layers.
        nope_layers: Indices of layers whose attention gets no rotary positions at all ("NoPE", Kazemnejad et al.
            2023; SmolLM3 every fourth layer): the causal mask alone tells them the order.
        sliding_window: W of local attention (Beltagy et al. 2020; Mistral): a query sees only keys less than W
            positions away (in a decoder the W most recent tokens, itself included). Which layers it applies to:
            `layer_types`. None: no window.
        layer_types: One entry per layer, `full_attention` or `sliding_attention` (transformers' names; Gemma 3's
            five local layers to one global, ModernBERT's alternation); None: every layer sliding when
            `sliding_window` is set, else every layer full.
        qk_norm: A norm (`norm_type`) on queries and keys before the rotation: `head` normalises each head's D
            values (Qwen3, Gemma 3), `projection` the whole H·D projection (OLMo 2); `none` by default.
        attention_output_bias: A bias on the output projection; None: as `attention_bias` (Qwen2 has q/k/v biases
            and none on the output).
        attn_logit_softcapping: c in scores ← c·tanh(scores / c), after the scaling and before the mask (Gemma 2):
            no score can grow beyond ±c. None: no cap. Fused SDPA kernels cannot apply it (eager or flex_attention).
        final_logit_softcapping: The same cap on the vocabulary logits (Gemma 2/3). None: no cap.
        query_pre_attn_scalar: Scale q·k by this number's -1/2 power instead of head_dim's (Gemma).
        norm_bias: LayerNorm with a bias (False: ModernBERT's norms, which have none).
        first_attention_norm: Whether the first layer has its attention norm; False where the embedding norm already
            normalised its input (ModernBERT). Needs pre-norm.
        head_transform_bias: A bias on the dense layer of `lm_head_transform` and of the encoder's
            `classifier_transform` (BERT has one, ModernBERT not).
        relative_attention_num_buckets, relative_attention_max_distance: T5 bucketing of relative distances. Half
            the buckets (per direction in an encoder) hold exact distances, so an encoder needs at least 4 buckets and
            a decoder 2, and max_distance must exceed the exact range (num_buckets // 4 in an encoder, // 2 in a
            decoder), or the log-spaced buckets come out negative.
        layer_norm_eps: Epsilon of the norms (> 0).
        hidden_dropout_prob: Dropout on embeddings and on each sub-layer output before the residual add.
        activation_dropout: Dropout inside the feed-forward network, after the activation.
        attention_dropout: Dropout on the attention weights (training only).
        initializer_range: Std of the normal initialisation.
        label_smoothing: ε of the token losses computed from `labels` (language-model and token-classification
            heads), as `F.cross_entropy(label_smoothing=ε)`: (1 − ε)(−log p[y]) + ε · mean over the vocabulary of
            −log p[v]. In [0, 1); default 0.0, the plain cross-entropy.
        unlikelihood_weight: α of the token-level unlikelihood term added to the loss of the heads that generate
            left to right, causal LM and encoder-decoder, not the masked LM (`losses.repeat_unlikelihood`):
            α · Σ −log(1 − p[c]) over the one or two previous target tokens c that differ from the target, which
            trains the model not to repeat the token it has just written. ≥ 0; default 0.0, no term.
        tie_word_embeddings: Share the input embedding matrix with the output projection.
        lm_head_bias: A bias on the vocabulary projection `lm_head` (BERT's MLM bias, BART/Marian's
            `final_logits_bias`). Default False: the paper's output layer is the (tied) embedding matrix alone.
        freeze_lm_head_bias: Keep that bias out of training (`requires_grad=False`), as BART/Marian's
            `final_logits_bias`, a buffer that HF never updates. Needs `lm_head_bias`. Default False.
        lm_head_transform: Before the vocabulary projection, map the last hidden state through dense → activation
            (`hidden_act`, or its gate for gated ones) → norm (BERT's MLM head). Default False.
        scale_lm_head_input: Multiply the last hidden state by hidden_size**-0.5 before the vocabulary projection
            (T5 with tied embeddings: the mirror of `scale_embeddings` on the way out). Default False.
    """

    keys_to_ignore_at_inference = ["cache", "past_key_values"]  # the cache's name from transformers 5.24, and before
    _field_checks = FIELD_CHECKS
    # The stacks this family builds: True = bidirectional (encoder), False = causal (decoder). The positional scheme
    # checks the config for each (T5's relative buckets need a different minimum in each direction).
    _stack_directions = (True, False)

    def __init__(
        self,
        vocab_size: int = 8000,
        hidden_size: int = 512,
        num_attention_heads: int = 8,
        num_key_value_heads: int | None = None,
        head_dim: int | None = None,
        intermediate_size: int = 2048,
        hidden_act: str = "relu",
        max_position_embeddings: int = 512,
        attention_score: str = "scaled_dot",
        position_encoding: str = "sinusoidal",
        norm_position: str = "post",
        norm_type: str = "layernorm",
        scale_embeddings: bool = True,
        attention_bias: bool = True,
        mlp_bias: bool = True,
        embedding_norm: bool = False,
        final_norm: bool | None = None,
        type_vocab_size: int = 0,
        position_offset: int = 0,
        sinusoidal_layout: str = "interleaved",
        rope_theta: float = 10000.0,
        rope_type: str = "default",
        rope_scaling_options: dict | None = None,
        longrope_recompute_cache: bool = False,
        partial_rotary_factor: float = 1.0,
        local_rope_theta: float | None = None,
        nope_layers: list[int] | None = None,
        sliding_window: int | None = None,
        layer_types: list[str] | None = None,
        qk_norm: str = "none",
        attention_output_bias: bool | None = None,
        attn_logit_softcapping: float | None = None,
        final_logit_softcapping: float | None = None,
        query_pre_attn_scalar: float | None = None,
        norm_bias: bool = True,
        first_attention_norm: bool = True,
        head_transform_bias: bool = True,
        relative_attention_num_buckets: int = 32,
        relative_attention_max_distance: int = 128,
        layer_norm_eps: float = 1e-5,
        hidden_dropout_prob: float = 0.1,
        activation_dropout: float = 0.0,
        attention_dropout: float = 0.0,
        initializer_range: float = 0.02,
        label_smoothing: float = 0.0,
        unlikelihood_weight: float = 0.0,
        use_cache: bool = True,
        tie_word_embeddings: bool = True,
        pad_token_id: int | None = 0,
        bos_token_id: int | None = 1,
        eos_token_id: int | list[int] | None = 2,
        lm_head_bias: bool = False,
        freeze_lm_head_bias: bool = False,
        lm_head_transform: bool = False,
        scale_lm_head_input: bool = False,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_attention_heads if num_key_value_heads is None else num_key_value_heads
        self.head_dim = head_dim
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.attention_score = attention_score
        self.position_encoding = position_encoding
        self.norm_position = norm_position
        self.norm_type = norm_type
        self.scale_embeddings = scale_embeddings
        self.attention_bias = attention_bias
        self.mlp_bias = mlp_bias
        self.embedding_norm = embedding_norm
        self.final_norm = (norm_position == "pre") if final_norm is None else final_norm
        self.type_vocab_size = type_vocab_size
        self.position_offset = position_offset
        self.sinusoidal_layout = sinusoidal_layout
        self.rope_theta = rope_theta
        self.rope_type = rope_type
        self.rope_scaling_options = {} if rope_scaling_options is None else dict(rope_scaling_options)
        self.longrope_recompute_cache = longrope_recompute_cache
        self.partial_rotary_factor = partial_rotary_factor
        self.local_rope_theta = local_rope_theta
        self.nope_layers = [] if nope_layers is None else list(nope_layers)
        self.sliding_window = sliding_window
        self.layer_types = None if layer_types is None else list(layer_types)
        self.qk_norm = qk_norm
        # None when it is the same as attention_bias: one value per computation, so that configs compare equal
        self.attention_output_bias = None if attention_output_bias == attention_bias else attention_output_bias
        self.attn_logit_softcapping = attn_logit_softcapping
        self.final_logit_softcapping = final_logit_softcapping
        self.query_pre_attn_scalar = query_pre_attn_scalar
        self.norm_bias = norm_bias
        self.first_attention_norm = first_attention_norm
        self.head_transform_bias = head_transform_bias
        self.relative_attention_num_buckets = relative_attention_num_buckets
        self.relative_attention_max_distance = relative_attention_max_distance
        self.layer_norm_eps = layer_norm_eps
        self.hidden_dropout_prob = hidden_dropout_prob
        self.activation_dropout = activation_dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.label_smoothing = label_smoothing
        self.unlikelihood_weight = unlikelihood_weight
        self.use_cache = use_cache
        self.tie_word_embeddings = tie_word_embeddings
        self.pad_token_id = pad_token_id
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.lm_head_bias = lm_head_bias
        self.freeze_lm_head_bias = freeze_lm_head_bias
        self.lm_head_transform = lm_head_transform
        self.scale_lm_head_input = scale_lm_head_input
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

        Single fields were checked when they were set (`_FIELD_CHECKS`); this checks how they fit together.
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
        if self.layer_types is not None and layers is not None and len(self.layer_types) != layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for {layers} layers; give one per layer."
            )

    def _validate_layer_knobs(self) -> None:
        """Per-layer attention types: one per layer, and a window for the sliding ones."""
        if self.layer_types is not None:
            layers = self.layer_count()
            if layers is None:
                raise ValueError(
                    f"layer_types={self.layer_types!r} is for the encoder and decoder families, whose layers form one "
                    "stack; leave it None here."
                )
            self._check_layer_types_length()
            if "sliding_attention" in self.layer_types and self.sliding_window is None:
                raise ValueError("layer_types has 'sliding_attention' layers but sliding_window is None: set it.")
        if self.sliding_window is not None and self.layer_count() is None:
            raise ValueError(
                f"sliding_window={self.sliding_window} is for the encoder and decoder families; the encoder-decoder "
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
        if self.layer_types is not None:
            return list(self.layer_types)
        kind = "sliding_attention" if self.sliding_window is not None else "full_attention"
        return [kind] * (self.layer_count() or 0)

    def check_attention_implementation(self, implementation: str) -> None:
        """Raise ValueError when the attention score cannot run on the backend `implementation`: fused kernels such
        as SDPA compute q·k themselves, so a score that is not a dot product needs the eager backend ("paged|eager"
        is the name continuous batching gives it)."""
        if self.attn_logit_softcapping is not None and implementation not in (
            "eager",
            "paged|eager",
            "flex_attention",
        ):
            raise ValueError(
                f"attn_logit_softcapping={self.attn_logit_softcapping} needs attn_implementation='eager' or "
                f"'flex_attention' (got {implementation!r}): fused kernels such as SDPA cannot cap the scores."
            )
        if implementation not in ("eager", "paged|eager") and not SCORES[self.attention_score].dot_product:
            raise ValueError(
                f"attention_score={self.attention_score!r} needs attn_implementation='eager' (got "
                f"{implementation!r}): fused kernels such as SDPA only compute dot-product scores "
                f"{dot_product_scores()}."
            )

    def _check_token_ids(self) -> None:
        check_token_ids(self)


class HFAttentionEncoderConfig(HFAttentionConfigBase):
    """Bidirectional encoder (BERT-like): token classification, sequence classification and masked LM.

    Args:
        num_hidden_layers: Number of encoder layers.
        classifier_dropout: Dropout before classification heads; `None` uses hidden_dropout_prob.
        classifier_pooling: How the sequence classifier summarises a text: "mean" of the real tokens' states, or
            the "first" token's state (BERT's [CLS]).
        classifier_transform: The classifiers map each vector through dense → activation → norm before their linear
            layer (ModernBERT's heads). Default False.
        **kwargs: The knobs of `HFAttentionConfigBase`.
    """

    model_type = "hf_attention_encoder"
    _stack_directions = (True,)

    def __init__(
        self,
        num_hidden_layers: int = 6,
        classifier_dropout: float | None = None,
        classifier_pooling: str = "mean",
        classifier_transform: bool = False,
        **kwargs,
    ):
        self.num_hidden_layers = num_hidden_layers
        self.classifier_dropout = classifier_dropout
        self.classifier_pooling = classifier_pooling
        self.classifier_transform = classifier_transform
        kwargs.setdefault("is_decoder", False)
        super().__init__(**kwargs)


class HFAttentionDecoderConfig(HFAttentionConfigBase):
    """Causal decoder (GPT-like) for language modelling and generation.

    Args:
        num_hidden_layers: Number of decoder layers.
        classifier_dropout: Dropout before the sequence-classification head; `None` uses hidden_dropout_prob.
        **kwargs: The knobs of `HFAttentionConfigBase`.
    """

    model_type = "hf_attention_decoder"
    _stack_directions = (False,)

    def __init__(self, num_hidden_layers: int = 6, classifier_dropout: float | None = None, **kwargs):
        self.num_hidden_layers = num_hidden_layers
        self.classifier_dropout = classifier_dropout
        kwargs.setdefault("is_decoder", True)
        super().__init__(**kwargs)


class HFAttentionSeq2SeqConfig(HFAttentionConfigBase):
    """Encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017).

    Args:
        encoder_layers: Number of encoder layers.
        decoder_layers: Number of decoder layers.
        decoder_start_token_id: First decoder input; `None` uses bos_token_id.
        **kwargs: The knobs of `HFAttentionConfigBase`.
    """

    model_type = "hf_attention_seq2seq"

    def __init__(
        self, encoder_layers: int = 6, decoder_layers: int = 6, decoder_start_token_id: int | None = None, **kwargs
    ):
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        kwargs["is_encoder_decoder"] = True
        super().__init__(**kwargs)
        self.decoder_start_token_id = self.bos_token_id if decoder_start_token_id is None else decoder_start_token_id
        self._check_token_ids()
