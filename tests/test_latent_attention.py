"""Multi-head latent attention (`kv_lora_rank`, hf_attention/modeling/latent_attention.py) against transformers'
DeepSeek-V3 and DeepSeek-V2 attention layers, and in our decoder.

- The layer gives HF's `DeepseekV3Attention` outputs (weights copied by name, every parameter moved from its initial
  value) on a left-padded batch, with and without the queries' low-rank path, adjacent or halved rotation pairs,
  plain RoPE and YaRN with `mscale_all_dim`, eager and SDPA, in float32; `DeepseekV2Attention` (complex rotation of
  adjacent pairs) too; and with a cache, prefill then decoding steps (ours absorbed, theirs expanded) give HF's
  outputs with HF's cache.
- In a decoder: prefill then cached decoding steps (one token, then two) give the full forward's logits, under
  eager, SDPA and FlexAttention; the cache holds kv_lora_rank + qk_rope_head_dim numbers per token and layer, against
  H·(n + ρ) + H·v for the same model's per-head keys and values; a layer plan with Gated DeltaNet layers keeps them.
- A from-scratch model trains one step with finite gradients for every parameter and round-trips
  save_pretrained/from_pretrained exactly; greedy and beam generate() run with the latent cache and give the tokens
  of generate() without a cache.
- Bad knob values raise ValueError naming the field.
"""

import pytest
import torch
from modern_references import max_difference_at_real
from transformers import DeepseekV2Config, DeepseekV3Config, DynamicCache
from transformers.cache_utils import DynamicLayer, LinearAttentionLayer
from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Attention, DeepseekV2RotaryEmbedding
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM
from hf_attention.modeling.cache_argument import CACHE_FIELD, cache_of
from hf_attention.modeling.latent_attention import LatentCacheLayer, MultiHeadLatentAttention
from hf_attention.modeling.layer_plan import plan_layers
from hf_attention.modeling.positional import RotaryEmbedding

TOLERANCE = 1e-5  # float32
# H = 4 heads; r = 12, r_q = 10; n = 6, ρ = 4, v = 5: the value width differs from the query/key width n + ρ = 10
SIZES = {
    "hidden_size": 32,
    "num_attention_heads": 4,
    "kv_lora_rank": 12,
    "qk_nope_head_dim": 6,
    "qk_rope_head_dim": 4,
    "v_head_dim": 5,
}
YARN = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 16,
    "mscale": 0.9,
    "mscale_all_dim": 0.7,
    "beta_fast": 32,
    "beta_slow": 1,
}
PADDING = (0, 3, 6)  # left padding of each row
LENGTH = 11


def left_padding_mask(length: int = LENGTH, padding=PADDING) -> torch.Tensor:
    mask = torch.ones(len(padding), length, dtype=torch.long)
    for row, pad in enumerate(padding):
        mask[row, :pad] = 0
    return mask


def randomise(module: torch.nn.Module, seed: int = 0) -> None:
    """Every parameter away from its start: matrices redrawn, the latent norms' gains around 1, biases drawn."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if "layernorm" in name:
                parameter.copy_(1 + 0.5 * noise)
            else:
                parameter.copy_(0.3 * noise)


def hf_config(cls, q_lora_rank, rope_interleave, yarn, attn):
    rope = {**YARN, "rope_theta": 10000.0} if yarn else {"rope_type": "default", "rope_theta": 10000.0}
    config = cls(
        **SIZES,
        num_key_value_heads=4,
        q_lora_rank=q_lora_rank,
        rope_interleave=rope_interleave,
        attention_bias=True,
        max_position_embeddings=64,
        rope_parameters=rope,
    )
    config._attn_implementation = attn
    return config


def our_config(q_lora_rank=None, rope_interleave=False, yarn=False, attn="eager", **extra):
    rope = {}
    if yarn:
        rope = {"rope_type": "yarn", "rope_scaling_options": {k: v for k, v in YARN.items() if k != "rope_type"}}
    return HFAttentionDecoderConfig(
        **SIZES,
        q_lora_rank=q_lora_rank,
        rope_interleave=rope_interleave,
        position_encoding="rotary",
        max_position_embeddings=64,
        attn_implementation=attn,
        **rope,
        **extra,
    )


def allowed_keys(attention_mask: torch.Tensor, past: int = 0) -> torch.Tensor:
    """(B, 1, T, S) bool: causal (queries after `past` cached tokens) and no padded key."""
    length = attention_mask.shape[1] - past
    causal = torch.ones(length, past + length, dtype=torch.bool).tril(past)
    return causal[None, None] & attention_mask.bool()[:, None, None, :]


def additive(allowed: torch.Tensor) -> torch.Tensor:
    return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)


def positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each token's position: the real tokens before it (our stack's positions under left padding)."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def hf_and_ours(q_lora_rank, rope_interleave, yarn, attn, v2=False):
    """HF's attention layer (randomised) and ours with its weights, plus the two rotary embeddings."""
    torch.manual_seed(0)
    cls, attention, rotary = (
        (DeepseekV2Config, DeepseekV2Attention, DeepseekV2RotaryEmbedding)
        if v2
        else (DeepseekV3Config, DeepseekV3Attention, DeepseekV3RotaryEmbedding)
    )
    reference_config = hf_config(cls, q_lora_rank, rope_interleave, yarn, attn)
    theirs = attention(reference_config, layer_idx=0).eval()
    randomise(theirs)
    config = our_config(q_lora_rank, rope_interleave, yarn, attn)
    ours = MultiHeadLatentAttention.from_config(config, layer_idx=0).eval()
    ours.load_state_dict(theirs.state_dict())  # the same names and shapes
    return theirs, rotary(reference_config), ours, RotaryEmbedding.from_config(config, bidirectional=False)


CASES = [
    pytest.param(q_lora_rank, interleave, yarn, attn, id=f"q_lora={q_lora_rank}-interleave={interleave}-{rope}-{attn}")
    for q_lora_rank in (None, 10)
    for interleave in (True, False)
    for yarn, rope in ((False, "default"), (True, "yarn"))
    for attn in ("eager", "sdpa")
]


@pytest.mark.parametrize(("q_lora_rank", "rope_interleave", "yarn", "attn"), CASES)
def test_the_layer_gives_deepseek_v3_attention(q_lora_rank, rope_interleave, yarn, attn):
    theirs, their_rotary, ours, our_rotary = hf_and_ours(q_lora_rank, rope_interleave, yarn, attn)
    if yarn:  # the softmax scale carries mscale(factor, mscale_all_dim)²: not 1/√(n + ρ)
        assert ours.scaling == pytest.approx(theirs.scaling, rel=1e-12) and ours.scaling != 10**-0.5
    mask = left_padding_mask()
    hidden = torch.randn(3, LENGTH, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, _ = theirs(
            hidden,
            position_embeddings=their_rotary(hidden, positions(mask)),
            attention_mask=additive(allowed_keys(mask)),
        )
        cos, sin = our_rotary.rotary_tables(positions(mask), hidden.dtype)
        output, _ = ours(hidden, attention_mask=allowed_keys(mask), position_embeddings=(cos, sin))
    assert max_difference_at_real(expected, output, mask) <= TOLERANCE


@pytest.mark.parametrize("q_lora_rank", [None, 10])
def test_the_layer_gives_deepseek_v2_attention(q_lora_rank):
    """DeepSeek-V2 rotates adjacent pairs as complex numbers and keeps them adjacent: rope_interleave=True."""
    theirs, their_rotary, ours, our_rotary = hf_and_ours(q_lora_rank, True, False, "eager", v2=True)
    mask = left_padding_mask()
    hidden = torch.randn(3, LENGTH, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected, _ = theirs(
            hidden,
            position_embeddings=their_rotary(hidden, positions(mask)),
            attention_mask=additive(allowed_keys(mask)),
        )
        output, _ = ours(
            hidden,
            attention_mask=allowed_keys(mask),
            position_embeddings=our_rotary.rotary_tables(positions(mask), hidden.dtype),
        )
    assert max_difference_at_real(expected, output, mask) <= TOLERANCE


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_cached_decoding_gives_hf_with_its_cache(attn):
    """Prefill 7 tokens, then two steps of one token and one of two: ours reads the latents in the absorbed form,
    HF decompresses them; the caches hold the same tensors."""
    theirs, their_rotary, ours, our_rotary = hf_and_ours(10, True, True, attn)
    mask = left_padding_mask()
    hidden = torch.randn(3, LENGTH, 32, generator=torch.Generator().manual_seed(3))
    their_cache, our_cache = DynamicCache(), DynamicCache()
    our_cache.layers.append(LatentCacheLayer())
    for start, end in ((0, 7), (7, 8), (8, 9), (9, 11)):
        step, step_mask = hidden[:, start:end], mask[:, :end]
        step_positions = positions(step_mask)[:, start:end]
        allowed = allowed_keys(step_mask, past=start)
        with torch.no_grad():
            expected, _ = theirs(
                step,
                position_embeddings=their_rotary(step, step_positions),
                attention_mask=additive(allowed),
                **{CACHE_FIELD: their_cache},
            )
            output, _ = ours(
                step,
                attention_mask=allowed,
                position_embeddings=our_rotary.rotary_tables(step_positions, step.dtype),
                cache=our_cache,
            )
        assert max_difference_at_real(expected, output, mask[:, start:end]) <= TOLERANCE, (start, end)
    assert torch.equal(their_cache.layers[0].keys, our_cache.layers[0].latents)
    assert (their_cache.layers[0].values - our_cache.layers[0].rotated_keys).abs().max() <= TOLERANCE


def tiny_model(attn="eager", seed=0, **extra) -> HFAttentionForCausalLM:
    config = our_config(
        q_lora_rank=10,
        rope_interleave=True,
        yarn=True,
        attn=attn,
        vocab_size=61,
        num_hidden_layers=2,
        intermediate_size=48,
        norm_position="pre",
        norm_type="rmsnorm",
        hidden_act="swiglu",
        hidden_dropout_prob=0.0,
        pad_token_id=0,
        **extra,
    )
    torch.manual_seed(seed)
    model = HFAttentionForCausalLM(config).eval()
    randomise(model, seed)
    return model


def left_padded_ids(length=LENGTH, padding=PADDING, seed=4):
    mask = left_padding_mask(length, padding)
    ids = torch.randint(3, 61, mask.shape, generator=torch.Generator().manual_seed(seed)).masked_fill(mask == 0, 0)
    return ids, mask


@pytest.mark.parametrize("attn", ["eager", "sdpa", "flex_attention"])
def test_cached_decoding_gives_the_full_forward(attn):
    model = tiny_model(attn)
    ids, mask = left_padded_ids()
    with torch.no_grad():
        full = model(ids, attention_mask=mask, use_cache=False).logits
        cache = None
        for start, end in ((0, 6), (6, 7), (7, 8), (8, 10), (10, 11)):
            output = model(ids[:, start:end], attention_mask=mask[:, :end], cache=cache, use_cache=True)
            cache = cache_of(output)
            assert max_difference_at_real(full[:, start:end], output.logits, mask[:, start:end]) <= TOLERANCE
    assert all(isinstance(layer, LatentCacheLayer) for layer in cache.layers)


def test_the_cache_holds_the_latent_and_one_rotated_key_per_token():
    """r + ρ = 16 numbers per token and layer (64 bytes in float32), where the same model's per-head keys and values
    take H·(n + ρ) + H·v = 40 + 20 = 60 numbers (240 bytes)."""
    model = tiny_model()
    ids, mask = left_padded_ids()
    with torch.no_grad():
        cache = cache_of(model(ids, attention_mask=mask, use_cache=True))
    for index, layer in enumerate(cache.layers):
        assert isinstance(layer, LatentCacheLayer)
        assert layer.latents.shape == (3, 1, LENGTH, 12) and layer.rotated_keys.shape == (3, 1, LENGTH, 4)
        assert layer.bytes_per_token() == (12 + 4) * 4
        per_head = DynamicLayer()  # what per-head attention caches: every head's key and value
        per_head.update(*model.model.decoder.layers[index].self_attn.expand_latents(layer.latents, layer.rotated_keys))
        assert per_head.keys.shape == (3, 4, LENGTH, 6 + 4) and per_head.values.shape == (3, 4, LENGTH, 5)
        per_head_bytes = sum(t.numel() * t.element_size() for t in (per_head.keys, per_head.values))
        assert per_head_bytes // (3 * LENGTH) == (4 * (6 + 4) + 4 * 5) * 4
    with pytest.raises(ValueError, match="per-head keys and values belong in a DynamicLayer"):
        LatentCacheLayer().update(torch.zeros(1, 4, 2, 10), torch.zeros(1, 4, 2, 5))


def test_the_plan_gives_full_attention_layers_latent_attention():
    """layer_types keeps transformers' names (full_attention, as DeepSeek-V3's config says); the plan maps them, and
    Gated DeltaNet layers (Kimi Linear's mixture) keep their own mixer and cache slot."""
    config = our_config(num_hidden_layers=3, layer_types=["linear_attention", "full_attention", "linear_attention"])
    plan = plan_layers(config, 3)
    assert config.layer_types == ["linear_attention", "full_attention", "linear_attention"]
    assert plan.mixers == ["linear_attention", "latent_attention", "linear_attention"]
    assert plan.layers[1] == ("full_attention", "global") and plan.first_full == 1
    model = HFAttentionForCausalLM(config).eval()
    assert isinstance(model.model.decoder.layers[1].self_attn, MultiHeadLatentAttention)
    with torch.no_grad():
        cache = cache_of(model(torch.randint(3, 50, (2, 5)), use_cache=True))
    assert [type(layer) for layer in cache.layers] == [LinearAttentionLayer, LatentCacheLayer, LinearAttentionLayer]
    assert cache.get_seq_length(1) == 5
    plain = HFAttentionDecoderConfig(num_hidden_layers=2)  # no kv_lora_rank: nothing changes
    assert plan_layers(plain, 2).mixers == ["full_attention", "full_attention"]


def test_a_training_step_and_an_exact_save_and_load(tmp_path):
    model = tiny_model("sdpa").train()
    ids, mask = left_padded_ids()
    labels = ids.masked_fill(mask == 0, -100)
    loss = model(ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.kv_lora_rank == 12 and loaded.config.head_dim == 4 and loaded.config.v_head_dim == 5
    with torch.no_grad():
        assert torch.equal(model(ids, attention_mask=mask).logits, loaded(ids, attention_mask=mask).logits)


@pytest.mark.parametrize(("num_beams", "cache_implementation"), [(1, None), (3, None), (1, "static")])
def test_generate_with_the_latent_cache_gives_the_tokens_without_a_cache(num_beams, cache_implementation):
    """Greedy and beam search with the latent cache (`latent_cache`); a static cache holds the same two tensors."""
    model = tiny_model("sdpa", seed=5)
    ids, mask = left_padded_ids(length=6, padding=(0, 2, 4))
    options = {"max_new_tokens": 6, "do_sample": False, "num_beams": num_beams, "pad_token_id": 0}
    with torch.no_grad():
        cached = model.generate(
            ids,
            attention_mask=mask,
            return_dict_in_generate=True,
            cache_implementation=cache_implementation,
            **options,
        )
        uncached = model.generate(ids, attention_mask=mask, use_cache=False, **options)
    assert torch.equal(cached.sequences, uncached)
    layers = cached.past_key_values.layers
    if cache_implementation is None:
        assert all(isinstance(layer, LatentCacheLayer) for layer in layers)
    assert layers[0].keys.shape[:2] == (3 * num_beams, 1) and layers[0].keys.shape[-1] == 12  # c
    assert layers[0].values.shape[-1] == 4  # k_rot


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kv_lora_rank": 0}, "kv_lora_rank"),
        ({"kv_lora_rank": 12, "qk_nope_head_dim": None}, "qk_nope_head_dim"),
        ({"kv_lora_rank": 12, "qk_rope_head_dim": None}, "qk_rope_head_dim"),
        ({"kv_lora_rank": 12, "qk_rope_head_dim": 5}, "qk_rope_head_dim"),
        ({"kv_lora_rank": 12, "v_head_dim": -1}, "v_head_dim"),
        ({"kv_lora_rank": 12, "q_lora_rank": 0}, "q_lora_rank"),
        ({"kv_lora_rank": 12, "rope_interleave": "yes"}, "rope_interleave"),
        ({"kv_lora_rank": 12, "head_dim": 8}, "head_dim"),
        ({"kv_lora_rank": 12, "num_key_value_heads": 2}, "num_key_value_heads"),
        ({"kv_lora_rank": 12, "partial_rotary_factor": 0.5}, "partial_rotary_factor"),
        ({"kv_lora_rank": 12, "qk_norm": "head"}, "qk_norm"),
        ({"kv_lora_rank": 12, "sliding_window": 4}, "sliding_window"),
        ({"kv_lora_rank": 12, "attention_score": "additive"}, "attention_score"),
        ({"kv_lora_rank": 12, "attn_logit_softcapping": 30.0}, "attn_logit_softcapping"),
        ({"kv_lora_rank": 12, "attention_sinks": True}, "attention_sinks"),
        ({"kv_lora_rank": 12, "attention_output_gate": True}, "attention_output_gate"),
        ({"kv_lora_rank": 12, "position_encoding": "none", "rope_interleave": True}, "rope_interleave"),
        ({"kv_lora_rank": None, "q_lora_rank": 10}, "q_lora_rank"),
        ({"kv_lora_rank": None, "v_head_dim": 5}, "v_head_dim"),
    ],
)
def test_bad_knob_values_are_refused_by_name(overrides, field):
    values = {**SIZES, "position_encoding": "rotary", **overrides}
    if values.get("kv_lora_rank") is None:
        values = {key: value for key, value in values.items() if key not in SIZES or key in overrides}
        values |= {"hidden_size": 32, "num_attention_heads": 4}
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        HFAttentionDecoderConfig(**values)
