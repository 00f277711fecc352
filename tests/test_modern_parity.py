"""Parity with today's HF architectures: Llama with each RoPE variant (default, linear, dynamic, yarn, llama3,
longrope), Qwen2, Qwen3, Mistral, Gemma 3, Phi-3 (plain and longrope), OLMo 2, SmolLM3 and ModernBERT, their
sequence classifiers and ModernBERT's base model (tiny random references in `modern_references.py`).

For every case, `from_hf` gives the reference's logits, hidden states and attention weights on a padded batch that
crosses every sliding window and original RoPE length, with eager and with sdpa; `save_pretrained` → Auto class is
bit-exact; and `to_hf` writes the reference's class back with its weights and logits. Every causal LM generates the
reference's greedy tokens from a prompt of 12 tokens, 12 new tokens past the original RoPE length of 16.

Beam search (3 beams) and sampling (a seed set before each call) run on every causal LM too: beams reorder the
cache between steps (sliding-window layers, RoPE that changes during decoding), sampling reads the whole distribution
(softcapped logits, YaRN's attention factor); sampling draws from the whole vocabulary (top_k 0) except for Qwen3
(top_k 20, the filter's path). The check that costs more runs on a subset:

- Loading as remote code in a fresh interpreter without hf_attention (REMOTE_CODE) ships the same files whatever the
  case: one decoder with per-head q/k norms and a head_dim of its own (Qwen3), the mixed sliding/global decoder with
  (1 + w) norms (Gemma 3), and the encoder with local attention (ModernBERT).

Outputs at padding positions are not compared: HF's own eager and sdpa backends disagree there.
"""

import json
import subprocess
import sys

import pytest
import torch
import transformers
from modern_references import (
    ARCHITECTURE,
    CASES,
    CAUSAL_LMS,
    DECODER,
    ENCODERS,
    NUM_LABELS,
    ORIGINAL_LENGTH,
    WINDOW,
    forward_inputs,
    main_output,
    max_difference_at_real,
    padded_batch,
    real_positions,
    reference,
)
from test_save_load import REMOTE_SCRIPT, remote_code_env
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from hf_attention import from_hf
from hf_attention.conversion import from_hf as convert_module  # importing hf_attention registers our Auto classes
from hf_attention.conversion.to_hf import ARCHITECTURES, exportable_as, to_hf
from hf_attention.modeling.modeling_hf_attention import AUTO_CLASSES

TOLERANCE = 1e-5
PROMPT_LENGTH = 12  # shorter than the original RoPE length (16): decoding crosses it, the prefill crosses the window
NEW_TOKENS = {"max_new_tokens": 12, "min_new_tokens": 12}  # every row keeps generating to the end
BEAM_SEARCH = CAUSAL_LMS
# (case, top_k): 0 samples from the whole vocabulary, 20 from the 20 most likely tokens
SAMPLING = [(name, 20 if name == "qwen3" else 0) for name in CAUSAL_LMS]
REMOTE_CODE = [
    "qwen3",
    "gemma3",
    "modernbert",
    "mixtral",
    "qwen3_moe",
    "olmoe",
    "qwen3_5",
    "gpt_oss",
    "deepseek_v3",
    "qwen3_next",
    "llama4_moe",
    "glm4",
    "granite",
]
CLASSIFIERS = [name for name in CASES if name.endswith("_classifier")]


def _run(model, inputs: dict, **extra):
    with torch.no_grad():
        return model(**inputs, **extra)


def _auto_class(model) -> type:
    """The Auto class that loads `model`'s checkpoint as `model`'s own class."""
    classes = AUTO_CLASSES[model.config.model_type]
    return getattr(transformers, next(name for name, cls in classes.items() if cls is type(model)))


# ---------------------------------------------------------------------------------------------------------------------
# Forward pass


# (case, backend): sdpa wherever the reference class has it (Gemma 2's refuses it, and so do ours with its score cap).
FORWARD = [
    (name, attn) for name in CASES for attn in ("eager", "sdpa") if attn == "eager" or CASES[name][0]._supports_sdpa
]


@pytest.mark.parametrize(("name", "attn"), FORWARD)
def test_forward_parity(name, attn):
    ref = reference(name, attn)
    ours = from_hf(ref)
    assert ours.config._attn_implementation == attn
    inputs = forward_inputs(name)
    mask = inputs["attention_mask"]
    details = {"output_hidden_states": True, "output_attentions": attn == "eager"}
    theirs, mine = _run(ref, inputs, **details), _run(ours, inputs, **details)
    assert max_difference_at_real(main_output(theirs), main_output(mine), mask) <= TOLERANCE
    assert len(theirs.hidden_states) == len(mine.hidden_states) == ref.config.num_hidden_layers + 1
    for layer, (a, b) in enumerate(zip(theirs.hidden_states, mine.hidden_states, strict=True)):
        # the residual stream grows to a few units: relative to its size (transformers 5.23's Llama differed by
        # 1.3e-5 on values near 2 once, float rounding of another order of operations)
        scale = max(1.0, real_positions(a, mask).abs().max().item())
        assert max_difference_at_real(a, b, mask) <= TOLERANCE * scale, f"hidden state {layer}"
    if attn == "eager":  # (B, H, T, S): a padding query's row is not defined
        # one per attention layer (transformers reports none for a linear-attention layer)
        attention_layers = [kind for kind in ours.config.attention_types() if kind != "linear_attention"]
        assert len(theirs.attentions) == len(mine.attentions) == len(attention_layers)
        for layer, (a, b) in enumerate(zip(theirs.attentions, mine.attentions, strict=True)):
            assert max_difference_at_real(a.transpose(1, 2), b.transpose(1, 2), mask) <= TOLERANCE, f"layer {layer}"


def test_without_an_sdpa_reference_ours_refuses_sdpa_or_computes_the_same():
    """Gemma 2's class has no sdpa backend (its scores are capped before the mask); ours, converted from it, runs
    eager and refuses sdpa with the field that stands in the way, rather than computing something else. GPT-OSS's
    has none either (its sinks join the softmax); ours computes the same function through SDPA (one more key, zero
    vectors, the sink as its mask entry) and through FlexAttention: the reference's eager logits."""
    without = [name for name in CASES if not CASES[name][0]._supports_sdpa]
    assert {"gemma2", "gpt_oss"} <= set(without)
    for name in without:
        ours = from_hf(reference(name))
        assert ours.config._attn_implementation == "eager"
        if ours.config.attn_logit_softcapping is not None:
            with pytest.raises(ValueError, match="attn_logit_softcapping"):
                ours.set_attn_implementation("sdpa")
            continue
        inputs = forward_inputs(name)
        expected = main_output(_run(reference(name), inputs))
        for backend in ("sdpa", "flex_attention"):
            ours.set_attn_implementation(backend)
            got = main_output(_run(ours, inputs))
            assert max_difference_at_real(expected, got, inputs["attention_mask"]) <= TOLERANCE, (name, backend)


def test_the_batch_crosses_the_windows_and_the_original_lengths():
    """What the forward comparison relies on: the real tokens of the longest row outnumber every sliding window
    (ModernBERT's local layers see 4 tokens on either side) and the original RoPE length of 16; the classifiers read
    a real token in every row (decoders: the last column, ModernBERT: the first)."""
    for name in CASES:
        mask = forward_inputs(name)["attention_mask"]
        assert mask.sum(-1).max() > ORIGINAL_LENGTH > WINDOW and (mask.sum(-1) < mask.shape[1]).any()
        read = 0 if name in ENCODERS else -1
        assert mask[:, read].all()
    dynamic = reference("llama3_dynamic").config
    assert dynamic.max_position_embeddings == ORIGINAL_LENGTH < forward_inputs("llama3_dynamic")["input_ids"].shape[1]


@pytest.mark.parametrize("name", list(CASES))
def test_converted_ids_labels_and_generation_config(name):
    ref = reference(name)
    ours = from_hf(ref)
    for field in ("pad_token_id", "bos_token_id", "eos_token_id"):
        assert getattr(ours.config, field, None) == getattr(ref.config, field, None), field
    if name in CLASSIFIERS:
        assert ours.config.num_labels == ref.config.num_labels == NUM_LABELS
    if ref.can_generate():
        assert ours.can_generate()
        assert ours.generation_config.to_diff_dict() == ref.generation_config.to_diff_dict()


# ---------------------------------------------------------------------------------------------------------------------
# Generation: a left-padded prompt shorter than the original RoPE length, decoding past it and past the windows


def _prompt(name: str) -> dict:
    prompt = padded_batch(name, PROMPT_LENGTH, seed=1)
    assert prompt["attention_mask"][:, -1].all() and not prompt["attention_mask"][:, 0].all()
    return prompt


def _generate_both(name: str, **settings) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's tokens and ours, from the same prompt; with sampling, the same seed right before each call."""
    ref = reference(name)
    ours = from_hf(ref)  # before the reference runs: a stateful RoPE starts where the reference starts
    prompt = _prompt(name)
    tokens = []
    for model in (ref, ours):
        torch.manual_seed(7)
        tokens.append(model.generate(**prompt, **NEW_TOKENS, **settings))
    assert tokens[0].shape[1] == PROMPT_LENGTH + NEW_TOKENS["max_new_tokens"]
    return tokens[0], tokens[1]


@pytest.mark.parametrize("name", CAUSAL_LMS)
def test_greedy_generation_parity(name):
    theirs, ours = _generate_both(name, do_sample=False)
    assert torch.equal(theirs, ours)


@pytest.mark.parametrize("name", BEAM_SEARCH)
def test_beam_search_parity(name):
    theirs, ours = _generate_both(name, do_sample=False, num_beams=3)
    assert torch.equal(theirs, ours)


@pytest.mark.parametrize(("name", "top_k"), SAMPLING)
def test_sampling_parity(name, top_k):
    theirs, ours = _generate_both(name, do_sample=True, top_k=top_k, temperature=0.8)
    assert torch.equal(theirs, ours)


# ---------------------------------------------------------------------------------------------------------------------
# Checkpoints: save_pretrained → Auto class, and remote code without hf_attention


@pytest.mark.parametrize("name", list(CASES))
def test_save_and_reload_with_auto_classes_is_bit_exact(name, tmp_path):
    ours = from_hf(reference(name))
    ours.save_pretrained(tmp_path)
    reloaded = _auto_class(ours).from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert type(reloaded) is type(ours)
    if ours.can_generate():
        assert reloaded.generation_config.to_diff_dict() == ours.generation_config.to_diff_dict()
    inputs = forward_inputs(name)
    assert torch.equal(main_output(_run(reloaded, inputs)), main_output(_run(ours, inputs)))


@pytest.mark.slow
@pytest.mark.parametrize("name", REMOTE_CODE)
def test_remote_code_load_in_fresh_process(name, tmp_path):
    """Every Auto class of the checkpoint loads it from the checkpoint's own code in an interpreter where
    hf_attention cannot be imported, and computes the logits of the model that saved it."""
    # the backend a plain from_pretrained picks (our sdpa, also where the reference has only eager: GPT-OSS)
    ours = from_hf(reference(name))
    ours.set_attn_implementation("sdpa")
    checkpoint = tmp_path / "checkpoint"
    ours.save_pretrained(checkpoint)
    inputs = forward_inputs(name)
    torch.save(inputs, tmp_path / "inputs.pt")
    (tmp_path / "remote.py").write_text(REMOTE_SCRIPT)
    env = remote_code_env(tmp_path)
    auto = _auto_class(ours).__name__
    done = subprocess.run(
        [sys.executable, "remote.py", str(checkpoint), auto, "inputs.pt", "logits.pt"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    classes = AUTO_CLASSES[ours.config.model_type]
    assert report == {"AutoConfig": type(ours.config).__name__, **{a: c.__name__ for a, c in classes.items()}}
    assert torch.equal(torch.load(tmp_path / "logits.pt"), _run(ours, inputs).logits)


# ---------------------------------------------------------------------------------------------------------------------
# The way back: to_hf


def test_every_case_names_an_architecture_to_hf_writes():
    assert set(ARCHITECTURE.values()) <= set(ARCHITECTURES)


@pytest.mark.parametrize("name", list(CASES))
def test_to_hf_gives_back_the_reference(name):
    ref = reference(name)
    ours = from_hf(ref)
    assert exportable_as(ours, "auto") == ARCHITECTURE[name]
    automatic, named = to_hf(ours, to="auto"), to_hf(ours, to=ARCHITECTURE[name])
    inputs = forward_inputs(name)
    expected = main_output(_run(ref, inputs))
    for exported in (automatic, named):
        assert type(exported) is type(ref)
        assert exported.config._attn_implementation == "eager"
        theirs, back = ref.state_dict(), exported.state_dict()
        assert theirs.keys() == back.keys()
        assert [key for key in theirs if not torch.equal(theirs[key], back[key])] == []
        assert torch.equal(main_output(_run(exported, inputs)), expected)


def test_to_hf_keeps_the_sdpa_backend():
    """An sdpa model comes back as an sdpa reference that computes exactly what the sdpa reference computes."""
    for name in ("gemma3", "modernbert"):
        ref = reference(name, "sdpa")
        exported = to_hf(from_hf(ref))
        assert exported.config._attn_implementation == "sdpa"
        inputs = forward_inputs(name)
        assert torch.equal(main_output(_run(exported, inputs)), main_output(_run(ref, inputs)))


# ---------------------------------------------------------------------------------------------------------------------
# Options of a supported class that hf_attention cannot express


def test_gemma3_bidirectional_attention_is_refused_before_any_weight_is_copied(monkeypatch):
    """EmbeddingGemma's switch turns every layer bidirectional (and halves the window): refused by name, before the
    converted model is built or loaded."""
    config = Gemma3TextConfig(**{**DECODER, "num_hidden_layers": 6, "head_dim": 16}, use_bidirectional_attention=True)
    model = Gemma3ForCausalLM(config).eval()

    def load(*args, **kwargs):
        raise AssertionError("from_hf loaded weights before refusing")

    monkeypatch.setattr(convert_module, "_load", load)
    with pytest.raises(ValueError, match="use_bidirectional_attention"):
        from_hf(model)
