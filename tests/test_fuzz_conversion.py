"""Property-based tests (hypothesis) of the converters: for every class of every architecture in the registry, a tiny
Hugging Face model whose config is drawn around the architecture's tiny reference (tests/conversion_strategies.py:
sizes, head widths, RoPE scalings, windows, special ids, activations, biases, caps, ...), with random weights moved
away from their initialisation, in float32 and eval mode.

The properties, for each drawn model that transformers itself builds and runs:

(a) `from_hf(model)` either refuses with a ValueError that starts with "from_hf" and names a field the user set on
    the config (as the config class names it), or returns a model whose logits on a padded batch equal the
    reference's at the real positions;
(b) `to_hf(ours, to="auto")` of an accepted model, on the backend it was converted with and on the other one (a
    checkpoint loads on sdpa whatever its source ran on), either refuses with a ValueError of its own, or returns a
    standard model whose logits equal ours; never another exception;
(c) `hf-attention export --to auto` of a saved checkpoint of an accepted model (`export_checkpoint`) either refuses
    with a ValueError of its own (leaving no folder, and only where `to_hf` refuses the model too), or writes a
    folder that transformers' Auto class loads as a transformers class (no remote code), whose logits equal ours and
    whose config gives back the user's sizes, special ids inside the vocabulary and, where a layer slides, window and
    layer types. The other fields drawn that do not come back (an activation's synonym, a window no layer reads) are
    reported as hypothesis events (`--hypothesis-show-statistics`), not asserted.

(a) draws every value, those the converters refuse included; (b) and (c) leave out the values known to be refused
(`drawn_references(refusals=False)`), so that their examples are converted models. A draw that transformers refuses
(while building the config or the model, or running it) is rejected: the oracle is only ever the reference's own
behaviour. The tests are parametrized by (architecture, reference class), so that no class is left out of a run.
Every example is deterministic (`derandomize`), as in tests/test_fuzz.py; `HF_ATTENTION_FUZZ_PROFILE=long` draws
random examples instead (`HF_ATTENTION_FUZZ_EXAMPLES` of them per test and class, 200 by default).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import tempfile
import warnings
from pathlib import Path

import pytest
import torch
import transformers
from conversion_strategies import DrawnReference, drawn_references, reference_cases, reference_fields
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st
from modern_references import generate_positions, real_positions

from hf_attention import (
    HFAttentionDecoderForSequenceClassification,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
    from_hf,
)
from hf_attention.architectures import REGISTRY
from hf_attention.conversion.to_hf import export_checkpoint, to_hf

ARCHITECTURES = list(REGISTRY)
# Every (architecture, reference class) that from_hf converts: each gets its own examples, so that none is left out.
CLASSES = [(name, cls) for name, architecture in REGISTRY.items() for cls in architecture.classes.values()]
CLASS_IDS = [f"{name}-{cls.__name__}" for name, cls in CLASSES]
ENCODERS = ("bert", "modernbert")  # padded on the right; decoders on the left, with generate()'s position ids
TOLERANCE = {"rtol": 1e-5, "atol": 1e-4}
LENGTH = 24  # crosses every drawn window (4, 8) and original RoPE length (8, 16), not all of 30 or 32
SOURCE_LENGTH, TARGET_LENGTH = 12, 6  # an encoder-decoder's source and decoder inputs

_LONG = os.environ.get("HF_ATTENTION_FUZZ_PROFILE", "suite") == "long"
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def _settings(examples: int) -> settings:
    """`examples` deterministic examples per class in the suite; random ones in the long profile."""
    return settings(
        max_examples=int(os.environ.get("HF_ATTENTION_FUZZ_EXAMPLES", "200")) if _LONG else examples,
        derandomize=not _LONG,
        deadline=None,
        suppress_health_check=_HEALTH,
    )


# The Auto class that loads an export of each of our classes (as the export's model card names it).
AUTO = {
    HFAttentionForCausalLM: transformers.AutoModelForCausalLM,
    HFAttentionDecoderForSequenceClassification: transformers.AutoModelForSequenceClassification,
    HFAttentionEncoderModel: transformers.AutoModel,
    HFAttentionForMaskedLM: transformers.AutoModelForMaskedLM,
    HFAttentionForSeq2SeqLM: transformers.AutoModelForSeq2SeqLM,
    HFAttentionForSequenceClassification: transformers.AutoModelForSequenceClassification,
    HFAttentionForTokenClassification: transformers.AutoModelForTokenClassification,
}


# ---------------------------------------------------------------------------------------------------------------------
# The reference, its inputs and outputs


def _inputs(drawn: DrawnReference, config) -> dict[str, torch.Tensor]:
    """Three rows holding all, 3/4 and 1/2 of their columns as real tokens (never a special id): decoders padded on
    the left with generate()'s position ids, encoders and sources on the right. A decoder classifier without a pad id
    gets one unpadded row (transformers' classifier needs the pad id to find the last token of a padded row)."""
    generator = torch.Generator().manual_seed(drawn.seed)
    special = drawn.special_ids()
    tokens = torch.tensor([token for token in range(3, drawn.vocab_size) if token not in special])
    seq2seq = config.is_encoder_decoder
    length = SOURCE_LENGTH if seq2seq else LENGTH
    rows = 3
    if drawn.model_class.__name__.endswith("ForSequenceClassification") and config.pad_token_id is None:
        rows = 1
    ids = tokens[torch.randint(len(tokens), (rows, length), generator=generator)]
    real = torch.tensor([length, length * 3 // 4, length // 2][:rows])
    columns = torch.arange(length)[None]
    left = drawn.architecture not in ENCODERS and not seq2seq
    first = length - real[:, None] if left else 0
    mask = ((columns >= first) & (columns < first + real[:, None])).long()
    pad = (
        config.pad_token_id
        if isinstance(config.pad_token_id, int) and 0 <= config.pad_token_id < drawn.vocab_size
        else 0
    )
    inputs = {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}
    if left:
        inputs["position_ids"] = generate_positions(mask)
    if seq2seq:  # from the decoder's vocabulary (Marian's may be smaller)
        targets = tokens[tokens < (getattr(config, "decoder_vocab_size", None) or drawn.vocab_size)]
        inputs["decoder_input_ids"] = targets[torch.randint(len(targets), (rows, TARGET_LENGTH), generator=generator)]
    return inputs


def _logits(model, inputs: dict) -> torch.Tensor:
    """The logits (a base model's last hidden state) at the real positions: a padding position's output is not
    defined (transformers' own backends disagree there); an encoder-decoder's decoder inputs are all real."""
    with torch.no_grad():
        output = model(**inputs)
    values = output.logits if "logits" in output else output.last_hidden_state
    if model.config.is_encoder_decoder:
        return values
    return real_positions(values, inputs["attention_mask"])


def _perturb(model, seed: int):
    """Noise on every trained parameter, as modern_references.perturb: 0.02·N(0, 1) on matrices, 0.1·N(0, 1) on
    vectors (norm weights, biases), so that a misplaced one changes the logits. Fixed tables (Marian's sinusoids, a
    parameter that is never trained) keep the values the class computes, as in every checkpoint."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.parameters():  # a tied matrix is listed (and moved) once
            if tensor.requires_grad:
                tensor.add_((0.1 if tensor.dim() == 1 else 0.02) * torch.randn(tensor.shape, generator=generator))
    return model


def _reference(drawn: DrawnReference):
    """The drawn reference model, its inputs and logits; rejects the draw when transformers refuses it (its config
    validation, the model's constructor or its forward pass raise) or computes non-finite logits."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = drawn.config()
            with torch.random.fork_rng():
                torch.manual_seed(drawn.seed)
                model = drawn.model_class._from_config(config, attn_implementation=drawn.attn_implementation)
            model = _perturb(model.float().eval(), drawn.seed)
            inputs = _inputs(drawn, model.config)
            logits = _logits(model, inputs)
    except Exception as error:  # whatever transformers raises: the draw is not a model it runs
        event(f"transformers refuses the config: {type(error).__name__}")
        reject()
    if not torch.isfinite(logits).all():
        event("transformers computes non-finite logits")
        reject()
    return model, inputs, logits


def _names_a_drawn_field(error: ValueError, drawn: DrawnReference, caller: str) -> None:
    """The refusal's message starts with the function that refused and names a field the user set on the config."""
    message = str(error)
    assert message.startswith(caller), f"{caller} refused without saying so first: {message}"
    names = drawn.source_names()
    named = [name for name in names if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message)]
    assert named, f"{caller} refused {drawn!r} naming none of the fields drawn ({sorted(names)}): {message}"
    event(f"{caller} refuses, naming {sorted(named)[0]}")


def _converted(reference):
    """Ours, converted from the reference; a refusal is property (a)'s business, here the draw is rejected."""
    try:
        return from_hf(reference)
    except ValueError:
        event("from_hf refuses (property a)")
        reject()


@contextlib.contextmanager
def _quiet():
    """transformers' and the converters' warnings on drawn configs (ids outside the vocabulary, windows no layer
    reads) are expected: silenced while an example runs, so that a failing example's output shows the failure, and
    restored after it (other tests read those warnings)."""
    loggers = [logging.getLogger(name) for name in ("transformers", "hf_attention")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


# ---------------------------------------------------------------------------------------------------------------------
# What the draws start from


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_converted_class_is_drawn_from_a_reference_whose_config_the_draws_rebuild(architecture):
    """Each class `from_hf` takes has a tiny reference to perturb (a class without one would go unfuzzed), and the
    keyword arguments every draw starts from rebuild that reference's config exactly."""
    cases = reference_cases(architecture)
    assert {reference.model_class for reference in cases.values()} == set(REGISTRY[architecture].classes.values())
    for case, reference in cases.items():
        config = reference.config()
        rebuilt = type(config)(**copy.deepcopy(reference_fields(architecture, case)))
        assert rebuilt.to_dict() == config.to_dict(), case


# ---------------------------------------------------------------------------------------------------------------------
# (a) from_hf


@pytest.mark.parametrize(("architecture", "reference_class"), CLASSES, ids=CLASS_IDS)
@_settings(examples=20)
@given(data=st.data())
def test_from_hf_gives_the_reference_logits_or_names_the_field(architecture, reference_class, data):
    drawn = data.draw(drawn_references(architecture, reference_class), label="reference")
    with _quiet():
        check_from_hf(drawn)


def check_from_hf(drawn: DrawnReference) -> None:
    reference, inputs, theirs = _reference(drawn)
    try:
        ours = from_hf(reference)
    except ValueError as error:
        _names_a_drawn_field(error, drawn, "from_hf")
        return
    event("from_hf converts")
    torch.testing.assert_close(_logits(ours, inputs), theirs, **TOLERANCE)


# ---------------------------------------------------------------------------------------------------------------------
# (b) to_hf


@pytest.mark.parametrize(("architecture", "reference_class"), CLASSES, ids=CLASS_IDS)
@_settings(examples=8)
@given(data=st.data())
def test_to_hf_gives_our_logits_or_refuses(architecture, reference_class, data):
    drawn = data.draw(drawn_references(architecture, reference_class, refusals=False), label="reference")
    with _quiet():
        check_to_hf(drawn)


def check_to_hf(drawn: DrawnReference) -> None:
    reference, inputs, _ = _reference(drawn)
    ours = _converted(reference)
    mine = _logits(ours, inputs)
    _exports_our_logits(ours, inputs, mine, drawn)
    # A model loaded from its checkpoint runs on sdpa where it may (the export command's case), whatever backend its
    # source ran on: to_hf takes either.
    other = "sdpa" if ours.config._attn_implementation == "eager" else "eager"
    try:
        ours.set_attn_implementation(other)
    except ValueError:  # ours refuses sdpa where no sdpa kernel computes it (Gemma 2's score cap): not this property
        return
    _exports_our_logits(ours, inputs, mine, drawn)


def _exports_our_logits(ours, inputs: dict, mine: torch.Tensor, drawn: DrawnReference) -> None:
    backend = ours.config._attn_implementation
    try:
        exported = to_hf(ours, to="auto")
    except ValueError as error:
        message = str(error)
        assert message.startswith("to_hf"), (
            f"to_hf refused our {backend} model of {drawn!r} in another's words: {message}"
        )
        event("to_hf refuses")
        return
    event(f"to_hf writes {type(exported).__name__}")
    torch.testing.assert_close(_logits(exported, inputs), mine, **TOLERANCE)


# ---------------------------------------------------------------------------------------------------------------------
# (c) hf-attention export


# The fields of a config that the export writes back as the user gave them, when the export is of the source's own
# class: its sizes and special ids (a special id outside the vocabulary is converted as None, or refused).
KEPT_SIZES = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "d_model",
    "d_kv",
    "num_heads",
    "num_layers",
    "num_decoder_layers",
    "n_embd",
    "n_layer",
    "n_head",
)
KEPT_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "cls_token_id", "sep_token_id")


def _not_given_back(drawn: DrawnReference, source, written, names) -> list[str]:
    """`names` whose value in the config transformers loads from the export (`written`) is not the source's; a
    special id outside the vocabulary is left out (converted as None, or refused)."""
    differences = []
    for name in names:
        if not hasattr(source, name):
            continue
        value = getattr(source, name)
        if name.endswith("_token_id") and not _inside(value, drawn.vocab_size):
            continue
        if getattr(written, name, None) != value:
            differences.append(f"{name}={value!r} written as {getattr(written, name, None)!r}")
    return differences


def _kept(drawn: DrawnReference, source, written) -> list[str]:
    """What an export of the source's own class must give back: the sizes, the special ids inside the vocabulary,
    and, where some layer slides, the window (as the class reads it: ModernBERT's is half its `local_attention`)
    and the layer types."""
    names = [*KEPT_SIZES, *KEPT_IDS]
    if "sliding_attention" in list(getattr(source, "layer_types", None) or []):
        names += ["sliding_window", "layer_types"]
    return _not_given_back(drawn, source, written, names)


def _inside(value, vocab_size: int) -> bool:
    values = value if isinstance(value, (list, tuple)) else [value]
    return all(isinstance(token, int) and 0 <= token < vocab_size for token in values)


@pytest.mark.parametrize(("architecture", "reference_class"), CLASSES, ids=CLASS_IDS)
@_settings(examples=2)
@given(data=st.data())
def test_export_writes_a_folder_transformers_loads_alone(architecture, reference_class, data):
    drawn = data.draw(drawn_references(architecture, reference_class, refusals=False), label="reference")
    with _quiet():
        check_export(drawn)


def check_export(drawn: DrawnReference) -> None:
    reference, inputs, _ = _reference(drawn)
    ours = _converted(reference)
    mine = _logits(ours, inputs)
    with tempfile.TemporaryDirectory() as root:
        source, destination = Path(root, "ours"), Path(root, "export")
        ours.save_pretrained(source)
        try:
            export_checkpoint(str(source), destination, to="auto")
        except ValueError as error:
            message = str(error)
            assert message.startswith(("to_hf", "export")), f"export refused {drawn!r} in another's words: {message}"
            assert not destination.exists(), "a refused export left a folder"
            # the checkpoint holds the model to_hf was given: the command refuses only what to_hf refuses
            with pytest.raises(ValueError):
                to_hf(ours, to="auto")
            event("export refuses")
            return
        loaded = AUTO[type(ours)].from_pretrained(destination, attn_implementation="eager").eval()
    assert type(loaded).__module__.startswith("transformers.models."), type(loaded).__module__
    assert not getattr(loaded.config, "auto_map", None), loaded.config.auto_map  # no remote code to trust
    event(f"export writes {type(loaded).__name__}")
    torch.testing.assert_close(_logits(loaded, inputs), mine, **TOLERANCE)
    source_config, written = reference.config, loaded.config
    if written.model_type != source_config.model_type:
        event(f"export writes {written.model_type} for a {source_config.model_type}")
        return
    assert not _kept(drawn, source_config, written), _kept(drawn, source_config, written)
    # The other fields drawn come back as the user wrote them, or as others that compute the same (an activation's
    # synonym, a window no layer reads): reported, not asserted.
    for difference in _not_given_back(drawn, source_config, written, drawn.drawn):
        event(f"export does not give back {difference.split('=')[0]}")
