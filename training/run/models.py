"""The model of an objective: checks of the requested architecture and config before any data is read, a fresh
model sized to the tokenizer, or a pretrained one from a checkpoint folder (training.finetune)."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import logging
import math

from transformers import AutoConfig

from training.objective import Objective

logger = logging.getLogger(__name__)


def check_model_type(objective: Objective, model_type: str | None) -> str:
    """The model type to build for `objective`, or a ValueError if that architecture cannot train it.

    Checked before any data is read, from the config class alone.
    """
    model_type = model_type or objective.model.our_model_type
    try:
        config_class = type(AutoConfig.for_model(model_type))
    except ValueError as error:
        raise ValueError(f"Unknown model_type={model_type!r}: {error}") from error
    auto = objective.model.auto_class
    if config_class not in auto._model_mapping:
        usable = "/".join(sorted({objective.model.our_model_type, *objective.model.example_model_types}))
        raise ValueError(
            f"model_type={model_type!r} cannot be trained for objective {objective.name!r}: {auto.__name__} has no "
            f"class for {config_class.__name__}. Use {objective.model.architecture} config (e.g. model_type {usable})."
        )
    is_encoder_decoder = bool(getattr(config_class(), "is_encoder_decoder", False))
    if objective.model.encoder_decoder is not None and is_encoder_decoder != objective.model.encoder_decoder:
        what = "is an encoder-decoder" if is_encoder_decoder else "is not"
        raise ValueError(
            f"objective {objective.name!r} needs {objective.model.architecture} config; "
            f"model_type={model_type!r} {what}."
        )
    return model_type


def check_model_config(model_type: str, model_config: dict) -> None:
    """Refuse `model_config` keys that the config class of `model_type` does not know (a typo would otherwise be
    stored on the config and ignored, as `PretrainedConfig` keeps unknown keys) and values its checks refuse, before
    any data is read."""
    config_class = type(AutoConfig.for_model(model_type))
    known = set(vars(config_class())) | set(inspect.signature(config_class.__init__).parameters)
    known |= set(getattr(config_class, "attribute_map", {}))
    known |= {f.name for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else set()
    # Our configs declare `label_smoothing` and `unlikelihood_weight`; on a Hugging Face config they are kept as extra
    # fields, and the training loss (training/run/losses.py) honours them for every model, so the same recipe applies
    # to BART.
    known |= {"label_smoothing", "unlikelihood_weight"}
    smoothing = model_config.get("label_smoothing", 0.0)
    if not _is_finite(smoothing) or not 0.0 <= smoothing < 1.0:
        raise ValueError(f"model_config label_smoothing={smoothing!r} must be a number in [0, 1).")
    weight = model_config.get("unlikelihood_weight", 0.0)
    if not _is_finite(weight) or weight < 0.0:  # NaN or infinity would only show as a diverged loss at step 1
        raise ValueError(f"model_config unlikelihood_weight={weight!r} must be a finite number ≥ 0.")
    unknown = sorted(set(model_config) - known)
    if unknown:
        hints = [
            f"{key!r} (did you mean {', '.join(map(repr, close))}?)"
            if (close := difflib.get_close_matches(key, sorted(known), n=2))
            else repr(key)
            for key in unknown
        ]
        raise ValueError(
            f"model_config has keys that {config_class.__name__} does not know: {', '.join(hints)}. "
            f"Model-config fields are the arguments of {config_class.__name__}."
        )
    try:  # the config's own checks (types, ranges, combinations), before the data and tokenizer are made
        AutoConfig.for_model(model_type, **model_config)
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid model_config for model_type={model_type!r}: {error}") from error


def check_loss_options(objective: Objective, model_config: dict) -> None:
    """Refuse a loss option of `model_config` that the objective's loss would leave out (a masked LM never gets the
    unlikelihood term of repeating: its labels are not a sequence the model writes), naming it, before any data is
    read. 0 asks for nothing, and is accepted."""
    for name in _idle_loss_options(objective):
        value = model_config.get(name, 0.0)
        if value:
            raise ValueError(
                f"model_config {name}={value!r} does not act in objective {objective.name!r}: the unlikelihood term "
                "applies to models that write their labels left to right (a causal LM, an encoder-decoder); a masked "
                f"LM fills its labels in place and never gets it. Remove {name} from model_config."
            )


def acting_model_config(objective: Objective, model_config: dict) -> dict:
    """`model_config` without the loss options the objective leaves out (what the model card lists)."""
    idle = _idle_loss_options(objective)
    return {name: value for name, value in model_config.items() if name not in idle}


def _idle_loss_options(objective: Objective) -> set[str]:
    return set() if objective.writes_left_to_right else {"unlikelihood_weight"}


def _is_finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_export_target(
    objective: Objective, model_type: str, model_config: dict, export_to: str | None
) -> str | None:
    """Raise the ValueError of `hf-attention export` now, before data is read, when `--export_to` cannot be done
    for this model (a reference architecture already is standard; a configuration may have no standard equivalent).

    `exportable_as` is the check `to_hf` makes at the end of the run, the place of every tensor included; the model
    here differs from the trained one only in its vocabulary size and special-token ids, which every architecture
    takes as they are. Returns the architecture written (what "auto" stands for), None without --export_to."""
    if export_to is None:
        return None
    if model_type != objective.model.our_model_type:
        raise ValueError(
            f"--export_to writes an hf-attention model as a standard one; model_type={model_type!r} already is one "
            "(its final folder loads without hf-attention)."
        )
    from hf_attention.conversion.to_hf import exportable_as

    model = objective.model.auto_class.from_config(AutoConfig.for_model(model_type, **model_config))
    return exportable_as(model, export_to)


def build_model(objective: Objective, model_type: str, model_config: dict, tokenizer, data_fields: dict | None = None):
    """A freshly initialised model of `model_type` for `objective`, sized to the tokenizer.

    The special-token ids come from the tokenizer (<pad>=0, <s>=1, </s>=2), so BART, GPT-2, BERT and ours agree.
    `data_fields` are the model-config fields the data decides (`ModelSpec.config_from_data`: a classifier's labels).
    """
    fields = {**model_config, **(data_fields or {})}
    fields.update(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if objective.model.encoder_decoder:  # the decoder starts from <s>
        fields.setdefault("decoder_start_token_id", tokenizer.bos_token_id)
        if model_type != objective.model.our_model_type:
            fields.setdefault("forced_eos_token_id", tokenizer.eos_token_id)
    try:
        config = AutoConfig.for_model(model_type, **fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid model_config for model_type={model_type!r}: {error}") from error
    return objective.model.auto_class.from_config(config)


def pretrained_model(objective: Objective, model_name_or_path: str, tokenizer, data_fields: dict | None = None):
    """The model saved in `model_name_or_path`, loaded by the objective's Auto class, its embeddings grown to the
    tokenizer when a tokenizer trained here is larger than the checkpoint's vocabulary."""
    model = objective.model.auto_class.from_pretrained(model_name_or_path, **(data_fields or {}))
    embeddings = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > embeddings:
        logger.warning("Tokenizer has %d tokens, the model %d embeddings: resizing.", len(tokenizer), embeddings)
        model.resize_token_embeddings(len(tokenizer))
    return model
