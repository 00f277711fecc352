"""transformers' attention interface: functions registered with `AttentionInterface.register(name, fn)` run every
attention layer when selected by `attn_implementation=name`, receive the model's extra keyword arguments (as in HF's
Llama, which serving stacks rely on), and get their masks in the form of the mask builder registered for them."""

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, left_pad, right_pad
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward as hf_sdpa_attention
from transformers.masking_utils import eager_mask, sdpa_mask
from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward as gemma2_eager_attention
from transformers.models.t5.modeling_t5 import eager_attention_forward as t5_eager_attention

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM

FAMILIES = {
    "encoder": (HFAttentionEncoderModel, "last_hidden_state"),
    "decoder": (HFAttentionForCausalLM, "logits"),
    "seq2seq": (HFAttentionForSeq2SeqLM, "logits"),
}
SEEN: list[dict] = []


def needs_a_serving_state(module, query, key, value, attention_mask, *, scaling, serving_state, dropout=0.0, **kwargs):
    """An attention function that cannot run without a keyword of its own, like a serving stack's."""
    SEEN.append({"module": module, "serving_state": serving_state, "mask": attention_mask, **kwargs})
    return hf_sdpa_attention(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


AttentionInterface.register("test_serving_state", needs_a_serving_state)
AttentionMaskInterface.register("test_serving_state", sdpa_mask)
# transformers' own functions, each with the mask builder transformers uses for it
AttentionInterface.register("test_hf_sdpa", hf_sdpa_attention)
AttentionMaskInterface.register("test_hf_sdpa", sdpa_mask)
AttentionInterface.register("test_hf_t5_eager", t5_eager_attention)  # adds `position_bias` itself, as in T5
AttentionMaskInterface.register("test_hf_t5_eager", eager_mask)
AttentionInterface.register("test_no_mask_builder", needs_a_serving_state)


def inputs_of(family: str) -> dict:
    rows = [[5, 17, 33, 8, 61], [7, 21, 3]]
    ids, mask = left_pad(rows) if family == "decoder" else right_pad(rows)
    inputs = {"input_ids": ids, "attention_mask": mask}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = torch.tensor([[1, 9, 4, 12], [1, 30, 2, 5]])
    return inputs


def outputs_of(model, family: str, attn_implementation: str, **extra) -> torch.Tensor:
    model.set_attn_implementation(attn_implementation)
    inputs = inputs_of(family)
    with torch.no_grad():
        output = model(**inputs, **extra)[FAMILIES[family][1]]
    # padded positions of a decoder (left) or encoder (right) carry no meaning; seq2seq decoder rows are all real
    return output if family == "seq2seq" else output[inputs["attention_mask"].bool()]


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_keywords_reach_a_registered_attention_function(family):
    model_class, _ = FAMILIES[family]
    model = build(model_class, family)
    expected = outputs_of(model, family, "sdpa")
    SEEN.clear()
    state = object()
    got = outputs_of(model, family, "test_serving_state", serving_state=state)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    attention_modules = [m for m in model.modules() if type(m).__name__ == "MultiHeadAttention"]
    assert len(SEEN) == len(attention_modules)  # every layer, self- and cross-attention
    assert all(call["serving_state"] is state for call in SEEN)
    assert {id(call["module"]) for call in SEEN} == {id(m) for m in attention_modules}
    assert all(call["mask"] is None or call["mask"].dtype == torch.bool for call in SEEN)
    with pytest.raises(TypeError, match="serving_state"):
        outputs_of(model, family, "test_serving_state")  # without the keyword the function itself refuses


def test_a_registered_function_without_a_mask_builder_gets_no_mask():
    """As in transformers: a function with no registered mask builder attends to everything it is given."""
    model = build(HFAttentionForCausalLM, "decoder")
    SEEN.clear()
    outputs_of(model, "decoder", "test_no_mask_builder", serving_state=None)
    assert SEEN and all(call["mask"] is None for call in SEEN)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_transformers_sdpa_registered_by_name_gives_the_built_in_outputs(family, position):
    model_class, _ = FAMILIES[family]
    model = build(model_class, family, position_encoding=position)
    expected = outputs_of(model, family, "sdpa")
    torch.testing.assert_close(outputs_of(model, family, "test_hf_sdpa"), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_transformers_t5_eager_registered_by_name_gives_the_built_in_outputs(family, position):
    """T5's eager function takes additive masks (eager_mask) and the position bias; it has no grouped heads."""
    model_class, _ = FAMILIES[family]
    model = build(model_class, family, position_encoding=position, num_key_value_heads=4)
    expected = outputs_of(model, family, "eager")
    torch.testing.assert_close(outputs_of(model, family, "test_hf_t5_eager"), expected, rtol=0, atol=1e-5)


def test_keywords_the_model_computes_itself_are_refused():
    model = build(HFAttentionForCausalLM, "decoder")
    with pytest.raises(TypeError, match="position_bias: this is computed by the model itself"):
        model(torch.tensor([[5, 6, 7]]), position_bias=torch.zeros(1, 4, 3, 3))


# ---------------------------------------------------------------------------------------------------------------------
# A score cap (attn_logit_softcapping) reaches a registered function as `softcap=`, as transformers' Gemma 2 passes it

# Gemma 2's own eager function applies its `softcap` keyword (c·tanh(s / c) before the additive mask).
AttentionInterface.register("test_gemma2_eager", gemma2_eager_attention)
AttentionMaskInterface.register("test_gemma2_eager", eager_mask)


def recording_gemma2_eager(module, query, key, value, attention_mask, **kwargs):
    """Gemma 2's eager function, recording the keywords each call receives."""
    SEEN.append(kwargs)
    return gemma2_eager_attention(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register("test_recording_gemma2_eager", recording_gemma2_eager)
AttentionMaskInterface.register("test_recording_gemma2_eager", eager_mask)


def capped_decoder(cap: float | None):
    """A decoder whose scores are large enough for a cap of 1 to change the logits a lot (initializer_range 0.5)."""
    torch.manual_seed(0)
    return build(
        HFAttentionForCausalLM,
        "decoder",
        position_encoding="rotary",
        attn_logit_softcapping=cap,
        attn_implementation="eager",
        initializer_range=0.5,
    )


def test_a_registered_function_that_applies_softcap_gives_the_eager_logits():
    model, uncapped = capped_decoder(1.0), capped_decoder(None)
    uncapped.load_state_dict(model.state_dict())
    ids, mask = left_pad([[5, 17, 33, 8, 61], [7, 21, 3]])
    real = mask.bool()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits[real]
        assert (uncapped(ids, attention_mask=mask).logits[real] - expected).abs().max() > 0.1  # the cap matters
        model.set_attn_implementation("test_gemma2_eager")
        got = model(ids, attention_mask=mask).logits[real]
    # float32, logits of order 10 after two layers; the same formula in another order of operations: rounding only,
    # while a cap left out moves them by more than 0.1 (above)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_the_cap_is_passed_only_where_there_is_one():
    for cap in (1.0, None):
        model = capped_decoder(cap)
        model.set_attn_implementation("test_recording_gemma2_eager")
        SEEN.clear()
        with torch.no_grad():
            model(torch.tensor([[5, 17, 33]]))
        assert len(SEEN) == model.config.num_hidden_layers
        assert all(call.get("softcap", "none passed") == (cap or "none passed") for call in SEEN), cap


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("eager", False),
        ("paged|eager", False),
        ("flex_attention", False),
        ("test_gemma2_eager", False),  # registered: it receives the cap as `softcap=`
        ("sdpa", True),
        ("test_hf_sdpa", True),  # transformers' SDPA, registered under another name
    ],
)
def test_softcap_refusal_names_only_the_backends_that_cannot_cap(name, refused):
    from hf_attention.modeling.attention_backends import softcap_refusal

    assert softcap_refusal(name, None) is None  # nothing capped: every backend can
    message = softcap_refusal(name, 30.0)
    if not refused:
        assert message is None
        return
    for words in (
        "attn_logit_softcapping=30.0 needs attn_implementation='eager', 'flex_attention' or a function registered",
        f"(got {name!r})",
        "cannot cap the scores",
        "attn_logit_softcapping=None",
    ):
        assert words in message, (words, message)


def test_a_capped_model_takes_a_registered_function_and_refuses_sdpa():
    model = capped_decoder(1.0)
    model.set_attn_implementation("test_gemma2_eager")
    assert model.config._attn_implementation == "test_gemma2_eager"
    with pytest.raises(ValueError, match="attn_logit_softcapping=1.0 needs attn_implementation='eager'"):
        model.set_attn_implementation("sdpa")
