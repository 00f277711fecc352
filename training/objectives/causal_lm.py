"""Causal language modelling: a decoder learns to continue the Python documentation (or the user's texts).

Rows are `--causal_lm_layout` blocks (texts concatenated and cut), padded texts, or packed whole texts
(training/data.py); the model shifts the labels itself (position t predicts token t + 1).
"""

from __future__ import annotations

from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq, default_data_collator

from training import data as data_lib
from training.corpus import PYTHON_DOCS, PYTHON_DOCS_DESCRIPTION, text_corpus
from training.objective import TRAIN, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective


def featurize(split, tokenizer, data_args):
    if data_args.causal_lm_layout == "blocks":
        return data_lib.causal_lm_features(split, tokenizer, block_size=data_args.block_size)
    return data_lib.causal_lm_document_features(
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
)
