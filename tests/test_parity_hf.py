"""Parity with the reference implementations: HF GPT-2, Llama, BERT, BART, Marian and T5 with random tiny weights,
converted by `hf_attention.from_hf`, give the same hidden states, attentions, logits and generated tokens. The
references are those the architectures' modules declare (`Architecture.parity_references`)."""

import copy

import pytest
import torch
from conftest import tiny_config
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    BartConfig,
    BartForConditionalGeneration,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
    MarianConfig,
    MarianMTModel,
    T5ForConditionalGeneration,
)
from transformers.activations import ACT2FN

from hf_attention import (
    HFAttentionDecoderForSequenceClassification,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    from_hf,
)
from hf_attention.architectures import REGISTRY, bert, t5
from hf_attention.architectures.tiny import BART_SIZES
from hf_attention.conversion import from_hf as convert_module

TOLERANCE = 1e-4
GPT2_SMALL = {
    "vocab_size": 99,
    "n_embd": 32,
    "n_layer": 1,
    "n_head": 4,
    "n_positions": 16,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
# name → (reference class, its tiny config), from every architecture of the registry (`parity_references`, at the
# sizes of architectures/tiny.py's first parity suite). Special tokens sit inside the 99-token vocabulary.
REFERENCES = {
    name: (reference.model_class, reference.config)
    for architecture in REGISTRY.values()
    for name, reference in architecture.parity_references.items()
}
GENERATIVE = [
    name
    for architecture in REGISTRY.values()
    for name, reference in architecture.parity_references.items()
    if reference.model_class.can_generate() and reference.generates
]
AUTO = {
    HFAttentionDecoderForSequenceClassification: AutoModelForSequenceClassification,
    HFAttentionForCausalLM: AutoModelForCausalLM,
    HFAttentionForMaskedLM: AutoModelForMaskedLM,
    HFAttentionForSeq2SeqLM: AutoModelForSeq2SeqLM,
}


def build_reference(name: str, attn_implementation: str = "eager"):
    """A tiny random reference model in eval mode; biases, norms and BART's logits bias are made non-trivial, so
    that a weight the converter forgot or misplaced cannot hide behind its zero/one initialisation."""
    model_class, make_config = REFERENCES[name]
    model = model_class._from_config(copy.deepcopy(make_config()), attn_implementation=attn_implementation).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for key, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if key.endswith("bias") or "norm" in key.lower() or key.endswith("final_logits_bias"):
                tensor.add_(0.1 * torch.randn(tensor.shape, generator=generator))
    return model


def right_padded(batch: int = 3, length: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids avoiding special tokens, and a mask whose rows hold length, length-3 and length-5 real tokens."""
    ids = torch.randint(3, 90, (batch, length), generator=torch.Generator().manual_seed(2))
    lengths = torch.tensor([length, length - 3, length - 5][:batch])
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    return ids * mask, mask


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def main_output_diff(reference, theirs, ours, real: torch.Tensor) -> float:
    """Max |difference| of the logits (or last hidden state), over real tokens for encoders and decoders."""
    key = "logits" if "logits" in theirs else "last_hidden_state"
    if reference.config.is_encoder_decoder or theirs[key].dim() == 2:  # decoder inputs unpadded; one row per text
        return max_diff(theirs[key], ours[key])
    return max_diff(theirs[key][real], ours[key][real])


def forward_both(name: str, reference, converted, with_details: bool = True) -> tuple:
    """Both models' outputs on a right-padded batch, and the (B, T) mask of real tokens."""
    ids, mask = right_padded()
    inputs = {
        "input_ids": ids,
        "attention_mask": mask,
        "output_hidden_states": with_details,
        "output_attentions": with_details,
    }
    if reference.config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.randint(3, 90, (3, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return reference(**inputs), converted(**inputs), mask.bool()


# ---------------------------------------------------------------------------------------------------------------------
# Forward pass: logits, every layer's hidden states, attention weights


@pytest.mark.parametrize("name", list(REFERENCES))
def test_forward_parity(name):
    reference = build_reference(name)
    converted = from_hf(reference)
    theirs, ours, real = forward_both(name, reference, converted)
    if reference.config.is_encoder_decoder:
        # Source rows are right-padded (compare real tokens only); decoder inputs have no padding.
        pairs = [
            (theirs.logits, ours.logits, None),
            (theirs.encoder_last_hidden_state, ours.encoder_last_hidden_state, real),
        ]
        pairs += [(a, b, real) for a, b in zip(theirs.encoder_hidden_states, ours.encoder_hidden_states, strict=True)]
        pairs += [(a, b, None) for a, b in zip(theirs.decoder_hidden_states, ours.decoder_hidden_states, strict=True)]
        attentions = [
            (theirs.encoder_attentions, ours.encoder_attentions, real),
            (theirs.decoder_attentions, ours.decoder_attentions, None),
            (theirs.cross_attentions, ours.cross_attentions, None),
        ]
    else:
        output = theirs.logits if hasattr(theirs, "logits") else theirs.last_hidden_state
        rows = real if output.dim() == 3 else None  # a classifier's logits: one row per text
        pairs = [(output, ours.logits if hasattr(ours, "logits") else ours.last_hidden_state, rows)]
        pairs += [(a, b, real) for a, b in zip(theirs.hidden_states, ours.hidden_states, strict=True)]
        attentions = [(theirs.attentions, ours.attentions, real)]
    assert len(theirs.get("hidden_states") or theirs.get("encoder_hidden_states")) > 1
    for a, b, rows in pairs:
        assert a.shape == b.shape
        assert max_diff(a[rows] if rows is not None else a, b[rows] if rows is not None else b) <= TOLERANCE
    for their_layers, our_layers, rows in attentions:
        assert len(their_layers) == len(our_layers) > 0
        for a, b in zip(their_layers, our_layers, strict=True):  # (B, H, T, S); padded query rows are undefined
            a, b = (a.transpose(1, 2)[rows], b.transpose(1, 2)[rows]) if rows is not None else (a, b)
            assert max_diff(a, b) <= TOLERANCE


@pytest.mark.parametrize("name", list(REFERENCES))
def test_sdpa_reference_converts_to_sdpa(name):
    """The default (SDPA) reference converts to our SDPA backend, which also matches."""
    reference = build_reference(name, attn_implementation="sdpa")
    converted = from_hf(reference)
    assert converted.config._attn_implementation == "sdpa"
    theirs, ours, real = forward_both(name, reference, converted, with_details=False)
    assert main_output_diff(reference, theirs, ours, real) <= TOLERANCE


def test_converted_classes_and_ids():
    expected = {
        "gpt2": HFAttentionForCausalLM,
        "llama": HFAttentionForCausalLM,
        "bert": AutoModel,
        "bert_mlm": HFAttentionForMaskedLM,
        "bart": HFAttentionForSeq2SeqLM,
        "marian": HFAttentionForSeq2SeqLM,
    }
    for name, cls in expected.items():
        reference = build_reference(name)
        converted = from_hf(reference)
        if cls is AutoModel:
            assert type(converted).__name__ == "HFAttentionEncoderModel"
        else:
            assert type(converted) is cls
        for field in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            assert getattr(converted.config, field, None) == getattr(reference.config, field, None), (name, field)
        if reference.can_generate():
            assert converted.generation_config.to_diff_dict() == reference.generation_config.to_diff_dict()


# ---------------------------------------------------------------------------------------------------------------------
# Generation: identical tokens, greedy and beam, with and without cache


def generation_inputs(reference) -> dict:
    """Decoders: a left-padded batch (as generate() wants). Encoder-decoders: right-padded sources."""
    ids, mask = right_padded()
    if not reference.config.is_encoder_decoder:
        width = ids.shape[1]
        shift = torch.stack([torch.roll(torch.arange(width), width - int(n)) for n in mask.sum(-1)])
        ids, mask = ids.gather(1, shift), mask.gather(1, shift)  # real tokens moved to the right end
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("name", GENERATIVE)
def test_generate_parity(name):
    reference = build_reference(name)
    converted = from_hf(reference)
    inputs = generation_inputs(reference)
    mask = inputs["attention_mask"]
    padded, real = (-1, 0) if reference.config.is_encoder_decoder else (0, -1)  # sources: right; decoders: left
    assert not mask[:, padded].all() and mask[:, real].all()
    # min_new_tokens keeps every row generating for all 20 steps, so the cache is exercised to the end.
    settings = {"max_new_tokens": 20, "min_new_tokens": 20, "do_sample": False}
    for num_beams in (1, 4):
        theirs = reference.generate(**inputs, **settings, num_beams=num_beams)
        assert theirs.shape[1] >= 20
        # The reference runs once (with its cache): equality to it, with and without ours, is the claim under test.
        for use_cache in (True, False):
            ours = converted.generate(**inputs, **settings, num_beams=num_beams, use_cache=use_cache)
            assert torch.equal(theirs, ours), (name, num_beams, use_cache)


# ---------------------------------------------------------------------------------------------------------------------
# Round trip through save_pretrained and the Auto classes


@pytest.mark.parametrize("name", list(REFERENCES))
def test_save_and_reload_with_auto_classes(name, tmp_path):
    reference = build_reference(name)
    converted = from_hf(reference)
    converted.save_pretrained(tmp_path)
    auto = AUTO.get(type(converted), AutoModel)
    reloaded = auto.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert type(reloaded) is type(converted)
    if reference.can_generate():
        assert reloaded.generation_config.to_diff_dict() == converted.generation_config.to_diff_dict()
    theirs, ours, real = forward_both(name, reference, reloaded, with_details=False)
    assert main_output_diff(reference, theirs, ours, real) <= TOLERANCE


# ---------------------------------------------------------------------------------------------------------------------
# Bad input


def test_unsupported_model_class_is_refused():
    with pytest.raises(ValueError, match=r"GPT2Model is not supported; supported classes are .*GPT2LMHeadModel"):
        from_hf(GPT2Model(GPT2Config(**GPT2_SMALL)))
    with pytest.raises(ValueError, match="BertForSequenceClassification is not supported"):
        from_hf(BertForSequenceClassification(bert.parity_config()))


@pytest.mark.parametrize(
    ("model_class", "config", "message"),
    [
        (
            GPT2LMHeadModel,
            GPT2Config(**GPT2_SMALL, scale_attn_by_inverse_layer_idx=True),
            "scale_attn_by_inverse_layer_idx",
        ),
        (GPT2LMHeadModel, GPT2Config(**GPT2_SMALL, activation_function="tanh"), "activation_function='tanh'"),
        (
            LlamaForCausalLM,
            LlamaConfig(
                vocab_size=99,
                hidden_size=32,
                intermediate_size=37,
                num_hidden_layers=1,
                num_attention_heads=4,
                # Llama's attention rotates whole heads: a partial factor in its rope_parameters is not read the
                # way Phi-3 reads it, and is refused by name
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            ),
            "Llama partial_rotary_factor=0.5",
        ),
        (
            T5ForConditionalGeneration,
            t5.parity_config(feed_forward_proj="gated-relu"),
            "feed_forward_proj='gated-relu'",  # the value as the source's config holds it
        ),
        (BartForConditionalGeneration, BartConfig(**{**BART_SIZES, "decoder_ffn_dim": 40}), "decoder_ffn_dim=40"),
        (
            MarianMTModel,
            MarianConfig(
                **BART_SIZES, pad_token_id=98, decoder_start_token_id=98, share_encoder_decoder_embeddings=False
            ),
            "share_encoder_decoder_embeddings",
        ),
    ],
)
def test_unsupported_options_are_refused(model_class, config, message):
    with pytest.raises(ValueError, match=message):
        from_hf(model_class(config))


def test_reference_weight_without_counterpart_is_refused():
    reference = build_reference("gpt2")
    reference.transformer.register_parameter("extra_scale", torch.nn.Parameter(torch.ones(32)))
    with pytest.raises(ValueError, match=r"weights that have no counterpart \(transformer.extra_scale\)"):
        from_hf(reference)


def test_weights_left_random_are_detected():
    model = HFAttentionForCausalLM(tiny_config("decoder"))
    partial = {key: value for key, value in model.state_dict().items() if "layers.1." not in key}
    with pytest.raises(RuntimeError, match=r"random initialisation: \['model.decoder.layers.1"):
        convert_module._load(model, partial)


# ---------------------------------------------------------------------------------------------------------------------
# The knobs added for parity (lm_head_bias, lm_head_transform, scale_lm_head_input, hidden_act="geglu_new")


def test_output_head_knobs_default_to_the_paper():
    model = HFAttentionForCausalLM(tiny_config("decoder")).eval()
    assert model.lm_head.bias is None and model.lm_head_transform is None
    hidden = torch.randn(2, 3, 32)
    assert torch.equal(model.vocabulary_logits(hidden), model.lm_head(hidden))


@pytest.mark.parametrize(
    ("family", "cls"),
    [("decoder", HFAttentionForCausalLM), ("encoder", HFAttentionForMaskedLM), ("seq2seq", HFAttentionForSeq2SeqLM)],
)
def test_output_head_knobs(family, cls):
    config = tiny_config(
        family, lm_head_bias=True, lm_head_transform=True, scale_lm_head_input=True, hidden_act="gelu"
    )
    model = cls(config).eval()
    assert model.lm_head.bias.shape == (99,)
    hidden = torch.randn(2, 3, 32)
    transform = model.lm_head_transform
    expected = model.lm_head(transform.norm(ACT2FN["gelu"](transform.dense(hidden * 32**-0.5))))
    torch.testing.assert_close(model.vocabulary_logits(hidden), expected)


def test_geglu_new_gates_with_tanh_gelu():
    model = HFAttentionForCausalLM(tiny_config("decoder", hidden_act="geglu_new"))
    mlp = model.model.decoder.layers[0].mlp
    x = torch.randn(2, 3, 32)
    torch.testing.assert_close(mlp(x), mlp.down_proj(ACT2FN["gelu_new"](mlp.gate_proj(x)) * mlp.up_proj(x)))


@pytest.mark.parametrize("field", ["lm_head_bias", "freeze_lm_head_bias", "lm_head_transform", "scale_lm_head_input"])
def test_output_head_knobs_are_validated(field):
    with pytest.raises(ValueError, match=f"{field}='yes' must be True or False"):
        tiny_config("decoder", **{field: "yes"})


def test_freeze_lm_head_bias_needs_a_bias():
    with pytest.raises(ValueError, match="freeze_lm_head_bias=True needs lm_head_bias=True"):
        tiny_config("decoder", freeze_lm_head_bias=True)


@pytest.mark.parametrize("name", ["bart", "marian"])
def test_final_logits_bias_stays_untrained_as_in_hf(name, tmp_path):
    """HF keeps BART/Marian's final_logits_bias as a buffer; ours (lm_head.bias) is used but frozen likewise, also
    after a save/load round trip and after resize_token_embeddings (which installs a new lm_head)."""
    reference = build_reference(name)
    ours = from_hf(reference)
    assert ours.config.freeze_lm_head_bias and not ours.lm_head.bias.requires_grad
    torch.testing.assert_close(ours.lm_head.bias, reference.final_logits_bias[0])  # still applied to the logits
    ids = torch.randint(3, 90, (2, 6))
    ours.train()(input_ids=ids, labels=ids).loss.backward()
    assert ours.lm_head.bias.grad is None and ours.lm_head.weight.grad is not None
    ours.save_pretrained(tmp_path)
    reloaded = type(ours).from_pretrained(tmp_path)
    assert not reloaded.lm_head.bias.requires_grad and reloaded.lm_head.weight.requires_grad
    reloaded.resize_token_embeddings(reloaded.config.vocab_size + 4)
    assert reloaded.lm_head.bias.shape == (reloaded.config.vocab_size,)
    assert not reloaded.lm_head.bias.requires_grad and reloaded.lm_head.weight.requires_grad
