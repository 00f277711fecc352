"""Causal language modelling: a decoder learns to continue the Python documentation (or the user's texts).

Rows are `--causal_lm_layout` blocks (texts concatenated and cut, `causal_lm_features`), padded texts, or packed whole
texts (`causal_lm_document_features`); the model shifts the labels itself (position t predicts token t + 1).
"""

from __future__ import annotations

from itertools import accumulate, chain

from datasets import Dataset
from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq, default_data_collator

from training.data.corpora import PYTHON_DOCS, PYTHON_DOCS_DESCRIPTION, text_corpus
from training.data.dataset_checks import check_columns, raise_if_empty
from training.objective import TRAIN, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective


def causal_lm_features(dataset: Dataset, tokenizer, *, block_size: int, text_column: str = "text") -> Dataset:
    """Tokenise texts and pack them into blocks of exactly `block_size` tokens for causal LM training.

    Each text ends with the tokenizer's eos token (when it has one), so the model learns where a document stops;
    texts are then concatenated and cut into blocks, and the tail of each `map` batch that does not fill a block
    is dropped (at most `block_size - 1` tokens per 1000 texts). `labels` equal `input_ids`: the model shifts them.

    Args:
        dataset: A dataset with a string column `text_column`.
        tokenizer: Any Hugging Face tokenizer.
        block_size: Tokens per training example.
        text_column: The column holding the text.

    Returns:
        A `Dataset` with columns `input_ids`, `attention_mask` and `labels`, every row `block_size` long.

    Raises:
        ValueError: If the column is missing or the texts are too short to fill one block.
    """
    check_columns(dataset, [text_column])
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def pack(batch):
        ids = tokenizer(batch[text_column], add_special_tokens=True)["input_ids"]
        stream = list(chain.from_iterable(row + eos if row[-1:] != eos else row for row in ids))
        blocks = [stream[i : i + block_size] for i in range(0, len(stream) - block_size + 1, block_size)]
        return {
            "input_ids": blocks,
            "attention_mask": [[1] * block_size for _ in blocks],
            "labels": [list(block) for block in blocks],
        }

    packed = dataset.map(pack, batched=True, remove_columns=dataset.column_names)
    raise_if_empty(
        len(packed),
        f"causal LM dataset (block_size={block_size})",
        {"texts": len(dataset)},
        "texts packed into full blocks",
    )
    return packed


def causal_lm_document_features(
    dataset: Dataset, tokenizer, *, block_size: int, packed: bool, text_column: str = "text"
) -> Dataset:
    """Causal LM rows that keep documents apart: one text per row (`packed=False`, padded per batch), or texts laid
    end to end in rows of exactly `block_size` tokens with positions restarting at each (`packed=True`).

    A document never sees another: its first token is not predicted from what precedes it (label -100) and it
    attends only to itself. Unpadded, each text (+ eos) is cut into pieces of at most `block_size` tokens, a row
    each. Packed, texts (+ eos) are concatenated and cut into full rows, as in the `blocks` layout, but
    `position_ids` restart at 0 at every text start and every row start, which is how the models (and
    transformers' own) tell packed documents apart: no padding token, no attention mask, no attention across texts.
    The tail of each `map` batch that does not fill a row is dropped.

    Returns:
        A `Dataset` with `input_ids` and `labels` (and `position_ids` when packed).
    """
    check_columns(dataset, [text_column])
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def rows(batch):
        ids = tokenizer(batch[text_column], add_special_tokens=True)["input_ids"]
        texts = [row + eos if row[-1:] != eos else row for row in ids if row]
        return _packed_rows(texts, block_size) if packed else _padded_rows(texts, block_size)

    features = dataset.map(rows, batched=True, remove_columns=dataset.column_names)
    raise_if_empty(
        len(features),
        f"causal LM dataset (block_size={block_size})",
        {"texts": len(dataset)},
        "texts of at least two tokens" if not packed else "texts packed into full rows",
    )
    return features


def _padded_rows(texts: list[list[int]], block_size: int) -> dict:
    """Each text cut into pieces of at most `block_size` tokens, a row each; a piece's first token is no target."""
    pieces = [text[i : i + block_size] for text in texts for i in range(0, len(text), block_size)]
    pieces = [piece for piece in pieces if len(piece) > 1]  # a one-token piece has nothing to predict
    return {"input_ids": pieces, "labels": [[-100, *piece[1:]] for piece in pieces]}


def _packed_rows(texts: list[list[int]], block_size: int) -> dict:
    """`texts` end to end in full rows of `block_size`, positions restarting (and no target) where a text or a row
    starts."""
    stream = list(chain.from_iterable(texts))
    text_starts = set(accumulate((len(text) for text in texts[:-1]), initial=0))
    out = {"input_ids": [], "labels": [], "position_ids": []}
    for row_start in range(0, len(stream) - block_size + 1, block_size):
        positions, labels, position = [], [], 0
        for i in range(row_start, row_start + block_size):
            if i == row_start or i in text_starts:  # a document starts: positions restart, no target
                position = 0
            positions.append(position)
            labels.append(stream[i] if position else -100)
            position += 1
        out["input_ids"].append(stream[row_start : row_start + block_size])
        out["position_ids"].append(positions)
        out["labels"].append(labels)
    return out


def featurize(split, tokenizer, data_args):
    if data_args.causal_lm_layout == "blocks":
        return causal_lm_features(split, tokenizer, block_size=data_args.block_size)
    return causal_lm_document_features(
        split, tokenizer, block_size=data_args.block_size, packed=data_args.causal_lm_layout == "packed"
    )


def make_collator(tokenizer, model, data_args):
    if data_args.causal_lm_layout == "padded":
        return DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100, padding=True)
    return default_data_collator  # blocks and packed rows: every row has block_size tokens


def set_generation_defaults(config, model, tokenizer, generation) -> None:
    config.bos_token_id = tokenizer.bos_token_id
    config.max_new_tokens = 50


OBJECTIVE = Objective(
    name="causal_lm",
    entry_points=(TRAIN,),
    model=ModelSpec(
        our_model_type="hf_attention_decoder",
        auto_class=AutoModelForCausalLM,
        architecture="a decoder-only",
        example_model_types=("gpt2", "llama"),
        encoder_decoder=False,
    ),
    data=DataSpec(
        load_corpus=text_corpus,
        text_columns=("text",),
        tokenizer_kind="causal",
        tokenizer_max_length=lambda data_args: data_args.block_size,
        featurize=featurize,
        make_collator=make_collator,
    ),
    evaluation=EvaluationSpec(
        predicts_next_token=True,
        scores_translations=False,
        set_generation_defaults=set_generation_defaults,
    ),
    card=CardSpec(
        default_dataset=PYTHON_DOCS,
        default_corpus_description=PYTHON_DOCS_DESCRIPTION,
        pipeline_task="text-generation",
        task_name="Text generation",
        custom_pipeline=False,
        example="The with statement",
        intended_use="Continuing English technical prose in the style of the Python documentation; a small "
        "research / teaching model, not a general-purpose assistant.",
    ),
    options=("text_column", "max_topics", "block_size", "causal_lm_layout"),
    corpus_options=("max_topics",),
)
