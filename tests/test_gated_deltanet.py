"""Gated DeltaNet (`linear_attention` layers, gated_deltanet.py) against transformers' Qwen3-Next and Qwen3.5 layers.

- The mixer gives HF's `Qwen3NextGatedDeltaNet` (weights regrouped by `split_qwen3_next_projections`) and
  `Qwen3_5GatedDeltaNet` (weights copied by name) outputs on a left-padded batch longer than a chunk, every parameter
  moved from its initial value, in float32, with HF's chunk (64) and a small one; and with a cache, prefill then
  decoding steps, HF's outputs with HF's cache.
- Its chunked form equals its token-by-token form, from a zero and from a given state.
- In a decoder mixing linear and full attention: cached decoding (single tokens and a two-token continuation) gives
  the full forward's logits; the linear layers' cache does not grow with the length; generate() with the cache gives
  the tokens of generate() without it (greedy on a left-padded batch, beam search, prompt lookup's rollbacks); a
  training step gives finite gradients to every parameter; save_pretrained/from_pretrained is exact.
- Bad sizes, linear layers where they cannot run, and a cache without the layers' states are refused by name.
"""

import inspect
import subprocess
import sys

import pytest
import torch
from test_save_load import REMOTE_SCRIPT, remote_code_env
from transformers import DynamicCache, Qwen3NextConfig
from transformers.cache_utils import LinearAttentionLayer
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

from hf_attention import HFAttentionDecoderConfig, HFAttentionEncoderConfig, HFAttentionForCausalLM
from hf_attention.architectures.qwen3_next import merge_qwen3_next_projections, split_qwen3_next_projections
from hf_attention.modeling.gated_deltanet import (
    CHUNK_SIZE,
    GatedDeltaNet,
    chunked_gated_delta_rule,
    recurrent_gated_delta_rule,
)
from hf_attention.modeling.layer_plan import plan_layers

# Whether the installed transformers' cache records past linear-attention states (assisted decoding's rollbacks).
RECORDS_PAST_STATES = hasattr(DynamicCache, "get_recurrent_states_to_keep")
TOLERANCE = 1e-4  # linear attention's float32 tolerance against HF (the chunked form sums in another order)
SIZES = {  # Hv = 2·Hk (grouped heads), Dk ≠ Dv (a transposed state would not fit)
    "hidden_size": 32,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 6,
    "linear_conv_kernel_dim": 4,
}
LENGTH = 70  # longer than HF's chunk of 64
PADDING = (0, 5, 23)  # left padding of each row


def left_padding_mask(length: int = LENGTH, padding=PADDING) -> torch.Tensor:
    mask = torch.ones(len(padding), length, dtype=torch.long)
    for row, pad in enumerate(padding):
        mask[row, :pad] = 0
    return mask


def randomise(module: torch.nn.Module) -> None:
    """Every parameter away from its start: weights, A_log and dt_bias, the convolution, the norm's gain."""
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if name == "A_log":
                parameter.copy_(torch.empty_like(parameter).uniform_(0.5, 4.0).log())
            elif name == "norm.weight":
                parameter.copy_(1 + 0.5 * torch.randn_like(parameter))
            else:
                parameter.normal_(0.0, 0.3)


def ours_like(sizes: dict, chunk_size: int = 64) -> GatedDeltaNet:
    return GatedDeltaNet(
        hidden_size=sizes["hidden_size"],
        num_key_heads=sizes["linear_num_key_heads"],
        num_value_heads=sizes["linear_num_value_heads"],
        key_head_dim=sizes["linear_key_head_dim"],
        value_head_dim=sizes["linear_value_head_dim"],
        conv_kernel_size=sizes["linear_conv_kernel_dim"],
        norm_eps=1e-6,
        layer_idx=0,
        chunk_size=chunk_size,
    )


def qwen3_next_pair(chunk_size: int = 64):
    """HF's Qwen3-Next layer, randomised, its config, and ours with its weights."""
    config = Qwen3NextConfig(**SIZES, num_hidden_layers=1, layer_types=["linear_attention"], rms_norm_eps=1e-6)
    theirs = Qwen3NextGatedDeltaNet(config, layer_idx=0).eval()
    randomise(theirs)
    ours = ours_like(SIZES, chunk_size).eval()
    weights = {key: value for key, value in theirs.state_dict().items() if not key.startswith("in_proj_")}
    weights |= split_qwen3_next_projections(
        theirs.in_proj_qkvz.weight,
        theirs.in_proj_ba.weight,
        num_key_heads=SIZES["linear_num_key_heads"],
        num_value_heads=SIZES["linear_num_value_heads"],
        key_head_dim=SIZES["linear_key_head_dim"],
        value_head_dim=SIZES["linear_value_head_dim"],
    )
    ours.load_state_dict(weights)  # strict: the regrouped rows fill every parameter
    return theirs, config, ours


def max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@pytest.mark.parametrize("chunk_size", [64, 16])
def test_qwen3_next_layer_on_a_left_padded_batch_longer_than_a_chunk(chunk_size):
    torch.manual_seed(0)
    theirs, _, ours = qwen3_next_pair(chunk_size)
    hidden = torch.randn(len(PADDING), LENGTH, SIZES["hidden_size"])
    mask = left_padding_mask()
    with torch.no_grad():
        expected = theirs(hidden, attention_mask=mask)
        output, weights = ours(hidden, attention_mask=mask)
    assert weights is None
    assert max_difference(output, expected) <= TOLERANCE
    # padding changes nothing in a row: the padded row's real positions are the row's alone
    with torch.no_grad():
        alone, _ = ours(hidden[2:, PADDING[2] :])
    assert max_difference(output[2, PADDING[2] :], alone[0]) <= TOLERANCE


def test_qwen3_5_layer_converts_by_copying():
    torch.manual_seed(1)
    config = Qwen3_5TextConfig(**SIZES, num_hidden_layers=1, layer_types=["linear_attention"], rms_norm_eps=1e-6)
    theirs = Qwen3_5GatedDeltaNet(config, layer_idx=0).eval()
    randomise(theirs)
    ours = ours_like(SIZES).eval()
    ours.load_state_dict(theirs.state_dict())  # strict: the same names and shapes
    hidden = torch.randn(len(PADDING), LENGTH, SIZES["hidden_size"])
    mask = left_padding_mask()
    with torch.no_grad():
        assert max_difference(ours(hidden, attention_mask=mask)[0], theirs(hidden, attention_mask=mask)) <= TOLERANCE


def our_cache(num_layers: int = 1) -> DynamicCache:
    """The cache a decoder of `num_layers` linear-attention layers makes (transformers' LinearAttentionLayer)."""
    config = HFAttentionDecoderConfig(
        **SIZES, num_attention_heads=4, num_hidden_layers=num_layers, layer_types=["linear_attention"] * num_layers
    )
    return DynamicCache(config=config)


def test_cached_prefill_and_decoding_match_hf_with_its_cache():
    torch.manual_seed(2)
    theirs, config, ours = qwen3_next_pair(chunk_size=16)
    # the layer's own name for its cache: `cache` (transformers ≥ 5.24), `cache_params` before
    field = "cache" if "cache" in inspect.signature(theirs.forward).parameters else "cache_params"
    steps = 4
    hidden = torch.randn(len(PADDING), LENGTH + steps, SIZES["hidden_size"])
    mask = left_padding_mask()
    their_cache, cache = DynamicCache(config=config), our_cache()
    assert isinstance(cache.layers[0], LinearAttentionLayer)
    with torch.no_grad():
        expected = [theirs(hidden[:, :LENGTH], attention_mask=mask, **{field: their_cache})]
        outputs = [ours(hidden[:, :LENGTH], attention_mask=mask, cache=cache)[0]]
        for step in range(LENGTH, LENGTH + steps):  # one token at a time: the recurrent form from the cached state
            expected.append(theirs(hidden[:, step : step + 1], **{field: their_cache}))
            outputs.append(ours(hidden[:, step : step + 1], cache=cache)[0])
    for output, reference in zip(outputs, expected, strict=True):
        assert max_difference(output, reference) <= TOLERANCE
    if RECORDS_PAST_STATES:  # the layer's states as transformers ≥ 5.24 holds them (one per recorded step)
        states = cache.layers[0].recurrent_states[0], their_cache.layers[0].recurrent_states[0]
        assert max_difference(*states) <= TOLERANCE
        assert torch.equal(cache.layers[0].conv_states[0], their_cache.layers[0].conv_states[0])


@pytest.mark.parametrize("with_state", [False, True])
def test_the_chunked_form_is_the_recurrent_form(with_state):
    torch.manual_seed(3)
    batch, heads, length, key_dim, value_dim = 2, 3, 37, 8, 5  # 37: chunks of 8 and a partial one
    query = torch.nn.functional.normalize(torch.randn(batch, heads, length, key_dim), dim=-1) * key_dim**-0.5
    key = torch.nn.functional.normalize(torch.randn(batch, heads, length, key_dim), dim=-1)
    value = torch.randn(batch, heads, length, value_dim)
    decay = -torch.rand(batch, heads, length) * 2  # g ≤ 0
    beta = torch.rand(batch, heads, length)
    state = (
        torch.randn(batch, heads, key_dim, value_dim) if with_state else torch.zeros(batch, heads, key_dim, value_dim)
    )
    recurrent, states = recurrent_gated_delta_rule(query, key, value, decay, beta, state)
    chunked, final = chunked_gated_delta_rule(query, key, value, decay, beta, state, chunk_size=8)
    assert max_difference(chunked, recurrent) <= TOLERANCE
    assert max_difference(final, states[-1]) <= TOLERANCE
    assert len(states) == length


def hybrid_config(**overrides) -> HFAttentionDecoderConfig:
    """A decoder whose layers mix Gated DeltaNet and full attention, the first one linear (as in Qwen3-Next)."""
    values = {
        "vocab_size": 64,
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 48,
        "num_hidden_layers": 3,
        "layer_types": ["linear_attention", "full_attention", "linear_attention"],
        "linear_num_key_heads": 2,
        "linear_value_head_dim": 6,
        "position_encoding": "rotary",
        "norm_position": "pre",
        "norm_type": "rmsnorm",
        "hidden_act": "swiglu",
        "hidden_dropout_prob": 0.0,
        "pad_token_id": 0,
    }
    return HFAttentionDecoderConfig(**{**values, **overrides})


def hybrid_model(**overrides) -> HFAttentionForCausalLM:
    torch.manual_seed(4)
    model = HFAttentionForCausalLM(hybrid_config(**overrides)).eval()
    for layer in model.model.decoder.layers:
        if isinstance(layer.self_attn, GatedDeltaNet):
            randomise(layer.self_attn)
            layer.self_attn.chunk_size = 8  # prompts of 14 tokens cross a chunk
    return model


def test_the_config_derives_the_sizes_and_the_plan_gives_linear_layers_the_padding_mask():
    config = hybrid_config()
    assert (config.linear_num_value_heads, config.linear_num_key_heads) == (4, 2)  # num_attention_heads; given
    assert (config.linear_key_head_dim, config.linear_value_head_dim, config.linear_conv_kernel_dim) == (8, 6, 4)
    plan = plan_layers(config, 3)
    assert plan.layers == [("padding", None), ("full_attention", "global"), ("padding", None)]
    assert (plan.first_full, plan.uniform) == (1, False)
    model = HFAttentionForCausalLM(config)
    assert [type(layer.self_attn).__name__ for layer in model.model.decoder.layers] == [
        "GatedDeltaNet",
        "MultiHeadAttention",
        "GatedDeltaNet",
    ]
    plain = HFAttentionDecoderConfig(vocab_size=64, hidden_size=32, num_attention_heads=4, num_hidden_layers=2)
    assert plain.linear_num_value_heads is None and plain.linear_conv_kernel_dim is None  # unset where unused


def left_padded_ids(length: int, padding=(0, 4), seed: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 64, (len(padding), length), generator=generator)
    mask = left_padding_mask(length, padding)
    return ids.masked_fill(mask == 0, 0), mask


def test_cached_decoding_gives_the_full_forward():
    model = hybrid_model()
    ids, mask = left_padded_ids(20)
    prefill = 14
    with torch.no_grad():
        full = model(ids, attention_mask=mask, use_cache=False).logits
        output = model(ids[:, :prefill], attention_mask=mask[:, :prefill], use_cache=True)
        cache, pieces = output.past_key_values, [output.logits]
        assert isinstance(cache.layers[0], LinearAttentionLayer) and isinstance(cache.layers[2], LinearAttentionLayer)
        # single tokens (the recurrent form), then two tokens after cached ones (the chunked form from the state)
        for start, end in ((14, 15), (15, 16), (16, 17), (17, 18), (18, 20)):
            output = model(ids[:, start:end], attention_mask=mask[:, :end], cache=cache, use_cache=True)
            pieces.append(output.logits)
            cache = output.past_key_values
    real = mask.bool()
    assert max_difference(torch.cat(pieces, dim=1)[real], full[real]) <= TOLERANCE


def linear_state_bytes(cache) -> int:
    """Bytes held by the cache's linear-attention layers: their convolution and recurrent states."""
    layers = [layer for layer in cache.layers if isinstance(layer, LinearAttentionLayer)]
    assert layers
    return sum(
        tensor.numel() * tensor.element_size()
        for layer in layers
        for tensor in (*layer.conv_states.values(), *layer.recurrent_states.values())
    )


def test_the_linear_layers_cache_does_not_grow_with_the_length():
    model = hybrid_model()
    sizes = []
    for length in (6, 40):
        ids, mask = left_padded_ids(length)
        with torch.no_grad():
            cache = model(ids, attention_mask=mask, use_cache=True).past_key_values
            for _ in range(3):
                ids = torch.cat([ids, torch.full((2, 1), 7)], dim=1)
                mask = torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], dim=1)
                cache = model(ids[:, -1:], attention_mask=mask, cache=cache, use_cache=True).past_key_values
        sizes.append(linear_state_bytes(cache))
        assert cache.get_seq_length(1) == length + 3  # the full-attention layer grows
    config = model.config
    channels = 2 * config.linear_num_key_heads * config.linear_key_head_dim
    channels += config.linear_num_value_heads * config.linear_value_head_dim
    per_layer = 2 * channels * config.linear_conv_kernel_dim * 4  # (B, channels, K) float32
    per_layer += 2 * config.linear_num_value_heads * config.linear_key_head_dim * config.linear_value_head_dim * 4
    assert sizes == [2 * per_layer, 2 * per_layer]


GENERATION = {"max_new_tokens": 8, "min_new_tokens": 8, "do_sample": False, "pad_token_id": 0}


def test_generate_with_the_cache_gives_the_tokens_of_generate_without_it():
    model = hybrid_model()
    ids, mask = left_padded_ids(14)
    with torch.no_grad():
        greedy = model.generate(ids, attention_mask=mask, **GENERATION)
        assert torch.equal(greedy, model.generate(ids, attention_mask=mask, use_cache=False, **GENERATION))
        beams = {"num_beams": 3, **GENERATION}  # beam search reorders the linear layers' states between steps
        beam = model.generate(ids, attention_mask=mask, **beams)
        assert torch.equal(beam, model.generate(ids, attention_mask=mask, use_cache=False, **beams))
        # prompt lookup proposes several tokens and rolls the cache back over the rejected ones (past recording,
        # which transformers' linear-attention cache has from 5.24 on)
        repeated = torch.cat([ids[:1, :7], ids[:1, :7]], dim=1)
        if RECORDS_PAST_STATES:
            looked_up = model.generate(repeated, prompt_lookup_num_tokens=3, **GENERATION)
            assert torch.equal(looked_up, model.generate(repeated, **GENERATION))
        else:  # refused, as transformers refuses its own Qwen3-Next there: the state cannot go back
            with pytest.raises(ValueError, match="stateful"):
                model.generate(repeated, prompt_lookup_num_tokens=3, **GENERATION)


def test_a_training_step_and_an_exact_save_and_load(tmp_path):
    model = hybrid_model().train()
    ids, mask = left_padded_ids(20)
    loss = model(ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
    linear = model.model.decoder.layers[0].self_attn
    for parameter in (linear.A_log, linear.dt_bias, linear.conv1d.weight, linear.norm.weight, linear.in_proj_a.weight):
        assert parameter.grad.abs().sum() > 0  # every piece of the layer takes part
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.layer_types == model.config.layer_types
    assert loaded.config.linear_num_key_heads == 2 and loaded.config.linear_value_head_dim == 6
    for (name, tensor), (loaded_name, loaded_tensor) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert name == loaded_name and torch.equal(tensor, loaded_tensor), name
    for layer in loaded.model.decoder.layers:
        if isinstance(layer.self_attn, GatedDeltaNet):
            layer.self_attn.chunk_size = 8  # as the saved model's (a computing choice, not a weight or a knob)
    with torch.no_grad():
        assert torch.equal(model(ids, attention_mask=mask).logits, loaded(ids, attention_mask=mask).logits)


def test_a_checkpoint_runs_as_remote_code_without_hf_attention(tmp_path):
    model = hybrid_model()
    for layer in model.model.decoder.layers:
        if isinstance(layer.self_attn, GatedDeltaNet):
            layer.self_attn.chunk_size = CHUNK_SIZE  # as a loaded model computes
    model.save_pretrained(tmp_path / "checkpoint")
    assert (tmp_path / "checkpoint" / "gated_deltanet.py").is_file()  # shipped with the code that imports it
    ids, mask = left_padded_ids(12)
    torch.save({"input_ids": ids, "attention_mask": mask}, tmp_path / "inputs.pt")
    (tmp_path / "remote.py").write_text(REMOTE_SCRIPT)
    done = subprocess.run(
        [sys.executable, "remote.py", str(tmp_path / "checkpoint"), "AutoModelForCausalLM", "inputs.pt", "logits.pt"],
        cwd=tmp_path,
        env=remote_code_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with torch.no_grad():
        assert torch.equal(torch.load(tmp_path / "logits.pt"), model(ids, attention_mask=mask).logits)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"linear_num_key_heads": 3}, "linear_num_value_heads=4"),  # 4 value heads in groups of 3
        ({"linear_num_value_heads": 0}, "linear_num_value_heads=0"),
        ({"linear_key_head_dim": -8}, "linear_key_head_dim=-8"),
        ({"linear_value_head_dim": 2.5}, "linear_value_head_dim=2.5"),
        ({"linear_conv_kernel_dim": 0}, "linear_conv_kernel_dim=0"),
        ({"layer_types": ["full_attention"] * 3}, "linear_num_key_heads=2"),  # sizes for layers that do not exist
        ({"layer_types": ["linear_attention", "mamba", "full_attention"]}, "layer_types="),
    ],
)
def test_bad_sizes_are_refused_by_name(overrides, field):
    with pytest.raises(ValueError, match=field):
        hybrid_config(**overrides)


def test_linear_layers_where_they_cannot_run_are_refused():
    with pytest.raises(ValueError, match="decoder family"):  # an encoder reads both ways; the recurrence does not
        HFAttentionEncoderConfig(
            vocab_size=64,
            hidden_size=32,
            num_attention_heads=4,
            num_hidden_layers=2,
            layer_types=["linear_attention"] * 2,
        )
    model = hybrid_model()
    ids, _ = left_padded_ids(8, padding=(0, 0))
    with pytest.raises(ValueError, match="DynamicCache\\(config=model.config\\)"):
        model(ids, cache=DynamicCache(), use_cache=True)  # a cache without the layers' states
    packed = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]] * 2)  # two texts per row, no attention mask
    with pytest.raises(ValueError, match="packed rows"):
        model(ids, position_ids=packed, use_cache=False)  # as a padding-free trainer calls it


def test_qwen3_next_projections_regroup_and_back_exactly():
    """The export writes Qwen3-Next's packed rows back from ours: merge inverts split bit for bit."""
    theirs, _, _ = qwen3_next_pair()
    sizes = {
        "num_key_heads": SIZES["linear_num_key_heads"],
        "num_value_heads": SIZES["linear_num_value_heads"],
        "key_head_dim": SIZES["linear_key_head_dim"],
        "value_head_dim": SIZES["linear_value_head_dim"],
    }
    split = split_qwen3_next_projections(theirs.in_proj_qkvz.weight, theirs.in_proj_ba.weight, **sizes)
    qkvz, ba = merge_qwen3_next_projections(split, **sizes)
    assert torch.equal(qkvz, theirs.in_proj_qkvz.weight) and torch.equal(ba, theirs.in_proj_ba.weight)
