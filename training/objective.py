"""What an objective is: four small records (model, data, evaluation, card) under one name.

Each objective is one module of training/objectives/ that fills an `Objective`: its corpus, its featurizer, its
default fine-tuning model and its scoring live there. The code that reads the records (training/data/splits.py,
tokenizer.py, models.py, losses.py, evaluate.py, loop.py, finish.py, export.py, and the entry points training.train,
training.finetune and training.score) is written once for all objectives and names none of them. This module imports
nothing from training/, so every other module can read the type without an import cycle.

The functions an objective holds take the run's `DataArguments` (training/args.py) as `data_args`; they read only
the fields that concern them, and `Objective.options` names those of them that other objectives do not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# The commands that can train an objective: training.train (the Accelerate loop, token-level losses) and
# training.finetune (🤗 Trainer / Seq2SeqTrainer).
TRAIN = "train"
FINETUNE = "finetune"


@dataclass(frozen=True)
class ModelSpec:
    """The model: our family by default, or any Hugging Face type its Auto class can build."""

    our_model_type: str
    auto_class: type
    architecture: str  # "a decoder-only", ...: what error messages ask for
    example_model_types: tuple[str, ...]  # Hugging Face types that work, named by error messages
    encoder_decoder: bool | None  # whether the architecture must (not) be an encoder-decoder; None: either
    # Model-config fields the data decides (a classifier's labels), from the splits; None: none.
    config_from_data: Callable | None = None
    # PEFT's TaskType name for a LoRA adapter (training.finetune --lora), and the modules LoRA trains in full.
    peft_task_type: str | None = None
    modules_to_save: tuple[str, ...] = ()
    # (data_args) → the config of the small model of `our_model_type` that training.finetune builds when it starts
    # from scratch (`model_config` entries override it); required of an objective that training.finetune trains.
    finetune_config: Callable | None = None


@dataclass(frozen=True)
class DataSpec:
    """The corpus, its tokenizer, and how texts become batches."""

    load_corpus: Callable  # (data_args) → Dataset: the embedded corpus or the user's, with `text_columns`
    text_columns: tuple[str, ...]  # source first: the split hashes it, the tokenizer learns from all
    tokenizer_kind: str  # training/data/tokenizer.py
    tokenizer_max_length: Callable  # (data_args) → int: where the tokenizer truncates
    featurize: Callable  # (split, tokenizer, data_args) → Dataset of token ids
    make_collator: Callable  # (tokenizer, model, data_args) → collator that pads (and masks)
    # (train split, sources of the other splits, data_args) → the training split with augmented rows added; None:
    # the objective has no augmentation.
    augment_train: Callable | None = None
    # (train split, data_args) → the texts the tokenizer learns from; None: every text column as it is.
    tokenizer_texts: Callable | None = None
    # (data_args) → whether the tokenizer holds the placeholder sentinels (hf_attention/modeling/placeholders.py);
    # None: never.
    placeholder_sentinels: Callable | None = None
    # (corpus, data_args) → {name: Dataset}: test splits beside the hash split's three, from data the corpus does not
    # hold (translation: the out-of-domain catalogs); None: none.
    extra_splits: Callable | None = None
    # (data_args) → None, or a ValueError for arguments the objective cannot train with, raised before any data is
    # read; None: the argument checks of training/args.py are enough.
    check_arguments: Callable | None = None


@dataclass(frozen=True)
class EvaluationSpec:
    """How the model is scored and what it generates by default."""

    predicts_next_token: bool  # position t is scored against token t + 1 (the labels are not shifted yet)
    scores_translations: bool  # BLEU / chrF of generated translations, at evaluations and on the test split
    # (generation_config, model, tokenizer, GenerationSettings) → None: the export's generate() defaults; None: the
    # model does not generate.
    set_generation_defaults: Callable | None = None
    # (tokenizer) → the `compute_metrics` of a 🤗 Trainer (training.finetune); None: loss only.
    trainer_metrics: Callable | None = None
    # (accelerator, model, tokenizer, split, GenerationSettings, limit=) → (scores, (input, reference, output)
    # samples): how the model's generated outputs on a split are scored, by training.train where
    # `scores_translations` asks for it and by training.score; None: the objective is scored by its loss only, and
    # training.score refuses it.
    score_outputs: Callable | None = None
    # (data_args, data_fields) → what training.finetune's results.json names beside the scores (the labels, the
    # target language); None: nothing.
    results_fields: Callable | None = None


@dataclass(frozen=True)
class CardSpec:
    """What the exported folder and its model card say about the objective."""

    default_dataset: str  # the embedded corpus, as the model card names it
    default_corpus_description: str  # how the card describes it (formatted with the DataArguments fields)
    pipeline_task: str
    task_name: str  # the Hub's name of `pipeline_task`
    # Our own pipeline class (transformers 5 has no translation pipeline): the export carries its code, and the
    # card's usage snippet loads it with trust_remote_code=True.
    custom_pipeline: bool
    example: str  # the input of the usage snippet
    intended_use: str
    limitations: str = ""  # added after the limitations every card states


@dataclass(frozen=True)
class Objective:
    """One training objective: its name, the commands that train it, and the four records."""

    name: str
    entry_points: tuple[str, ...]  # TRAIN and / or FINETUNE
    model: ModelSpec
    data: DataSpec
    evaluation: EvaluationSpec
    card: CardSpec
    # The run arguments that act only for some objectives (training/argument_checks.py, OBJECTIVE_OPTIONS) that this
    # one reads: training.train refuses the others when they are set away from their defaults, since the run would
    # ignore them.
    options: tuple[str, ...] = ()
    # Those of `options` that only choose or cut the objective's own corpus (which catalogs, how many topics): a
    # user's `dataset` replaces that corpus, so training.train refuses them beside it.
    corpus_options: tuple[str, ...] = ()

    def __post_init__(self):
        # What the shared code calls must be there: a new model for training.finetune, a scoring for training.train.
        if FINETUNE in self.entry_points and self.model.finetune_config is None:
            raise ValueError(
                f"Objective {self.name!r} is trained by training.finetune but declares no ModelSpec.finetune_config "
                "(the small model it builds from scratch)."
            )
        if self.evaluation.scores_translations and self.evaluation.score_outputs is None:
            raise ValueError(
                f"Objective {self.name!r} sets EvaluationSpec.scores_translations but declares no score_outputs (how "
                "its generated outputs are scored)."
            )

    @property
    def writes_left_to_right(self) -> bool:
        """Whether the model writes its labels left to right, as it generates (a causal LM, an encoder-decoder): the
        objectives the unlikelihood term of repeating applies to. A masked LM fills its labels in place."""
        return self.evaluation.set_generation_defaults is not None

    def languages(self, data_args) -> list[str]:
        """The languages of the text columns (model card): the source language, and the target language of pairs."""
        return [data_args.source_lang, data_args.target_lang][: len(self.data.text_columns)]
