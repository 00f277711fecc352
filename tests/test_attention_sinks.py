"""Attention sinks (`attention_sinks`, GPT-OSS): a learned logit per query head joins every softmax of its
self-attention and is dropped after it, p = softmax([s_1 … s_S, sink_h])[:S].

Against transformers' GptOssAttention (tiny, every parameter moved from its start, the sinks included): our eager and
sdpa backends on left-padded batches with grouped heads, causal and sliding-window masks, with the same weights
(eager's returned without the sink column, as GPT-OSS returns them). Our three backends agree on whole models
(decoder with sliding and full layers, encoder, ALiBi's bias folded into SDPA's mask, bfloat16 on CPU); a cached
decoding step equals the full forward; a model trains (the sinks get gradients), saves and loads exactly; the heatmaps
and the explorer show the weight given to the sink; backends that would drop the sinks are refused, and so is an
export to an architecture without them.
"""

import numpy as np
import pytest
import torch
from conftest import left_pad, tiny_config
from test_to_hf import LLAMA
from transformers import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention, GptOssRotaryEmbedding

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM
from hf_attention.conversion.to_hf import to_hf
from hf_attention.inspection.explorer import explore
from hf_attention.inspection.heatmaps import SINK_LABEL, plot_attention
from hf_attention.modeling.attention_backends import sinks_refusal
from hf_attention.modeling.builders import build_attention, build_positional

TOLERANCE = 1e-5
WINDOW = 3
HEADS, KV_HEADS, HEAD_DIM, WIDTH = 4, 2, 8, 32
ROTARY = {
    "position_encoding": "rotary",
    "norm_position": "pre",
    "norm_type": "rmsnorm",
    "hidden_act": "swiglu",
    "attention_sinks": True,
}
# GPT-OSS's alternation of sliding and full layers, with grouped heads (conftest's TINY: 4 query heads, 2 kv heads)
GPT_OSS_LIKE = {**ROTARY, "sliding_window": WINDOW, "layer_types": ["sliding_attention", "full_attention"]}


def randomise_(module: torch.nn.Module) -> torch.nn.Module:
    """Every parameter moved from its start (the biases from zero; the sinks from zero, by as much as a score)."""
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            parameter.normal_(0.0, 1.0 if name.endswith("sinks") else 0.3)
    return module


# ---------------------------------------------------------------------------------------------------------------------
# One attention layer against transformers' GPT-OSS


def gpt_oss_pair(sliding: bool, implementation: str) -> tuple[GptOssAttention, torch.nn.Module, object]:
    """transformers' GptOssAttention (eager) and ours (`implementation`), the same random weights; the configs."""
    reference_config = GptOssConfig(
        vocab_size=64,
        hidden_size=WIDTH,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=2,
        intermediate_size=32,
        num_local_experts=2,
        attention_bias=True,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    reference_config._attn_implementation = "eager"
    reference = randomise_(GptOssAttention(reference_config, layer_idx=0 if sliding else 1)).eval()
    config = tiny_config("decoder", hidden_size=WIDTH, attention_bias=True, **GPT_OSS_LIKE)
    config._attn_implementation = implementation
    ours = build_attention(config, 0 if sliding else 1, is_causal=True, is_cross=False).eval()
    ours.load_state_dict(reference.state_dict())  # the same names: q/k/v/o_proj and sinks
    return reference, ours, (reference_config, config)


def padded_masks(lengths: list[int], total: int, window: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """A left-padded batch's (B, 1, T, T) causal mask, as our bool mask and as GPT-OSS's additive float mask."""
    queries = torch.arange(total)[:, None]
    keys = torch.arange(total)[None, :]
    allowed = keys <= queries
    if window is not None:
        allowed = allowed & (queries - keys < window)
    real = torch.stack([torch.arange(total) >= total - length for length in lengths])  # (B, T) keys that are tokens
    boolean = (allowed[None] & real[:, None, :])[:, None]  # (B, 1, T, T)
    additive = torch.zeros(boolean.shape).masked_fill(~boolean, torch.finfo(torch.float32).min)
    return boolean, additive


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("sliding", [False, True], ids=["full", "sliding"])
def test_a_layer_with_sinks_computes_gpt_oss_attention(implementation, sliding):
    reference, ours, (reference_config, config) = gpt_oss_pair(sliding, implementation)
    lengths, total = [5, 7], 7
    hidden = torch.randn(2, total, WIDTH)
    boolean, additive = padded_masks(lengths, total, WINDOW if sliding else None)
    positions = (torch.arange(total)[None] - (total - torch.tensor(lengths))[:, None]).clamp(min=0)  # (B, T)
    reference_tables = GptOssRotaryEmbedding(reference_config)(hidden, positions)  # half tables: (B, T, D/2)
    our_tables = build_positional(config, bidirectional=False)(positions)  # (B, T, D)
    with torch.no_grad():
        expected, expected_weights = reference(hidden, reference_tables, additive)
        got, weights = ours(hidden, attention_mask=boolean, position_embeddings=our_tables)
    real = torch.stack([torch.arange(total) >= total - length for length in lengths])
    assert (got - expected)[real].abs().max() <= TOLERANCE
    if implementation == "eager":  # the weights without the sink column, rows summing to less than 1
        assert weights.shape == expected_weights.shape == (2, HEADS, total, total)
        rows, expected_rows = weights.transpose(1, 2)[real], expected_weights.transpose(1, 2)[real]  # (N, H, S)
        assert (rows - expected_rows).abs().max() <= TOLERANCE
        assert rows.sum(-1).max() <= 1 + 1e-6 and rows.sum(-1).min() < 0.9  # the sinks took their share


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_sinks_at_minus_infinity_are_plain_attention(implementation):
    """exp(−∞) = 0 adds nothing to the softmax: the module computes what it computes without sinks, and the
    randomised sinks move the output visibly."""
    _, ours, _ = gpt_oss_pair(False, implementation)
    hidden = torch.randn(2, 6, WIDTH)
    with torch.no_grad():
        with_sinks = ours(hidden)[0]
        ours.sinks.fill_(float("-inf"))
        closed = ours(hidden)[0]
        ours.sinks = None  # the same module without sinks
        plain = ours(hidden)[0]
    assert (closed - plain).abs().max() <= TOLERANCE
    assert (with_sinks - plain).abs().max() > 1e-2


# ---------------------------------------------------------------------------------------------------------------------
# Whole models: the backends agree, the cache, training, saving


def sinked(model):
    return randomise_sinks_(model.eval())


def randomise_sinks_(model):
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("sinks"):
                parameter.normal_(0.0, 1.0)
    return model


def run_backends(model, inputs: dict, backends=("eager", "sdpa", "flex_attention")) -> dict[str, torch.Tensor]:
    outputs = {}
    for backend in backends:
        model.set_attn_implementation(backend)
        with torch.no_grad():
            output = model(**inputs)
        outputs[backend] = output.logits if hasattr(output, "logits") else output.last_hidden_state
    return outputs


@pytest.mark.parametrize(
    ("model_class", "family", "knobs"),
    [
        (HFAttentionForCausalLM, "decoder", GPT_OSS_LIKE),
        (HFAttentionEncoderModel, "encoder", {**GPT_OSS_LIKE, "layer_types": ["full_attention", "sliding_attention"]}),
        (HFAttentionForCausalLM, "decoder", {"position_encoding": "alibi", "attention_sinks": True}),
    ],
    ids=["decoder-sliding", "encoder-sliding", "decoder-alibi"],
)
def test_eager_sdpa_and_flex_agree_with_sinks(model_class, family, knobs):
    model = sinked(model_class(tiny_config(family, **knobs)))
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21, 40, 2], [7, 11, 13, 4, 6]])
    outputs = run_backends(model, {"input_ids": ids, "attention_mask": mask})
    real = mask.bool()
    for backend in ("sdpa", "flex_attention"):
        assert (outputs[backend] - outputs["eager"])[real].abs().max() <= TOLERANCE, backend


def test_bfloat16_on_cpu_takes_the_sinks_too():
    """SDPA runs low-precision inputs in float32 on CPU: its sink mask must be float32 as well."""
    model = sinked(HFAttentionForCausalLM(tiny_config("decoder", **GPT_OSS_LIKE)))
    ids, mask = left_pad([[5, 17, 33, 8, 9, 21], [7, 11, 13, 4]])
    expected = run_backends(model, {"input_ids": ids, "attention_mask": mask}, ("eager",))["eager"]
    got = run_backends(model.to(torch.bfloat16), {"input_ids": ids, "attention_mask": mask}, ("sdpa",))["sdpa"]
    assert (got.float() - expected)[mask.bool()].abs().max() < 2e-2  # logits below 1 in bfloat16 (8-bit mantissa)


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex_attention"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
def test_cached_decoding_steps_equal_the_full_forward(backend, padded):
    """Two one-token steps after a prefill, through a sliding layer's window: the same logits as one forward pass
    over the whole sequence (without padding, the step reaches SDPA without a mask: the sinks' own path)."""
    model = sinked(HFAttentionForCausalLM(tiny_config("decoder", **GPT_OSS_LIKE)))
    model.set_attn_implementation(backend)
    rows = (
        [[5, 17, 33, 8, 9, 21, 40], [7, 11, 13, 4, 6, 3, 12]]
        if not padded
        else [[5, 17, 33, 8, 9, 21, 40], [7, 11, 4, 6, 3]]
    )
    ids, mask = left_pad(rows)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask).logits
        step = model(input_ids=ids[:, :-2], attention_mask=mask[:, :-2], use_cache=True)
        steps = [step.logits[:, -1]]
        for index in (-2, -1):
            upto = mask.shape[1] + index + 1
            step = model(
                input_ids=ids[:, index : index + 1 or None],
                attention_mask=mask[:, :upto] if padded else None,
                cache=step.past_key_values,
                use_cache=True,
            )
            steps.append(step.logits[:, -1])
    assert (torch.stack(steps, 1) - full[:, -3:]).abs().max() <= TOLERANCE


def test_a_model_with_sinks_trains_and_saves_exactly(tmp_path):
    model = HFAttentionForCausalLM(tiny_config("decoder", **GPT_OSS_LIKE))
    sinks = [module.sinks for module in model.modules() if getattr(module, "sinks", None) is not None]
    # normal(0, initializer_range), as GPT-OSS starts them
    assert len(sinks) == 2 and all(s.shape == (4,) and 0 < s.abs().max() < 0.2 for s in sinks)
    before = [s.detach().clone() for s in sinks]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.randint(3, 99, (4, 70))  # 280 rows: the training step's fused projections
    model.train()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert all(s.grad is not None and s.grad.abs().max() > 0 for s in sinks)
    optimizer.step()
    assert all(not torch.equal(s, b) for s, b in zip(sinks, before, strict=True))
    model.eval().save_pretrained(tmp_path)
    loaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.attention_sinks is True
    for (name, mine), (_, theirs) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(mine, theirs), name
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


# ---------------------------------------------------------------------------------------------------------------------
# The weight given to the sink, in the heatmaps and the explorer


def test_the_heatmap_draws_the_weight_given_to_the_sink(trained_tokenizer):
    tokenizer = trained_tokenizer("decoder")
    model = sinked(HFAttentionForCausalLM(tiny_config("decoder", vocab_size=len(tokenizer), **GPT_OSS_LIKE)))
    text = "Return the value of the named attribute"
    drawn = plot_attention(model, tokenizer, text, layer=0)  # every head
    rows = drawn.weights.sum(-1)  # (H, Q)
    assert drawn.sink_weights.shape == rows.shape
    np.testing.assert_allclose(drawn.sink_weights, 1 - rows, atol=1e-6)
    assert drawn.sink_weights.min() > 1e-3  # each query gave the sink a visible share
    for axis in drawn.figure.axes[: len(rows)]:  # the heads' panels (the colour bars follow)
        labels = [label.get_text() for label in axis.get_xticklabels()]
        assert labels[-1] == SINK_LABEL and len(labels) == len(drawn.key_tokens) + 1
    mean = plot_attention(model, tokenizer, text, layer=0, head="mean")
    np.testing.assert_allclose(mean.sink_weights, drawn.sink_weights.mean(0), atol=1e-6)
    page = explore(model, tokenizer, text)
    np.testing.assert_allclose(page.sink_weights["self"], 1 - page.weights["self"].sum(-1), atol=1e-6)
    plain = HFAttentionForCausalLM(
        tiny_config("decoder", vocab_size=len(tokenizer), **{**ROTARY, "attention_sinks": False})
    )
    assert plot_attention(plain, tokenizer, text, layer=0).sink_weights is None
    assert explore(plain, tokenizer, text).sink_weights is None


# ---------------------------------------------------------------------------------------------------------------------
# What refuses the sinks


def test_the_knob_is_checked_when_the_config_is_built():
    with pytest.raises(ValueError, match="attention_sinks"):
        tiny_config("decoder", attention_sinks="yes")
    assert not hasattr(tiny_config("seq2seq"), "attention_sinks")  # the encoder and decoder families' knob


@pytest.mark.parametrize(
    ("name", "refused"),
    [("eager", False), ("sdpa", False), ("flex_attention", False), ("paged|eager", False), ("paged|sdpa", True)],
)
def test_only_transformers_sdpa_functions_are_refused(name, refused):
    assert sinks_refusal(name, False) is None
    message = sinks_refusal(name, True)
    assert (message is not None) == refused
    if refused:
        assert "attention_sinks=True needs attn_implementation=" in message and repr(name) in message


def test_a_model_with_sinks_refuses_an_sdpa_function_that_would_drop_them():
    model = HFAttentionForCausalLM(tiny_config("decoder", **GPT_OSS_LIKE))
    with pytest.raises(ValueError, match="attention_sinks=True needs"):
        model.set_attn_implementation("paged|sdpa")


def test_exporting_sinks_to_llama_is_refused_naming_the_knob():
    to_hf(HFAttentionForCausalLM(tiny_config("decoder", **LLAMA)), "llama")  # exported without them
    model = HFAttentionForCausalLM(tiny_config("decoder", **LLAMA, attention_sinks=True))
    with pytest.raises(ValueError, match="attention_sinks"):
        to_hf(model, "llama")
