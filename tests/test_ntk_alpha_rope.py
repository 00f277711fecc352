"""The rotation of Hunyuan's released models: NTK scaling by a fixed α (`rope_type="ntk_alpha"`, option `alpha`),
against transformers' `HunYuanDenseV1RotaryEmbedding` (rope_type "dynamic" with an `alpha`, its "ntk_alpha"):

- the inverse frequencies are transformers' bit for bit (base θ·α^(D/(D−2))), and so are the cos/sin tables at
  positions well past max_position_embeddings: the base does not change with the input's length;
- the converter reads each of Hunyuan's rotations as transformers computes it ("dynamic" with α: ours; "dynamic"
  with α = 0: the length-dependent NTK; "default" with an α: plain; the released legacy `rope_scaling` with keys no
  formula reads), and the export writes transformers' form back; Llama, which has no such scaling, cannot be built
  from such a model;
- bad options are refused by name when the config is built.
"""

import re

import pytest
import torch
from modern_references import forward_inputs, main_output, max_difference_at_real
from transformers import HunYuanDenseV1Config, HunYuanDenseV1ForCausalLM
from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import HunYuanDenseV1RotaryEmbedding

from hf_attention import HFAttentionDecoderConfig, from_hf, to_hf
from hf_attention.architectures.tiny import DECODER
from hf_attention.modeling.positional import RotaryEmbedding

TOLERANCE = 1e-5
THETA = 10000.0
ORIGINAL = 16  # max_position_embeddings: the positions below reach 40


def _hf_rotary(head_dim: int, rope: dict) -> HunYuanDenseV1RotaryEmbedding:
    config = HunYuanDenseV1Config(
        hidden_size=64,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=ORIGINAL,
        rope_parameters=rope,
    )
    return HunYuanDenseV1RotaryEmbedding(config)


@pytest.mark.parametrize("head_dim", [24, 128])
@pytest.mark.parametrize("alpha", [1000.0, 2.5, 1])
def test_the_frequencies_and_tables_are_transformers(head_dim, alpha):
    theirs = _hf_rotary(head_dim, {"rope_type": "dynamic", "alpha": alpha, "factor": 1.0, "rope_theta": THETA})
    assert theirs.rope_type == "ntk_alpha"
    ours = RotaryEmbedding(
        head_dim=head_dim,
        base=THETA,
        rope_type="ntk_alpha",
        options={"alpha": alpha},
        max_position_embeddings=ORIGINAL,
    )
    assert torch.equal(ours.inverse_frequencies(torch.device("cpu")), theirs.inv_freq)
    positions = torch.arange(40)[None]  # past max_position_embeddings: no rescaling on either side
    x = torch.zeros(1, 40, head_dim)
    their_cos, their_sin = theirs(x, positions)
    our_cos, our_sin = ours.rotary_tables(positions, torch.float32)
    assert torch.equal(our_cos[:, 0], their_cos) and torch.equal(our_sin[:, 0], their_sin)


def _reference(rope: dict | None = None, **legacy) -> HunYuanDenseV1ForCausalLM:
    """The registry's tiny Hunyuan with another rotation, every weight moved from its start."""
    fields = {**DECODER, "head_dim": 24, "attention_bias": True, "max_position_embeddings": ORIGINAL}
    config = HunYuanDenseV1Config(**fields, rope_parameters=rope, **legacy)
    model = HunYuanDenseV1ForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_((0.1 if parameter.dim() == 1 else 0.02) * torch.randn(parameter.shape, generator=generator))
    return model


# (transformers' rotation → our rope_type and options)
READINGS = [
    ({"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": THETA}, "ntk_alpha", {"alpha": 1000.0}),
    ({"rope_type": "dynamic", "alpha": 0.0, "factor": 2.0, "rope_theta": THETA}, "dynamic", {"factor": 2.0}),
    ({"rope_type": "default", "alpha": 1000.0, "rope_theta": THETA}, "default", {}),
]


@pytest.mark.parametrize(("rope", "rope_type", "options"), READINGS, ids=["alpha", "alpha_zero", "default"])
def test_the_converter_reads_each_rotation_as_transformers_computes_it(rope, rope_type, options):
    """On a 24-token batch, past the original length of 16 (where "dynamic" without α rescales)."""
    reference = _reference(dict(rope))
    ours = from_hf(reference)
    assert (ours.config.rope_type, ours.config.rope_scaling_options) == (rope_type, options)
    inputs = forward_inputs("hunyuan_v1_dense")
    with torch.no_grad():
        expected, got = main_output(reference(**inputs)), main_output(ours(**inputs))
    assert max_difference_at_real(expected, got, inputs["attention_mask"]) <= TOLERANCE


def test_the_released_legacy_form_converts_and_exports_as_transformers_writes_it():
    """Hunyuan-7B's config.json: `rope_scaling` with "type" and YaRN-style keys that no formula reads (left out);
    the export writes rope_parameters back in transformers' form, factor 1.0 as released."""
    released = {"alpha": 1000.0, "beta_fast": 32, "beta_slow": 1, "factor": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
    reference = _reference(rope_scaling={"type": "dynamic", **released}, rope_theta=THETA)
    ours = from_hf(reference)
    assert ours.config.rope_scaling_options == {"alpha": 1000.0}
    exported = to_hf(ours)
    assert type(exported) is HunYuanDenseV1ForCausalLM
    assert exported.config.rope_parameters == {
        "rope_type": "dynamic",
        "rope_theta": THETA,
        "alpha": 1000.0,
        "factor": 1.0,
    }
    inputs = forward_inputs("hunyuan_v1_dense")
    with torch.no_grad():
        assert torch.equal(main_output(exported(**inputs)), main_output(reference(**inputs)))


def test_llama_cannot_hold_the_alpha_rotation():
    """Llama has no fixed-α scaling (its "dynamic" ignores an α): the export names why, rather than writing a model
    that rotates otherwise."""
    ours = from_hf(_reference({"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": THETA}))
    with pytest.raises(ValueError, match="cannot be written as llama: its model cannot be built.*ntk_alpha"):
        to_hf(ours, to="llama")


ROTARY = {
    "vocab_size": 64,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 48,
    "position_encoding": "rotary",
    "rope_type": "ntk_alpha",
}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "rope_type='ntk_alpha' needs rope_scaling_options 'alpha'."),
        ({"alpha": 0.0}, "rope_scaling_options['alpha']=0.0 must be a number > 0 (rope_type='ntk_alpha')."),
        ({"alpha": -2.0}, "rope_scaling_options['alpha']=-2.0 must be a number > 0"),
        ({"alpha": "1000"}, "rope_scaling_options['alpha']='1000' must be a number > 0"),
        (
            {"alpha": 1000.0, "factor": 1.0},
            "has 'factor', which rope_type='ntk_alpha' does not read (it reads: alpha)",
        ),
    ],
)
def test_bad_options_are_refused_by_name(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        HFAttentionDecoderConfig(**ROTARY, rope_scaling_options=options)
