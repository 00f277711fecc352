"""generate() projects q, k and v with one stacked product per layer, and computes the vocabulary projection of a few
rows in blocks: same tokens and scores to the bit, nothing kept after it returns, and never for a projection that
someone else must see called. Both are states of the modules they change (`MultiHeadAttention.stack_projections`,
`block_vocabulary_projection`), switched on by generate(): no method is installed on an instance from outside."""

import sys
import threading
import types
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import build, left_pad
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LogitsProcessor, LogitsProcessorList

import hf_attention
from hf_attention import HFAttentionForCausalLM, HFAttentionForSeq2SeqLM, attention, linear_products
from hf_attention.modeling import speed_paths
from hf_attention.modeling.attention import MultiHeadAttention
from hf_attention.modeling.pretrained import TransformerPreTrainedModel
from hf_attention.modeling.speed_paths import StackedProjections

GENERATIVE = [
    (HFAttentionForCausalLM, "decoder", {"position_encoding": "rotary", "hidden_act": "swiglu"}),
    (HFAttentionForCausalLM, "decoder", {"attention_bias": True, "position_encoding": "learned"}),
    (HFAttentionForSeq2SeqLM, "seq2seq", {"attention_bias": True}),
]
OPTIONS = [
    {"do_sample": False},
    {"do_sample": False, "num_beams": 3},
    {"do_sample": True, "top_k": 20},
]


class _CountMatmuls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


TWO_PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12]]
# 5 rows without beams, 10 with 2 beams: both inside `linear_products.BLOCKED_ROWS`
FIVE_PROMPTS = [[5 + i, 6, 7, 8, 9][: 5 - i % 3] for i in range(5)]


def _generate(model, options, dtype=torch.float32, prompts=TWO_PROMPTS):
    ids, mask = left_pad(prompts)
    torch.manual_seed(3)
    return model.to(dtype).generate(
        ids,
        attention_mask=mask,
        max_new_tokens=6,
        min_new_tokens=6,
        output_scores=True,
        return_dict_in_generate=True,
        **options,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("options", OPTIONS, ids=["greedy", "beam", "sample"])
@pytest.mark.parametrize(
    ("model_class", "family", "overrides"), GENERATIVE, ids=["rotary-swiglu", "biases", "seq2seq"]
)
def test_stacked_projections_change_nothing(model_class, family, overrides, options, dtype, monkeypatch):
    model = build(model_class, family, **overrides)
    stacked = _generate(model, options, dtype)
    monkeypatch.setattr(speed_paths, "MAX_STACKED_ELEMENTS", 0)  # nothing is stackable: three products per layer
    separate = _generate(model, options, dtype)
    assert torch.equal(stacked.sequences, separate.sequences)
    assert all(torch.equal(a, b) for a, b in zip(stacked.scores, separate.scores, strict=True))


def _count_products(model, prompt, new_tokens, *, stack: bool):
    saved = speed_paths.MAX_STACKED_ELEMENTS
    speed_paths.MAX_STACKED_ELEMENTS = saved if stack else 0
    try:
        with _CountMatmuls() as mode:
            model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    finally:
        speed_paths.MAX_STACKED_ELEMENTS = saved
    return mode.counts["mm"] + mode.counts["addmm"]


@pytest.mark.parametrize("hidden_act", ["gelu", "swiglu"])
def test_one_product_instead_of_three_and_nothing_kept_afterwards(hidden_act):
    """q/k/v: three products → one on one-token steps, after one step that computes both ways and compares them
    (the prompt keeps three products; a gated feed-forward keeps its two)."""
    model = build(HFAttentionForCausalLM, "decoder", hidden_act=hidden_act)
    prompt, steps = torch.tensor([[5, 6, 7]]), 3  # the prompt and three one-token steps
    separate = _count_products(model, prompt, steps + 1, stack=False)
    stacked = _count_products(model, prompt, steps + 1, stack=True)
    modules = [layer.self_attn for layer in model.model.decoder.layers]
    _assert_no_decoding_state(model)  # copies and checks dropped: the plain path again
    # the check runs inside the call: see what it found by stacking again for one step of one row
    with model.decoding_states(), torch.no_grad():
        hidden = torch.randn(1, 1, model.config.hidden_size)
        exact = []
        for m in modules:
            m.project_qkv(hidden, None)
            exact.append(m._stacked.value.is_exact[1])
    # first step: the check's 1 stacked + 3 separate, then the step's own product (1 if exact, else 3 again);
    # each later step: 1 stacked if exact, else 3 separate
    extra_per_layer = [(4 + 1 - 3) - (steps - 1) * 2 if ok else 1 for ok in exact]
    assert stacked - separate == sum(extra_per_layer)


def test_a_stacked_product_that_differs_is_never_used(monkeypatch):
    """Where the stacked product does not give the separate products' bits, generate() keeps the three products:
    here the stacked weights are made to differ in their last bits, and the result is still the separate one."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")
    expected = _generate(model, {"do_sample": False, "num_beams": 2})
    exact_stack = speed_paths.stack_weights

    def perturbed(projections):
        weight, bias = exact_stack(projections)
        return torch.nextafter(weight, torch.full_like(weight, torch.inf)), bias

    monkeypatch.setattr(speed_paths, "stack_weights", perturbed)
    observed = _generate(model, {"do_sample": False, "num_beams": 2})
    assert torch.equal(observed.sequences, expected.sequences)
    assert all(torch.equal(a, b) for a, b in zip(observed.scores, expected.scores, strict=True))


@pytest.mark.parametrize("rows", [1, 2, 4, 8])
def test_stacking_is_exact_where_a_blas_sums_the_wider_product_differently(rows):
    """E = 128 with 4 rows is a shape where MKL's float32 kernels give the stacked product other last bits than the
    separate ones; generate() must still give the separate products' scores for every row count."""
    model = build(HFAttentionForCausalLM, "decoder", hidden_size=128, intermediate_size=512, num_attention_heads=4)
    torch.manual_seed(0)
    ids = torch.randint(5, 90, (rows, 6))

    def scores(stack):
        saved = speed_paths.MAX_STACKED_ELEMENTS
        speed_paths.MAX_STACKED_ELEMENTS = saved if stack else 0
        try:
            return model.generate(
                ids, max_new_tokens=5, do_sample=False, output_scores=True, return_dict_in_generate=True
            ).scores
        finally:
            speed_paths.MAX_STACKED_ELEMENTS = saved

    assert all(torch.equal(a, b) for a, b in zip(scores(True), scores(False), strict=True))


def test_a_hooked_projection_is_called_as_itself():
    model = build(HFAttentionForCausalLM, "decoder")
    seen = []
    model.model.decoder.layers[0].self_attn.k_proj.register_forward_hook(lambda *_: seen.append(1))
    model.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=3, min_new_tokens=3, do_sample=False)
    assert len(seen) == 3  # prompt + two steps: the hooked layer kept its three separate products


def test_training_after_generate_uses_the_current_weights():
    """Stacked weights live only inside generate(): an optimizer step afterwards is seen by the next generation."""
    model = build(HFAttentionForCausalLM, "decoder")
    prompt = torch.tensor([[5, 6, 7]])
    before = model.generate(
        prompt, max_new_tokens=5, do_sample=False, output_scores=True, return_dict_in_generate=True
    ).scores
    with torch.no_grad():
        for layer in model.model.decoder.layers:
            layer.self_attn.v_proj.weight.data.mul_(3.0)  # in place, behind autograd's back
    after = model.generate(
        prompt, max_new_tokens=5, do_sample=False, output_scores=True, return_dict_in_generate=True
    ).scores
    with torch.no_grad():
        logits = model(prompt, logits_to_keep=1).logits[:, -1]  # the changed weights, three products per layer
    assert not torch.equal(before[0], after[0]) and torch.equal(after[0], logits)


def test_concurrent_generations_match_sequential_ones():
    model = build(HFAttentionForCausalLM, "decoder")
    prompts = [torch.tensor([[5 + i, 6, 7, 8]]) for i in range(4)]
    expected = [model.generate(p, max_new_tokens=8, do_sample=False) for p in prompts]
    results = [None] * len(prompts)

    def run(index):
        results[index] = model.generate(prompts[index], max_new_tokens=8, do_sample=False)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(torch.equal(a, b) for a, b in zip(results, expected, strict=True))
    _assert_no_decoding_state(model)


# Blocked vocabulary projection. The test models' heads (99 × 32) are far below the default block size, so the tests
# shrink the blocks to 16 vocabulary rows (7 blocks, the last one partial).
SMALL_BLOCKS = 16 * 32 * 4


def _spy_blocked(monkeypatch):
    calls = []
    blocked = linear_products.BlockedLinear.blocked

    def spy(self, x):
        calls.append(x.shape[:-1].numel())
        return blocked(self, x)

    monkeypatch.setattr(linear_products.BlockedLinear, "blocked", spy)
    return calls


@pytest.mark.parametrize("options", [{"do_sample": False}, {"do_sample": False, "num_beams": 2}, {"do_sample": True}])
@pytest.mark.parametrize(
    ("model_class", "family", "overrides"),
    GENERATIVE + [(HFAttentionForSeq2SeqLM, "seq2seq", {"lm_head_bias": True})],
    ids=["rotary-swiglu", "biases", "seq2seq", "seq2seq-head-bias"],
)
def test_blocked_vocabulary_projection_changes_nothing(model_class, family, overrides, options, monkeypatch):
    model = build(model_class, family, **overrides)
    monkeypatch.setattr(linear_products, "VOCABULARY_BLOCK_BYTES", SMALL_BLOCKS)
    calls = _spy_blocked(monkeypatch)
    blocked = _generate(model, options, prompts=FIVE_PROMPTS)
    assert calls and all(rows in linear_products.BLOCKED_ROWS for rows in calls)  # the blocked product did run
    monkeypatch.setattr(linear_products, "BLOCKED_ROWS", range(0))  # no row count is blocked: one product per step
    plain = _generate(model, options, prompts=FIVE_PROMPTS)
    assert torch.equal(blocked.sequences, plain.sequences)
    assert all(torch.equal(a, b) for a, b in zip(blocked.scores, plain.scores, strict=True))
    _assert_no_decoding_state(model)  # dropped afterwards


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rows", [1, 3, 4, 7, 11, 12])
def test_a_blocked_projection_returns_the_linear_layers_bits(rows, bias, monkeypatch):
    """On every call, whatever the row count: the blocked product where it was found exact, `linear` elsewhere."""
    # blocks of 5 output features, the last one partial
    monkeypatch.setattr(linear_products, "VOCABULARY_BLOCK_BYTES", 5 * 24 * 4)
    torch.manual_seed(0)
    linear = torch.nn.Linear(24, 23, bias=bias)
    projection = linear_products.BlockedLinear(linear)
    x = torch.randn(rows, 1, 24)
    with torch.no_grad():
        expected = linear(x)
        assert torch.allclose(projection.blocked(x), expected, rtol=1e-6, atol=1e-6)  # the same products
        for _ in range(3):  # the checking call, then the verdict's
            assert torch.equal(projection(x), expected)
    assert list(projection.is_exact) == ([rows] if rows in linear_products.BLOCKED_ROWS else [])


def test_a_blocked_product_that_differs_is_never_used(monkeypatch):
    """Where the blocked product does not give the plain product's bits, generate() keeps the plain product: here the
    blocked one is made to differ in its last bits, and the scores are still the plain ones."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")
    monkeypatch.setattr(linear_products, "VOCABULARY_BLOCK_BYTES", SMALL_BLOCKS)
    monkeypatch.setattr(linear_products, "BLOCKED_ROWS", range(0))
    expected = _generate(model, {"do_sample": False}, prompts=FIVE_PROMPTS)
    monkeypatch.setattr(linear_products, "BLOCKED_ROWS", range(4, 12))
    exact = linear_products.BlockedLinear.blocked
    calls = []

    def perturbed(self, x):
        calls.append(1)
        result = exact(self, x)
        return torch.nextafter(result, torch.full_like(result, torch.inf))

    monkeypatch.setattr(linear_products.BlockedLinear, "blocked", perturbed)
    observed = _generate(model, {"do_sample": False}, prompts=FIVE_PROMPTS)
    assert len(calls) == 1  # computed once, for the check, and never again in that call
    assert torch.equal(observed.sequences, expected.sequences)
    assert all(torch.equal(a, b) for a, b in zip(observed.scores, expected.scores, strict=True))


def test_the_vocabulary_projection_is_left_alone_when_it_must_be_seen_or_was_not_measured(monkeypatch):
    """No blocks for a hooked head (a hook must see its call), bfloat16 weights (not measured) or a head smaller than
    two blocks (the default block size with the test model)."""
    calls = _spy_blocked(monkeypatch)
    small = build(HFAttentionForCausalLM, "decoder")
    _generate(small, {"do_sample": False}, prompts=FIVE_PROMPTS)  # default blocks: 99 × 32 float32 is far below two
    monkeypatch.setattr(linear_products, "VOCABULARY_BLOCK_BYTES", SMALL_BLOCKS)
    _generate(small, {"do_sample": False}, torch.bfloat16, FIVE_PROMPTS)
    hooked = build(HFAttentionForCausalLM, "decoder")
    seen = []
    hooked.lm_head.register_forward_hook(lambda *_: seen.append(1))
    _generate(hooked, {"do_sample": False}, prompts=FIVE_PROMPTS)
    assert not calls
    assert len(seen) == 6  # the prompt and five one-token steps, each through the hooked head


def test_a_nested_block_has_states_of_its_own_and_a_model_copies_without_them():
    """A nested block (a generate() inside a generate() callback) makes its own states from the weights of that
    moment and the outer block's come back when it leaves; a model copied or pickled afterwards carries no generation
    state (its locks are made afresh)."""
    import copy
    import pickle

    model = build(HFAttentionForCausalLM, "decoder")
    module = model.model.decoder.layers[0].self_attn
    with model.decoding_states():
        stacked = module._stacked.value
        assert isinstance(stacked, StackedProjections)
        with torch.no_grad():
            module.v_proj.weight.mul_(3.0)
        assert not stacked.is_current()  # the outer copy no longer applies: the call's later steps go unstacked
        with model.decoding_states():
            inner = module._stacked.value
            assert inner is not stacked and inner.is_current() and module._stacked.users == 2
            separate = (module.q_proj, module.k_proj, module.v_proj)
            assert torch.equal(inner.weight, torch.cat([p.weight for p in separate]))
        assert module._stacked.value is stacked and module._stacked.users == 1
    _assert_no_decoding_state(model)
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        _assert_no_decoding_state(copied)
        copied_module = copied.model.decoder.layers[0].self_attn
        assert copied_module._stacked._lock is not module._stacked._lock
        assert copied._blocked_lm_head._lock is not model._blocked_lm_head._lock
        assert torch.equal(
            copied.generate(torch.tensor([[5, 6]]), max_new_tokens=3),
            model.generate(torch.tensor([[5, 6]]), max_new_tokens=3),
        )


def test_a_state_made_inside_a_generation_is_what_the_module_shows():
    """While generate() runs, the stacked weights and the blocked head are states of the modules, read where the
    modules are read: the stacked weights are the three projections' weights, one after the other."""
    model = build(HFAttentionForCausalLM, "decoder", attention_bias=True)
    module = model.model.decoder.layers[0].self_attn
    assert module._stacked.value is None and model._blocked_lm_head.value is None
    with model.decoding_states():
        stacked = module._stacked.value
        separate = (module.q_proj, module.k_proj, module.v_proj)
        assert torch.equal(stacked.weight, torch.cat([p.weight for p in separate]))
        assert torch.equal(stacked.bias, torch.cat([p.bias for p in separate]))
        assert not stacked.weight.requires_grad
        assert model._blocked_lm_head.users == 1  # entered; the test head is too small to block (value None)
    _assert_no_decoding_state(model)


def test_the_backend_is_looked_up_once_per_generation_and_by_name_otherwise():
    """While generate() runs, every attention module holds the backend its config names (looked up once for the
    call); outside it, each call looks the name up, so `set_attn_implementation` between calls takes effect."""
    model = build(HFAttentionForCausalLM, "decoder")
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    for name, function in (("sdpa", attention.sdpa_attention_forward), ("eager", attention.eager_attention_forward)):
        model.set_attn_implementation(name)
        assert all(m.backend_function() is function for m in modules)
        with model.decoding_states():
            assert all(m._pinned_backend.value is function for m in modules)
        _assert_no_decoding_state(model)


def _assert_no_decoding_state(model):
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            assert module._stacked.value is None and module._stacked.users == 0
            assert module._pinned_backend.value is None and module._pinned_backend.users == 0
    assert model._blocked_lm_head.value is None and model._blocked_lm_head.users == 0


# What generate() runs is what the modules' classes say.


def _shadowing_callables(model) -> list[str]:
    """Every callable in a module's own `__dict__` that hides an attribute of its class (a method replaced on the
    instance), as "path.name"."""
    return [
        f"{path}.{name}"
        for path, module in model.named_modules()
        for name, value in vars(module).items()
        if callable(value) and hasattr(type(module), name)
    ]


class _CheckEveryStep(LogitsProcessor):
    def __init__(self, model):
        self.model, self.found, self.steps = model, [], 0

    def __call__(self, input_ids, scores):
        self.steps += 1
        self.found += _shadowing_callables(self.model)
        return scores


def _package_code() -> set[types.CodeType]:
    """The code of every function defined in hf_attention's modules: module functions, the methods (properties,
    static and class methods, decorated ones unwrapped) of the classes they define, and what those define inside."""
    found: set[types.CodeType] = set()

    def add(code: types.CodeType) -> None:
        found.add(code)
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                add(constant)

    def add_function(value) -> None:
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            for accessor in (value.fget, value.fset, value.fdel):
                if accessor is not None:
                    add_function(accessor)
            return
        while hasattr(value, "__wrapped__"):
            value = value.__wrapped__
        if isinstance(value, types.FunctionType):
            add(value.__code__)

    for name, module in list(sys.modules.items()):
        if name != "hf_attention" and not name.startswith("hf_attention."):
            continue
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name:
                for attribute in vars(value).values():
                    add_function(attribute)
            else:
                add_function(value)
    return found


@pytest.mark.parametrize(
    ("model_class", "family", "overrides"), GENERATIVE, ids=["rotary-swiglu", "biases", "seq2seq"]
)
def test_generate_runs_only_what_the_classes_define(model_class, family, overrides, monkeypatch):
    """During generate(), no module holds a method installed on the instance from outside its class (checked at
    every step), every function of the package that runs is defined by one of its modules or classes, and the
    stacked and blocked states are read by the classes' own `project_qkv` and `vocabulary_projection`."""
    model = build(model_class, family, **overrides)
    monkeypatch.setattr(linear_products, "VOCABULARY_BLOCK_BYTES", SMALL_BLOCKS)  # the head is blocked too
    check = _CheckEveryStep(model)
    package = Path(hf_attention.__file__).parent / "modeling"
    called: set[types.CodeType] = set()

    def profile(frame, event, arg):
        if event == "call" and Path(frame.f_code.co_filename).parent == package:
            called.add(frame.f_code)

    ids, mask = left_pad(FIVE_PROMPTS)
    sys.setprofile(profile)
    try:
        model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=4,
            min_new_tokens=4,
            do_sample=False,
            logits_processor=LogitsProcessorList([check]),
        )
    finally:
        sys.setprofile(None)
    assert check.steps == 4 and not check.found
    unknown = called - _package_code()
    assert not unknown, sorted(f"{code.co_filename}:{code.co_firstlineno} {code.co_name}" for code in unknown)
    assert speed_paths.stacked_product_applies.__code__ in called  # the stacked state, read by project_qkv
    assert TransformerPreTrainedModel.vocabulary_projection.__code__ in called
    assert linear_products.BlockedLinear.blocked.__code__ in called  # the blocked head ran (its first-step check)
