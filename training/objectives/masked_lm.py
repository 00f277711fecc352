"""Masked language modelling: an encoder learns to fill masked tokens of the Python documentation (or the user's
texts); the collator draws the masks (`--mlm_probability`) as batches are made."""

from __future__ import annotations

from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

from training import data as data_lib
from training.corpus import PYTHON_DOCS, PYTHON_DOCS_DESCRIPTION, text_corpus
from training.objective import TRAIN, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective


def featurize(split, tokenizer, data_args):
    return data_lib.masked_lm_features(split, tokenizer, max_length=data_args.max_length)


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
)
