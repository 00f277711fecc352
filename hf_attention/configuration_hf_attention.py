"""Configurations of the three hf-attention families: encoder, decoder and encoder-decoder.

One shared base holds every knob; each family adds its layer counts and its `model_type`. Variant choices are plain
strings checked against the tuples below, so `config.json` stays JSON and a typo fails at construction time with an
error that names the field, the value and what is allowed.

This file is shipped with every checkpoint (remote code) and imports only `transformers`.
"""

from transformers import PretrainedConfig

ATTENTION_SCORES = ("scaled_dot", "dot", "additive", "gaussian")
# Scores that are a (scaled) dot product q·k can run on fused kernels such as torch's SDPA.
DOT_PRODUCT_SCORES = ("scaled_dot", "dot")
POSITION_ENCODINGS = ("sinusoidal", "learned", "rotary", "alibi", "relative", "none")
NORM_POSITIONS = ("post", "pre")
NORM_TYPES = ("layernorm", "rmsnorm")
HIDDEN_ACTS = ("relu", "gelu", "gelu_new", "silu", "swiglu", "geglu", "geglu_new")
SINUSOIDAL_LAYOUTS = ("interleaved", "concat")
CLASSIFIER_POOLINGS = ("mean", "first")


def _check_choice(field: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{field}={value!r} is not supported; allowed values are {', '.join(map(repr, allowed))}.")


def _check_positive(field: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{field}={value!r} must be a positive integer.")


def _check_probability(field: str, value) -> None:
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{field}={value!r} must be a probability in [0, 1).")


class HFAttentionConfigBase(PretrainedConfig):
    """Knobs shared by the three families (DESIGN.md §2).

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
        norm_position: `post` (Add & Norm of the 2017 paper) or `pre` (GPT-2 / Llama).
        norm_type: `layernorm` or `rmsnorm` (Zhang & Sennrich 2019).
        scale_embeddings: Multiply token embeddings by √hidden_size (paper §3.4).
        attention_bias: Biases on the q/k/v/o projections.
        mlp_bias: Biases on the feed-forward projections.
        embedding_norm: A norm right after the embeddings (BERT, BART).
        final_norm: A norm after the last layer; `None` means "yes for pre-norm, no for post-norm".
        type_vocab_size: Number of token-type (segment) embeddings; 0 disables them (BERT uses 2).
        position_offset: Added to position ids before the learned-table lookup (BART reserves 2 rows).
        sinusoidal_layout: `interleaved` (sin, cos, sin, … as in the paper) or `concat` ([sin…, cos…], Marian).
        rope_theta: Base of the rotary frequencies.
        relative_attention_num_buckets, relative_attention_max_distance: T5 bucketing of relative distances.
        layer_norm_eps: Epsilon of the norms.
        hidden_dropout_prob: Dropout on embeddings and on each sub-layer output before the residual add.
        activation_dropout: Dropout inside the feed-forward network, after the activation.
        attention_dropout: Dropout on the attention weights (training only).
        initializer_range: Std of the normal initialisation.
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

    keys_to_ignore_at_inference = ["past_key_values"]

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
        relative_attention_num_buckets: int = 32,
        relative_attention_max_distance: int = 128,
        layer_norm_eps: float = 1e-5,
        hidden_dropout_prob: float = 0.1,
        activation_dropout: float = 0.0,
        attention_dropout: float = 0.0,
        initializer_range: float = 0.02,
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
        self.relative_attention_num_buckets = relative_attention_num_buckets
        self.relative_attention_max_distance = relative_attention_max_distance
        self.layer_norm_eps = layer_norm_eps
        self.hidden_dropout_prob = hidden_dropout_prob
        self.activation_dropout = activation_dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.use_cache = use_cache
        self.tie_word_embeddings = tie_word_embeddings
        self.pad_token_id = pad_token_id
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.lm_head_bias = lm_head_bias
        self.freeze_lm_head_bias = freeze_lm_head_bias
        self.lm_head_transform = lm_head_transform
        self.scale_lm_head_input = scale_lm_head_input
        super().__init__(**kwargs)
        self._validate_knobs()

    def _validate_knobs(self) -> None:
        """Raise ValueError naming the field, the value and what is allowed, before any module is built."""
        for field in ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads",
                      "intermediate_size", "max_position_embeddings"):
            _check_positive(field, getattr(self, field))
        _check_choice("attention_score", self.attention_score, ATTENTION_SCORES)
        _check_choice("position_encoding", self.position_encoding, POSITION_ENCODINGS)
        _check_choice("norm_position", self.norm_position, NORM_POSITIONS)
        _check_choice("norm_type", self.norm_type, NORM_TYPES)
        _check_choice("hidden_act", self.hidden_act, HIDDEN_ACTS)
        _check_choice("sinusoidal_layout", self.sinusoidal_layout, SINUSOIDAL_LAYOUTS)
        for field in ("hidden_dropout_prob", "activation_dropout", "attention_dropout"):
            _check_probability(field, getattr(self, field))
        for field in ("lm_head_bias", "freeze_lm_head_bias", "lm_head_transform", "scale_lm_head_input"):
            if not isinstance(getattr(self, field), bool):
                raise ValueError(f"{field}={getattr(self, field)!r} must be True or False.")
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
        _check_positive("head_dim", self.head_dim)
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} is not divisible by num_key_value_heads="
                f"{self.num_key_value_heads}; each key/value head must serve a whole group of query heads."
            )
        if self.position_encoding == "rotary" and self.head_dim % 2:
            raise ValueError(f"position_encoding='rotary' needs an even head_dim, got {self.head_dim}.")
        if self.position_encoding == "sinusoidal" and self.hidden_size % 2:
            raise ValueError(f"position_encoding='sinusoidal' needs an even hidden_size, got {self.hidden_size}.")
        if self.position_encoding == "relative":
            _check_positive("relative_attention_num_buckets", self.relative_attention_num_buckets)
            _check_positive("relative_attention_max_distance", self.relative_attention_max_distance)
        if self.type_vocab_size < 0 or self.position_offset < 0:
            raise ValueError(
                f"type_vocab_size={self.type_vocab_size} and position_offset={self.position_offset} must be >= 0."
            )
        requested = getattr(self, "_attn_implementation_internal", None)
        if isinstance(requested, str) and requested != "eager" and self.attention_score not in DOT_PRODUCT_SCORES:
            raise ValueError(
                f"attention_score={self.attention_score!r} needs attn_implementation='eager' (got {requested!r}): "
                f"fused kernels such as SDPA only compute dot-product scores {DOT_PRODUCT_SCORES}."
            )



class HFAttentionEncoderConfig(HFAttentionConfigBase):
    """Bidirectional encoder (BERT-like): token classification, sequence classification and masked LM.

    Args:
        num_hidden_layers: Number of encoder layers.
        classifier_dropout: Dropout before classification heads; `None` uses hidden_dropout_prob.
        classifier_pooling: How the sequence classifier summarises a text: "mean" of the real tokens' states, or
            the "first" token's state (BERT's [CLS]).
        **kwargs: The knobs of `HFAttentionConfigBase`.
    """

    model_type = "hf_attention_encoder"

    def __init__(self, num_hidden_layers: int = 6, classifier_dropout: float | None = None,
                 classifier_pooling: str = "mean", **kwargs):
        self.num_hidden_layers = num_hidden_layers
        self.classifier_dropout = classifier_dropout
        self.classifier_pooling = classifier_pooling
        kwargs.setdefault("is_decoder", False)
        super().__init__(**kwargs)
        _check_positive("num_hidden_layers", self.num_hidden_layers)
        _check_choice("classifier_pooling", self.classifier_pooling, CLASSIFIER_POOLINGS)


class HFAttentionDecoderConfig(HFAttentionConfigBase):
    """Causal decoder (GPT-like) for language modelling and generation.

    Args:
        num_hidden_layers: Number of decoder layers.
        classifier_dropout: Dropout before the sequence-classification head; `None` uses hidden_dropout_prob.
        **kwargs: The knobs of `HFAttentionConfigBase`.
    """

    model_type = "hf_attention_decoder"

    def __init__(self, num_hidden_layers: int = 6, classifier_dropout: float | None = None, **kwargs):
        self.num_hidden_layers = num_hidden_layers
        self.classifier_dropout = classifier_dropout
        kwargs.setdefault("is_decoder", True)
        super().__init__(**kwargs)
        _check_positive("num_hidden_layers", self.num_hidden_layers)


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
        _check_positive("encoder_layers", self.encoder_layers)
        _check_positive("decoder_layers", self.decoder_layers)
