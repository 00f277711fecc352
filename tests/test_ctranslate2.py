"""CTranslate2, an inference engine that knows only standard architectures, runs what `hf-attention export` writes.

Its own `TransformersConverter` reads the exported folder (the Llama and GPT-2 shapes of our decoder, the BART shape of
our encoder-decoder) and its float32 greedy tokens must be those of our `generate()`. Of today's architectures that
`from_hf` imports, CTranslate2 4.8.5 converts and runs Mistral, Qwen2, Qwen3 and Gemma 3 (the shapes in TODAY); its
Phi-3 loader fails on transformers 5's config, and it has no OLMo 2 or SmolLM3 loader
(docs/deploy.md#todays-decoders-in-ctranslate2).
"""

import os

import ctranslate2
import pytest
import torch
from ctranslate2.converters import TransformersConverter
from modern_references import DECODER, perturb
from test_to_hf import SHAPES, build
from text_fixtures import make_tokenizer, pydoc_paragraphs
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from hf_attention import from_hf
from hf_attention.conversion.to_hf import export_checkpoint
from hf_attention.modeling.placeholders import (
    SENTINELS,
    protect,
    protect_batch,
    protect_pair,
    restore,
    translate_protected,
)
from training.data.tokenizer import train_tokenizer

PROMPTS = [
    "The attention weights of one query sum to one",
    "A decoder generates one token at a time",
    "Keys and values",
    "def softmax(x):",
]


@pytest.fixture(scope="module")
def tokenizers():
    texts = pydoc_paragraphs(200)
    return {family: make_tokenizer(family, texts) for family in ("decoder", "seq2seq")}


# Today's architectures that CTranslate2 converts: name → the Hugging Face class, and its config from the tiny
# decoder's fields and a sliding window. The window is the longest prompt's length minus one: CTranslate2 4.8.5 gives
# other logits from the first new token on once a prompt is longer than window + 1 tokens (it decodes past the window
# exactly), and the two longest prompts' continuations cross it. Each shape is a released model's: Mistral with a
# window on every layer; Qwen2 with its q/k/v biases and no window (CTranslate2 ignores `use_sliding_window`, which no
# Qwen2 release sets); Qwen3 with q/k norms and a head_dim (24) that is not hidden / heads; Gemma 3 1B's two kinds of
# layer (sliding, then global), GELU-tanh, scaled embeddings, (1 + w) sandwich norms, its rotary bases (1e4 local,
# 1e6 global), query_pre_attn_scalar = head_dim, no soft-capping, no RoPE scaling: CTranslate2 reads no other base,
# scalar, soft-capping or scaling. Gemma 3 is untied here only so that the random model does not repeat its input.
TODAY = {
    "mistral": (MistralForCausalLM, lambda fields, window: MistralConfig(**fields, sliding_window=window)),
    "qwen2": (Qwen2ForCausalLM, lambda fields, window: Qwen2Config(**fields)),
    "qwen3": (Qwen3ForCausalLM, lambda fields, window: Qwen3Config(**fields, head_dim=24)),
    "gemma3": (
        Gemma3ForCausalLM,
        lambda fields, window: Gemma3TextConfig(
            **fields,
            head_dim=16,
            query_pre_attn_scalar=16,
            sliding_window=window,
            layer_types=["sliding_attention", "full_attention"],
            tie_word_embeddings=False,
        ),
    ),
}


def _imported(name, tokenizer, initializer_range):
    """Our model imported by `from_hf` from a tiny Hugging Face model of architecture `name` with random weights."""
    model_class, make_config = TODAY[name]
    longest = max(len(tokenizer(prompt)["input_ids"]) for prompt in PROMPTS)
    fields = {
        **DECODER,
        "vocab_size": len(tokenizer),
        "initializer_range": initializer_range,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    with torch.random.fork_rng():
        torch.manual_seed(0)
        reference = model_class._from_config(make_config(fields, longest - 1), attn_implementation="eager")
    return from_hf(perturb(reference.float().eval(), seed=0)).eval()


def _converted(name, tokenizer, tmp_path, initializer_range):
    """Our model of shape `name` (weights drawn wide enough that greedy tokens vary), exported, then converted."""
    if name in TODAY:
        model, architecture = _imported(name, tokenizer, initializer_range), name
    else:
        model = build(name, vocab_size=len(tokenizer), initializer_range=initializer_range)
        architecture = SHAPES[name][3]
    source, standard = tmp_path / "ours", tmp_path / "standard"
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    export_checkpoint(str(source), standard, to=architecture)
    TransformersConverter(str(standard)).convert(str(tmp_path / "ct2"), force=True)
    return model, str(tmp_path / "ct2")


def assert_same_log_probs(model, translator, tokenizer, source, target: list[int]) -> None:
    """CTranslate2's log-probability of each token of `target` (then </s>) after `source` is ours."""
    decoder_input_ids = torch.tensor([[model.config.decoder_start_token_id, *target]])
    with torch.no_grad():
        logits = model(input_ids=source, decoder_input_ids=decoder_input_ids).logits[0]
    expected = logits.log_softmax(-1).gather(1, torch.tensor([*target, tokenizer.eos_token_id])[:, None])[:, 0]
    scored = translator.score_batch(
        [tokenizer.convert_ids_to_tokens(source[0].tolist())], [tokenizer.convert_ids_to_tokens(target)]
    )[0]
    # Log-probabilities reach ~15 nats with these random weights; two fp32 GEMM libraries differ by ~1e-4 of that
    # (seen on an AVX-512 EPYC), so the bound is relative.
    torch.testing.assert_close(torch.tensor(scored.log_probs), expected, rtol=3e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["llama", "gpt2", *TODAY])
def test_ctranslate2_generates_our_greedy_tokens_from_the_exported_decoder(name, tokenizers, tmp_path):
    tokenizer = tokenizers["decoder"]
    model, converted = _converted(name, tokenizer, tmp_path, initializer_range=0.3)
    generator = ctranslate2.Generator(converted, device="cpu", compute_type="float32")
    seen = set()
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        ours = model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1] :].tolist()
        result = generator.generate_batch(
            [tokenizer.convert_ids_to_tokens(ids[0].tolist())],
            max_length=12,
            sampling_topk=1,
            include_prompt_in_result=False,
        )[0]
        theirs = tokenizer.convert_tokens_to_ids(result.sequences[0])
        # CTranslate2 stops before the end token; generate() keeps it.
        assert ours[: len(theirs)] == theirs and (
            len(theirs) == len(ours) or ours[len(theirs)] == tokenizer.eos_token_id
        )
        seen.update(ours)
    assert len(seen) > 4, "degenerate continuations: the comparison would prove little"


def test_ctranslate2_translates_with_our_greedy_tokens_from_the_exported_bart(tokenizers, tmp_path):
    tokenizer = tokenizers["seq2seq"]
    model, converted = _converted("bart", tokenizer, tmp_path, initializer_range=1.0)
    translator = ctranslate2.Translator(converted, device="cpu", compute_type="float32")
    seen = set()
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]  # ends in </s>, as the seq2seq tokenizer adds it
        ours = model.generate(ids, max_new_tokens=12, do_sample=False)[0, 1:].tolist()  # without the start token
        result = translator.translate_batch(
            [tokenizer.convert_ids_to_tokens(ids[0].tolist())], beam_size=1, max_decoding_length=12
        )[0]
        theirs = tokenizer.convert_tokens_to_ids(result.hypotheses[0])
        assert ours[: len(theirs)] == theirs and (
            len(theirs) == len(ours) or ours[len(theirs)] == tokenizer.eos_token_id
        )
        seen.update(ours)
    # A random post-norm encoder-decoder often repeats one token; the log-probabilities of a given target do not.
    target = tokenizer("Jede Abfrage gewichtet alle Werte")["input_ids"][:-1]  # without </s>: CTranslate2 adds it
    for prompt in PROMPTS:
        assert_same_log_probs(
            model, translator, tokenizer, tokenizer(prompt, return_tensors="pt")["input_ids"], target
        )


def _ctranslate2_translate():
    """benchmarks.deploy's CTranslate2 strings-to-strings function, imported without leaving the benchmarks' OpenMP
    setting (busy-waiting threads) to the processes later tests start."""
    previous = os.environ.get("OMP_WAIT_POLICY")
    from benchmarks.deploy import ctranslate2_translate

    if previous is None:
        os.environ.pop("OMP_WAIT_POLICY", None)
    return ctranslate2_translate


def test_ctranslate2_translates_protected_sources_with_the_same_sentinel_ids(tmp_path):
    """A model trained with placeholder protection, exported as BART and converted: CTranslate2 reads each sentinel as
    the same single id (its log-probabilities of a target full of sentinels are ours), and `translate_protected`
    around CTranslate2 gives what protect → generate() → restore gives."""
    texts = []
    for paragraph in pydoc_paragraphs(120):
        source, target, _ = protect_pair(
            f"{paragraph[:60]} %(name)s <b>%s</b>", f"<b>%s</b> {paragraph[-40:]} %(name)s"
        )
        texts += [source, target]
    tokenizer = train_tokenizer(texts, 400, kind="seq2seq", placeholder_sentinels=True)
    model, converted = _converted("bart", tokenizer, tmp_path, initializer_range=1.0)
    translator = ctranslate2.Translator(converted, device="cpu", compute_type="float32")
    sources = ["Open %(file)s in <b>%s</b>", "Keys &amp; values {0}", "Delete %s?"]
    masked, _ = protect_batch(sources)
    target = tokenizer("⟦ph_2⟧ Werte ⟦ph_0⟧ und ⟦ph_1⟧")["input_ids"][:-1]
    assert set(tokenizer.convert_tokens_to_ids(list(SENTINELS[:3]))) <= set(target)
    for text in masked:
        assert_same_log_probs(model, translator, tokenizer, tokenizer(text, return_tensors="pt")["input_ids"], target)
    ctranslate2_translate = _ctranslate2_translate()
    theirs = translate_protected(
        sources,
        lambda texts: ctranslate2_translate(translator, tokenizer, texts, max_source_length=32, max_new_tokens=12),
    )
    ours = []
    for source in sources:
        text, originals = protect(source)
        ids = model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=12, do_sample=False)[0]
        ours.append(restore(tokenizer.decode(ids, skip_special_tokens=True), originals))
    assert theirs == ours


@pytest.mark.parametrize("num_beams", [1, 4])
def test_the_deploy_benchmark_compares_the_same_ids_greedy_and_with_beams(num_beams, tokenizers, tmp_path):
    """benchmarks.deploy's two engines on the exported BART, in batches padded to their longest row: greedy and beam
    search (with a length penalty) give the same output ids in CTranslate2 float32 as in our generate()."""
    previous = os.environ.get("OMP_WAIT_POLICY")
    from benchmarks.deploy import ctranslate2_ids, generate_ids

    if previous is None:
        os.environ.pop("OMP_WAIT_POLICY", None)
    tokenizer = tokenizers["seq2seq"]
    model, converted = _converted("bart", tokenizer, tmp_path, initializer_range=1.0)
    translator = ctranslate2.Translator(converted, device="cpu", compute_type="float32")
    texts = [*PROMPTS, *(paragraph[:50] for paragraph in pydoc_paragraphs(12))]
    settings = {"max_source_length": 24, "max_new_tokens": 10, "num_beams": num_beams, "length_penalty": 0.8}
    model.generation_config.num_beams = 3  # as a trained model's export asks for beams: greedy must still be greedy
    model.generation_config.early_stopping = True  # as the export sets it: CTranslate2's end of beam search
    ours = generate_ids(model.eval(), tokenizer, texts, batch_size=5, **settings)
    theirs = ctranslate2_ids(translator, tokenizer, texts, batch_size=5, **settings)
    assert ours == theirs
    assert len({tuple(row) for row in ours}) > len(texts) // 2, "degenerate outputs: the comparison would prove little"
