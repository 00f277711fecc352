"""Markup augmentation: extra training pairs made from existing ones by putting the same HTML tags and format
placeholders into both sides, so the model learns to carry markup through a translation.

User-interface catalogs differ most in their markup: the system catalogs the main job learns from hold `%s` and `%d`
almost only, while a Qt application's strings are full of `<b>…</b>`, `<br>` and `{}` (the out-of-domain split of
the main job: 108 of its 154 placeholders are HTML tags, against 16 of 45,000 training rows holding a `<br>`). A
model that has not seen a tag does not copy it. The remedy is that of Hanneman & Dinu (2020, "How should markup tags
be translated?"): inject markup into training pairs where both sides agree on where it goes. Four ways, one per
augmented pair, chosen at random:

- wrap: the whole pair in one element, `<b>S</b>` → `<b>T</b>`;
- join: two pairs joined by a line break, `S1<br>S2` → `T1<br>T2`;
- mark: a word found once in each side (a name, a number, a file name) wrapped in one element in both sides;
- slot: a format placeholder added at the same end of both sides (`S: %s` → `T: %s`), or put in place of such a word.

Half of the augmented pairs get a second way on top of the first (`<b>S1</b><br><br>S2`, `<b>S1<br>S2</b>`): a
closing tag then sits in the middle of the text, after what it wraps, as it does in real strings, and not only at the
end. Some elements carry an attribute holding a placeholder (`<a href="%s">`), as links in catalogs do.

An augmented pair is new data only if nothing held out could be derived from the same rows, so pairs whose source is
a source of another split are dropped. The choices are drawn from a fixed seed: a run and its resume see the same
pairs.
"""

from __future__ import annotations

import random
import re

from datasets import Dataset, concatenate_datasets

# Elements UI strings wrap text in (inline and heading), and line breaks as written in catalogs.
TAG_NAMES = ("b", "i", "u", "em", "strong", "tt", "code", "small", "big", "span", "kbd", "h3", "h4", "p")
LINE_BREAKS = ("<br>", "<br/>", "<br />", "<br><br>", "<br/><br/>")
# printf conversions, Qt arguments and str.format fields; NAME is replaced by an identifier made from the pair.
FORMAT_PLACEHOLDERS = ("%s", "%d", "%(NAME)s", "%(NAME)d", "{}", "{0}", "{1}", "{NAME}", "%1", "%2")
WAYS = ("wrap", "join", "mark", "slot")
# Elements with an attribute, as catalogs write links and styled text: (opening tag, closing tag).
ATTRIBUTE_ELEMENTS = (
    ('<a href="%s">', "</a>"),
    ('<a href="{}">', "</a>"),
    ('<a href="%(url)s">', "</a>"),
    ('<span style="font-weight:bold">', "</span>"),
    ('<font color="red">', "</font>"),
)
COMPOSED = 0.5  # the share of augmented pairs made in two ways, one on top of the other

_WORD = re.compile(r"\w[\w.-]*\w|\w")
_NAME_LIKE = re.compile(r"[A-Z0-9._-]")
# Markup and placeholders already in a text (tags, {fields}, printf conversions, entities): no word inside one is
# marked or replaced.
_MARKUP = re.compile(r"<[^<>]*>|\{[^{}]*\}|%\([^)]*\)\w*|%[-+#0-9.$]*[A-Za-z]?|&#?\w+;")


def augment_with_markup(
    train: Dataset,
    *,
    fraction: float,
    max_chars: int,
    held_out_sources: set[str] = frozenset(),
    seed: int = 0,
) -> Dataset:
    """`train` followed by about `fraction` × len(train) augmented pairs (see the module docstring).

    Args:
        train: The training split, with `source` and `target` columns.
        fraction: Augmented pairs per training pair; 0 returns `train` unchanged.
        max_chars: The longest source or target kept (as the corpus filter), so that no pair is cut by truncation.
        held_out_sources: Sources of the other splits; an augmented pair with one of them as its source is dropped.
        seed: Seed of the choices.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"markup_augmentation={fraction} is not a fraction; allowed values are 0 to 1 (0: none).")
    wanted = round(fraction * len(train))
    if wanted == 0 or len(train) == 0:
        return train
    rng = random.Random(seed)
    sources, targets = list(train["source"]), list(train["target"])
    new_sources, new_targets = [], []
    # A bounded number of attempts: pairs too long to join or with no shared word are skipped, not retried forever.
    for _ in range(4 * wanted):
        if len(new_sources) == wanted:
            break
        index = rng.randrange(len(train))
        pair = sources[index], targets[index]
        for _ in range(2 if rng.random() < COMPOSED else 1):
            pair = augment_pair(*pair, rng.choice(WAYS), rng, partner=_partner(sources, targets, rng))
            if pair is None:
                break
        if pair is None:
            continue
        source, target = pair
        if len(source) > max_chars or len(target) > max_chars or source in held_out_sources:
            continue
        new_sources.append(source)
        new_targets.append(target)
    extra = Dataset.from_dict({"source": new_sources, "target": new_targets})
    columns = [name for name in train.column_names if name not in ("source", "target")]
    return concatenate_datasets([train.remove_columns(columns), extra])


def _partner(sources, targets, rng: random.Random) -> tuple[str, str]:
    index = rng.randrange(len(sources))
    return sources[index], targets[index]


def augment_pair(
    source: str, target: str, way: str, rng: random.Random, *, partner: tuple[str, str] | None = None
) -> tuple[str, str] | None:
    """One augmented (source, target), made in one of the `WAYS` (the partner is the pair a join adds); None when
    that way does not apply to the pair."""
    if way not in WAYS:
        raise ValueError(f"way={way!r} is not a way of augmenting; allowed values are {', '.join(WAYS)}.")
    if way == "wrap":
        open_tag, close_tag = _element(rng)
        return f"{open_tag}{source}{close_tag}", f"{open_tag}{target}{close_tag}"
    if way == "join":
        if partner is None:
            return None
        line_break = rng.choice(LINE_BREAKS)
        return f"{source}{line_break}{partner[0]}", f"{target}{line_break}{partner[1]}"
    shared = shared_words(source, target)
    if way == "mark":
        if not shared:
            return None
        word = rng.choice(shared)
        open_tag, close_tag = _element(rng)
        return _replace_word(source, word, f"{open_tag}{word}{close_tag}"), _replace_word(
            target, word, f"{open_tag}{word}{close_tag}"
        )
    placeholder = rng.choice(FORMAT_PLACEHOLDERS).replace("NAME", _identifier(source, rng))
    if shared and rng.random() < 0.5:
        word = rng.choice(shared)
        return _replace_word(source, word, placeholder), _replace_word(target, word, placeholder)
    if rng.random() < 0.5:
        return f"{source.rstrip('.:')}: {placeholder}", f"{target.rstrip('.:')}: {placeholder}"
    return f"{placeholder} {source}", f"{placeholder} {target}"


def shared_words(source: str, target: str) -> list[str]:
    """Name-like words (with a capital, a digit or a '.-_') written the same way in both sides, once in each and
    outside any markup: where both sides agree markup can go. Lower-case words ("in", "so") are the same in both
    languages by chance, not by being copied."""
    in_source, in_target = _words(source), _words(target)
    return sorted(
        word
        for word in in_source
        if in_source[word] == 1 and in_target.get(word) == 1 and _NAME_LIKE.search(word) and len(word) > 1
    )


def _words(text: str) -> dict[str, int]:
    """Each word outside markup with its count."""
    counts: dict[str, int] = {}
    for match in _WORD.finditer(_without_markup(text)):
        counts[match.group()] = counts.get(match.group(), 0) + 1
    return counts


def _without_markup(text: str) -> str:
    """`text` with its markup blanked out, positions kept."""
    return _MARKUP.sub(lambda match: " " * len(match.group()), text)


def _replace_word(text: str, word: str, replacement: str) -> str:
    """`text` with the one occurrence of `word` outside markup replaced."""
    for match in _WORD.finditer(_without_markup(text)):
        if match.group() == word:
            return text[: match.start()] + replacement + text[match.end() :]
    raise ValueError(f"{word!r} is not a word of {text!r}")


def _element(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.15:
        return rng.choice(ATTRIBUTE_ELEMENTS)
    name = rng.choice(TAG_NAMES)
    return f"<{name}>", f"</{name}>"


def _identifier(source: str, rng: random.Random) -> str:
    """A format field's name made of the source's words ("file_name"), as catalogs name them."""
    words = [word.lower() for word in re.findall(r"[A-Za-z]{3,}", source)] or ["value"]
    return "_".join(rng.sample(words, k=min(len(words), rng.choice((1, 2)))))
