"""attn_implementation="flex_attention": torch's FlexAttention with block masks (causal, padding, packed documents,
cross-attention) and the position biases as score modifications gives the outputs of SDPA and eager.

Most cases run torch's unfused FlexAttention (`flex.COMPILE = False`: the same mask_mod and score_mod, evaluated
without compiling a kernel), so that the whole matrix fits in the suite; the compiled kernel runs in the slow cases."""

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, left_pad, right_pad

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM, flex

FAMILIES = {
    "encoder": (HFAttentionEncoderModel, "last_hidden_state"),
    "decoder": (HFAttentionForCausalLM, "logits"),
    "seq2seq": (HFAttentionForSeq2SeqLM, "logits"),
}
TOLERANCE = {"rtol": 0, "atol": 1e-5}


@pytest.fixture
def unfused(monkeypatch):
    monkeypatch.setattr(flex, "COMPILE", False)


def _inputs(family: str) -> dict:
    rows = [[5, 17, 33, 8, 61, 12], [7, 21, 3]]
    ids, mask = left_pad(rows) if family == "decoder" else right_pad(rows)
    inputs = {"input_ids": ids, "attention_mask": mask}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = torch.tensor([[1, 9, 4, 12], [1, 30, 2, 5]])
    return inputs


def _outputs(model, family: str, implementation: str) -> torch.Tensor:
    model.set_attn_implementation(implementation)
    inputs = _inputs(family)
    with torch.no_grad():
        output = model(**inputs)[FAMILIES[family][1]]
    return output if family == "seq2seq" else output[inputs["attention_mask"].bool()]  # real positions


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_flex_gives_the_outputs_of_sdpa_and_eager(unfused, family, position):
    model = build(FAMILIES[family][0], family, position_encoding=position)
    flexed = _outputs(model, family, "flex_attention")
    torch.testing.assert_close(flexed, _outputs(model, family, "sdpa"), **TOLERANCE)
    torch.testing.assert_close(flexed, _outputs(model, family, "eager"), **TOLERANCE)


@pytest.mark.parametrize("position", ["rotary", "alibi", "relative"])
def test_flex_keeps_packed_documents_apart(unfused, position):
    """Padding-free packing (positions restart, no mask): each text attends within itself, as if run alone."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding=position, attn_implementation="flex_attention")
    documents = [[5, 17, 33, 8], [7, 21, 3], [40, 41, 42, 43, 44]]
    packed = torch.tensor([sum(documents, [])])
    position_ids = torch.tensor([[p for d in documents for p in range(len(d))]])
    with torch.no_grad():
        together = model(packed, position_ids=position_ids, use_cache=False).logits[0]
        alone = torch.cat([model(torch.tensor([d])).logits[0] for d in documents])
    torch.testing.assert_close(together, alone, **TOLERANCE)


@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
@pytest.mark.parametrize("position", ["rotary", "alibi", "relative"])
def test_flex_generates_the_tokens_of_sdpa(unfused, family, position):
    model = build(FAMILIES[family][0], family, position_encoding=position)
    inputs = _inputs(family)
    inputs.pop("decoder_input_ids", None)
    for num_beams in (1, 2):
        options = {"max_new_tokens": 6, "do_sample": False, "eos_token_id": None, "num_beams": num_beams}
        model.set_attn_implementation("sdpa")
        expected = model.generate(**inputs, **options)
        model.set_attn_implementation("flex_attention")
        assert torch.equal(model.generate(**inputs, **options), expected), num_beams


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "position"), [("decoder", "alibi"), ("encoder", "relative"), ("seq2seq", "rotary")]
)
def test_the_compiled_kernel_gives_the_same_outputs(family, position):
    """Inputs of more than a block of queries (128) run the compiled kernel; generation's one-query steps do not."""
    model = build(FAMILIES[family][0], family, position_encoding=position, max_position_embeddings=256)
    generator = torch.Generator().manual_seed(0)
    rows = [torch.randint(3, 99, (length,), generator=generator).tolist() for length in (160, 131)]
    ids, mask = left_pad(rows) if family == "decoder" else right_pad(rows)
    inputs = {"input_ids": ids, "attention_mask": mask}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = ids[:, :140]
    assert flex._kernel(torch.empty(2, 4, ids.shape[1], 8)) is not flex._plain_flex_attention
    outputs = {}
    for implementation in ("flex_attention", "sdpa"):
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            output = model(**inputs)[FAMILIES[family][1]]
        outputs[implementation] = output if family == "seq2seq" else output[mask.bool()]
    torch.testing.assert_close(outputs["flex_attention"], outputs["sdpa"], **TOLERANCE)
    if family != "encoder":
        inputs.pop("decoder_input_ids", None)
        options = {"max_new_tokens": 4, "do_sample": False, "eos_token_id": None}
        tokens = {}
        for implementation in ("flex_attention", "sdpa"):
            model.set_attn_implementation(implementation)
            tokens[implementation] = model.generate(**inputs, **options)
        assert torch.equal(tokens["flex_attention"], tokens["sdpa"])


def test_the_kernel_compiles_once_for_all_lengths_on_a_gpu_and_per_shape_on_the_cpu(monkeypatch):
    """Packed training batches change length at every step: on a GPU the kernel is compiled with symbolic lengths
    (dynamic=True), so a new length compiles nothing new; the CPU's dynamic-shape kernels do not build, so there the
    kernel is compiled per shape. Short inputs (decoding steps) and compiled models run the plain function."""
    compiled = []
    monkeypatch.setattr(flex, "_compiled_flex_attention", {})
    monkeypatch.setattr(torch, "compile", lambda function, **options: compiled.append(options) or function)
    queries = torch.empty(1, 4, flex.COMPILED_MIN_QUERIES, 8)
    assert flex._kernel(queries[:, :, :1]) is flex._plain_flex_attention
    flex._kernel(queries), flex._kernel(queries)
    assert compiled == [{"dynamic": False}]  # the CPU: per shape, one compiled function for all of them
    monkeypatch.setattr(flex, "DYNAMIC_DEVICE_TYPES", frozenset({"cpu"}))  # as the CPU were a GPU
    flex._kernel(queries), flex._kernel(queries)
    assert compiled == [{"dynamic": False}, {"dynamic": True}]
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert flex._kernel(queries) is flex._plain_flex_attention


def test_flex_refuses_to_train_on_cpu_and_non_dot_product_scores():
    model = build(HFAttentionForCausalLM, "decoder", attn_implementation="flex_attention").train()
    model.config.attention_dropout = 0.0
    with pytest.raises(ValueError, match="cannot train on CPU: torch .* has no FlexAttention backward pass"):
        model(torch.tensor([[5, 6, 7]]), labels=torch.tensor([[5, 6, 7]]))
    with pytest.raises(ValueError, match="attention_score='additive' needs attn_implementation='eager'"):
        build(HFAttentionForCausalLM, "decoder", attention_score="additive", attn_implementation="flex_attention")
