"""generate()'s cache layers on CPU (hf_attention.modeling.kv_cache): appends in place, beam reorders done by the next
append, no-op beam reorders of the cross-attention cache skipped; the same tokens and scores to the bit as
transformers' own layers, and transformers' behaviour wherever their assumptions do not hold."""

import pytest
import torch
from conftest import build, left_pad
from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache

from hf_attention import HFAttentionForCausalLM, HFAttentionForSeq2SeqLM, kv_cache
from hf_attention.modeling.cache_argument import CACHE_FIELD, cache_of
from hf_attention.modeling.kv_cache import BeamReorderedLayer, BeamSharedCrossLayer, GrowingKVLayer

GENERATIVE = [
    (HFAttentionForCausalLM, "decoder", {"position_encoding": "rotary", "hidden_act": "swiglu"}),  # grouped heads
    (HFAttentionForCausalLM, "decoder", {"position_encoding": "alibi", "attn_implementation": "eager"}),
    (HFAttentionForSeq2SeqLM, "seq2seq", {"attention_bias": True}),
    (HFAttentionForSeq2SeqLM, "seq2seq", {"position_encoding": "relative", "norm_type": "rmsnorm"}),
]
OPTIONS = [
    {"do_sample": False},
    {"do_sample": False, "num_beams": 3},
    {"do_sample": True, "top_k": 20},
]


def _plain_cache(model):
    """A cache passed by the caller: generate() leaves its transformers layers alone."""
    if model.config.is_encoder_decoder:
        return EncoderDecoderCache(DynamicCache(), DynamicCache())
    return DynamicCache()


def _generate(model, options, dtype=torch.float32, **kwargs):
    ids, mask = left_pad([[5, 6, 7, 8, 9], [10, 11, 12]])
    torch.manual_seed(3)
    return model.to(dtype).generate(
        ids,
        attention_mask=mask,
        max_new_tokens=7,
        min_new_tokens=7,
        output_scores=True,
        return_dict_in_generate=True,
        **options,
        **kwargs,
    )


def _layers(cache):
    if isinstance(cache, EncoderDecoderCache):
        return cache.self_attention_cache.layers, cache.cross_attention_cache.layers
    return cache.layers, []


@pytest.fixture(params=["in-place", "concatenated-while-small"])
def in_place_min_bytes(request, monkeypatch):
    """Run with in-place appends and deferred beam reorders from the first token (the test models' caches are far
    below the default sizes at which the layers switch from transformers' way to theirs), and with the defaults."""
    if request.param == "in-place":
        monkeypatch.setattr(kv_cache, "IN_PLACE_MIN_BYTES", 0)
        monkeypatch.setattr(kv_cache, "DEFERRED_REORDER_MIN_BYTES", 0)
    return kv_cache.IN_PLACE_MIN_BYTES


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("options", OPTIONS, ids=["greedy", "beam", "sample"])
@pytest.mark.parametrize(
    ("model_class", "family", "overrides"), GENERATIVE, ids=["rotary-gqa", "alibi-eager", "seq2seq", "t5-buckets"]
)
def test_generation_layers_change_nothing(model_class, family, overrides, options, dtype, in_place_min_bytes):
    model = build(model_class, family, **overrides)
    ours = _generate(model, options, dtype)
    plain = _generate(model, options, dtype, **{CACHE_FIELD: _plain_cache(model)})
    assert torch.equal(ours.sequences, plain.sequences)
    assert all(torch.equal(a, b) for a, b in zip(ours.scores, plain.scores, strict=True))
    self_layers, cross_layers = _layers(cache_of(ours))
    plain_self, plain_cross = _layers(cache_of(plain))
    beams = options.get("num_beams", 1) > 1
    # the test models' caches stay far below the default sizes: self-attention then keeps transformers' layer
    swapped = BeamReorderedLayer if beams else GrowingKVLayer
    assert all(type(layer) is (swapped if in_place_min_bytes == 0 else DynamicLayer) for layer in self_layers)
    assert all(type(layer) is (BeamSharedCrossLayer if beams else DynamicLayer) for layer in cross_layers)
    for a, b in zip(self_layers + cross_layers, plain_self + plain_cross, strict=True):  # the cache itself, too
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    if not beams and in_place_min_bytes == 0:  # appended in place from the first token
        assert all(layer._buffers is not None for layer in self_layers)


@pytest.mark.parametrize(("num_beams", "threshold"), [(1, "IN_PLACE_MIN_BYTES"), (3, "DEFERRED_REORDER_MIN_BYTES")])
def test_self_attention_layers_are_swapped_only_for_caches_that_reach_their_size(monkeypatch, num_beams, threshold):
    """A generation whose cached keys never reach the size from which a layer pays keeps transformers' layer."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary", num_key_value_heads=2)
    config = model.config
    rows = 2 * num_beams  # the two prompts of `_generate`, 5 positions long after padding, 7 new tokens
    longest = 5 + 7 - 1  # positions cached at most: the last token is never fed back
    row_bytes = rows * config.num_key_value_heads * config.head_dim * 4  # float32
    expected_layer = BeamReorderedLayer if num_beams > 1 else GrowingKVLayer
    options = {"do_sample": False, "num_beams": num_beams}
    for size, layer_type in ((longest * row_bytes, expected_layer), (longest * row_bytes + 1, DynamicLayer)):
        monkeypatch.setattr(kv_cache, threshold, size)
        result = _generate(model, options)
        assert all(type(layer) is layer_type for layer in cache_of(result).layers), (size, layer_type)
        plain = _generate(model, options, **{CACHE_FIELD: _plain_cache(model)})
        assert torch.equal(result.sequences, plain.sequences)


def test_a_cache_the_caller_passes_keeps_its_layers():
    model = build(HFAttentionForCausalLM, "decoder")
    cache = DynamicCache()
    _generate(model, {"do_sample": False}, **{CACHE_FIELD: cache})
    assert cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers)


def test_continuing_from_the_returned_cache_matches_transformers_layers():
    """The cache generate() returns keeps working: a second turn appends to it."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")
    results = []
    for cache in (None, DynamicCache()):
        first = model.generate(
            torch.tensor([[5, 6, 7]]),
            max_new_tokens=4,
            do_sample=False,
            return_dict_in_generate=True,
            **{CACHE_FIELD: cache},
        )
        more = torch.cat([first.sequences, torch.tensor([[9, 10]])], dim=1)
        second = model.generate(
            more,
            **{CACHE_FIELD: cache_of(first)},
            max_new_tokens=4,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
        )
        results.append(second)
    assert torch.equal(results[0].sequences, results[1].sequences)
    assert all(torch.equal(a, b) for a, b in zip(results[0].scores, results[1].scores, strict=True))


def test_assisted_generation_crops_and_matches():
    """Assisted decoding crops the cache after rejected draft tokens; the in-place layer must rewrite those slots."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")
    torch.manual_seed(1)
    assistant = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")  # other weights: drafts rejected
    prompt = torch.tensor([[5, 6, 7, 8]])
    expected = model.generate(prompt, max_new_tokens=12, do_sample=False)
    assisted = model.generate(prompt, max_new_tokens=12, do_sample=False, assistant_model=assistant)
    assert torch.equal(assisted, expected)


def _states(batch=2, heads=2, length=3, dim=4, dtype=torch.float32):
    return torch.randn(batch, heads, length, dim, dtype=dtype), torch.randn(batch, heads, length, dim, dtype=dtype)


def _same_as_dynamic(operations):
    """The same operations on a GrowingKVLayer and a DynamicLayer: keys and values agree after each of them."""
    ours, reference = GrowingKVLayer(capacity_hint=8, min_bytes=0), DynamicLayer()
    for operation in operations:
        for layer in (ours, reference):
            operation(layer)
        assert torch.equal(ours.keys, reference.keys) and torch.equal(ours.values, reference.values)
    return ours


def test_growing_layer_appends_in_place_and_follows_dynamic_layer_everywhere():
    steps = [_states(length=3)] + [_states(length=1) for _ in range(9)]  # grows past the hint of 8
    appends = [lambda layer, s=s: layer.update(*s) for s in steps]
    layer = _same_as_dynamic(appends[:2])
    buffer = layer._buffers[0]
    layer.update(*_states(length=1))
    assert layer._buffers[0] is buffer and layer.keys.data_ptr() == buffer.data_ptr()  # written in place
    assert buffer.shape[-2] == 6  # twice the first three positions
    for _ in range(3):
        layer.update(*_states(length=1))
    assert layer._buffers[0].shape[-2] == 8  # doubling again, bounded by the hint
    _same_as_dynamic(
        appends[:4]
        + [lambda layer: layer.crop(-2)]  # a view of the buffer: later appends overwrite the dropped slots
        + appends[4:6]
        + [lambda layer: layer.reorder_cache(torch.tensor([1, 0]))]  # new tensors: copied into fresh buffers
        + appends[6:8]
        + [lambda layer: layer.batch_repeat_interleave(2)]
        + [lambda layer: layer.batch_select_indices(torch.tensor([0, 3]))]
        + appends[8:]
    )


def test_growing_layer_grows_past_its_hint_and_survives_a_reset():
    layer = GrowingKVLayer(capacity_hint=4, min_bytes=0)
    for _ in range(3):
        layer.update(*_states(length=3))
    assert layer.get_seq_length() == 9 and layer._buffers[0].shape[-2] >= 9
    layer.reset()
    assert layer.get_seq_length() == 0 and layer._buffers is None
    keys, values = _states(length=2)
    assert torch.equal(layer.update(keys, values)[0], keys)


def test_growing_layer_falls_back_to_concatenation_when_it_cannot_write_in_place():
    layer = GrowingKVLayer(min_bytes=0)
    layer.update(*_states())
    keys, values = _states(dtype=torch.float64)  # torch.cat promotes; a write into float32 buffers would round
    reference = DynamicLayer()
    reference.update(*[t.clone() for t in (layer.keys, layer.values)])
    assert torch.equal(layer.update(keys, values)[0], reference.update(keys, values)[0])
    assert layer.keys.dtype == torch.float64 and layer._buffers is None
    recorded = GrowingKVLayer(min_bytes=0)
    recorded.update(*_states())
    keys = torch.randn(2, 2, 1, 4, requires_grad=True)
    out, _ = recorded.update(keys, torch.randn(2, 2, 1, 4))
    out.sum().backward()  # concatenated, so autograd reaches the new keys
    assert torch.equal(keys.grad, torch.ones_like(keys))


def test_growing_layer_concatenates_while_small_then_appends_in_place():
    """Below `min_bytes` per cached tensor appends go through torch.cat (cheaper there); past it, into buffers."""
    row_bytes = 2 * 2 * 4 * 4  # (B=2, K=2, one position, D=4) float32
    layer, reference = GrowingKVLayer(capacity_hint=16, min_bytes=5 * row_bytes), DynamicLayer()
    for step in range(8):
        states = _states(length=3 if step == 0 else 1)
        for target in (layer, reference):
            target.update(*states)
        assert torch.equal(layer.keys, reference.keys) and torch.equal(layer.values, reference.values)
        assert (layer._buffers is not None) == (layer.get_seq_length() >= 5)


def _cross_layer(keys, values, beams):
    layer = BeamSharedCrossLayer(beams)
    layer.update(keys, values)
    return layer


def test_cross_layer_skips_reorders_among_equal_beams_only():
    beams, sequences = 3, 2
    keys = torch.randn(sequences, 2, 5, 4).repeat_interleave(beams, dim=0)  # as generate() expands encoder outputs
    values = torch.randn(sequences, 2, 5, 4).repeat_interleave(beams, dim=0)
    layer = _cross_layer(keys, values, beams)
    stored = layer.keys
    within = torch.tensor([2, 2, 0, 3, 5, 4])
    layer.reorder_cache(within)
    assert layer.keys is stored  # skipped: the same values index_select would give
    assert torch.equal(layer.keys, keys.index_select(0, within))
    across = torch.tensor([3, 1, 2, 0, 4, 5])  # rows move to another sequence: a real reorder
    layer.reorder_cache(across)
    assert torch.equal(layer.keys, keys.index_select(0, across)) and layer.keys is not stored
    differing = keys.clone()
    differing[1] += 1  # beams of the first sequence no longer equal
    layer = _cross_layer(differing, values, beams)
    layer.reorder_cache(within)
    assert torch.equal(layer.keys, differing.index_select(0, within))


def _same_as_dynamic_beams(operations):
    """The same operations on a BeamReorderedLayer and a DynamicLayer: keys and values agree after each of them."""
    ours, reference = BeamReorderedLayer(min_bytes=0), DynamicLayer()
    for operation in operations:
        results = [operation(layer) for layer in (ours, reference)]
        if results[0] is not None:  # an update returns the whole cache
            assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))
        assert ours.get_seq_length() == reference.get_seq_length()
        assert torch.equal(ours.keys, reference.keys) and torch.equal(ours.values, reference.values)
    return ours


def test_beam_layer_applies_reorders_with_the_next_append():
    steps = [_states(batch=4, length=3)] + [_states(batch=4, length=1) for _ in range(6)]
    appends = [lambda layer, s=s: layer.update(*s) for s in steps]
    reorders = [
        lambda layer, order=order: layer.reorder_cache(torch.tensor(order))
        for order in ([1, 1, 0, 3], [3, 2, 2, 0], [0, 0, 0, 1])
    ]
    _same_as_dynamic_beams(
        appends[:2]
        + [reorders[0]]
        + appends[2:3]
        + [reorders[1], reorders[2]]
        + appends[3:4]  # two reorders before an append: composed
        + [reorders[0], lambda layer: layer.crop(-1)]
        + appends[4:5]  # a crop reads (and so applies) the reorder
        + [reorders[1], lambda layer: layer.batch_select_indices(torch.tensor([0, 1, 2, 3]))]
        + appends[5:]
    )
    layer = BeamReorderedLayer(min_bytes=0)
    layer.update(*steps[0])
    layer.reorder_cache(torch.tensor([2, 2, 1, 0]))
    assert layer._pending is not None and layer.get_seq_length() == 3  # nothing copied yet
    layer.update(*steps[1])
    assert layer._pending is None and layer.keys.is_contiguous()  # laid out as torch.cat lays it out


def test_beam_layer_reorders_a_small_cache_at_once():
    """Below `min_bytes` per cached tensor a reorder is applied when asked, as DynamicLayer does; past it, deferred."""
    row_bytes = 2 * 4 * 4  # (K=2, one position, D=4) float32 of one row
    layer, reference = BeamReorderedLayer(min_bytes=4 * 5 * row_bytes), DynamicLayer()  # 4 rows × 5 positions
    for step in range(5):
        states = _states(batch=4, length=3 if step == 0 else 1)
        for target in (layer, reference):
            target.update(*states)
            target.reorder_cache(torch.tensor([3, 0, 0, 2]))
        assert (layer._pending is not None) == (layer.get_seq_length() >= 5)
        assert torch.equal(layer.keys, reference.keys) and torch.equal(layer.values, reference.values)


def test_beam_layer_falls_back_to_dynamic_layer():
    layer = BeamReorderedLayer(min_bytes=0)
    layer.update(*_states(batch=2))
    layer.reorder_cache(torch.tensor([1, 1]))
    reorder_then_cat = torch.cat(
        [layer._keys.index_select(0, torch.tensor([1, 1])).double(), torch.ones(2, 2, 1, 4, dtype=torch.float64)],
        dim=-2,
    )
    keys, _ = layer.update(torch.ones(2, 2, 1, 4, dtype=torch.float64), torch.ones(2, 2, 1, 4, dtype=torch.float64))
    assert torch.equal(keys, reorder_then_cat)  # another dtype: reorder applied, then concatenated (promoted)
    recorded = BeamReorderedLayer(min_bytes=0)
    recorded.update(*_states(batch=2))
    recorded.reorder_cache(torch.tensor([1, 0]))
    new_keys = torch.randn(2, 2, 1, 4, requires_grad=True)
    out, _ = recorded.update(new_keys, torch.randn(2, 2, 1, 4))
    out.sum().backward()
    assert torch.equal(new_keys.grad, torch.ones_like(new_keys))
    recorded.reorder_cache(torch.tensor([0, 0]))
    recorded.reset()
    assert recorded.get_seq_length() == 0 and recorded._pending is None


@pytest.mark.parametrize(
    ("model_class", "family"), [(HFAttentionForCausalLM, "decoder"), (HFAttentionForSeq2SeqLM, "seq2seq")]
)
@pytest.mark.parametrize("num_beams", [1, 3])
def test_the_cache_is_made_with_its_layers_and_is_otherwise_transformers_own(
    model_class, family, num_beams, monkeypatch
):
    """generate() makes its cache with the layers that pay from the start (nothing is swapped afterwards): a
    DynamicCache (two in an EncoderDecoderCache) with transformers' attributes and one layer per decoder layer, as
    transformers' `DynamicCache(config=...)`."""
    monkeypatch.setattr(kv_cache, "IN_PLACE_MIN_BYTES", 0)
    monkeypatch.setattr(kv_cache, "DEFERRED_REORDER_MIN_BYTES", 0)
    model = build(model_class, family)
    generation_config = model.generation_config
    generation_config.num_beams = num_beams
    generation_config.max_length = 12
    cache = kv_cache.generation_cache(
        model.config, generation_config, batch_size=2, max_cache_length=12, dtype=model.dtype, device=model.device
    )
    plain = DynamicCache(config=model.config.get_text_config(decoder=True))
    caches = [cache.self_attention_cache, cache.cross_attention_cache] if family == "seq2seq" else [cache]
    kinds = [BeamReorderedLayer if num_beams > 1 else GrowingKVLayer]
    if family == "seq2seq":
        kinds.append(BeamSharedCrossLayer if num_beams > 1 else DynamicLayer)
    for made, kind in zip(caches, kinds, strict=True):
        assert type(made) is DynamicCache and len(made.layers) == len(plain.layers)
        assert all(type(layer) is kind and not layer.is_initialized for layer in made.layers)
        assert {k: v for k, v in vars(made).items() if k != "layers"} == {
            k: v for k, v in vars(plain).items() if k != "layers"
        }
    assert isinstance(cache, EncoderDecoderCache) == (family == "seq2seq")


def test_no_cache_is_made_where_transformers_own_is_the_one():
    """Another cache kind, no cache, an assistant's cache or layers that would not pay: generate() makes
    transformers' cache (generation_cache leaves it to it)."""
    model = build(HFAttentionForCausalLM, "decoder")
    base = model.generation_config

    def made(**changes):
        config = base.__class__.from_dict({**base.to_dict(), **changes})
        return kv_cache.generation_cache(
            model.config, config, batch_size=2, max_cache_length=4096, dtype=model.dtype, device=model.device
        )

    assert made() is not None  # a long generation: in-place appends pay
    assert made(cache_implementation="static") is None
    assert made(cache_implementation="offloaded") is None
    assert made(use_cache=False) is None
    assert made(is_assistant=True) is None
    small = kv_cache.generation_cache(
        model.config, base, batch_size=1, max_cache_length=4, dtype=model.dtype, device=model.device
    )
    assert small is None
