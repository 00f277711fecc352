"""Masked language modelling: an encoder learns to fill masked tokens of the Python documentation (or the user's
texts); the collator draws the masks (`--mlm_probability`) as batches are made."""

from __future__ import annotations

from datasets import Dataset
from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

from training.data.corpora import PYTHON_DOCS, PYTHON_DOCS_DESCRIPTION, text_corpus
from training.data.dataset_checks import check_columns
from training.objective import TRAIN, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective


def masked_lm_features(dataset: Dataset, tokenizer, *, max_length: int, text_column: str = "text") -> Dataset:
    """Tokenise and truncate texts for masked LM; `DataCollatorForLanguageModeling` pads and masks per batch.

    Masking at batch time (not here) draws new masks every epoch. `special_tokens_mask` lets the collator avoid
    masking <s>, </s> and padding.

    Args:
        dataset: A dataset with a string column `text_column`.
        tokenizer: Any Hugging Face tokenizer.
        max_length: Longest sequence, special tokens included.
        text_column: The column holding the text.

    Returns:
        A `Dataset` with `input_ids`, `attention_mask` and `special_tokens_mask` (variable length).
    """
    check_columns(dataset, [text_column])
    return dataset.map(
        lambda batch: tokenizer(
            batch[text_column], truncation=True, max_length=max_length, return_special_tokens_mask=True
        ),
        batched=True,
        remove_columns=dataset.column_names,
    )


def featurize(split, tokenizer, data_args):
    return masked_lm_features(split, tokenizer, max_length=data_args.max_length)


def make_collator(tokenizer, model, data_args):
    return DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=data_args.mlm_probability)


OBJECTIVE = Objective(
    name="masked_lm",
    entry_points=(TRAIN,),
    model=ModelSpec(
        our_model_type="hf_attention_encoder",
        auto_class=AutoModelForMaskedLM,
        architecture="an encoder",
        example_model_types=("bert", "roberta"),
        encoder_decoder=None,
    ),
    data=DataSpec(
        load_corpus=text_corpus,
        text_columns=("text",),
        tokenizer_kind="masked",
        tokenizer_max_length=lambda data_args: data_args.max_length,
        featurize=featurize,
        make_collator=make_collator,
    ),
    evaluation=EvaluationSpec(predicts_next_token=False, scores_translations=False),  # encoders do not generate
    card=CardSpec(
        default_dataset=PYTHON_DOCS,
        default_corpus_description=PYTHON_DOCS_DESCRIPTION,
        pipeline_task="fill-mask",
        task_name="Fill mask",
        custom_pipeline=False,
        example="The <mask> statement is used to wrap a block.",
        intended_use="Filling masked words in English technical prose and as a small encoder to fine-tune "
        "(e.g. with `AutoModelForSequenceClassification`); research / teaching.",
    ),
    options=("text_column", "max_topics", "max_length", "mlm_probability"),
    corpus_options=("max_topics",),
)
