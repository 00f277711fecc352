"""The sentinel constraint (hf_attention/modeling/placeholder_constraint.py) beside every logits processor a generation
config can switch on, with Hugging Face's own BART and Marian: a forced end of sequence (BART's forced_eos_token_id) no
longer leaves the last step with no allowed token (greedy wrote a pad and lost a sentinel, sampling crashed); no step
leaves a row all -inf; each sentinel is written exactly once whenever the room allows it; options that ban a sentinel
outright are refused before generating."""

from collections import Counter

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sentinel_constraint import SENTINEL_IDS, VOCAB, biased, sentinel_counts
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    GenerationConfig,
    LogitsProcessorList,
    MarianConfig,
    MarianMTModel,
)

from hf_attention.modeling.placeholder_constraint import constraint_for_config

BOS, PAD, EOS = 0, 1, 2
WORDS = list(range(3, 60))
TINY = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2}
TINY |= {"decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "max_position_embeddings": 64}
SPECIAL = {"bos_token_id": BOS, "pad_token_id": PAD, "eos_token_id": EOS, "forced_eos_token_id": EOS}


def hf_models() -> dict:
    """Tiny random BART and Marian, each with a forced end of sequence, as their Hub checkpoints have it."""
    torch.manual_seed(0)
    bart = BartForConditionalGeneration(BartConfig(vocab_size=VOCAB, decoder_start_token_id=EOS, **TINY, **SPECIAL))
    marian_config = MarianConfig(vocab_size=VOCAB, decoder_vocab_size=VOCAB, decoder_start_token_id=PAD, **TINY)
    marian_config.update(SPECIAL)
    marian = MarianMTModel(marian_config)
    return {"bart": bart.eval(), "marian": marian.eval()}


MODELS = hf_models()


def generate(model, sources: list[list[int]], **options):
    """Generate for right-padded `sources` under the constraint built from the generation config with `options`;
    returns (sequences, the processed scores of every step)."""
    width = max(map(len, sources))
    ids = torch.tensor([row + [PAD] * (width - len(row)) for row in sources])
    mask = (ids != PAD).long()
    config = GenerationConfig.from_model_config(model.config)
    config.update(**options)
    processors = LogitsProcessorList([constraint_for_config(SENTINEL_IDS, ids, config)])
    output = model.generate(
        input_ids=ids,
        attention_mask=mask,
        generation_config=config,
        logits_processor=processors,
        output_scores=True,
        return_dict_in_generate=True,
    )
    return output.sequences, output.scores


DECODINGS = {
    "greedy": {"do_sample": False},
    "beam": {"do_sample": False, "num_beams": 3},
    "sampling": {"do_sample": True, "top_k": 5},
}


@pytest.mark.parametrize("decoding", list(DECODINGS))
@pytest.mark.parametrize("name", list(MODELS))
def test_a_forced_end_of_sequence_leaves_room_for_every_sentinel(name, decoding):
    """Four sentinels, five new tokens, the last one forced to be the end: the sentinels take the four before it.
    Before, the constraint kept the last step for a sentinel, the forced end of sequence banned it: greedy and beam
    search wrote a pad there and lost a sentinel, sampling raised "probability tensor contains either inf, nan"."""
    model = MODELS[name]
    source = [5, *SENTINEL_IDS[:4], 6, EOS]
    handle = biased(model, {7: 40.0})  # a model that writes the word 7 whatever it reads
    try:
        torch.manual_seed(0)
        sequences, scores = generate(model, [source], max_new_tokens=5, **DECODINGS[decoding])
    finally:
        handle.remove()
    for row in sequences:
        assert sentinel_counts(row) == Counter(SENTINEL_IDS[:4]), row
        assert row[-1] == EOS and PAD not in row[1:].tolist(), row
    assert all(torch.isfinite(step).any(dim=1).all() for step in scores)


def test_a_bart_config_through_the_shipped_pipeline_samples_without_crashing(tmp_path):
    """The pipeline and the training evaluation read forced_eos_token_id from the model's generation config:
    sampling with a sentinel due at the last step gave a RuntimeError; now the translation comes back whole."""
    from accelerate import Accelerator
    from transformers import pipeline

    from hf_attention.modeling.pipelines import TASK, save_translation_pipeline
    from hf_attention.modeling.placeholders import protect_pair
    from training.data.tokenizer import train_tokenizer
    from training.finish.evaluate import GenerationSettings
    from training.finish.evaluate import translate as evaluate_translate

    pairs = [protect_pair(f"Delete %(name)s in the {w} <b>%s</b>", f"%(name)s im {w} löschen <b>%s</b>") for w in "ab"]
    texts = [text for source, target, _ in pairs for text in (source, target)] * 10
    tokenizer = train_tokenizer(texts, 300, kind="seq2seq", placeholder_sentinels=True, min_frequency=1)
    special = {"bos_token_id": tokenizer.bos_token_id, "pad_token_id": tokenizer.pad_token_id}
    special |= {"eos_token_id": tokenizer.eos_token_id, "forced_eos_token_id": tokenizer.eos_token_id}
    torch.manual_seed(0)
    config = BartConfig(vocab_size=len(tokenizer), decoder_start_token_id=tokenizer.eos_token_id, **TINY, **special)
    folder = save_translation_pipeline(BartForConditionalGeneration(config).eval(), tokenizer, tmp_path / "bart")
    translate = pipeline(TASK, model=str(folder))
    source = "Cannot delete %(name)s: <b>%s</b>"  # four placeholders
    for options in ({"do_sample": True, "top_k": 5}, {"do_sample": False}, {"num_beams": 3}):
        torch.manual_seed(0)
        result = translate(source, max_new_tokens=5, **options)
        assert result[0]["placeholder_problems"] == [], (options, result)
    # training.finish.evaluate (the scores of a run with --model_type bart) reads the same config
    for beams in (1, 3):
        settings = GenerationSettings(batch_size=2, num_beams=beams, max_new_tokens=5)
        scored = evaluate_translate(Accelerator(cpu=True), translate.model, tokenizer, [source, "Open %s"], settings)
        assert [translation.problems for translation in scored] == [[], []], scored


def test_options_that_ban_a_sentinel_due_are_refused_before_generating():
    model = MODELS["bart"]
    source = [[5, SENTINEL_IDS[0], 6, EOS]]
    with pytest.raises(ValueError, match=r"suppress_tokens bans the placeholder sentinel\(s\) sentinel 60 \(id 60\)"):
        generate(model, source, max_new_tokens=5, suppress_tokens=[9, SENTINEL_IDS[0]])
    with pytest.raises(ValueError, match=r"bad_words_ids bans .* take them out of bad_words_ids"):
        generate(model, source, max_new_tokens=5, bad_words_ids=[[SENTINEL_IDS[0]]])
    sequences, _ = generate(model, source, max_new_tokens=5, suppress_tokens=[SENTINEL_IDS[5]])  # not due: allowed
    assert sentinel_counts(sequences[0]) == Counter(SENTINEL_IDS[:1])


# ------------------------------------------------------------------------------------------- the property


@st.composite
def generation_options(draw) -> dict:
    """Any mix of the logits processors a generation config can switch on, with any decoding."""
    options = {"max_new_tokens": draw(st.integers(1, 9))}
    decoding = draw(st.sampled_from(["greedy", "beam", "sampling"]))
    if decoding == "beam":
        options["num_beams"] = draw(st.integers(2, 3))
    if decoding == "sampling":
        options["do_sample"] = True
        options["temperature"] = draw(st.floats(0.3, 2.0))
        options["top_k"] = draw(st.sampled_from([0, 1, 3, 50]))
        options["top_p"] = draw(st.sampled_from([1.0, 0.9, 0.3]))
    if draw(st.booleans()):
        options["forced_bos_token_id"] = BOS
    words = st.lists(st.sampled_from(WORDS), max_size=4, unique=True)
    optional = {
        "min_new_tokens": st.integers(0, 9),
        "suppress_tokens": words,
        "begin_suppress_tokens": words,
        "bad_words_ids": st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2), min_size=1, max_size=3),
        "no_repeat_ngram_size": st.integers(1, 3),
        "repetition_penalty": st.floats(1.0, 3.0),
        "exponential_decay_length_penalty": st.tuples(st.integers(1, 4), st.floats(1.0, 2.0)),
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            options[name] = draw(strategy)
    if options.get("min_new_tokens", 0) >= options["max_new_tokens"]:
        options["min_new_tokens"] = options["max_new_tokens"] - 1  # a forced end must come after the minimum
    return options


@st.composite
def sources(draw) -> list[list[int]]:
    """One to three sources of words and up to five sentinels, each once (no_repeat_ngram_size=1 forbids writing
    a token twice, so a sentinel the source holds twice could not be honoured there)."""
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        sentinels = draw(st.lists(st.sampled_from(SENTINEL_IDS), max_size=5, unique=True))
        words = draw(st.lists(st.sampled_from(WORDS), max_size=4))
        rows.append(draw(st.permutations(sentinels + words)) + [EOS])
    return rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(list(MODELS)),
    options=generation_options(),
    rows=sources(),
    bias=st.sampled_from([{}, {7: 40.0}, {EOS: 40.0}, {SENTINEL_IDS[9]: 40.0}, dict.fromkeys(SENTINEL_IDS, 30.0)]),
    seed=st.integers(0, 2**16),
)
def test_the_constraint_composes_with_every_processor_of_a_generation_config(name, options, rows, bias, seed):
    """No crash, no all -inf row at any step, and each sentinel of a source written exactly once whenever the steps
    that may write one (max_new_tokens less a forced first and last token) are enough."""
    model = MODELS[name]
    handle = biased(model, bias)
    try:
        torch.manual_seed(seed)
        sequences, scores = generate(model, rows, **options)
    finally:
        handle.remove()
    assert all(torch.isfinite(step).any(dim=1).all() for step in scores), options
    room = options["max_new_tokens"] - 1 - ("forced_bos_token_id" in options)  # both models force the end
    per_source = sequences.shape[0] // len(rows)
    for index, row in enumerate(sequences):
        wanted = sentinel_counts(torch.tensor(rows[index // per_source]))
        if sum(wanted.values()) <= room:
            assert sentinel_counts(row) == wanted, (options, rows, row)
        else:
            assert not sentinel_counts(row) - wanted, (options, rows, row)  # short of room: lost, never invented
