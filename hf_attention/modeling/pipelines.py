"""A text-to-text pipeline for encoder-decoder models, in-process and shipped with checkpoints.

transformers 5 removed the `translation` / `text2text-generation` pipelines and refuses to re-register those names
in-process. So:

- in-process, `import hf_attention` registers `Seq2SeqGenerationPipeline` as the task "hf-attention-text2text":
  `pipeline("hf-attention-text2text", model=DIR)`;
- `save_translation_pipeline(model, tokenizer, DIR)` writes a checkpoint that carries this file as a custom pipeline,
  so that anywhere, without hf_attention installed, `pipeline("translation", model=DIR, trust_remote_code=True)` works
  (custom tasks bypass the removed-task check).

This file is copied next to the weights with the siblings it imports (placeholders.py, `pipeline_files`): it must
import only the stdlib, torch, transformers and those siblings (HF's dynamic-module loader checks every import
statement of a shipped file, even inside functions, and copies the relative imports beside it).

Output: one dict per generated sequence, `{"translation_text": str}` for the task "translation" and
`{"generated_text": str}` otherwise (the keys of the transformers 4 pipelines); with `return_tensors=True`,
`{"translation_token_ids" | "generated_token_ids": Tensor}` instead. A single input gives a list of dicts; a list of
inputs gives a list of such lists, or a flat list of dicts when each input has one result (as in transformers 4).

Placeholder protection (placeholders.py): when the tokenizer holds the sentinels (a model trained with
`protect_placeholders`), each source is protected before generation and each output restored from it, and every dict
with a text gets `"placeholder_problems"`: the sentinels lost, invented or duplicated, as dicts `{"kind", "sentinel",
"placeholder", "count"}` (an empty list when each came out once). A translation with problems is logged as a warning
naming the source and the problems, or, with `strict_placeholders=True`, raises a ValueError. The token ids of
`return_tensors=True` are the model's own, sentinels included. Decoding is constrained by default
(placeholder_constraint.py): each hypothesis can write only its source's sentinels, each as often as the source holds
it, and cannot end while one is unplaced, so only a too small max_new_tokens loses one; `constrain_placeholders=False`
decodes unconstrained (as CTranslate2 does). A tokenizer without the sentinels: none of this.
"""

import copy
import logging
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForSeq2SeqLM, GenerationConfig, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

from .closure import import_closure
from .placeholder_constraint import sentinel_constraint
from .placeholders import protect, restore, tokenizer_protects

logger = logging.getLogger(__name__)

TASK = "hf-attention-text2text"
SHIPPED_TASK = "translation"
_PREPROCESS_OPTIONS = ("truncation",)
_FORWARD_OPTIONS = ("constrain_placeholders",)
_POSTPROCESS_OPTIONS = ("return_tensors", "return_text", "clean_up_tokenization_spaces", "strict_placeholders")
# What preprocess hands on, beside the model inputs, to restore the outputs: the source and its placeholders.
_PROTECTION_KEYS = ("source", "originals")


class Seq2SeqGenerationPipeline(Pipeline):
    """Source text → generated text with any `AutoModelForSeq2SeqLM` (translation, summarisation, ...).

    Example:
        >>> translate = pipeline("hf-attention-text2text", model="path/to/checkpoint")
        >>> translate("Open file", num_beams=4, max_new_tokens=32)
        [{'generated_text': 'Datei öffnen'}]

    Call options: `truncation` (cut sources to what the model takes instead of raising), `return_tensors`,
    `return_text`, `clean_up_tokenization_spaces`, `strict_placeholders` (with placeholder protection: raise a
    ValueError for a translation whose sentinels went wrong, instead of warning), `constrain_placeholders` (with
    placeholder protection, default True: each output writes its source's sentinels, as often as the source holds
    each, see placeholder_constraint.py; False: unconstrained), and any `generate()` parameter
    (num_beams, max_new_tokens, do_sample, num_return_sequences, ...). Unknown options raise ValueError.
    """

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False
    _pipeline_calls_generate = True
    # Only used where neither the caller nor the model's generation config sets a length.
    _default_generation_config = GenerationConfig(max_new_tokens=128)

    def __call__(self, inputs: str | list[str], **kwargs: Any) -> list:
        """Generate for one source text or a list of them; see the module docstring for the output structure."""
        if isinstance(inputs, (list, tuple)) and not inputs:
            # The base Pipeline would fail with an IndexError while looking at inputs[0].
            raise ValueError(
                f"{type(self).__name__} got an empty list: pass a source text or a non-empty list of source texts."
            )
        result = super().__call__(inputs, **kwargs)
        if isinstance(inputs, list) and all(len(one) == 1 for one in result):
            return [one[0] for one in result]
        return result

    def _sanitize_parameters(self, **kwargs: Any) -> tuple[dict, dict, dict]:
        generation_keys = {key for key in vars(GenerationConfig()) if not key.startswith("_")} | {"generation_config"}
        options = _PREPROCESS_OPTIONS + _FORWARD_OPTIONS + _POSTPROCESS_OPTIONS
        unknown = sorted(set(kwargs) - generation_keys - set(options))
        if unknown:
            raise ValueError(
                f"Unknown option(s) {', '.join(map(repr, unknown))} for the {type(self).__name__} pipeline; it takes "
                f"{', '.join(options)} and generate() parameters "
                "(num_beams, max_new_tokens, do_sample, ...)."
            )
        self._check_protection_options(kwargs)
        preprocess = {key: kwargs.pop(key) for key in _PREPROCESS_OPTIONS if key in kwargs}
        postprocess = {key: kwargs.pop(key) for key in _POSTPROCESS_OPTIONS if key in kwargs}
        return preprocess, kwargs, postprocess

    def _check_protection_options(self, kwargs: dict[str, Any]) -> None:
        """Refuse strict_placeholders=True and constrain_placeholders=True on a model without placeholder protection:
        its sources are not protected, so neither option can act, and passing them silently would promise a check
        that never happens."""
        asked = [key for key in ("strict_placeholders", "constrain_placeholders") if kwargs.get(key) is True]
        if asked and not self.protects_placeholders:
            raise ValueError(
                f"{'=True and '.join(asked)}=True needs placeholder protection, but this model's tokenizer does not "
                "hold the placeholder sentinels (it was trained without protect_placeholders), so its sources are "
                "translated as plain text and there are no sentinels to check or constrain; leave the option out."
            )

    @property
    def protects_placeholders(self) -> bool:
        """Whether sources are protected and outputs restored: the tokenizer holds the placeholder sentinels."""
        if not hasattr(self, "_protects_placeholders"):
            self._protects_placeholders = tokenizer_protects(self.tokenizer)
        return self._protects_placeholders

    def preprocess(self, text: str, truncation: bool = False) -> dict[str, Any]:
        """Tokenize one source text (protected, if the tokenizer holds the sentinels) into (1, S) `input_ids` and
        `attention_mask`; with protection, also the source and its placeholders."""
        if not isinstance(text, str):
            raise ValueError(f"{type(self).__name__} takes a string or a list of strings, got {type(text).__name__}.")
        if not text.strip():
            raise ValueError("The source text is empty: there is nothing to translate or rewrite.")
        protection = {}
        if self.protects_placeholders:
            masked, originals = protect(text)
            protection = {"source": text, "originals": originals}
            text = masked
        limit = self._source_limit()
        # Truncate at the model's limit, which a freshly trained tokenizer may not know (its model_max_length).
        encoded = self.tokenizer(
            text, return_tensors="pt", truncation=truncation, max_length=limit if truncation else None
        )
        length = encoded["input_ids"].shape[1]
        if limit is not None and length > limit:
            raise ValueError(
                f"The source text is {length} tokens long, but the model takes at most {limit} "
                "(max_position_embeddings with learned positions); pass truncation=True or shorten it."
            )
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], **protection}

    def _source_limit(self) -> int | None:
        config = self.model.config
        # An hf-attention config asks its positional scheme (only a learned table limits the length); another model
        # is taken to have a learned table of max_position_embeddings rows, as BART and Marian do.
        if hasattr(config, "position_limit"):
            return config.position_limit
        return getattr(config, "max_position_embeddings", None)

    def _forward(
        self, model_inputs: dict[str, Any], constrain_placeholders: bool = True, **generate_kwargs: Any
    ) -> dict[str, Any]:
        # The source and its placeholders go around generate() to postprocess (a list of them for a batch, which
        # the pipeline's iterator hands out one by one).
        protection = {key: model_inputs[key] for key in _PROTECTION_KEYS if key in model_inputs}
        model_inputs = {key: value for key, value in model_inputs.items() if key not in _PROTECTION_KEYS}
        batch = model_inputs["input_ids"].shape[0]
        prepare = getattr(self, "_prepare_generate_kwargs", None)  # transformers >= 5.x merges init/call options
        if prepare is not None:
            generate_kwargs = prepare(generate_kwargs)
        if protection and constrain_placeholders:
            # Protected sources: each hypothesis places exactly its source's sentinels (placeholder_constraint.py).
            config = self._generation_config(generate_kwargs)
            eos = config.eos_token_id if config.eos_token_id is not None else self.tokenizer.eos_token_id
            generate_kwargs["logits_processor"] = sentinel_constraint(
                self.tokenizer, model_inputs["input_ids"], eos, config.max_new_tokens, generation_config=config
            )
        output = self.model.generate(**model_inputs, **generate_kwargs)
        sequences = output if isinstance(output, torch.Tensor) else output.sequences
        return {"output_ids": sequences.reshape(batch, -1, sequences.shape[-1]), **protection}  # (B, n, L)

    def _generation_config(self, generate_kwargs: dict[str, Any]) -> GenerationConfig:
        """The generation config generate() will run with: the call's (or the model's), with the call's options
        over it, so that the constraint sees every processor they switch on (a forced end of sequence, ...)."""
        config = copy.deepcopy(generate_kwargs.get("generation_config") or self.model.generation_config)
        options = {key: value for key, value in generate_kwargs.items() if key != "generation_config"}
        config.update(**{key: value for key, value in options.items() if hasattr(config, key)})
        return config

    def postprocess(
        self,
        model_outputs: dict[str, Any],
        return_tensors: bool = False,
        return_text: bool = True,
        clean_up_tokenization_spaces: bool = False,
        strict_placeholders: bool = False,
    ) -> list[dict]:
        """(1, n, L) generated ids → n dicts with the text (restored, with its placeholder problems, when the source
        was protected) and/or the token ids."""
        name = "translation" if (self.task or "").startswith("translation") else "generated"
        results = []
        for ids in model_outputs["output_ids"][0]:
            record = {}
            if return_tensors:
                record[f"{name}_token_ids"] = ids
            if return_text or not return_tensors:
                text = self.tokenizer.decode(
                    ids, skip_special_tokens=True, clean_up_tokenization_spaces=clean_up_tokenization_spaces
                )
                if "originals" in model_outputs:
                    text, problems = restore(text, model_outputs["originals"], source=model_outputs["source"])
                    _report(model_outputs["source"], text, problems, strict_placeholders)
                    record["placeholder_problems"] = [problem._asdict() for problem in problems]
                record[f"{name}_text"] = text
            results.append(record)
        return results


def _report(source: str, text: str, problems: list, strict: bool) -> None:
    """A translation whose sentinels went wrong is never passed on silently: a warning, or a ValueError if strict."""
    if not problems:
        return
    message = (
        f"The translation of {source!r} has placeholder problems: {'; '.join(p.describe() for p in problems)} "
        f"(output: {text!r})."
    )
    if strict:
        raise ValueError(
            message + " strict_placeholders=True refuses it; call without it to get the output with a "
            "'placeholder_problems' list."
        )
    logger.warning(message)


def register_pipelines() -> None:
    """Register `Seq2SeqGenerationPipeline` in-process under TASK ("hf-attention-text2text"). Idempotent."""
    if TASK not in PIPELINE_REGISTRY.supported_tasks:
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=Seq2SeqGenerationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
        )


def save_translation_pipeline(model, tokenizer, directory: str | Path, *, task: str = SHIPPED_TASK) -> Path:
    """Save an encoder-decoder model, its tokenizer and this pipeline so that the folder works with
    `pipeline(task, model=directory, trust_remote_code=True)` in any process.

    The training export calls this for seq2seq checkpoints. `config.custom_pipelines` names this file's class; the
    file and the siblings it imports are copied beside the weights (with the model's own remote code, which
    `save_pretrained` copies).

    Args:
        model: An encoder-decoder model (e.g. `HFAttentionForSeq2SeqLM`).
        tokenizer: Its tokenizer.
        directory: Where to save (created if needed).
        task: The task name users will pass; "translation" (default) works although transformers removed that task.

    Returns:
        The directory.

    Raises:
        ValueError: If `model` is not an encoder-decoder model.
    """
    if not getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(
            f"save_translation_pipeline needs an encoder-decoder model, got {type(model).__name__} "
            f"(model_type={model.config.model_type!r}); use the built-in pipelines for other families."
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    source = Path(__file__)
    previous = getattr(model.config, "custom_pipelines", None)
    model.config.custom_pipelines = {
        task: {
            "impl": f"{source.stem}.{Seq2SeqGenerationPipeline.__name__}",
            "pt": ["AutoModelForSeq2SeqLM"],
            "type": "text",
        }
    }
    try:
        model.save_pretrained(directory)
    finally:
        # The in-memory config goes back to what it was: a later plain save_pretrained would not copy this file.
        model.config.custom_pipelines = previous
        if previous is None:
            del model.config.custom_pipelines
    tokenizer.save_pretrained(directory)
    for name in pipeline_files(source.parent):
        shutil.copyfile(source.parent / name, directory / name)
    return directory


def pipeline_files(folder: Path | None = None) -> list[str]:
    """This file and the siblings it imports (placeholders.py, closure.py) in `folder` (default: this file's),
    sorted: what a checkpoint that ships the pipeline carries beside the model's own code."""
    return sorted(import_closure(folder or Path(__file__).resolve().parent, [Path(__file__).name]))
