"""A decoding state belongs to the generate() call that made it: a call that starts while another one is in flight,
and a forward() run meanwhile, see the weights and the attention backend as they are then, not as they were when the
other call started; an in-place weight update during a call is seen by that call's later steps too.

Each test holds a first generate() in another thread at one of its steps (a logits processor that waits on an event)
and does something meanwhile: the outcome must be what a fresh model with the same weights and backend gives. The
first call is held after two one-token steps, so that its stacked q/k/v copy has been checked against the separate
products for its batch size (a copy that is merely unchecked would be compared, and dropped, by the next step)."""

import contextlib
import copy
import threading

import pytest
import torch
from conftest import build, left_pad, right_pad
from fuzz_strategies import batches, valid_configs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AttentionInterface, AttentionMaskInterface, LogitsProcessor, LogitsProcessorList
from transformers.masking_utils import sdpa_mask

from hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionForCausalLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionSeq2SeqConfig,
    attention,
)
from hf_attention.modeling import speed_paths

MODELS = {
    "decoder": (HFAttentionForCausalLM, {"position_encoding": "rotary", "attention_bias": True}),
    "seq2seq": (HFAttentionForSeq2SeqLM, {"attention_bias": True}),
}
PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12]]
HELD_AT = 3  # the third step: after the prompt and two one-token steps
SETTLE_S = 60  # how long a held call waits for the test before it goes on anyway (a failing test must not hang)

COUNTED: list[int] = []


def counted_sdpa(module, query, key, value, attention_mask, **kwargs):
    """Our SDPA backend, counting its calls: shows whether a backend selected by name is the one that runs."""
    COUNTED.append(1)
    return attention.sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register("test_counted_sdpa", counted_sdpa)
AttentionMaskInterface.register("test_counted_sdpa", sdpa_mask)


class _Hold(LogitsProcessor):
    """Holds its generate() at step `at` (counted from 1) until `go` is set; `held` says it got there. With
    `meanwhile`, the held call itself runs it there (in its own thread) instead of waiting."""

    def __init__(self, at: int = HELD_AT, meanwhile=None):
        self.at, self.steps, self.meanwhile = at, 0, meanwhile
        self.held, self.go = threading.Event(), threading.Event()

    def __call__(self, input_ids, scores):
        self.steps += 1
        if self.steps == self.at:
            if self.meanwhile is not None:
                self.meanwhile()
            else:
                self.held.set()
                self.go.wait(SETTLE_S)
        return scores


def _inputs(family: str, prompts=PROMPTS) -> dict:
    ids, mask = left_pad(prompts) if family == "decoder" else right_pad(prompts)
    return {"input_ids": ids, "attention_mask": mask}


def _generate(model, inputs: dict, processor=None, new_tokens: int = 6, **options):
    """Greedy (unless `options` say otherwise) scores of `new_tokens` steps, from a fixed seed."""
    torch.manual_seed(3)
    return model.generate(
        **inputs,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
        logits_processor=LogitsProcessorList([] if processor is None else [processor]),
        **options,
    ).scores


@contextlib.contextmanager
def _during_a_generation(model, inputs: dict, results: list, at: int = HELD_AT, **options):
    """Runs the block while a generate() of `model` on `inputs`, in another thread, is held at step `at`; its
    scores are appended to `results` once it ends (after the block)."""
    hold = _Hold(at)
    failure: list[BaseException] = []

    def run():
        try:
            results.append(_generate(model, inputs, hold, **options))
        except BaseException as error:  # re-raised in the test's thread
            failure.append(error)
            hold.held.set()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert hold.held.wait(SETTLE_S) and not failure, failure
        yield
    finally:
        hold.go.set()
        thread.join()
    if failure:
        raise failure[0]


def _new_weights(model) -> dict:
    """Every floating-point tensor of `model`'s state moved by a fixed random amount."""
    generator = torch.Generator().manual_seed(1)
    return {
        name: tensor + 0.1 * torch.randn(tensor.shape, generator=generator) if tensor.is_floating_point() else tensor
        for name, tensor in model.state_dict().items()
    }


def _fresh(model, weights: dict | None = None, attn_implementation: str | None = None):
    """A copy of `model` (taken while no generation runs) with `weights` loaded and the backend selected."""
    fresh = copy.deepcopy(model)
    if weights is not None:
        fresh.load_state_dict(weights)
    if attn_implementation is not None:
        fresh.set_attn_implementation(attn_implementation)
    return fresh


def _one_token_logits(model, family: str, inputs: dict) -> torch.Tensor:
    """Logits of a no-grad forward() with one (decoder) token for each row of `inputs`: the shape of a decoding step
    (a seq2seq model reads `inputs` as its source)."""
    rows = inputs["input_ids"].shape[0]
    one_token = torch.full((rows, 1), 7 if family == "decoder" else 1)
    step = {"input_ids": one_token} if family == "decoder" else {**inputs, "decoder_input_ids": one_token}
    with torch.no_grad():
        return model(**step).logits


def _assert_same(observed, expected):
    assert len(observed) == len(expected)
    for step, (a, b) in enumerate(zip(observed, expected, strict=True)):
        assert torch.equal(a, b), f"step {step}: max |Δ| {(a - b).nan_to_num().abs().max().item()}"  # -inf - -inf


def _build(family: str):
    model_class, overrides = MODELS[family]
    return build(model_class, family, **overrides)


@pytest.mark.parametrize("family", MODELS)
def test_a_call_started_after_an_in_place_update_during_another_sees_the_new_weights(family):
    """(a) load_state_dict while a generate() of the same batch size is held; a generate() started then samples
    what a fresh model with the new weights samples."""
    model = _build(family)
    inputs = _inputs(family)
    weights = _new_weights(model)
    expected = _generate(_fresh(model, weights), inputs)
    first: list = []
    with _during_a_generation(model, inputs, first):
        model.load_state_dict(weights)
        observed = _generate(model, inputs)
    _assert_same(observed, expected)
    _assert_no_decoding_state(model)


@pytest.mark.parametrize("family", MODELS)
def test_a_forward_during_a_call_uses_the_current_weights(family):
    """(b) A one-token no-grad forward() in another thread while a generate() is held, after an in-place update, and
    one without an update: the logits of a fresh model with the weights of the moment."""
    model = _build(family)
    inputs = _inputs(family)
    weights = _new_weights(model)
    unchanged = _one_token_logits(_fresh(model), family, inputs)
    updated = _one_token_logits(_fresh(model, weights), family, inputs)
    first: list = []
    with _during_a_generation(model, inputs, first):
        assert torch.equal(_one_token_logits(model, family, inputs), unchanged)
        model.load_state_dict(weights)
        observed = _one_token_logits(model, family, inputs)
    assert torch.equal(observed, updated), (observed - updated).abs().max().item()


@pytest.mark.parametrize("family", MODELS)
def test_a_backend_selected_during_a_call_runs_in_later_calls(family):
    """(c) set_attn_implementation while a generate() is held: a generate() and a forward() started then run the
    newly selected backend (at every attention layer of every step), with a fresh model's results."""
    model = _build(family)
    inputs = _inputs(family)
    fresh = _fresh(model, attn_implementation="test_counted_sdpa")
    expected = _generate(fresh, inputs)
    expected_logits = _one_token_logits(fresh, family, inputs)
    first: list = []
    with _during_a_generation(model, inputs, first):
        model.set_attn_implementation("test_counted_sdpa")
        COUNTED.clear()
        observed = _generate(model, inputs)
        assert COUNTED, "generate() did not run the backend selected before it started"
        COUNTED.clear()
        logits = _one_token_logits(model, family, inputs)
        assert COUNTED, "forward() did not run the selected backend"
    _assert_same(observed, expected)
    assert torch.equal(logits, expected_logits)
    _assert_no_decoding_state(model)


@pytest.mark.parametrize("family", MODELS)
def test_an_in_place_update_during_a_call_is_seen_by_its_later_steps(family, monkeypatch):
    """A logits processor that loads new weights in the middle of its own generate(): the later steps of that call
    compute with them, as they do without the stacked q/k/v copy (three products per layer)."""
    model = _build(family)
    inputs = _inputs(family)
    weights = _new_weights(model)
    plain_model = _fresh(model)

    def updating(target):
        return _Hold(meanwhile=lambda: target.load_state_dict(weights))

    observed = _generate(model, inputs, updating(model))
    monkeypatch.setattr(speed_paths, "MAX_STACKED_ELEMENTS", 0)  # nothing is stacked
    expected = _generate(plain_model, inputs, updating(plain_model))
    _assert_same(observed, expected)
    _assert_no_decoding_state(model)


def test_concurrent_calls_with_their_own_batch_sizes_match_sequential_ones():
    """Six threads, three generations each, of three batch sizes (and so of stacked products checked per batch
    size): each gives what it gives alone."""
    model = _build("decoder")
    cases = [_inputs("decoder", PROMPTS[: 1 + i % 2] + [[20 + i, 21, 22]] * (i % 3)) for i in range(6)]
    expected = [_generate(model, case) for case in cases]
    results: dict[tuple[int, int], tuple] = {}

    def run(index):
        for round_ in range(3):
            results[index, round_] = _generate(model, cases[index])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (index, _), scores in results.items():
        _assert_same(scores, expected[index])
    assert len(results) == 18
    _assert_no_decoding_state(model)


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit])
def test_the_states_of_an_interrupted_call_are_released(interruption):
    model = _build("decoder")

    def interrupt():
        raise interruption

    with pytest.raises(interruption):
        _generate(model, _inputs("decoder"), _Hold(meanwhile=interrupt))
    _assert_no_decoding_state(model)
    _assert_same(_generate(model, _inputs("decoder")), _generate(_fresh(model), _inputs("decoder")))


def test_weights_made_under_inference_mode_are_not_copied():
    """Inference tensors keep no version counter, so a copy of them could not tell that it went stale: generate()
    keeps the three products for them (and gives what the copy would have given)."""
    plain = _build("decoder")
    with torch.inference_mode():
        torch.manual_seed(0)
        model = _build("decoder")  # plain's weights, as inference tensors
    module = model.model.decoder.layers[0].self_attn
    with model.decoding_states():
        assert module._stacked.value is None
    with torch.inference_mode():
        observed, expected = _generate(model, _inputs("decoder")), _generate(plain, _inputs("decoder"))
    # Inference tensors may take other kernels than plain ones (torch 2.11's differ in the last bit at the first
    # step, before any stacked product): the same scores to rounding, not bit for bit.
    assert len(observed) == len(expected)
    for a, b in zip(observed, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _assert_no_decoding_state(model):
    for module in model.modules():
        if isinstance(module, attention.MultiHeadAttention):
            assert module._stacked.value is None and module._stacked.users == 0
            assert module._pinned_backend.value is None and module._pinned_backend.users == 0
    assert model._blocked_lm_head.value is None and model._blocked_lm_head.users == 0


# Property: whatever the model and batch, a call started during another one, and a forward() run then, give what a
# fresh model with the weights and backend of the moment gives.

CONFIG_CLASSES = {"decoder": HFAttentionDecoderConfig, "seq2seq": HFAttentionSeq2SeqConfig}
MEANWHILE = ("update", "forward", "update then forward", "backend")


def _fuzzed_model(family: str, fields: dict):
    config = CONFIG_CLASSES[family](**{k: v for k, v in fields.items() if k != "attn_implementation"})
    torch.manual_seed(0)
    model_class = MODELS[family][0]
    return model_class._from_config(config, attn_implementation=fields["attn_implementation"]).eval()


@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    valid_configs(families=("decoder", "seq2seq")),
    batches(max_rows=3, max_length=5, sides=("left",)),
    st.integers(2, 4),
    st.sampled_from(MEANWHILE),
    st.sampled_from((1, 2)),
)
def test_a_call_during_another_equals_a_fresh_model(config, batch, held_at, meanwhile, beams):
    family, fields = config
    model = _fuzzed_model(family, fields)
    ids, mask = batch.tensors()
    if family == "seq2seq":  # the encoder's padding on the right
        ids, mask = right_pad(batch.rows)
    inputs = {"input_ids": ids, "attention_mask": mask}
    options = {"num_beams": beams, "new_tokens": 4}
    weights = _new_weights(model) if "update" in meanwhile else None
    backend = "test_counted_sdpa" if meanwhile == "backend" and fields["attn_implementation"] == "sdpa" else None
    fresh = _fresh(model, weights, backend)
    expected = _generate(fresh, inputs, **options)
    expected_first = _generate(_fresh(model), inputs, **options)
    first: list = []
    with _during_a_generation(model, inputs, first, at=held_at, **options):
        if weights is not None:
            model.load_state_dict(weights)
        if backend is not None:
            model.set_attn_implementation(backend)
        if "forward" in meanwhile:
            assert torch.equal(_one_token_logits(model, family, inputs), _one_token_logits(fresh, family, inputs))
        observed = _generate(model, inputs, **options)
    _assert_same(observed, expected)
    if weights is None:  # nothing the first call computes with changed: it gives what it gives alone
        _assert_same(first[0], expected_first)
    _assert_no_decoding_state(model)
