"""Placeholder protection: the format placeholders, tags and entities of a source replaced by indexed sentinels
before translation, and put back from the source afterwards.

A mangled placeholder crashes the program that reads the catalog (`%(name)s` dropped, `%(field_name)s` turned into
`%(flo_name)s`, `&amp;` into `undamp;`), and a small model mangles the ones it has rarely seen. Production
localisation MT therefore masks them: each placeholder occurrence of the source becomes an opaque token `⟦ph_0⟧`,
`⟦ph_1⟧`, ... in order, the model only has to copy (and may move) that token, and its exact text comes back from the
source. Whatever goes wrong is then visible: a sentinel lost, one that the source never had (invented), one written
twice (duplicated), each reported by `restore`.

- `QA_PLACEHOLDER`: what translators' QA checks keep (printf, named printf, Qt, str.format, HTML tags, character
  entities), one named syntax per alternative (`SYNTAXES`, `syntax_of`).
- `protect(source)` → (masked source, originals); `restore(output, originals, source=...)` → (text, problems).
- `protect_pair(source, target)`: the training pair, each target placeholder given the sentinel of its source
  occurrence, so the model learns to copy and reorder sentinels; a target with a sentinel string its source lacks
  (`stray_sentinels`) is refused, as it would teach the model to invent sentinels.
- `protect_batch`, `restore_batch` and `translate_protected(texts, translate_fn)`: for any engine that maps source
  strings to output strings with the same tokenizer (CTranslate2 reads the same token ids).
- `tokenizer_protects(tokenizer)`: protection is on exactly when the tokenizer holds the sentinels as tokens, so a
  model trained without it translates the text unprotected.

More placeholders than sentinels (`SENTINEL_COUNT`): the first ones get sentinels and the rest stay as text (the
model must copy those itself, and `restore` given the source reports one it lost), except that a sentinel string
written in the source always gets one, so that protect → restore gives every source back unchanged.

This file is shipped beside the weights with the translation pipeline (pipelines.py imports it): it imports only the
standard library.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import NamedTuple

# ------------------------------------------------------------------------------------------------ placeholders

# HTML elements: a tag with another name ("<file>", "<options>", "<none>") is a metavariable or a word in brackets,
# which translators translate ("<Datei>"), so it is not a placeholder.
_HTML_TAGS = (
    "a|abbr|b|big|blockquote|body|br|center|code|dd|del|div|dl|dt|em|font|h[1-6]|head|hr|html|i|img|ins|kbd|li|"
    "ol|p|pre|q|s|samp|small|span|strike|strong|sub|sup|table|td|th|title|tr|tt|u|ul|var"
)

# What a translation must carry over unchanged, as translators' QA checks (translate-toolkit's pofilter, Pology) look
# for them, one syntax per alternative, tried in this order. Narrower than the tokenizer's pattern on purpose: "50%
# done" holds no placeholder, and "<file>"-style metavariables are words a translator translates.
SYNTAX_PATTERNS = {
    # Python's named conversions: %(name)s %(count)d %(value)r
    "printf-named": r"%\([A-Za-z_][\w.-]*\)[-+#0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]",
    # printf conversions, positional ones too: %s %d %1$s %-5.2f %lu
    "printf": r"%(?:\d+\$)?[-+#0]*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t)?[diouxXeEfFgGcsp]",
    # Qt's numbered arguments: %1 %2 (after printf, so %1$s stays one placeholder)
    "qt": r"%\d+",
    # str.format fields: {} {0} {name} {0:.2f} {name!r}
    "format": r"\{[A-Za-z0-9_.]*(?:![rsa])?(?::[^{}]*)?\}",
    # HTML tags, with attributes, closing and self-closing: <a href="x"> </b> <br/>; a quoted attribute value may
    # hold "<" or ">" (<a href="x>y">), so quotes are skipped whole rather than cut at the first ">".
    "tag": rf"""</?(?i:{_HTML_TAGS})(?:\s(?:[^<>"']|"[^"]*"|'[^']*')*)?\s*/?>""",
    # character entities: &amp; &#39; &#x27;
    "entity": r"&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);",
}
SYNTAXES = tuple(SYNTAX_PATTERNS)
# No capturing group: `QA_PLACEHOLDER.findall(text)` gives the placeholders themselves.
QA_PLACEHOLDER = re.compile("|".join(f"(?:{pattern})" for pattern in SYNTAX_PATTERNS.values()))
_SYNTAX_RES = {name: re.compile(pattern) for name, pattern in SYNTAX_PATTERNS.items()}

# ---------------------------------------------------------------------------------------------------- sentinels

# Mathematical white square brackets: no UI string writes them, neither the QA checks nor the tokenizer's pattern take
# them for markup (an ASCII "<ph_0>" would be a tag to both), and the plots' default font (DejaVu Sans) has them.
SENTINEL_COUNT = 32
SENTINEL = "sentinel"  # the syntax `syntax_of` gives a sentinel string written in a source
SENTINEL_PATTERN = re.compile(r"⟦ph_(0|[1-9][0-9]*)⟧")
# What `protect` replaces: sentinel strings first, then every QA placeholder.
_PROTECTED = re.compile(rf"(?:{SENTINEL_PATTERN.pattern})|{QA_PLACEHOLDER.pattern}")


def sentinel(index: int) -> str:
    """The sentinel of the `index`-th protected placeholder of a source: `⟦ph_<index>⟧`."""
    return f"⟦ph_{index}⟧"


SENTINELS = tuple(sentinel(index) for index in range(SENTINEL_COUNT))


def syntax_of(placeholder: str) -> str:
    """The name of the syntax of `placeholder` (one of `SYNTAXES`, or `SENTINEL` for a sentinel string).

    Raises:
        ValueError: If `placeholder` is not one whole placeholder.
    """
    if SENTINEL_PATTERN.fullmatch(placeholder):
        return SENTINEL
    # QA_PLACEHOLDER tries the syntaxes in this order, so the first that matches the whole string is the one it found.
    for name, pattern in _SYNTAX_RES.items():
        if pattern.fullmatch(placeholder):
            return name
    raise ValueError(
        f"placeholder={placeholder!r} is not a placeholder; allowed are whole matches of one of the syntaxes "
        f"{', '.join(SYNTAXES)} (or a sentinel string such as {SENTINELS[0]!r})."
    )


def tokenizer_protects(tokenizer) -> bool:
    """Whether `tokenizer` holds every sentinel as a token of its own: then its model was trained on protected text,
    and its sources are protected and its outputs restored (a tokenizer without them: no protection at all)."""
    added = getattr(tokenizer, "get_added_vocab", None)
    vocabulary = added() if added is not None else tokenizer.get_vocab()
    return all(token in vocabulary for token in SENTINELS)


# ------------------------------------------------------------------------------------------- protect / restore


def _occurrences(text: str) -> list[tuple[re.Match, bool]]:
    """Every placeholder occurrence of `text`, each with whether it gets a sentinel: in order while sentinels last,
    keeping one for every later occurrence that holds a sentinel string (left as text, restore would replace it)."""
    matches = list(_PROTECTED.finditer(text))
    needed = [SENTINEL_PATTERN.search(match.group()) is not None for match in matches]
    if sum(needed) > SENTINEL_COUNT:
        raise ValueError(
            f"The text holds {sum(needed)} sentinel strings such as {SENTINELS[0]!r}; at most {SENTINEL_COUNT} can "
            f"be protected (there are {SENTINEL_COUNT} sentinels): {text[:80]!r}"
        )
    chosen, reserved, result = 0, sum(needed), []
    for match, must in zip(matches, needed, strict=True):
        reserved -= must
        protected = must or chosen + reserved < SENTINEL_COUNT
        chosen += protected
        result.append((match, protected))
    return result


def _masked(text: str, matches: Sequence[re.Match], replacements: Sequence[str | None]) -> str:
    """`text` with each match that has a replacement (not None) replaced by it."""
    pieces, end = [], 0
    for match, replacement in zip(matches, replacements, strict=True):
        if replacement is not None:
            pieces += [text[end : match.start()], replacement]
            end = match.end()
    return "".join(pieces) + text[end:]


# The idea: the model only has to copy an opaque symbol; the exact text comes back from the source.
def protect(source: str) -> tuple[str, list[str]]:
    """`source` with each placeholder occurrence replaced by the next sentinel, and the placeholders replaced
    (`originals[i]` is what `SENTINELS[i]` stands for).

    >>> protect("Cannot delete %(name)s: <b>%s</b>")
    ('Cannot delete ⟦ph_0⟧: ⟦ph_1⟧⟦ph_2⟧⟦ph_3⟧', ['%(name)s', '<b>', '%s', '</b>'])
    """
    masked, _, originals = protect_pair(source, None)
    return masked, originals


def protect_pair(source: str, target: str | None) -> tuple[str, str | None, list[str]]:
    """The training pair protected: (masked source, masked target, originals); `target=None` masks the source only.

    The source is masked as `protect` masks it. In the target, the k-th occurrence of a placeholder string takes the
    sentinel of the k-th occurrence of the same string in the source, wherever it stands (translations reorder named
    placeholders: "%(a)s … %(b)s" → "%(b)s … %(a)s" gives "⟦ph_1⟧ … ⟦ph_0⟧"); a target placeholder that the
    source does not have (or has fewer times, or left as text) stays as text.

    Raises:
        ValueError: If the target holds a sentinel string that the source does not (`stray_sentinels`): trained on
            it, the model would learn to write sentinels its source never had.
    """
    _check_text("source", source)
    masked, originals, slots = _protected_source(source)
    if target is None:
        return masked, None, originals
    in_target, replacements = _target_sentinels(slots, target)
    stray = _stray(in_target, replacements)
    if stray:
        raise ValueError(
            f"The target holds the sentinel string(s) {', '.join(stray)}, which its source does not: a model trained "
            f"on the pair learns to invent sentinels. Drop the pair (training drops such pairs) or fix the target: "
            f"source={source[:80]!r}, target={target[:80]!r}"
        )
    return masked, _masked(target, in_target, replacements), originals


def _protected_source(source: str) -> tuple[str, list[str], dict[str, list[str | None]]]:
    """(masked source, originals, placeholder string → the sentinel (None: left as text) of each occurrence)."""
    occurrences = _occurrences(source)
    originals, replacements = [], []
    slots = defaultdict(list)
    for match, protected in occurrences:
        replacements.append(sentinel(len(originals)) if protected else None)
        originals += [match.group()] if protected else []
        slots[match.group()].append(replacements[-1])
    return _masked(source, [match for match, _ in occurrences], replacements), originals, slots


def _target_sentinels(slots: dict, target: str) -> tuple[list[re.Match], list[str | None]]:
    """Each placeholder occurrence of `target` and its sentinel: the k-th of a string takes the k-th source slot."""
    _check_text("target", target)
    in_target = list(_PROTECTED.finditer(target))
    seen: Counter = Counter()
    replacements = []
    for match in in_target:
        text = match.group()
        found = slots.get(text, [])
        replacements.append(found[seen[text]] if seen[text] < len(found) else None)
        seen[text] += 1
    return in_target, replacements


def _stray(in_target: list[re.Match], replacements: list[str | None]) -> list[str]:
    """The target occurrences holding a sentinel string that got no sentinel of the source: left as they are, they
    would stay sentinel strings in the masked target."""
    return [
        match.group()
        for match, replacement in zip(in_target, replacements, strict=True)
        if replacement is None and SENTINEL_PATTERN.search(match.group())
    ]


def stray_sentinels(source: str, target: str) -> list[str]:
    """The placeholders of `target` that hold a sentinel string (`⟦ph_3⟧` written as text) its source does not
    account for: such a pair would teach a protected model to write a sentinel its source never had, so training
    drops it (`protect_pair` refuses it)."""
    _check_text("source", source)
    _, _, slots = _protected_source(source)
    return _stray(*_target_sentinels(slots, target))


class Problem(NamedTuple):
    """A sentinel the output did not carry exactly once.

    kind: "lost" (in the source, absent from the output), "invented" (the source has no such sentinel) or
    "duplicated" (written more than once); sentinel: its string (None for a placeholder the source left as text,
    past the sentinels, that the output lost: `restore(..., source=...)`); placeholder: what it stands for (None when
    invented); count: how often the output holds it.
    """

    kind: str
    sentinel: str | None
    placeholder: str | None
    count: int

    def describe(self) -> str:
        """The problem in a few words: "lost %(name)s", "invented ⟦ph_5⟧", "duplicated %s (2 times)"."""
        if self.kind == "invented":
            return f"invented {self.sentinel}"
        as_text = " (left as text)" if self.sentinel is None else ""
        return f"{self.kind} {self.placeholder}{as_text}" + (
            f" ({self.count} times)" if self.kind == "duplicated" else ""
        )


PROBLEM_KINDS = ("lost", "invented", "duplicated")


class Restored(NamedTuple):
    """An output with its sentinels replaced, and what was wrong with them (empty when each came out once)."""

    text: str
    problems: list[Problem]


def restore(output: str, originals: Sequence[str], *, source: str | None = None) -> Restored:
    """`output` with every sentinel replaced by the placeholder it stands for, and its problems (`Problem`), in
    sentinel order.

    A duplicated sentinel is restored at each place; an invented one stays as it is, so the output shows it. With
    the `source`, the placeholders it holds beyond the sentinels (`SENTINEL_COUNT`), left as text for the model to
    copy, are checked too: each one the output holds fewer times than the source is reported as lost (with
    `sentinel=None`), after the sentinels' problems.

    >>> restore("⟦ph_1⟧ nicht löschen", ["%(name)s", "%d"]).text
    '%d nicht löschen'
    >>> restore("⟦ph_1⟧ nicht löschen", ["%(name)s", "%d"]).problems
    [Problem(kind='lost', sentinel='⟦ph_0⟧', placeholder='%(name)s', count=0)]
    """
    _check_text("output", output)
    _check_originals(originals)
    counts = Counter(int(match.group(1)) for match in SENTINEL_PATTERN.finditer(output))
    problems = []
    for index in sorted(set(range(len(originals))) | set(counts)):
        count, original = counts[index], originals[index] if index < len(originals) else None
        kind = "invented" if original is None else "lost" if count == 0 else "duplicated" if count > 1 else None
        if kind is not None:
            problems.append(Problem(kind, sentinel(index), original, count))

    def replace(match: re.Match) -> str:
        index = int(match.group(1))
        return originals[index] if index < len(originals) else match.group()

    if source is not None:
        problems += _text_placeholders_lost(output, source)
    return Restored(SENTINEL_PATTERN.sub(replace, output), problems)


def _text_placeholders_lost(output: str, source: str) -> list[Problem]:
    """The placeholders `source` left as text (no sentinel left for them) that `output` holds fewer times: the
    model had to copy them itself, so they are the ones it may have mangled."""
    _check_text("source", source)
    wanted = Counter(match.group() for match, protected in _occurrences(source) if not protected)
    written = Counter(QA_PLACEHOLDER.findall(output))
    return [Problem("lost", None, text, written[text]) for text, count in wanted.items() if written[text] < count]


def _check_originals(originals) -> None:
    """`originals` is what `protect` returns: a list of placeholder strings, one per sentinel. A bare string would
    be read character by character (sentinel 0 restored as its first character), so it is refused."""
    if isinstance(originals, str) or not isinstance(originals, Sequence):
        raise TypeError(
            f"originals must be a list of placeholder strings, one per sentinel (what protect returns); got "
            f"{type(originals).__name__} ({originals!r:.60}). For a single placeholder pass [{originals!r:.60}]."
        )
    for index, original in enumerate(originals):
        if not isinstance(original, str):
            raise TypeError(
                f"originals[{index}] must be a str (the placeholder that sentinel {index} stands for); got "
                f"{type(original).__name__} ({original!r:.60})."
            )


def _check_text(name: str, value) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str; got {type(value).__name__} ({value!r:.60}).")


# ---------------------------------------------------------------------------------------------- other engines


def protect_batch(texts: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """`protect` of each text: (the masked texts, the originals of each)."""
    protected = [protect(text) for text in texts]
    return [masked for masked, _ in protected], [originals for _, originals in protected]


def restore_batch(
    outputs: Sequence[str], originals: Sequence[Sequence[str]], sources: Sequence[str] | None = None
) -> list[Restored]:
    """`restore` of each output with the originals of its source (and the source itself, when `sources` are given,
    so that the placeholders it left as text are checked too)."""
    if len(outputs) != len(originals):
        raise ValueError(f"{len(outputs)} outputs for {len(originals)} protected sources: give one output per source.")
    if sources is not None and len(sources) != len(outputs):
        raise ValueError(f"{len(sources)} sources for {len(outputs)} outputs: give one source per output, or none.")
    sources = [None] * len(outputs) if sources is None else sources
    return [
        restore(output, mine, source=source) for output, mine, source in zip(outputs, originals, sources, strict=True)
    ]


def translate_protected(texts: Sequence[str], translate_fn: Callable[[list[str]], Sequence[str]]) -> list[Restored]:
    """Translate `texts` with any engine, protected: each text masked (`protect`), `translate_fn` called once on the
    list of masked texts, each of its outputs restored (`restore`), in input order.

    `translate_fn` maps masked source strings to output strings with the model's own tokenizer, which holds the
    sentinels (`tokenizer_protects`), decoding with `skip_special_tokens=True` (the sentinels are not special): for
    CTranslate2, tokenize, `translate_batch`, decode (docs/deploy.md). Check `Restored.problems` before using a text.
    """
    masked, originals = protect_batch(texts)
    outputs = list(translate_fn(masked))
    if len(outputs) != len(masked):
        raise ValueError(
            f"translate_fn returned {len(outputs)} outputs for {len(masked)} texts; it must return one string per "
            "text, in order."
        )
    return restore_batch(outputs, originals, texts)
