"""The logits' factor (`logit_multiplier`, losses.py's `_lm_head_input`): the vocabulary logits times m, Cohere's
`logit_scale` (Command R: 0.0625).

Against transformers' own Cohere with only that factor set (every parameter moved from its start), eager and sdpa;
the factor is the logits' (bit for bit at Command R's power of two); `logit_scale`, what TRL's fused head multiplies
by, folds it in; the checks when the config is built; the default changes nothing; a model of each family with it
trains a step (fused loss = eval loss), saves and loads bit for bit, exports to Cohere and is refused by Llama.
"""

import pytest
import torch
from conftest import left_pad, tiny_config
from modern_references import perturb
from test_mup_multipliers import positions_of
from test_parallel_block import COHERE_LIKE, cohere_config
from transformers import CohereForCausalLM

from hf_attention import HFAttentionForCausalLM, HFAttentionForMaskedLM, HFAttentionForSeq2SeqLM, from_hf
from hf_attention.conversion.to_hf import to_hf

TOLERANCE = 1e-5
WIDTH = 32
PLAIN_DECODER = {"position_encoding": "rotary", "norm_position": "pre", "hidden_act": "swiglu", "lm_head_bias": False}


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_the_factor_alone_gives_coheres_logits(implementation):
    reference = perturb(CohereForCausalLM(cohere_config(use_qk_norm=False, logit_scale=0.3)), seed=4).eval()
    reference.set_attn_implementation(implementation)
    ours = from_hf(reference).eval()
    assert ours.config.logit_multiplier == 0.3 and ours.config.logit_scale == 0.3
    unscaled = CohereForCausalLM(cohere_config(use_qk_norm=False, logit_scale=1.0)).eval()
    unscaled.load_state_dict(reference.state_dict())
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21, 40, 3], [7, 11, 13, 4, 6]])
    real = mask.bool()
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask)).logits
        got = ours(input_ids=ids, attention_mask=mask).logits
        plain = unscaled(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask)).logits
    assert (got - expected)[real].abs().max() <= TOLERANCE
    assert (plain - expected)[real].abs().max() > 100 * TOLERANCE  # the factor was seen


@pytest.mark.parametrize(("m", "exact"), [(0.0625, True), (2.5, False)])
def test_the_logits_are_the_unscaled_ones_times_m(m, exact):
    plain = perturb(HFAttentionForCausalLM(tiny_config("decoder", **PLAIN_DECODER)), seed=5).eval()
    scaled = HFAttentionForCausalLM(tiny_config("decoder", **PLAIN_DECODER, logit_multiplier=m)).eval()
    scaled.load_state_dict(plain.state_dict())
    ids = torch.randint(3, 99, (2, 9))
    with torch.no_grad():
        expected, got = m * plain(ids).logits, scaled(ids).logits
    # (m·h)Wᵀ: a power of two scales every product and sum exactly; another m rounds once more
    assert torch.equal(got, expected) if exact else torch.allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("knobs", "scale"),
    [
        ({"logit_multiplier": 0.25}, 0.25),
        ({"logit_multiplier": 0.25, "logits_scaling": 4.0}, 0.0625),
        ({"logit_multiplier": 2.0, "scale_lm_head_input": True}, 2.0 * WIDTH**-0.5),
        ({"logit_multiplier": 0.25, "final_logit_softcapping": 5.0}, None),  # the cap is not a factor
        ({}, None),
    ],
)
def test_logit_scale_folds_in_the_factor(knobs, scale):
    """`config.logit_scale` is what a client projecting the last hidden state itself (TRL's fused LM head)
    multiplies by: it then computes this model's logits."""
    model = perturb(HFAttentionForCausalLM(tiny_config("decoder", **PLAIN_DECODER, **knobs)), seed=6).eval()
    assert model.config.logit_scale == scale
    if scale is None:
        return
    ids = torch.randint(3, 99, (2, 7))
    with torch.no_grad():
        logits = model(ids).logits
        hidden = model.model(ids).last_hidden_state
    assert torch.allclose(logits, scale * hidden @ model.lm_head.weight.T, atol=1e-6)


@pytest.mark.parametrize("value", [0, -0.5, float("inf"), float("nan"), "0.0625", True, None])
def test_the_factor_must_be_a_finite_number_above_zero(value):
    with pytest.raises(ValueError, match=r"logit_multiplier=.* must be a finite number > 0"):
        tiny_config("decoder", logit_multiplier=value)


def test_a_bias_on_the_head_is_refused_with_it():
    with pytest.raises(ValueError, match=r"logit_multiplier=0.5 multiplies the projection's input.*lm_head_bias"):
        tiny_config("decoder", logit_multiplier=0.5, lm_head_bias=True)


@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
def test_the_default_changes_nothing(family):
    config = tiny_config(family)
    assert config.logit_multiplier == 1.0 and config.logit_scale is None


@pytest.mark.parametrize(
    ("model_class", "family"),
    [(HFAttentionForCausalLM, "decoder"), (HFAttentionForMaskedLM, "encoder"), (HFAttentionForSeq2SeqLM, "seq2seq")],
)
def test_a_model_with_the_factor_trains_and_saves_exactly(model_class, family, tmp_path):
    model = model_class(tiny_config(family, logit_multiplier=0.3))
    ids = torch.randint(3, 99, (4, 70))  # 280 rows: the training step's fused projection and loss
    inputs = {"input_ids": ids, "labels": ids}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = ids[:, :10]
        inputs["labels"] = ids[:, 1:11]
    with torch.no_grad():
        eval_loss = model.eval()(**inputs).loss
    model.train()
    loss = model(**inputs).loss  # the fused projection and loss multiply as the eval path does
    assert torch.allclose(loss, eval_loss, atol=1e-5)
    loss.backward()
    assert model.lm_head.weight.grad.abs().max() > 0
    before = model.lm_head.weight.detach().clone()
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    assert not torch.equal(model.lm_head.weight, before)
    model.eval().save_pretrained(tmp_path)
    loaded = model_class.from_pretrained(tmp_path).eval()
    assert loaded.config.logit_multiplier == 0.3
    for (name, mine), (_, theirs) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(mine, theirs), name
    with torch.no_grad():
        inputs.pop("labels")
        assert torch.equal(model(**inputs).logits, loaded(**inputs).logits)


def test_a_model_with_the_factor_exports_to_cohere_and_is_refused_by_llama():
    llama_like = {**PLAIN_DECODER, "norm_type": "rmsnorm", "scale_embeddings": False, "attention_bias": False}
    llama_like |= {"mlp_bias": False, "tie_word_embeddings": False}
    with pytest.raises(ValueError, match="logit_multiplier=0.0625"):
        to_hf(HFAttentionForCausalLM(tiny_config("decoder", **llama_like, logit_multiplier=0.0625)), "llama")
    model = perturb(HFAttentionForCausalLM(tiny_config("decoder", **COHERE_LIKE, logit_multiplier=0.0625)), 7)
    exported = to_hf(model.eval(), "cohere")
    assert exported.config.logit_scale == 0.0625
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21], [7, 11, 13]])
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
        got = exported(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask)).logits
    assert (got - expected)[mask.bool()].abs().max() <= TOLERANCE
