"""Gated attention (`attention_output_gate`, Qwen3-Next, Qwen3.5; Qiu et al. 2025): q_proj also gives each head a
gate g beside its query ([q_h | g_h]), and the attention output is multiplied by σ(g) before o_proj.

Against transformers' Qwen3NextAttention (tiny, every parameter moved from its start: its (1 + w) QK-norms are our
`qk_norm="head"` with `norm_type="offset_rmsnorm"`, its partial rotation our `partial_rotary_factor`): eager and sdpa
on a left-padded batch with grouped heads, and a cached decoding step. A training step (with the fused q/k/v product
of `fuse_projections`) computes the forward of inference; a whole model trains (the gate's half of q_proj gets
gradients), saves and loads exactly, generates with its cache what it computes without; an export to an
architecture without the gate is refused.
"""

import pytest
import torch
from conftest import left_pad, tiny_config
from test_to_hf import LLAMA
from transformers import DynamicCache, Qwen3NextConfig
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention, Qwen3NextRotaryEmbedding

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM
from hf_attention.conversion.to_hf import to_hf
from hf_attention.modeling.builders import build_attention, build_positional
from hf_attention.modeling.cache_argument import CACHE_FIELD
from hf_attention.modeling.speed_paths import FUSED_PROJECTION_MIN_ROWS, make_stacked_projections

TOLERANCE = 1e-5
HEADS, KV_HEADS, HEAD_DIM, WIDTH = 4, 2, 16, 32
# Qwen3-Next's full-attention layer: (1 + w) RMSNorm on each head's queries and keys, a quarter of each head rotated
QWEN3_NEXT_LIKE = {
    "hidden_size": WIDTH,
    "head_dim": HEAD_DIM,
    "position_encoding": "rotary",
    "partial_rotary_factor": 0.25,
    "norm_position": "pre",
    "norm_type": "offset_rmsnorm",
    "layer_norm_eps": 1e-6,
    "qk_norm": "head",
    "hidden_act": "swiglu",
    "attention_bias": False,
    "attention_output_gate": True,
}


def randomise_(module: torch.nn.Module) -> torch.nn.Module:
    """Every parameter moved from its start (the norms' w from zero)."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.5)
    return module


def qwen3_next_pair(implementation: str):
    """transformers' Qwen3NextAttention and ours (both `implementation`), the same random weights; the configs."""
    reference_config = Qwen3NextConfig(
        vocab_size=64,
        hidden_size=WIDTH,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=2,
        partial_rotary_factor=0.25,
        rms_norm_eps=1e-6,
    )
    reference_config._attn_implementation = implementation
    reference = randomise_(Qwen3NextAttention(reference_config, layer_idx=0)).eval()
    config = tiny_config("decoder", **QWEN3_NEXT_LIKE)
    config._attn_implementation = implementation
    ours = build_attention(config, 0, is_causal=True, is_cross=False).eval()
    ours.load_state_dict(reference.state_dict())  # the same names: q/k/v/o_proj, q_norm, k_norm
    return reference, ours, reference_config, config


def causal_padded_mask(lengths: list[int], total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A left-padded batch's (B, 1, T, T) causal mask as a bool mask (ours) and an additive one (transformers')."""
    allowed = torch.arange(total)[None, :] <= torch.arange(total)[:, None]
    real = torch.stack([torch.arange(total) >= total - length for length in lengths])  # (B, T)
    boolean = (allowed[None] & real[:, None, :])[:, None]
    return boolean, torch.zeros(boolean.shape).masked_fill(~boolean, torch.finfo(torch.float32).min)


def tables(reference_config, config, positions: torch.Tensor):
    """transformers' rotary tables and ours for the same positions (partial: (B, T, D/4) each)."""
    reference_tables = Qwen3NextRotaryEmbedding(reference_config)(torch.zeros(1), positions)
    our_tables = build_positional(config, bidirectional=False)(positions)
    return reference_tables, our_tables


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_a_gated_layer_computes_qwen3_next_attention(implementation):
    reference, ours, reference_config, config = qwen3_next_pair(implementation)
    assert ours.q_proj.out_features == 2 * HEADS * HEAD_DIM
    lengths, total = [4, 6], 6
    hidden = torch.randn(2, total, WIDTH)
    boolean, additive = causal_padded_mask(lengths, total)
    positions = (torch.arange(total)[None] - (total - torch.tensor(lengths))[:, None]).clamp(min=0)
    reference_tables, our_tables = tables(reference_config, config, positions)
    with torch.no_grad():
        expected, expected_weights = reference(
            hidden, reference_tables, additive if implementation == "eager" else boolean
        )
        got, weights = ours(hidden, attention_mask=boolean, position_embeddings=our_tables)
    real = torch.stack([torch.arange(total) >= total - length for length in lengths])
    assert (got - expected)[real].abs().max() <= TOLERANCE
    if implementation == "eager":
        assert (weights - expected_weights).transpose(1, 2)[real].abs().max() <= TOLERANCE


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_a_cached_step_of_a_gated_layer_computes_qwen3_next_attention(implementation):
    reference, ours, reference_config, config = qwen3_next_pair(implementation)
    hidden = torch.randn(2, 6, WIDTH)
    positions = torch.arange(6)[None].expand(2, -1)
    reference_tables, our_tables = tables(reference_config, config, positions)
    prefill, step = slice(0, 5), slice(5, 6)  # five tokens, then one more read with the cache
    boolean, additive = causal_padded_mask([5, 5], 5)
    reference_cache, our_cache = DynamicCache(), DynamicCache()
    with torch.no_grad():
        reference_mask = additive if implementation == "eager" else boolean
        reference(
            hidden[:, prefill],
            [t[:, prefill] for t in reference_tables],
            reference_mask,
            **{CACHE_FIELD: reference_cache},
        )
        expected = reference(
            hidden[:, step], [t[:, step] for t in reference_tables], None, **{CACHE_FIELD: reference_cache}
        )[0]
        ours(
            hidden[:, prefill],
            attention_mask=boolean,
            position_embeddings=[t[:, prefill] for t in our_tables],
            cache=our_cache,
        )
        got = ours(hidden[:, step], position_embeddings=[t[:, step] for t in our_tables], cache=our_cache)[0]
    assert our_cache.get_seq_length(0) == 6
    assert (got - expected).abs().max() <= TOLERANCE


def test_a_training_step_projects_the_gate_as_inference_does():
    """With enough rows the training step takes q, k and v from one fused product (`fuse_projections`); the
    doubled q_proj is split back into queries and gates exactly as the separate products split it."""
    _, ours, _, config = qwen3_next_pair("sdpa")
    hidden = torch.randn(2, FUSED_PROJECTION_MIN_ROWS // 2, WIDTH)
    positions = torch.arange(hidden.shape[1])[None].expand(2, -1)
    rotation = build_positional(config, bidirectional=False)(positions)
    with torch.no_grad():
        expected = ours(hidden, position_embeddings=rotation)[0]
    ours.train()
    got = ours(hidden, position_embeddings=rotation)[0]
    assert (got - expected).abs().max() <= TOLERANCE
    got.square().sum().backward()
    gate_rows = ours.q_proj.weight.grad.view(HEADS, 2 * HEAD_DIM, WIDTH)[:, HEAD_DIM:]
    assert gate_rows.abs().max() > 0


# ---------------------------------------------------------------------------------------------------------------------
# Whole models


@pytest.mark.parametrize(
    ("model_class", "family"), [(HFAttentionForCausalLM, "decoder"), (HFAttentionEncoderModel, "encoder")]
)
def test_eager_sdpa_and_flex_agree_with_the_gate(model_class, family):
    model = randomise_(model_class(tiny_config(family, **QWEN3_NEXT_LIKE))).eval()
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21], [7, 11, 13, 4]])
    outputs = {}
    for backend in ("eager", "sdpa", "flex_attention"):
        model.set_attn_implementation(backend)
        with torch.no_grad():
            output = model(input_ids=ids, attention_mask=mask)
        outputs[backend] = output.logits if family == "decoder" else output.last_hidden_state
    for backend in ("sdpa", "flex_attention"):
        assert (outputs[backend] - outputs["eager"])[mask.bool()].abs().max() <= TOLERANCE, backend


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_generate_with_its_cache_computes_the_full_forward(backend):
    """generate() with the cache (and its decoding states: the stacked q/k/v product is not made for a gated
    q_proj) scores each new token as a forward pass over the whole sequence does; sinks and gate together."""
    model = HFAttentionForCausalLM(tiny_config("decoder", **QWEN3_NEXT_LIKE, attention_sinks=True)).eval()
    randomise_(model)
    assert make_stacked_projections(model.model.decoder.layers[0].self_attn) is None
    model.set_attn_implementation(backend)
    ids, mask = left_pad([[5, 17, 33, 8, 9], [7, 11, 13]])
    generated = model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=5,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
    )
    full_mask = torch.cat([mask, torch.ones(2, 5, dtype=mask.dtype)], 1)
    with torch.no_grad():
        logits = model(input_ids=generated.sequences, attention_mask=full_mask).logits
    scores = torch.stack(generated.scores, 1)  # (B, 5, V)
    assert (scores - logits[:, -6:-1]).abs().max() <= 1e-4  # logits of order 10: float32 rounding only


def test_a_gated_model_trains_and_saves_exactly(tmp_path):
    model = HFAttentionForCausalLM(tiny_config("decoder", **QWEN3_NEXT_LIKE))
    ids = torch.randint(3, 99, (4, 70))
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    for layer in model.model.decoder.layers:
        gate_rows = layer.self_attn.q_proj.weight.grad.view(4, 2 * HEAD_DIM, WIDTH)[:, HEAD_DIM:]
        assert gate_rows.abs().max() > 0
    model.eval().save_pretrained(tmp_path)
    loaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.attention_output_gate is True
    for (name, mine), (_, theirs) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(mine, theirs), name
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_the_knob_is_checked_and_refused_by_an_export():
    with pytest.raises(ValueError, match="attention_output_gate"):
        tiny_config("decoder", attention_output_gate=1)
    model = HFAttentionForCausalLM(tiny_config("decoder", **LLAMA, attention_output_gate=True))
    with pytest.raises(ValueError, match="attention_output_gate"):
        to_hf(model, "llama")
