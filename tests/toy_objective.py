"""An example objective, written as a new one is: one module that fills an `Objective` and registers it.

`alphabet`: a decoder learns that each letter is followed by the next one ("c d e f ..."), from a corpus made in
memory. Everything else (splits, tokenizer, loop, evaluation, export, model card) is the shared code of training/.
tests/test_objective_example.py trains it through training.train.
"""

import random

from datasets import Dataset
from transformers import AutoModelForCausalLM, default_data_collator

from training.objective import TRAIN, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective
from training.objectives import register
from training.objectives.causal_lm import causal_lm_features

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def alphabet_corpus(data_args) -> Dataset:
    """Runs of 8 to 16 consecutive letters, each starting at a random letter (a fixed seed: the same corpus)."""
    rng = random.Random(0)
    texts = []
    for _ in range(400):
        start, length = rng.randrange(10), rng.randrange(8, 17)
        texts.append(" ".join(LETTERS[start : start + length]))
    return Dataset.from_dict({"text": texts})


def featurize(split, tokenizer, data_args):
    return causal_lm_features(split, tokenizer, block_size=data_args.block_size)


def set_generation_defaults(config, model, tokenizer, generation) -> None:
    config.bos_token_id = tokenizer.bos_token_id
    config.max_new_tokens = 8


OBJECTIVE = register(
    Objective(
        name="alphabet",
        entry_points=(TRAIN,),
        model=ModelSpec(
            our_model_type="hf_attention_decoder",
            auto_class=AutoModelForCausalLM,
            architecture="a decoder-only",
            example_model_types=("gpt2",),
            encoder_decoder=False,
        ),
        data=DataSpec(
            load_corpus=alphabet_corpus,
            text_columns=("text",),
            tokenizer_kind="causal",
            tokenizer_max_length=lambda data_args: data_args.block_size,
            featurize=featurize,
            make_collator=lambda tokenizer, model, data_args: default_data_collator,
        ),
        evaluation=EvaluationSpec(
            predicts_next_token=True, scores_translations=False, set_generation_defaults=set_generation_defaults
        ),
        card=CardSpec(
            default_dataset="alphabet",
            default_corpus_description="Runs of consecutive letters, made in memory",
            pipeline_task="text-generation",
            task_name="Text generation",
            custom_pipeline=False,
            example="c d e",
            intended_use="Testing that a new objective trains through the shared code.",
        ),
        options=("block_size",),  # of the arguments only some objectives read, the one this one does
    )
)
