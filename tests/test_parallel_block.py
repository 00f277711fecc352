"""The parallel block (`parallel_block`, parallel_block.py): x + Attn(Norm(x)) + MLP(Norm(x)), one norm per layer
(GPT-J; PaLM; Cohere's Command R).

Against transformers' own `CohereDecoderLayer`, every parameter moved from its start (the bias-free LayerNorm, the
per-head q/k norms, the q/k/v/o biases): our layer with Cohere's knobs, on a left-padded batch, eager and sdpa, with
Cohere's rotation of adjacent pairs. A training step of a converted Cohere model gives transformers' loss and
gradients (our fused training paths: the q/k/v product, the fused vocabulary loss). The checks when the config is
built; the default leaves every layer sequential; a model with the knob trains a step, saves and loads bit for bit,
exports to Cohere and is refused by Llama by the knob's name. Last, what the Cohere converters read as transformers
does (a partial factor its default rotation ignores) or refuse in the source's words (a logit_scale of None, Cohere 2
layers it builds no mask for), where transformers' own forward pass fails first in the fuzzed conversions.
"""

import copy

import pytest
import torch
from conftest import left_pad, tiny_config
from modern_references import perturb
from test_mup_multipliers import padded_masks, positions_of
from transformers import Cohere2Config, Cohere2ForCausalLM, CohereConfig, CohereForCausalLM
from transformers.models.cohere.modeling_cohere import CohereDecoderLayer, CohereRotaryEmbedding

from hf_attention import HFAttentionForCausalLM, from_hf
from hf_attention.architectures.cohere import llama_shaped, to_ours
from hf_attention.architectures.tiny import DECODER
from hf_attention.architectures.weights import Weights
from hf_attention.conversion.to_hf import to_hf
from hf_attention.modeling.builders import build_positional
from hf_attention.modeling.layer_plan import build_layer
from hf_attention.modeling.layers import DecoderLayer
from hf_attention.modeling.parallel_block import ParallelDecoderLayer

TOLERANCE = 1e-5
WIDTH, HEADS, KV_HEADS, HEAD_DIM = 32, 4, 2, 12  # head_dim ≠ width / heads
# Cohere's layer, as our knobs say it (rope_interleave: its adjacent pairs; qk_norm: its per-head gains)
COHERE_LIKE = {
    "position_encoding": "rotary",
    "rope_theta": 10000.0,
    "rope_interleave": True,
    "norm_position": "pre",
    "norm_type": "layernorm",
    "norm_bias": False,
    "scale_embeddings": False,
    "hidden_act": "swiglu",
    "attention_bias": True,
    "mlp_bias": False,
    "head_dim": HEAD_DIM,
    "qk_norm": "per_head",
    "parallel_block": True,
}


def cohere_config(**extra) -> CohereConfig:
    """Command R+'s layer (q/k norms, biases) at conftest's sizes; `extra` overrides."""
    fields = {
        "vocab_size": 99,
        "hidden_size": WIDTH,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 64,
        "use_qk_norm": True,
        "attention_bias": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    return CohereConfig(**{**fields, **extra})


def moved(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """`perturb`'s noise, and more on the (heads, head_dim) q/k norm gains, which it moves as matrices (0.02): each
    head's gain then differs from the others' by far more than the tolerance."""
    perturb(module, seed)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))
    return module


# ---------------------------------------------------------------------------------------------------------------------
# One layer against transformers' CohereDecoderLayer


def our_layer(implementation: str, reference: CohereDecoderLayer):
    """Our decoder layer with the Cohere layer's weights (its one norm is our attention norm), and its config."""
    config = tiny_config("decoder", **COHERE_LIKE)
    config._attn_implementation = implementation
    layer = build_layer(config, 0, is_decoder=True, has_cross_attention=False).eval()
    state = {key.replace("input_layernorm", "self_attn_norm"): value for key, value in reference.state_dict().items()}
    layer.load_state_dict(state)  # strict: every tensor of each side has its place
    return layer, config


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_the_parallel_layer_computes_coheres_decoder_layer(implementation):
    reference_config = cohere_config()
    reference_config._attn_implementation = "eager"
    reference = moved(CohereDecoderLayer(reference_config, layer_idx=0), seed=1).eval()
    ours, config = our_layer(implementation, reference)
    assert isinstance(ours, ParallelDecoderLayer) and ours.mlp_norm is None
    hidden = torch.randn(2, 9, WIDTH)
    boolean, additive, real = padded_masks([6, 9], 9)
    positions = positions_of(real.long())
    with torch.no_grad():
        expected = reference(
            hidden,
            attention_mask=additive,
            position_embeddings=CohereRotaryEmbedding(reference_config)(hidden, positions),
        )
        tables = build_positional(config, bidirectional=False)(positions)
        got = ours(hidden, attention_mask=boolean, position_embeddings=tables)[0]
        # the same weights one after the other (the MLP reading x + attn, through the same norm): another output
        sequential = copy.deepcopy(ours)
        sequential.__class__, sequential.mlp_norm = DecoderLayer, ours.self_attn_norm
        chained = sequential(hidden, attention_mask=boolean, position_embeddings=tables)[0]
    assert (got - expected)[real].abs().max() <= TOLERANCE
    assert (chained - expected)[real].abs().max() > 100 * TOLERANCE


# ---------------------------------------------------------------------------------------------------------------------
# A training step of a converted Cohere model against transformers'


def test_a_training_step_gives_coheres_loss_and_gradients():
    reference = moved(CohereForCausalLM(cohere_config(logit_scale=0.3)), seed=2).train()
    ours = from_hf(reference).train()
    names = our_names(reference)
    rows = torch.randint(3, 99, (2, 140), generator=torch.Generator().manual_seed(0)).tolist()
    ids, mask = left_pad([rows[0], rows[1][:120]])  # 280 rows: the fused training paths
    # no label at padding, nor at a row's first real token: it would be predicted from a padding position, whose
    # output no backend defines (HF's eager and sdpa already disagree there)
    predicted_from_padding = torch.nn.functional.pad(mask, (1, 0))[:, :-1] == 0
    labels = ids.masked_fill((mask == 0) | predicted_from_padding, -100)
    expected = reference(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask), labels=labels).loss
    got = ours(input_ids=ids, attention_mask=mask, labels=labels).loss
    expected.backward()
    got.backward()
    assert abs(got.item() - expected.item()) <= TOLERANCE
    our_parameters = dict(ours.named_parameters())
    for theirs, parameter in reference.named_parameters():
        mine = our_parameters[names[theirs]]
        torch.testing.assert_close(mine.grad, parameter.grad, rtol=1e-4, atol=1e-6, msg=theirs)


def our_names(reference: CohereForCausalLM) -> dict[str, str]:
    """The reference's parameter names → ours, as the converter maps its tensors (a tied head: one name)."""
    weights = Weights(reference)
    to_ours(reference, weights)
    by_storage = {tensor.data_ptr(): ours for ours, tensor in weights.out.items()}
    return {name: by_storage[parameter.data_ptr()] for name, parameter in reference.named_parameters()}


# ---------------------------------------------------------------------------------------------------------------------
# The checks, when the config is built; the default


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"parallel_block": 1}, "parallel_block=1 must be True or False"),
        ({"parallel_block": True}, "parallel_block=True needs norm_position='pre' (got 'post')"),
        ({"parallel_block": True, "norm_position": "sandwich"}, "needs norm_position='pre' (got 'sandwich')"),
        ({"parallel_block": True, "norm_position": "output"}, "needs norm_position='pre' (got 'output')"),
    ],
)
def test_the_knob_is_checked_when_the_config_is_built(knobs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tiny_config("decoder", **knobs)


@pytest.mark.parametrize("family", ["encoder", "seq2seq"])
def test_the_other_families_refuse_it(family):
    with pytest.raises(ValueError, match="parallel_block=True .* for the decoder family"):
        tiny_config(family, parallel_block=True, norm_position="pre")


def test_the_default_leaves_every_layer_sequential():
    config = tiny_config("decoder", **{**COHERE_LIKE, "parallel_block": False})
    assert config.parallel_block is False
    model = HFAttentionForCausalLM(config)
    assert all(type(layer) is DecoderLayer and layer.mlp_norm is not None for layer in model.model.decoder.layers)


# ---------------------------------------------------------------------------------------------------------------------
# From scratch: trains, saves and loads exactly, exports


def test_a_model_with_parallel_blocks_trains_and_saves_exactly(tmp_path):
    model = HFAttentionForCausalLM(tiny_config("decoder", **COHERE_LIKE))
    assert all(isinstance(layer, ParallelDecoderLayer) for layer in model.model.decoder.layers)
    assert not any(".mlp_norm." in name for name in model.state_dict())  # one norm per layer
    ids = torch.randint(3, 99, (4, 70))  # 280 rows: the training step's fused projections and loss
    with torch.no_grad():
        eval_loss = model.eval()(input_ids=ids, labels=ids).loss
    model.train()
    loss = model(input_ids=ids, labels=ids).loss
    assert torch.allclose(loss, eval_loss, atol=1e-5)
    loss.backward()
    parameters = dict(model.named_parameters())
    assert all(p.grad is not None and p.grad.abs().max() > 0 for p in parameters.values())
    before = {name: p.detach().clone() for name, p in parameters.items()}
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    assert all(not torch.equal(p, before[name]) for name, p in parameters.items())
    model.eval().save_pretrained(tmp_path)
    loaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.parallel_block is True
    for (name, mine), (_, theirs) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(mine, theirs), name
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, loaded(input_ids=ids).logits)


def test_a_model_with_parallel_blocks_exports_to_cohere_and_is_refused_by_llama():
    model = perturb(HFAttentionForCausalLM(tiny_config("decoder", **COHERE_LIKE, tie_word_embeddings=True)), 3)
    with pytest.raises(ValueError, match="parallel_block=True"):
        to_hf(model, "llama")
    exported = to_hf(model.eval(), "cohere")
    assert isinstance(exported, CohereForCausalLM)
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21], [7, 11, 13]])
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
        got = exported(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask)).logits
    assert (got - expected)[mask.bool()].abs().max() <= TOLERANCE
    # and back: the same config (Cohere's logit_scale of 1 is our default multiplier)
    back = from_hf(exported)
    assert back.config.parallel_block and back.config.qk_norm == "per_head" and back.config.logit_multiplier == 1.0
    assert llama_shaped(exported.config).rms_norm_eps == exported.config.layer_norm_eps


# ---------------------------------------------------------------------------------------------------------------------
# What the Cohere converters refuse, or read as transformers does


PARTIAL = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}


def test_a_partial_factor_that_coheres_default_rotation_ignores_is_ignored():
    reference = perturb(CohereForCausalLM(cohere_config(rope_parameters=PARTIAL)), seed=8).eval()
    ours = from_hf(reference).eval()
    assert ours.config.partial_rotary_factor == 1.0  # transformers' Cohere turns whole heads (frequencies of head_dim)
    ids = torch.randint(3, 99, (2, 9))
    with torch.no_grad():
        assert (ours(ids).logits - reference(ids).logits).abs().max() <= TOLERANCE


def test_a_logit_scale_of_none_is_refused_by_name():
    reference = CohereForCausalLM(cohere_config())
    reference.config.logit_scale = None  # transformers' forward multiplies by it and fails
    with pytest.raises(ValueError, match=r"^from_hf: CohereConfig.logit_scale=None: transformers' forward"):
        from_hf(reference)


def test_cohere2_layers_without_a_mask_are_refused_by_name():
    config = Cohere2Config(**{**DECODER, "num_hidden_layers": 2}, sliding_window=8)
    config.layer_types = ["chunked_attention", "full_attention"]  # transformers' Cohere 2 masks no such layer
    with pytest.raises(ValueError, match=r"^from_hf: Cohere2Config.layer_types has 'chunked_attention' layers"):
        from_hf(Cohere2ForCausalLM(config))
