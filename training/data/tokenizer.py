"""Train a byte-level BPE tokenizer for one of three kinds of model and wrap it as a 🤗 `PreTrainedTokenizerFast`.

Special tokens always get the same ids, which are also the defaults of the hf-attention configs, so a freshly trained
tokenizer and a freshly built model agree without any wiring:

    <pad> = 0, <s> = 1 (bos, decoder start), </s> = 2 (eos), <unk> = 3, <mask> = 4 (kind="masked" only)

What `tokenizer(text)` adds around the text depends on the objective:

| kind      | single text     | pair (a, b)              | why                                                  |
|-----------|-----------------|--------------------------|------------------------------------------------------|
| "causal"  | `<s> text`      | `<s> a b`                | a prompt must not end in </s> (generation stops)     |
| "masked"  | `<s> text </s>` | `<s> a </s> </s> b </s>` | RoBERTa's layout; <s> is the pooled / first token    |
| "seq2seq" | `text </s>`     | `a </s> b </s>`          | Marian/T5: sources and labels end in </s>; the       |
|           |                 |                          | decoder starts from <s> (labels shifted right)       |

Byte-level BPE (GPT-2, RoBERTa) never produces <unk>: any UTF-8 string is covered by the 256 byte symbols.

Format placeholders, markup tags and character entities (`%(name)s`, `%1$s`, `{0}`, `${var}`, `<b>`, `&amp;`, ...;
`PLACEHOLDER_PATTERN` lists them) are pre-tokens of their own, with at most one leading space as GPT-2 gives a word:
BPE never merges one with the text around it, a frequent one becomes a single token, and a translation model can
copy it through. Text without placeholders is pre-tokenised exactly as GPT-2's byte-level regex does it.
`keep_placeholders=False` gives GPT-2's plain pre-tokenizer instead, which tools that recognise only GPT-2's own
pre-tokenizer need: llama.cpp's GGUF converter (benchmarks/deploy.py) accepts nothing else.

`placeholder_sentinels=True` (seq2seq only: translation with placeholder protection,
hf_attention/modeling/placeholders.py) adds the sentinels `⟦ph_0⟧` ... `⟦ph_31⟧` as tokens of their own, inside
`vocab_size`: BPE learns its merges from the texts around them, and each becomes one id that is not special, so
`decode(skip_special_tokens=True)` keeps it (the translation is restored from it). The pipeline and the evaluation
protect exactly when a tokenizer holds them. The result saves with `save_pretrained` and loads back with
`AutoTokenizer.from_pretrained` (tokenizer.json).

A run's tokenizer (`make_tokenizer`) is trained on its objective's training split, with the kind, the texts and the
length the objective declares; `saved_tokenizer` is the one a checkpoint folder holds instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_attention.modeling.placeholders import SENTINELS

if TYPE_CHECKING:
    from datasets import Dataset

    from training.objective import Objective

KINDS = ("causal", "masked", "seq2seq")
PAD, BOS, EOS, UNK, MASK = "<pad>", "<s>", "</s>", "<unk>", "<mask>"

# Format placeholders, markup tags and character entities, each kept whole by the pre-tokenizer. Alternatives, in
# the order they are tried:
#   - Qt localised arguments: %L1
#   - printf, Python %-format and strftime: %s %d %% %1$s %-10.3f %.*s %lu %lld %I64d %@ %(name)s %(count)-5d %H %-d
#   - Qt arguments: %1 %2 ... (after printf, so %1$s stays one placeholder)
#   - Mustache / Jinja / i18next: {{name}} {{ user.name }}
#   - brace formats (Python str.format, .NET, Java MessageFormat, ICU arguments): {} {0} {name} {0.attr} {items[0]}
#     {name!r} {0:>10} {0,number,integer} (no spaces inside, so "{a: 1}" or prose in braces is not one)
#   - shell and template variables: ${var} ${var:-default} $var $HOME (not "$5", a price)
#   - HTML / XML tags: <b> </b> <br/> <br /> <a href="..."> <img src='x' alt=y> (a name right after "<", so
#     "a < b > c" is not one)
#   - character entities: &amp; &lt; &nbsp; &#39; &#x27;
# ASCII classes only, so Python's `re` and the tokenizers library's Oniguruma agree on every match.
PLACEHOLDER_PATTERN = (
    r"%L[0-9]+"
    r"|%(?:\([A-Za-z_][A-Za-z0-9_]*\)|[0-9]+\$)?[-+#0'_^]*(?:[0-9]+|\*)?(?:\.(?:[0-9]+|\*))?"
    r"(?:hh|ll|I64|I32|[hlLqjzt])?[A-Za-z@%]"
    r"|%[0-9]+"
    r"|\{\{ ?[A-Za-z_][A-Za-z0-9_.]* ?\}\}"
    r"|\{(?:[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+|\[[A-Za-z0-9_]+\])*)?(?:![rsa])?(?:[:,][^{} \t\r\n]*)?\}"
    r"|\$\{[^{} \t\r\n]+\}"
    r"|\$[A-Za-z_][A-Za-z0-9_]*"
    # a tag: its name, then attributes `name`, `name=value`, `name="value"` or `name='value'`, then "/>" or ">"
    r"|</?[A-Za-z][A-Za-z0-9:._-]*"
    r"""(?:[ \t\r\n]+[^ \t\r\n"'<>/=]+(?:[ \t\r\n]*=[ \t\r\n]*(?:"[^"<>]*"|'[^'<>]*'|[^ \t\r\n"'<>=]+))?)*"""
    r"[ \t\r\n]*/?>"
    r"|&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);"
)

# GPT-2's pre-tokenizer regex (what `pre_tokenizers.ByteLevel(use_regex=True)` applies), preceded by the
# placeholders with one optional leading space; its run of punctuation stops where a placeholder starts, so "(%s)"
# gives "(", "%s", ")". The ByteLevel regex cannot run after the split: it would cut " %(name)s" into " %(", "name",
# ")s" again, so this one pattern does all the splitting and ByteLevel only maps bytes to symbols.
PRE_TOKENIZER_PATTERN = (
    rf" ?(?:{PLACEHOLDER_PATTERN})"
    r"|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+"
    rf"| ?(?:(?!{PLACEHOLDER_PATTERN})[^\s\p{{L}}\p{{N}}])+"
    r"|\s+(?!\S)|\s+"
)


def check_vocab_size(vocab_size: int, kind: str, *, placeholder_sentinels: bool = False) -> None:
    """Raise a ValueError unless a tokenizer of `kind` with `vocab_size` entries holds the special tokens, the byte
    alphabet and, with `placeholder_sentinels`, the sentinels (training.train asks this before anything is
    written)."""
    _check_sentinels(kind, placeholder_sentinels)
    specials, alphabet = len(special_tokens(kind)), len(pre_tokenizers.ByteLevel.alphabet())
    sentinels = len(SENTINELS) if placeholder_sentinels else 0
    if vocab_size < specials + alphabet + sentinels:
        with_sentinels = f" and {sentinels} placeholder sentinels" if sentinels else ""
        raise ValueError(
            f"vocab_size={vocab_size} is too small: byte-level BPE needs {alphabet} byte symbols plus {specials} "
            f"special tokens{with_sentinels}, so at least {specials + alphabet + sentinels}."
        )


def _check_sentinels(kind: str, placeholder_sentinels: bool) -> None:
    _check_kind(kind)
    if placeholder_sentinels and kind != "seq2seq":
        raise ValueError(
            f"placeholder_sentinels=True is not supported for kind={kind!r}; it is allowed only for kind='seq2seq' "
            "(translation with placeholder protection)."
        )


def special_tokens(kind: str) -> list[str]:
    """The special tokens of `kind`, in id order (<pad>=0, <s>=1, </s>=2, <unk>=3, then <mask>=4 for "masked")."""
    _check_kind(kind)
    return [PAD, BOS, EOS, UNK] + ([MASK] if kind == "masked" else [])


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    *,
    kind: str,
    min_frequency: int = 2,
    model_max_length: int | None = None,
    keep_placeholders: bool = True,
    placeholder_sentinels: bool = False,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `texts` for the objective `kind`.

    Stable API: `make_tokenizer`, the tests and the tutorials call this function; keep the signature.

    Args:
        texts: Training text, one string per line or paragraph (any iterable; read once).
        vocab_size: Size of the final vocabulary, special tokens and the 256 byte symbols included.
        kind: "causal" (decoder LM), "masked" (encoder MLM; adds <mask>) or "seq2seq" (translation).
        min_frequency: Merges seen fewer times than this are not learnt.
        model_max_length: Longest input the model takes (e.g. its max_position_embeddings); `truncation=True`
            then cuts there. None leaves the tokenizer unbounded.
        keep_placeholders: Make every `PLACEHOLDER_PATTERN` match (format placeholder, tag, entity) a pre-token of
            its own, so no token spans its boundary. False gives GPT-2's plain byte-level pre-tokenizer, which
            llama.cpp's GGUF converter needs (benchmarks/deploy.py names it "gpt-2" only then).
        placeholder_sentinels: Hold the placeholder sentinels (`hf_attention.modeling.placeholders.SENTINELS`) as
            tokens of their own after the learnt ones, inside `vocab_size` (seq2seq only); `texts` are then protected
            texts.

    Returns:
        A `PreTrainedTokenizerFast` with pad/bos/eos/unk (and mask) tokens set. Decoder tokenizers pad on the left,
        as batched generation needs; the others pad on the right.

    Raises:
        ValueError: If `kind` is unknown, `vocab_size` cannot hold the special tokens, the byte alphabet (and the
            sentinels), or `placeholder_sentinels` is asked for another kind than "seq2seq".
    """
    check_vocab_size(vocab_size, kind, placeholder_sentinels=placeholder_sentinels)
    tokenizer = _train_bpe(
        texts,
        vocab_size,
        kind=kind,
        min_frequency=min_frequency,
        keep_placeholders=keep_placeholders,
        placeholder_sentinels=placeholder_sentinels,
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        mask_token=MASK if kind == "masked" else None,
        padding_side="left" if kind == "causal" else "right",
        model_max_length=model_max_length if model_max_length is not None else int(1e30),
    )


def _train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    *,
    kind: str,
    min_frequency: int,
    keep_placeholders: bool,
    placeholder_sentinels: bool,
) -> Tokenizer:
    """The `tokenizers` BPE model learnt from `texts`, with its added tokens and the special tokens of `kind`."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = _pre_tokenizer(keep_placeholders)
    tokenizer.decoder = decoders.ByteLevel()
    if placeholder_sentinels:
        # BPE learns from the text between the sentinels, as the tokenizer will cut it (the added tokens first), and
        # leaves room for them.
        texts = _between_sentinels(texts)
        vocab_size -= len(SENTINELS)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=special_tokens(kind),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if kind == "masked":
        # As in RoBERTa, "a <mask> b" puts the space before <mask> into the mask token, so the model predicts the
        # word with its leading space ("Ġword"), the form it saw in training.
        tokenizer.add_special_tokens([AddedToken(MASK, lstrip=True, special=True)])
    if placeholder_sentinels:
        # Not special: decode(skip_special_tokens=True) must keep them. No stripping of spaces either: the spaces
        # around a sentinel are the text's own.
        tokenizer.add_tokens([AddedToken(token, special=False, normalized=False) for token in SENTINELS])
    # ByteLevel(trim_offsets) keeps character offsets off the leading-space byte, which token-classification
    # pipelines use to group words; the template then adds the objective's special tokens.
    tokenizer.post_processor = processors.Sequence(
        [processors.ByteLevel(trim_offsets=True), _template(kind, tokenizer)]
    )
    return tokenizer


_SENTINEL_TOKENS = re.compile("|".join(map(re.escape, SENTINELS)))  # what the added tokens cut out of a text


def _between_sentinels(texts: Iterable[str]) -> Iterable[str]:
    """The pieces of each text between its sentinels (and none that is empty)."""
    for text in texts:
        yield from filter(None, _SENTINEL_TOKENS.split(text))


def _pre_tokenizer(keep_placeholders: bool = True) -> pre_tokenizers.PreTokenizer:
    """GPT-2's byte-level pre-tokenizer, with every placeholder, tag and entity as a pre-token of its own if
    `keep_placeholders`."""
    if not keep_placeholders:
        return pre_tokenizers.ByteLevel(add_prefix_space=False)
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKENIZER_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _template(kind: str, tokenizer: Tokenizer) -> processors.TemplateProcessing:
    """The special tokens `tokenizer(text)` adds for `kind` (see the module table)."""
    ids = {token: tokenizer.token_to_id(token) for token in (BOS, EOS)}
    single, pair = {
        "causal": (f"{BOS} $A", f"{BOS} $A $B:1"),
        "masked": (f"{BOS} $A {EOS}", f"{BOS} $A {EOS} {EOS}:1 $B:1 {EOS}:1"),
        "seq2seq": (f"$A {EOS}", f"$A {EOS} $B:1 {EOS}:1"),
    }[kind]
    return processors.TemplateProcessing(single=single, pair=pair, special_tokens=list(ids.items()))


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not supported; allowed values are {', '.join(map(repr, KINDS))}.")


# ------------------------------------------------------------------------------------ an objective's tokenizer


def make_tokenizer(
    objective: Objective,
    train_split: Dataset,
    data_args,
    *,
    vocab_size: int,
    min_frequency: int = 2,
    keep_placeholders: bool = True,
) -> PreTrainedTokenizerFast:
    """A tokenizer trained on every text column of the training split (one shared vocabulary for pairs), or on the
    texts the objective makes of it (`DataSpec.tokenizer_texts`: protected pairs, the sentinels as tokens)."""
    if objective.data.tokenizer_texts is not None:
        texts = list(objective.data.tokenizer_texts(train_split, data_args))
    else:
        texts = list(chain.from_iterable(train_split[column] for column in objective.data.text_columns))
    return train_tokenizer(
        texts,
        vocab_size,
        kind=objective.data.tokenizer_kind,
        min_frequency=min_frequency,
        keep_placeholders=keep_placeholders,
        placeholder_sentinels=uses_sentinels(objective, data_args),
        model_max_length=objective.data.tokenizer_max_length(data_args),
    )


def uses_sentinels(objective: Objective, data_args) -> bool:
    """Whether the run's tokenizer holds the placeholder sentinels (hf_attention/modeling/placeholders.py)."""
    return objective.data.placeholder_sentinels is not None and objective.data.placeholder_sentinels(data_args)


def saved_tokenizer(model_name_or_path: str | None):
    """The tokenizer saved in a checkpoint folder, or None when there is no folder or it holds no tokenizer."""
    if model_name_or_path and any(
        (Path(model_name_or_path) / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")
    ):
        return AutoTokenizer.from_pretrained(model_name_or_path)
    return None
