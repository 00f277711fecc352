"""The configuration of the recurrent family (recurrent.py): the encoder-decoder that came before the Transformer, an
RNN that reads the source and one that writes the target, with or without attention over the source.

Its knobs are declared once, in `RECURRENT_KNOBS` (rows of the `knobs.Knob` record the Transformer families use: the
default, the check, the idea with its source), from which the constructor, the field checks, the docstring and the
signature are derived. This file is shipped with every checkpoint (remote code). It imports the standard library,
`transformers`, the knob record and the scores' registry.
"""

from transformers import PretrainedConfig

from .field_checks import (
    CheckedFields,
    check_at_least_zero,
    check_bool,
    check_choice,
    check_positive,
    check_probability,
    check_token_id_type,
    check_token_ids,
    optional,
)
from .knobs import Knob, choice, document_constructor
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


RECURRENT = ("recurrent",)  # the family of the knobs below


def recurrent_scores() -> tuple[str, ...]:
    """The attention scores the recurrent decoder takes: the registry's and "none"."""
    return (*SCORES, NO_ATTENTION)


RECURRENT_KNOBS: dict[str, Knob] = {
    "vocab_size": Knob(
        8000,
        check_positive,
        "Size of the token vocabulary (shared by source and target).",
        families=RECURRENT,
    ),
    "hidden_size": Knob(
        256,
        check_positive,
        "Width H of each recurrent layer's state (per direction in the encoder).",
        families=RECURRENT,
    ),
    "embedding_size": Knob(
        None,
        optional(check_positive),
        "Width of the token embeddings; `None` means hidden_size.",
        families=RECURRENT,
    ),
    "encoder_layers": Knob(1, check_positive, "Stacked recurrent layers of the encoder.", families=RECURRENT),
    "decoder_layers": Knob(1, check_positive, "Stacked recurrent layers of the decoder.", families=RECURRENT),
    "cell": Knob(
        "gru",
        choice(RECURRENT_CELLS),
        "`gru` (Cho et al. 2014) or `lstm` (Hochreiter & Schmidhuber 1997).",
        families=RECURRENT,
    ),
    "bidirectional_encoder": Knob(
        True,
        check_bool,
        "The encoder reads the source both ways and each position's annotation is the pair of states (Bahdanau et "
        "al. 2015 §3.2).",
        families=RECURRENT,
    ),
    "attention_score": Knob(
        "additive",
        choice(recurrent_scores),
        "How the decoder looks back at the source. `none`: it does not; it sees one fixed vector, the encoder's "
        "final states (the fixed-size bottleneck of Cho et al. 2014). `additive`: Bahdanau's wᵀtanh(W_q s + W_k "
        "h) over every source annotation; the dot-product and Gaussian scores of `scores.SCORES` work too (Luong "
        'et al. 2015\'s "dot").',
        families=RECURRENT,
    ),
    "attention_style": Knob(
        "bahdanau",
        choice(ATTENTION_STYLES),
        "When the decoder attends. `bahdanau` (default): before its RNN step, with the previous state s_{t−1} as "
        "the query, and the context c_t joins the RNN's input (Bahdanau et al. 2015). `luong`: after it, with the "
        "new state s_t as the query (Luong et al. 2015); the RNN's input is the token alone. Needs attention "
        "(`attention_score` not `none`).",
        families=RECURRENT,
    ),
    "input_feeding": Knob(
        False,
        check_bool,
        "Luong's input feeding: the previous attentional state h̃_{t−1} = tanh(W_c[s_{t−1}; c_{t−1}]) joins the "
        "token at the RNN's input, so the decoder knows what it attended to before. Needs "
        '`attention_style="luong"`; default False.',
        families=RECURRENT,
    ),
    "dropout": Knob(
        0.1,
        check_probability,
        "Dropout on embeddings, between stacked recurrent layers and before the output layer.",
        families=RECURRENT,
    ),
    "initializer_range": Knob(
        0.1,
        check_at_least_zero,
        "Std of the normal initialisation of embeddings and linear layers (the recurrent weights keep PyTorch's "
        "uniform ±1/√H). 0.1 as OpenNMT's recurrent models (uniform ±0.1): at the Transformer's 0.02 the "
        "embeddings reach the recurrent gates too weakly, and a copy task did not start learning in 1200 steps.",
        families=RECURRENT,
    ),
    "label_smoothing": Knob(
        0.0,
        check_probability,
        "ε of the token loss computed from `labels`, as `F.cross_entropy(label_smoothing=ε)`: (1 − ε)(−log p[y]) "
        "+ ε · mean over the vocabulary of −log p[v]. In [0, 1); default 0.0, the plain cross-entropy.",
        families=RECURRENT,
    ),
    "unlikelihood_weight": Knob(
        0.0,
        check_at_least_zero,
        "α of the token-level unlikelihood term added to that loss, as in the Transformer configs "
        "(`losses.repeat_unlikelihood`): α · Σ −log(1 − p[c]) over the one or two previous target tokens c that "
        "differ from the target. ≥ 0; default 0.0, no term.",
        families=RECURRENT,
    ),
    "tie_word_embeddings": Knob(
        True,
        check_bool,
        "Share the embedding matrix with the output projection.",
        families=RECURRENT,
    ),
    "use_cache": Knob(
        True,
        check_bool,
        "`generate()` carries the decoder's state from one token to the next instead of re-reading the whole "
        "target at every step.",
        families=RECURRENT,
    ),
    "decoder_start_token_id": Knob(
        None,
        check_token_id_type,
        "First decoder input; `None` uses bos_token_id.",
        families=RECURRENT,
    ),
    "pad_token_id": Knob(0, check_token_id_type, "Id of the padding token (None: none).", families=RECURRENT),
    "bos_token_id": Knob(
        1,
        check_token_id_type,
        "Id of the beginning-of-sequence token; the decoder's default start.",
        families=RECURRENT,
    ),
    "eos_token_id": Knob(
        2,
        check_token_id_type,
        "Id of the end-of-sequence token (or a list of them): generation stops there.",
        families=RECURRENT,
    ),
}
RECURRENT_FIELD_CHECKS = {name: knob.check for name, knob in RECURRENT_KNOBS.items()}


class HFAttentionRecurrentConfig(CheckedFields, PretrainedConfig):
    """The recurrent encoder-decoder that came before the Transformer: an RNN reads the source, another writes the
    target, with or without attention over the source (Cho et al. 2014; Sutskever et al. 2014; Bahdanau et al. 2015).
    """

    model_type = "hf_attention_rnn"
    _field_checks = RECURRENT_FIELD_CHECKS
    keys_to_ignore_at_inference = ["cache", "past_key_values"]

    def __init__(self, **kwargs):
        """Every knob from `kwargs` or its default (`RECURRENT_KNOBS`); other keys go to PretrainedConfig."""
        values = {name: kwargs.pop(name, knob.default) for name, knob in RECURRENT_KNOBS.items()}
        decoder_start_token_id = values.pop("decoder_start_token_id")  # None: bos_token_id, once that is set
        for name, value in values.items():
            setattr(self, name, value)  # checked on assignment (RECURRENT_FIELD_CHECKS)
        check_attention_style(self.attention_style, self.input_feeding, has_attention=self.has_attention)
        kwargs["is_encoder_decoder"] = True
        super().__init__(**kwargs)
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


document_constructor(HFAttentionRecurrentConfig, RECURRENT_KNOBS, RECURRENT_KNOBS)
