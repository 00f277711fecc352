"""The knobs of today's open architectures on a model trained from scratch: each is validated when the config is
built (the error names the field, the value and what is allowed), a model using them saves and loads bit for bit and
trains, and a sliding-window layer's cache keeps at most the window while generating.

Parity of each knob with the architecture it comes from is tested against transformers' own classes in
test_modern_parity.py."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

from hf_attention import HFAttentionDecoderConfig, HFAttentionEncoderConfig, HFAttentionSeq2SeqConfig

SMALL = {
    "vocab_size": 64,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 48,
}
ROTARY = dict(SMALL, position_encoding="rotary", norm_position="pre", norm_type="rmsnorm", hidden_act="swiglu")


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"rope_type": "ntk"}, "rope_type='ntk' is not supported"),
        ({"rope_type": "linear"}, "rope_type='linear' needs rope_scaling_options 'factor'"),
        (
            {"rope_type": "linear", "rope_scaling_options": {"factor": 2, "beta": 1}},
            "'beta', which rope_type='linear'",
        ),
        ({"rope_type": "linear", "rope_scaling_options": {"factor": "2"}}, "rope_scaling_options['factor']='2'"),
        (
            {
                "rope_type": "longrope",
                "rope_scaling_options": {
                    "short_factor": [1.0],
                    "long_factor": [1.0] * 4,
                    "original_max_position_embeddings": 8,
                },
            },
            "rope_scaling_options['short_factor'] must be a list of 4 numbers",
        ),
        ({"partial_rotary_factor": 0.0}, "partial_rotary_factor=0.0 must be a number in (0, 1]"),
        ({"partial_rotary_factor": 0.4}, "rotates int(head_dim=8 × factor) = 3"),
        ({"partial_rotary_factor": 0.2}, "rotation needs an even number >= 2"),
        ({"nope_layers": [2]}, "nope_layers=[2] names layers that do not exist"),
        ({"local_rope_theta": 100.0}, "rotates the sliding-window layers, and none is one"),
        ({"sliding_window": 0}, "sliding_window=0 must be a positive integer"),
        ({"layer_types": ["full_attention"]}, "layer_types has 1 entries for 2 layers"),
        ({"layer_types": ["full_attention", "local"]}, "each one of 'full_attention', 'sliding_attention'"),
        ({"layer_types": ["full_attention", "sliding_attention"]}, "sliding_window is None"),
        ({"qk_norm": "query"}, "qk_norm='query' is not supported"),
        ({"norm_position": "peri"}, "norm_position='peri' is not supported"),
        ({"attn_logit_softcapping": -1.0}, "attn_logit_softcapping=-1.0 must be a finite number > 0"),
        ({"norm_bias": False}, "norm_bias=False is for norm_type='layernorm'"),
        ({"norm_position": "post", "first_attention_norm": False}, "first_attention_norm=False needs"),
    ],
)
def test_bad_knobs_are_refused_by_name(knobs, message):
    with pytest.raises(ValueError) as error:
        HFAttentionDecoderConfig(**{**ROTARY, **knobs})
    assert message in str(error.value)


def test_rotary_knobs_need_rotary_positions():
    with pytest.raises(ValueError, match="rope_type='linear' needs position_encoding='rotary'"):
        HFAttentionDecoderConfig(**SMALL, rope_type="linear", rope_scaling_options={"factor": 2.0})


def test_the_encoder_decoder_family_has_no_windows():
    with pytest.raises(ValueError, match="sliding_window=4 is for the encoder and decoder families"):
        HFAttentionSeq2SeqConfig(hidden_size=32, num_attention_heads=4, sliding_window=4)


def test_score_cap_needs_a_backend_that_can_apply_it():
    config = HFAttentionDecoderConfig(**ROTARY, attn_logit_softcapping=30.0)
    with pytest.raises(ValueError, match="attn_logit_softcapping=30.0 needs attn_implementation='eager'"):
        AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    AutoModelForCausalLM.from_config(config, attn_implementation="eager")  # eager caps the scores


GEMMA_LIKE = dict(
    ROTARY,
    num_hidden_layers=3,
    norm_type="offset_rmsnorm",
    norm_position="sandwich",
    qk_norm="head",
    hidden_act="geglu_new",
    sliding_window=4,
    layer_types=["sliding_attention", "sliding_attention", "full_attention"],
    local_rope_theta=100.0,
    query_pre_attn_scalar=16.0,
    final_logit_softcapping=10.0,
    rope_type="linear",
    rope_scaling_options={"factor": 2.0},
)
OLMO_LIKE = dict(ROTARY, norm_position="output", qk_norm="projection", nope_layers=[1], partial_rotary_factor=0.5)
YARN_LIKE = dict(
    ROTARY,
    max_position_embeddings=32,
    attention_output_bias=False,
    rope_type="yarn",
    rope_scaling_options={"factor": 4.0, "original_max_position_embeddings": 8},
)


@pytest.mark.parametrize("knobs", [GEMMA_LIKE, OLMO_LIKE, YARN_LIKE], ids=["gemma-like", "olmo-like", "yarn"])
def test_a_model_with_the_new_knobs_saves_loads_and_trains(knobs, tmp_path):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(HFAttentionDecoderConfig(**knobs, hidden_dropout_prob=0.0))
    ids = torch.randint(3, 64, (2, 12))
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(model.eval()(ids).logits, loaded(ids).logits)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_offset_norms_start_as_the_identity():
    model = AutoModelForCausalLM.from_config(HFAttentionDecoderConfig(**GEMMA_LIKE))
    norm = model.model.decoder.layers[0].self_attn_output_norm
    assert torch.equal(norm.weight, torch.zeros_like(norm.weight))  # gain 1 + w = 1


def test_final_cap_bounds_the_logits_and_their_loss():
    config = HFAttentionDecoderConfig(**GEMMA_LIKE)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        model.lm_head.weight.mul_(1000.0)
    ids = torch.randint(3, 64, (1, 10))
    output = model(ids, labels=ids)
    assert output.logits.abs().max() <= 10.0
    plain = torch.nn.functional.cross_entropy(output.logits[0, :-1].float(), ids[0, 1:])
    torch.testing.assert_close(output.loss, plain)


def test_a_sliding_layer_keeps_at_most_its_window_while_generating():
    torch.manual_seed(0)
    config = HFAttentionDecoderConfig(**GEMMA_LIKE)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    ids = torch.randint(3, 64, (2, 10))
    output = model.generate(ids, max_new_tokens=30, do_sample=False, return_dict_in_generate=True)
    cache = output.past_key_values
    lengths = [layer.keys.shape[-2] for layer in cache.layers]
    assert lengths[0] <= config.sliding_window - 1 and lengths[1] <= config.sliding_window - 1
    assert lengths[2] == 10 + 30 - 1  # the global layer keeps everything
    # the windowed cache decodes what a full forward over the whole sequence computes
    with torch.no_grad():
        full = model(output.sequences).logits[:, 9:-1].argmax(-1)
    assert torch.equal(full, output.sequences[:, 10:])


def test_an_encoder_with_local_layers_sees_only_its_window():
    torch.manual_seed(0)
    config = HFAttentionEncoderConfig(
        **{**ROTARY, "num_hidden_layers": 1},
        sliding_window=3,
        embedding_norm=True,
        first_attention_norm=False,
        lm_head_transform=True,
        head_transform_bias=False,
    )
    model = AutoModelForMaskedLM.from_config(config).eval()
    ids = torch.randint(3, 64, (1, 12))
    changed = ids.clone()
    changed[0, 11] = (ids[0, 11] + 1) % 64
    with torch.no_grad():
        before, after = model(ids).logits, model(changed).logits
    # one layer: position 11 reaches back |i - j| < 3, to positions 9 and 10 only
    assert torch.equal(before[0, :9], after[0, :9])
    assert not torch.equal(before[0, 9:], after[0, 9:])


def eager_and_flex(config):
    """Two models of `config` with the same weights: one on the eager backend, one on FlexAttention."""
    eager = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    flex = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    flex.load_state_dict(eager.state_dict())
    flex.set_attn_implementation("flex_attention")
    return eager, flex


@pytest.mark.parametrize("softcap", [None, 20.0], ids=["plain", "score-cap"])
def test_flex_attention_applies_windows_local_bases_and_caps_as_eager(softcap):
    """FlexAttention draws the sliding window into its block mask and the score cap into its score_mod: the same
    logits and greedy tokens as the eager backend on a left-padded batch longer than the window."""
    torch.manual_seed(0)
    config = HFAttentionDecoderConfig(**GEMMA_LIKE, attn_logit_softcapping=softcap)
    eager, flex = eager_and_flex(config)
    ids = torch.randint(3, 64, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    with torch.no_grad():
        expected, actual = eager(ids, attention_mask=mask).logits, flex(ids, attention_mask=mask).logits
    real = mask.bool()
    torch.testing.assert_close(actual[real], expected[real], rtol=1e-5, atol=1e-5)
    settings = {"attention_mask": mask, "max_new_tokens": 8, "do_sample": False}
    assert torch.equal(flex.generate(ids, **settings), eager.generate(ids, **settings))


def test_flex_attention_takes_models_with_different_score_caps_in_one_process():
    """A second model whose score cap differs from the first one's runs FlexAttention too. torch.compile (which
    FlexAttention runs through even uncompiled) makes a captured float that changed value symbolic, which
    FlexAttention's operator rejects; a suite that met one cap before another failed this way."""
    ids = torch.randint(3, 64, (2, 12))
    for cap in (30.0, 20.0, 25.0):
        torch.manual_seed(0)
        config = HFAttentionDecoderConfig(**GEMMA_LIKE, attn_logit_softcapping=cap)
        eager, flex = eager_and_flex(config)
        with torch.no_grad():
            torch.testing.assert_close(flex(ids).logits, eager(ids).logits, rtol=1e-5, atol=1e-5)


def test_a_saved_qwen3_folder_converts_from_the_command_line_function(tmp_path):
    """`hf-attention convert` of a saved Qwen3 folder: the checkpoint loads with the Auto class and computes the
    reference's logits, and remembers the architecture it came from."""
    from modern_references import forward_inputs, reference

    from hf_attention.conversion.from_hf import convert_checkpoint

    theirs = reference("qwen3")
    theirs.save_pretrained(tmp_path / "qwen3")
    convert_checkpoint(str(tmp_path / "qwen3"), tmp_path / "ours")
    ours = AutoModelForCausalLM.from_pretrained(tmp_path / "ours").eval()
    assert ours.config.converted_from == "qwen3"
    inputs = forward_inputs("qwen3")
    with torch.no_grad():
        expected, actual = theirs(**inputs).logits, ours(**inputs).logits
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(actual[real], expected[real], rtol=1e-5, atol=1e-5)
