"""The configuration of the recurrent family (recurrent.py): the encoder-decoder that came before the Transformer, an
RNN that reads the source and one that writes the target, with or without attention over the source.

This file is shipped with every checkpoint (remote code). It imports the standard library, `transformers`, the
Transformer configurations (whose field checks it extends) and the scores' registry.
"""

from transformers import PretrainedConfig

from .configuration_hf_attention import FIELD_CHECKS
from .field_checks import (
    CheckedFields,
    check_bool,
    check_choice,
    check_positive,
    check_probability,
    check_token_ids,
    optional,
)
from .scores import SCORES

RECURRENT_CELLS = ("gru", "lstm")
NO_ATTENTION = "none"
ATTENTION_STYLES = ("bahdanau", "luong")


def check_attention_style(attention_style: str, input_feeding: bool, *, has_attention: bool) -> None:
    """ValueError unless the recurrent decoder's attention style and input feeding go together and with its
    attention: Luong's style needs attention (it is when the decoder attends), input feeding needs Luong's style
    (Bahdanau's decoder already feeds its context c_t to the RNN)."""
    check_choice("attention_style", attention_style, ATTENTION_STYLES)
    check_bool("input_feeding", input_feeding)
    if attention_style == "luong" and not has_attention:
        raise ValueError(
            f"attention_style='luong' needs attention over the source, but attention_score={NO_ATTENTION!r}: choose "
            "a score (e.g. 'additive' or 'dot') or leave attention_style='bahdanau'."
        )
    if input_feeding and attention_style != "luong":
        raise ValueError(
            "input_feeding=True feeds Luong's attentional state h̃_{t−1} to the next step and needs "
            "attention_style='luong' (Bahdanau's decoder already feeds its context c_t to the RNN)."
        )


RECURRENT_FIELD_CHECKS = {
    **FIELD_CHECKS,
    "embedding_size": optional(check_positive),
    "dropout": check_probability,
    "bidirectional_encoder": check_bool,
    "cell": lambda field, value: check_choice(field, value, RECURRENT_CELLS),
    "attention_score": lambda field, value: check_choice(field, value, (*SCORES, NO_ATTENTION)),
    "attention_style": lambda field, value: check_choice(field, value, ATTENTION_STYLES),
    "input_feeding": check_bool,
}


class HFAttentionRecurrentConfig(CheckedFields, PretrainedConfig):
    """The recurrent encoder-decoder that came before the Transformer: an RNN reads the source, another writes the
    target, with or without attention over the source (Cho et al. 2014; Sutskever et al. 2014; Bahdanau et al. 2015).

    Args:
        vocab_size: Size of the token vocabulary (shared by source and target).
        hidden_size: Width H of each recurrent layer's state (per direction in the encoder).
        embedding_size: Width of the token embeddings; `None` means hidden_size.
        encoder_layers: Stacked recurrent layers of the encoder.
        decoder_layers: Stacked recurrent layers of the decoder.
        cell: `gru` (Cho et al. 2014) or `lstm` (Hochreiter & Schmidhuber 1997).
        bidirectional_encoder: The encoder reads the source both ways and each position's annotation is the pair of
            states (Bahdanau et al. 2015 §3.2).
        attention_score: How the decoder looks back at the source. `none`: it does not; it sees one fixed vector,
            the encoder's final states (the fixed-size bottleneck of Cho et al. 2014). `additive`: Bahdanau's
            wᵀtanh(W_q s + W_k h) over every source annotation; the dot-product and Gaussian scores of
            `scores.SCORES` work too (Luong et al. 2015's "dot").
        attention_style: When the decoder attends. `bahdanau` (default): before its RNN step, with the previous
            state s_{t−1} as the query, and the context c_t joins the RNN's input (Bahdanau et al. 2015). `luong`:
            after it, with the new state s_t as the query (Luong et al. 2015); the RNN's input is the token alone.
            Needs attention (`attention_score` not `none`).
        input_feeding: Luong's input feeding: the previous attentional state h̃_{t−1} = tanh(W_c[s_{t−1}; c_{t−1}])
            joins the token at the RNN's input, so the decoder knows what it attended to before. Needs
            `attention_style="luong"`; default False.
        dropout: Dropout on embeddings, between stacked recurrent layers and before the output layer.
        initializer_range: Std of the normal initialisation of embeddings and linear layers (the recurrent weights
            keep PyTorch's uniform ±1/√H). 0.1 as OpenNMT's recurrent models (uniform ±0.1): at the Transformer's
            0.02 the embeddings reach the recurrent gates too weakly, and a copy task did not start learning in
            1200 steps.
        label_smoothing: ε of the token loss computed from `labels`, as `F.cross_entropy(label_smoothing=ε)`:
            (1 − ε)(−log p[y]) + ε · mean over the vocabulary of −log p[v]. In [0, 1); default 0.0, the plain
            cross-entropy.
        unlikelihood_weight: α of the token-level unlikelihood term added to that loss, as in the Transformer
            configs (`losses.repeat_unlikelihood`): α · Σ −log(1 − p[c]) over the one or two previous target tokens
            c that differ from the target. ≥ 0; default 0.0, no term.
        tie_word_embeddings: Share the embedding matrix with the output projection.
        use_cache: `generate()` carries the decoder's state from one token to the next instead of re-reading the
            whole target at every step.
    """

    model_type = "hf_attention_rnn"
    _field_checks = RECURRENT_FIELD_CHECKS
    keys_to_ignore_at_inference = ["cache", "past_key_values"]

    def __init__(
        self,
        vocab_size: int = 8000,
        hidden_size: int = 256,
        embedding_size: int | None = None,
        encoder_layers: int = 1,
        decoder_layers: int = 1,
        cell: str = "gru",
        bidirectional_encoder: bool = True,
        attention_score: str = "additive",
        attention_style: str = "bahdanau",
        input_feeding: bool = False,
        dropout: float = 0.1,
        initializer_range: float = 0.1,
        label_smoothing: float = 0.0,
        unlikelihood_weight: float = 0.0,
        tie_word_embeddings: bool = True,
        use_cache: bool = True,
        decoder_start_token_id: int | None = None,
        **kwargs,
    ):
        self.use_cache = use_cache
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.embedding_size = embedding_size
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.cell = cell
        self.bidirectional_encoder = bidirectional_encoder
        self.attention_score = attention_score
        self.attention_style = attention_style
        self.input_feeding = input_feeding
        check_attention_style(attention_style, input_feeding, has_attention=self.has_attention)
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.label_smoothing = label_smoothing
        self.unlikelihood_weight = unlikelihood_weight
        kwargs["is_encoder_decoder"] = True
        kwargs.setdefault("pad_token_id", 0)
        kwargs.setdefault("bos_token_id", 1)
        kwargs.setdefault("eos_token_id", 2)
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
        self.decoder_start_token_id = self.bos_token_id if decoder_start_token_id is None else decoder_start_token_id
        check_token_ids(self)

    @property
    def has_attention(self) -> bool:
        """Whether the decoder attends over the source (False: the fixed-vector encoder-decoder)."""
        return self.attention_score != NO_ATTENTION

    @property
    def attention_kinds(self) -> tuple[str, ...]:
        """The attention weights the model computes, for heatmaps: the decoder's over the source, if any."""
        return ("cross",) if self.has_attention else ()

    @property
    def position_limit(self) -> None:
        """None: a recurrent model reads any number of positions (it has no position table)."""
        return None

    @property
    def word_embedding_size(self) -> int:
        return self.hidden_size if self.embedding_size is None else self.embedding_size
