"""xIELU (`hidden_act="xielu"`; Huang & Schlag 2024, arXiv:2411.13010; Apertus): a learned activation, α_p·x² + β·x
for x > 0 and α_n·(expm1(min(x, ε)) − x) + β·x below, with α_p = softplus(a_p), α_n = β + softplus(a_n).

Against transformers' XIELUActivation (its Python path, the one it runs on a CPU; every parameter and buffer moved
from its start): the values and the gradients of input and parameters, the start it takes from its init values. The
config's knobs (`xielu_*`) start it, are refused outside their range or without `hidden_act="xielu"`; a model built
from scratch with it trains (α_p and α_n get gradients, β and ε stay fixed), saves and loads exactly, and exports to
transformers' Apertus with the same logits. A converted Apertus takes a training step as transformers' does; an
Apertus activation hf-attention lacks is refused by name.
"""

import copy

import pytest
import torch
from conftest import left_pad, tiny_config
from modern_references import DECODER, generate_positions, padded_batch, reference
from transformers import ApertusConfig, ApertusForCausalLM
from transformers.activations import XIELUActivation

from hf_attention import HFAttentionForCausalLM, HFAttentionForMaskedLM, HFAttentionForSeq2SeqLM, from_hf
from hf_attention.conversion.to_hf import to_hf
from hf_attention.modeling.activations import XIELU, activation_function

TOLERANCE = 1e-5
# Inputs of every region: far negative, the clamp's (ε, 0], zero, small and large positive.
INPUTS = torch.cat([torch.linspace(-12.0, 12.0, 481), torch.tensor([-1e-7, -1e-6, -2e-6, 0.0, 1e-7, 1e-6])])
# Start values other than the defaults, as (transformers' XIELUActivation's names, ours).
OPTIONS = {"alpha_p_init": 1.3, "alpha_n_init": 0.9, "beta": 0.25, "eps": -1e-4}


def _randomised_pair(**options) -> tuple[XIELU, XIELUActivation]:
    """Ours and transformers', started from `options`, then every tensor moved by the same random amounts."""
    ours = XIELU(**options)
    theirs = XIELUActivation(**options, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name in ("alpha_p", "alpha_n", "beta", "eps"):
            shift = 0.3 * torch.randn(getattr(ours, name).shape, generator=generator)
            if name == "eps":
                shift = -shift.abs() * 1e-3  # ε stays negative, a thousandth
            getattr(ours, name).add_(shift)
            getattr(theirs, name).add_(shift)
    return ours, theirs


@pytest.mark.parametrize("options", [{}, OPTIONS], ids=["defaults", "other-start"])
def test_xielu_starts_as_transformers_and_computes_the_same(options):
    ours, theirs = XIELU(**options), XIELUActivation(**options, dtype=torch.float32)
    for name in ("alpha_p", "alpha_n", "beta", "eps"):  # the same start, bit for bit
        assert torch.equal(getattr(ours, name), getattr(theirs, name)), name
    alpha_p = torch.nn.functional.softplus(ours.alpha_p)
    alpha_n = ours.beta + torch.nn.functional.softplus(ours.alpha_n)
    torch.testing.assert_close(alpha_p, torch.tensor([options.get("alpha_p_init", 0.8)]))
    torch.testing.assert_close(alpha_n, torch.tensor([options.get("alpha_n_init", 0.8)]))
    ours, theirs = _randomised_pair(**options)
    x = INPUTS.clone().requires_grad_(True)
    x_theirs = INPUTS.clone().requires_grad_(True)
    assert theirs._xielu_cuda_obj is None or not x_theirs.is_cuda  # the Python path: the oracle
    mine, reference_values = ours(x), theirs(x_theirs)
    assert (mine - reference_values).abs().max().item() <= TOLERANCE
    weights = torch.randn(INPUTS.shape, generator=torch.Generator().manual_seed(1))
    (mine * weights).sum().backward()
    (reference_values * weights).sum().backward()
    torch.testing.assert_close(x.grad, x_theirs.grad, rtol=0, atol=TOLERANCE)
    for name in ("alpha_p", "alpha_n"):
        torch.testing.assert_close(getattr(ours, name).grad, getattr(theirs, name).grad, rtol=1e-6, atol=TOLERANCE)
        assert getattr(ours, name).grad.abs().item() > 0
    assert [name for name, _ in ours.named_parameters()] == ["alpha_p", "alpha_n"]  # β and ε are not trained
    assert set(ours.state_dict()) == {"alpha_p", "alpha_n", "beta", "eps"}  # but saved


def test_xielu_formula_by_hand():
    """The two pieces and the clamp, written out, on one module with distinct numbers."""
    module = XIELU(alpha_p_init=1.5, alpha_n_init=2.0, beta=0.5, eps=-0.1)
    x = torch.tensor([-3.0, -0.5, -0.05, 0.0, 0.2, 2.0])
    expected = torch.tensor(
        [
            2.0 * (torch.expm1(torch.tensor(-3.0)) + 3.0) - 1.5,
            2.0 * (torch.expm1(torch.tensor(-0.5)) + 0.5) - 0.25,
            2.0 * (torch.expm1(torch.tensor(-0.1)) + 0.05) - 0.025,  # argument clamped to ε = -0.1
            2.0 * torch.expm1(torch.tensor(-0.1)),
            1.5 * 0.04 + 0.1,
            1.5 * 4.0 + 1.0,
        ]
    )
    torch.testing.assert_close(module(x), expected, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------------
# The knobs

# An Apertus-shaped model of ours: pre-norm RMSNorm, rotary, per-head q/k norms, a plain network without biases.
APERTUS_LIKE = {
    "position_encoding": "rotary",
    "norm_position": "pre",
    "norm_type": "rmsnorm",
    "qk_norm": "head",
    "hidden_act": "xielu",
    "mlp_bias": False,
    "attention_bias": False,
    "scale_embeddings": False,
    "tie_word_embeddings": False,
}
KNOBS = {"xielu_alpha_p_init": 1.3, "xielu_alpha_n_init": 0.9, "xielu_beta": 0.25, "xielu_eps": -1e-4}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"xielu_alpha_p_init": 0.0}, r"xielu_alpha_p_init=0.0 must be a finite number > 0"),
        ({"xielu_alpha_n_init": -1.0}, r"xielu_alpha_n_init=-1.0 must be a finite number > 0"),
        ({"xielu_beta": -0.5}, r"xielu_beta=-0.5 must be a finite number >= 0"),
        ({"xielu_eps": 1e-3}, r"xielu_eps=0.001 must be a finite number <= 0"),
        ({"xielu_beta": "0.5"}, r"xielu_beta='0.5' must be a finite number"),
        ({"xielu_alpha_p_init": True}, r"xielu_alpha_p_init=True must be a finite number"),
        ({"xielu_alpha_n_init": 0.5}, r"xielu_alpha_n_init=0.5 must exceed xielu_beta=0.5"),
        ({"xielu_alpha_n_init": 0.8, "xielu_beta": 1.0}, r"xielu_alpha_n_init=0.8 must exceed xielu_beta=1.0"),
        (
            {"hidden_act": "swiglu", "xielu_beta": 0.25},
            r"xielu_beta=0.25 starts the learned activation 'xielu', and hidden_act='swiglu' is another",
        ),
    ],
)
def test_the_knobs_are_checked_when_the_config_is_built(fields, message):
    with pytest.raises(ValueError, match=message):
        tiny_config("decoder", **{**APERTUS_LIKE, **fields})


def test_a_config_json_with_a_bad_start_fails_on_assignment():
    config = tiny_config("decoder", **APERTUS_LIKE)
    with pytest.raises(ValueError, match="xielu_eps=0.5 must be a finite number <= 0"):
        config.xielu_eps = 0.5


@pytest.mark.parametrize(
    ("family", "model_class"),
    [("encoder", HFAttentionForMaskedLM), ("decoder", HFAttentionForCausalLM), ("seq2seq", HFAttentionForSeq2SeqLM)],
)
def test_every_feed_forward_network_and_head_transform_starts_from_the_knobs(family, model_class):
    config = tiny_config(family, hidden_act="xielu", lm_head_transform=True, **KNOBS)
    activations = [module for module in model_class(config).modules() if isinstance(module, XIELU)]
    layers = config.num_hidden_layers if family != "seq2seq" else config.encoder_layers + config.decoder_layers
    assert len(activations) == layers + 1  # one per layer, one in the head's transform
    expected = XIELU(alpha_p_init=1.3, alpha_n_init=0.9, beta=0.25, eps=-1e-4)
    for module in activations:
        for name in ("alpha_p", "alpha_n", "beta", "eps"):
            assert torch.equal(getattr(module, name), getattr(expected, name)), name


def test_other_activations_are_unchanged():
    assert type(activation_function("relu")).__name__ == "ReLU"  # ACT2FN's, as before
    assert isinstance(activation_function("xielu"), XIELU)


# ---------------------------------------------------------------------------------------------------------------------
# From scratch: training, saving, the export to Apertus


def _from_scratch() -> HFAttentionForCausalLM:
    torch.manual_seed(0)
    return HFAttentionForCausalLM(tiny_config("decoder", **APERTUS_LIKE, **KNOBS))


def test_a_model_with_xielu_trains_one_step_then_saves_and_loads_exactly(tmp_path):
    model = _from_scratch().train()
    ids, mask = left_pad([[5, 6, 7, 8, 9, 10], [11, 12, 13]])
    fixed = {name: tensor.clone() for name, tensor in model.state_dict().items() if name.endswith((".beta", ".eps"))}
    learned = {name: p.detach().clone() for name, p in model.named_parameters() if name.endswith(".act.alpha_p")}
    assert len(fixed) == 4 and len(learned) == 2
    loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
    loss.backward()
    for name, parameter in model.named_parameters():
        if ".act." in name:
            assert parameter.grad is not None and parameter.grad.abs().item() > 0, name
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    state = model.state_dict()
    for name, before in learned.items():
        assert not torch.equal(state[name], before), name  # α_p moved
    for name, before in fixed.items():
        assert torch.equal(state[name], before), name  # β, ε did not
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    with torch.no_grad():
        assert torch.equal(
            loaded(input_ids=ids, attention_mask=mask).logits, model(input_ids=ids, attention_mask=mask).logits
        )


def test_a_model_with_xielu_exports_to_apertus_with_its_logits(caplog):
    model = _from_scratch().eval()
    with torch.no_grad():
        for name, tensor in model.named_buffers():
            if name.endswith(".beta"):
                tensor.add_(0.1)  # its own β per layer: the export carries the tensors, not the knobs
    exported = to_hf(model, "apertus")
    assert type(exported).__name__ == "ApertusForCausalLM" and exported.config.hidden_act == "xielu"
    assert "xielu_alpha_p_init=1.3" in caplog.text  # a start value: reported, not refused
    ids, mask = left_pad([[5, 6, 7, 8, 9, 10], [11, 12, 13]])
    positions = generate_positions(mask)
    with torch.no_grad():
        theirs = exported(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        ours = model(input_ids=ids, attention_mask=mask).logits
    assert (theirs - ours)[mask.bool()].abs().max().item() <= TOLERANCE


# ---------------------------------------------------------------------------------------------------------------------
# A converted Apertus takes transformers' training step


def test_a_converted_apertus_takes_the_same_training_step_as_transformers():
    theirs = copy.deepcopy(reference("apertus")).train()
    ours = from_hf(theirs).train()
    batch = padded_batch("apertus")
    mask = batch["attention_mask"]
    predicted_from_padding = torch.nn.functional.pad(mask, (1, 0))[:, :-1] == 0
    labels = batch["input_ids"].masked_fill((mask == 0) | predicted_from_padding, -100)
    batch = {**batch, "position_ids": generate_positions(mask), "labels": labels}
    their_output, our_output = theirs(**batch), ours(**batch)
    torch.testing.assert_close(our_output.loss, their_output.loss, rtol=1e-5, atol=1e-6)
    their_output.loss.backward()
    our_output.loss.backward()
    mine = dict(ours.named_parameters())
    for layer in range(theirs.config.num_hidden_layers):
        for name in ("alpha_p", "alpha_n"):
            their_grad = theirs.get_parameter(f"model.layers.{layer}.mlp.act_fn.{name}").grad
            our_grad = mine[f"model.decoder.layers.{layer}.mlp.act.{name}"].grad
            assert their_grad.abs().item() > 0
            torch.testing.assert_close(our_grad, their_grad, rtol=1e-4, atol=1e-6)
    for model in (theirs, ours):
        torch.optim.SGD(model.parameters(), lr=0.5).step()
    with torch.no_grad():
        after_theirs = theirs.eval()(**batch).logits[mask.bool()]
        after_ours = ours.eval()(**batch).logits[mask.bool()]
    torch.testing.assert_close(after_ours, after_theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hidden_act", ["relu2", "tanh"])
def test_an_apertus_activation_hf_attention_lacks_is_refused_by_name(hidden_act):
    config = ApertusConfig(
        **DECODER, hidden_act=hidden_act, rope_parameters={"rope_type": "default", "rope_theta": 1e4}
    )
    with pytest.raises(ValueError, match=rf"from_hf: hidden_act='{hidden_act}' .*supported: xielu, relu"):
        from_hf(ApertusForCausalLM(config))
