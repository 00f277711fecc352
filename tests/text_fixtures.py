"""Helpers behind the text fixtures of conftest.py: real text, trained tokenizers and saved tiny checkpoints.

The text is Python's documentation topics (`pydoc_data.topics`), present wherever CPython is: no download.
"""

from pathlib import Path
from pydoc_data.topics import topics

from conftest import tiny_config

from training.data.tokenizer import train_tokenizer

# Which tokenizer layout each family's objective uses (training/data/tokenizer.py).
KIND_OF_FAMILY = {"encoder": "masked", "decoder": "causal", "seq2seq": "seq2seq"}
VOCAB_SIZE = 400
LABELS = {0: "O", 1: "B-NAME", 2: "I-NAME"}


def pydoc_paragraphs(limit: int = 400, min_chars: int = 40) -> list[str]:
    """The first `limit` paragraphs (blank-line separated, ≥ `min_chars`) of the Python documentation topics."""
    paragraphs = []
    for name in sorted(topics):
        for paragraph in topics[name].split("\n\n"):
            paragraph = " ".join(paragraph.split())
            if len(paragraph) >= min_chars:
                paragraphs.append(paragraph)
                if len(paragraphs) == limit:
                    return paragraphs
    return paragraphs


def make_tokenizer(family: str, texts: list[str]):
    """A byte-level BPE tokenizer for `family`, trained on `texts`."""
    return train_tokenizer(texts, VOCAB_SIZE, kind=KIND_OF_FAMILY[family])


def save_tiny_checkpoint(model_class, family: str, tokenizer, directory: Path, **overrides) -> Path:
    """Build a tiny random `model_class` sized to `tokenizer`, save it and the tokenizer to `directory`."""
    fields = {"vocab_size": len(tokenizer), "id2label": LABELS, **overrides}
    model = model_class(tiny_config(family, **fields)).eval()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
