"""µP's multipliers (Yang et al. 2022, Tensor Programs V; IBM's Granite): token embeddings × `embedding_multiplier`,
q·k × `attention_multiplier` (the number itself, in place of 1/√head_dim), each sublayer's output ×
`residual_multiplier` before the residual add, the logits ÷ `logits_scaling`.

Against transformers' Granite, every parameter moved from its start: its decoder layer (the attention scale and the
residual multiplier) against ours on left-padded batches, eager and sdpa; each multiplier alone in a whole model (the
embeddings' and the logits'), from input ids and from inputs_embeds. The multiplier's place with the other norm
positions (post, sandwich, output); the checks of each knob when the config is built; the defaults leave every module
as it was; `logit_scale` (what TRL's fused head multiplies by) gives the logits; a model with all four trains a step
(fused loss = eval loss), saves and loads bit for bit, exports to Granite with its logits and is refused by Llama.
"""

import math

import pytest
import torch
from conftest import left_pad, tiny_config
from modern_references import perturb
from test_to_hf import LLAMA
from transformers import GraniteConfig, GraniteForCausalLM
from transformers.models.granite.modeling_granite import GraniteDecoderLayer, GraniteRotaryEmbedding

from hf_attention import (
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    from_hf,
)
from hf_attention.conversion.to_hf import to_hf
from hf_attention.modeling.builders import build_attention, build_positional
from hf_attention.modeling.layer_plan import build_layer

TOLERANCE = 1e-5
WIDTH, HEADS, KV_HEADS, HEAD_DIM = 32, 4, 2, 8
# Granite 3's own embedding and residual multipliers; an attention scale of 2 (not 1/√8: the tiny model's scores are
# small, and a scale close to the plain one would move the logits by less than the tolerance); logits ÷ 3.
MUP = {"embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 2.0, "logits_scaling": 3.0}
# What each multiplier is when it changes nothing, in Granite's config (its attention scale is always explicit).
IDENTITY = {
    "embedding_multiplier": 1.0,
    "residual_multiplier": 1.0,
    "attention_multiplier": HEAD_DIM**-0.5,
    "logits_scaling": 1.0,
}
GRANITE_LIKE = {**LLAMA, "layer_norm_eps": 1e-6, "intermediate_size": 48}
BIASED = {**GRANITE_LIKE, "attention_bias": True, "mlp_bias": True}


def granite_config(**multipliers) -> GraniteConfig:
    return GraniteConfig(
        vocab_size=99,
        hidden_size=WIDTH,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=64,
        pad_token_id=0,
        **{**IDENTITY, **multipliers},
    )


def positions_of(mask: torch.Tensor) -> torch.Tensor:
    """Each token's count of real tokens before it (ours by default; transformers' needs them passed)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


# ---------------------------------------------------------------------------------------------------------------------
# One decoder layer against transformers' Granite: the attention scale and the residual multiplier


def padded_masks(lengths: list[int], total: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A left-padded batch's (B, 1, T, T) causal mask as our bool mask and Granite's additive one; the real tokens."""
    allowed = torch.arange(total)[None, :] <= torch.arange(total)[:, None]
    real = torch.stack([torch.arange(total) >= total - length for length in lengths])  # (B, T)
    boolean = (allowed[None] & real[:, None, :])[:, None]
    additive = torch.zeros(boolean.shape).masked_fill(~boolean, torch.finfo(torch.float32).min)
    return boolean, additive, real


# Granite's layer norms → ours; every other name is the same (q/k/v/o_proj, gate/up/down_proj).
LAYER_NORMS = {"input_layernorm": "self_attn_norm", "post_attention_layernorm": "mlp_norm"}


def our_layer(implementation: str, reference: GraniteDecoderLayer, **multipliers):
    """Our decoder layer with the Granite layer's weights, and its config."""
    config = tiny_config("decoder", **BIASED, **multipliers)
    config._attn_implementation = implementation
    layer = build_layer(config, 0, is_decoder=True, has_cross_attention=False).eval()
    state = {}
    for key, value in reference.state_dict().items():
        prefix = key.split(".")[0]
        state[key.replace(prefix, LAYER_NORMS.get(prefix, prefix), 1)] = value
    layer.load_state_dict(state)
    return layer, config


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_a_layer_with_the_multipliers_computes_granites_decoder_layer(implementation):
    reference_config = granite_config(**MUP, attention_bias=True, mlp_bias=True)
    reference_config._attn_implementation = "eager"
    reference = perturb(GraniteDecoderLayer(reference_config, layer_idx=0), seed=1).eval()
    ours, config = our_layer(implementation, reference, **MUP)
    plain, _ = our_layer(implementation, reference)  # 1/√D, no multiplier: the same weights
    hidden = torch.randn(2, 8, WIDTH)
    boolean, additive, real = padded_masks([5, 8], 8)
    positions = positions_of(real.long())
    with torch.no_grad():
        expected = reference(
            hidden,
            attention_mask=additive,
            position_embeddings=GraniteRotaryEmbedding(reference_config)(hidden, positions),
        )
        tables = build_positional(config, bidirectional=False)(positions)
        got = ours(hidden, attention_mask=boolean, position_embeddings=tables)[0]
        unmultiplied = plain(hidden, attention_mask=boolean, position_embeddings=tables)[0]
    assert (got - expected)[real].abs().max() <= TOLERANCE
    assert (unmultiplied - expected)[real].abs().max() > 100 * TOLERANCE  # the knobs were seen


def test_the_attention_multiplier_is_the_scale_itself():
    """q·k × m: the scaling the backends receive is m, where the plain score's is head_dim^-1/2 and Gemma's s^-1/2."""

    def scale(**knobs) -> float:
        return build_attention(tiny_config("decoder", **knobs), 0, is_causal=True, is_cross=False).scaling

    assert scale() == HEAD_DIM**-0.5
    assert scale(query_pre_attn_scalar=20.0) == 20.0**-0.5
    assert scale(attention_multiplier=0.0078125) == 0.0078125


# ---------------------------------------------------------------------------------------------------------------------
# Each multiplier alone, in a whole model against GraniteForCausalLM


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("knob", sorted(MUP))
def test_each_multiplier_alone_gives_granites_logits(knob, implementation):
    reference = perturb(GraniteForCausalLM(granite_config(**{knob: MUP[knob]})), seed=2).eval()
    reference.set_attn_implementation(implementation)
    ours = from_hf(reference).eval()
    ours.set_attn_implementation(implementation)
    assert getattr(ours.config, knob) == MUP[knob]
    assert all(getattr(ours.config, other) in (1.0, None) for other in MUP if other != knob)  # the others at rest
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21, 40, 3], [7, 11, 13, 4, 6]])
    real = mask.bool()
    plain = GraniteForCausalLM(granite_config()).eval()  # the same weights, no multiplier
    plain.load_state_dict(reference.state_dict())
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask)).logits
        got = ours(input_ids=ids, attention_mask=mask).logits
        unmultiplied = plain(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask)).logits
        # embeddings given directly are multiplied too, as Granite multiplies them
        embeds = reference.get_input_embeddings()(ids)
        expected_embeds = reference(inputs_embeds=embeds, attention_mask=mask, position_ids=positions_of(mask)).logits
        got_embeds = ours(inputs_embeds=embeds, attention_mask=mask).logits
    assert (got - expected)[real].abs().max() <= TOLERANCE
    assert (got_embeds - expected_embeds)[real].abs().max() <= TOLERANCE
    assert (unmultiplied - expected)[real].abs().max() > 100 * TOLERANCE


# ---------------------------------------------------------------------------------------------------------------------
# The multiplier with the other norm positions: m·out joins the stream after the output norm


@pytest.mark.parametrize("norm_position", ["post", "pre", "sandwich", "output"])
def test_the_branch_is_multiplied_where_it_joins_the_residual_stream(norm_position):
    m = 0.3
    config = tiny_config("decoder", norm_position=norm_position, residual_multiplier=m)
    layer = build_layer(config, 0, is_decoder=True, has_cross_attention=False).eval()
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.add_(0.1 * torch.randn(parameter.shape))
    residual, output = torch.randn(2, 3, WIDTH), torch.randn(2, 3, WIDTH)
    norm, output_norm = layer.mlp_norm, layer.mlp_output_norm
    expected = {
        "post": lambda: norm(residual + m * output),
        "pre": lambda: residual + m * output,
        "sandwich": lambda: residual + m * output_norm(output),
        "output": lambda: residual + m * norm(output),
    }[norm_position]
    with torch.no_grad():
        got = layer.add_residual(residual, output, norm, output_norm)
        assert torch.allclose(got, expected(), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------------
# The checks, when the config is built


@pytest.mark.parametrize("knob", sorted(MUP))
@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), "2", True])
def test_each_multiplier_must_be_a_finite_number_above_zero(knob, value):
    with pytest.raises(ValueError, match=rf"{knob}=.* must be a finite number > 0"):
        tiny_config("decoder", **{knob: value})


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"attention_multiplier": 0.5, "attention_score": "dot"}, "attention_multiplier=0.5 sets the scale of the"),
        (
            {"attention_multiplier": 0.5, "query_pre_attn_scalar": 16.0},
            "attention_multiplier=0.5 and query_pre_attn_scalar=16.0 both set the scale",
        ),
        ({"logits_scaling": 2.0, "lm_head_bias": True}, "logits_scaling=2.0 divides the projection's input"),
        (
            {
                **LLAMA,
                "kv_lora_rank": 8,
                "qk_nope_head_dim": 8,
                "qk_rope_head_dim": 8,
                "num_key_value_heads": 4,
                "attention_multiplier": 0.5,
            },
            "attention_multiplier=0.5 is not available with kv_lora_rank=8",
        ),
    ],
)
def test_combinations_that_cannot_hold_are_refused(knobs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        tiny_config("decoder", **knobs)


# ---------------------------------------------------------------------------------------------------------------------
# The defaults change nothing


@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
def test_the_defaults_leave_every_module_as_it_was(family):
    config = tiny_config(family)
    assert (config.embedding_multiplier, config.residual_multiplier, config.logits_scaling) == (1.0, 1.0, 1.0)
    assert config.attention_multiplier is None and config.logit_scale is None
    model_class = {"encoder": HFAttentionForMaskedLM, "decoder": HFAttentionForCausalLM}.get(
        family, HFAttentionForSeq2SeqLM
    )
    model = model_class(config)
    stacks = [module for module in model.modules() if hasattr(module, "embed_scale")]
    assert stacks and all(stack.embed_scale == math.sqrt(WIDTH) for stack in stacks)  # scale_embeddings: √E exactly
    layers = [module for module in model.modules() if hasattr(module, "residual_multiplier")]
    assert layers and all(layer.residual_multiplier == 1.0 for layer in layers)
    unscaled = model_class(tiny_config(family, scale_embeddings=False))
    assert all(m.embed_scale == 1.0 for m in unscaled.modules() if hasattr(m, "embed_scale"))  # still skipped


# ---------------------------------------------------------------------------------------------------------------------
# logit_scale: what a client that projects the last hidden state itself (TRL's fused head) multiplies by


@pytest.mark.parametrize(
    ("knobs", "scale"),
    [
        ({"logits_scaling": 4.0}, 0.25),
        ({"logits_scaling": 4.0, "scale_lm_head_input": True}, WIDTH**-0.5 / 4.0),
        ({"scale_lm_head_input": True}, WIDTH**-0.5),
    ],
)
def test_logit_scale_gives_the_logits_from_the_last_hidden_state(knobs, scale):
    model = HFAttentionForCausalLM(tiny_config("decoder", **GRANITE_LIKE, **knobs)).eval()
    assert model.config.logit_scale == scale
    ids = torch.randint(3, 99, (2, 7))
    with torch.no_grad():
        logits = model(ids).logits
        hidden = model.model(ids).last_hidden_state
    assert torch.allclose(logits, scale * hidden @ model.lm_head.weight.T, atol=1e-6)
    transformed = tiny_config("decoder", **knobs, lm_head_transform=True)
    assert transformed.logit_scale is None  # the transform is not a factor


# ---------------------------------------------------------------------------------------------------------------------
# From scratch: trains, saves and loads exactly, exports


@pytest.mark.parametrize(
    ("model_class", "family"),
    [(HFAttentionForCausalLM, "decoder"), (HFAttentionForMaskedLM, "encoder"), (HFAttentionForSeq2SeqLM, "seq2seq")],
)
def test_a_model_with_the_multipliers_trains_and_saves_exactly(model_class, family, tmp_path):
    model = model_class(tiny_config(family, **MUP, scale_embeddings=False))
    ids = torch.randint(3, 99, (4, 70))  # 280 rows: the training step's fused projections and loss
    inputs = {"input_ids": ids, "labels": ids}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = ids[:, :10]
        inputs["labels"] = ids[:, 1:11]
    with torch.no_grad():
        eval_loss = model.eval()(**inputs).loss
    model.train()
    loss = model(**inputs).loss  # the fused projection and loss divide by logits_scaling as the eval path does
    assert torch.allclose(loss, eval_loss, atol=1e-5)
    loss.backward()
    parameters = dict(model.named_parameters())
    assert all(p.grad is not None and p.grad.abs().max() > 0 for p in parameters.values())
    before = {name: p.detach().clone() for name, p in parameters.items()}
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    assert all(not torch.equal(p, before[name]) for name, p in parameters.items())
    model.eval().save_pretrained(tmp_path)
    loaded = model_class.from_pretrained(tmp_path).eval()
    assert {knob: getattr(loaded.config, knob) for knob in MUP} == MUP
    for (name, mine), (_, theirs) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(mine, theirs), name
    with torch.no_grad():
        inputs.pop("labels")
        assert torch.equal(model(**inputs).logits, loaded(**inputs).logits)


def test_a_model_with_the_multipliers_exports_to_granite_and_is_refused_by_llama():
    model = HFAttentionForCausalLM(tiny_config("decoder", **GRANITE_LIKE, **MUP)).eval()
    perturb(model, seed=3)
    for knob, value in MUP.items():
        with pytest.raises(ValueError, match=knob):
            to_hf(HFAttentionForCausalLM(tiny_config("decoder", **GRANITE_LIKE, **{knob: value})), "llama")
    exported = to_hf(model, "granite")
    assert {knob: getattr(exported.config, knob) for knob in MUP} == MUP
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21], [7, 11, 13]])
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
        got = exported(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask)).logits
    assert (got - expected)[mask.bool()].abs().max() <= TOLERANCE
    # a Llama-shaped model exports to Granite too: its 1/√head_dim is written out, and read back as our default
    plain = to_hf(HFAttentionForCausalLM(tiny_config("decoder", **GRANITE_LIKE)), "granite")
    assert plain.config.attention_multiplier == HEAD_DIM**-0.5
    assert from_hf(plain).config.attention_multiplier is None
