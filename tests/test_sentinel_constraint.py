"""Constrained decoding of protected sources (hf_attention/modeling/placeholder_constraint.py): a model pushed to
invent, repeat or drop sentinels writes, under the constraint, exactly its source's sentinels with the source's counts,
with greedy and beam search, in padded batches; end of sequence waits for the last sentinel; without sentinels in the
tokenizer nothing changes."""

from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from conftest import left_pad, right_pad, tiny_config
from transformers import LogitsProcessorList

from hf_attention import HFAttentionForSeq2SeqLM
from hf_attention.modeling.placeholder_constraint import SentinelConstraint, sentinel_constraint, sentinel_ids
from hf_attention.modeling.placeholders import SENTINELS, protect, protect_pair, restore

VOCAB = 99
SENTINEL_IDS = list(range(60, 60 + len(SENTINELS)))  # ids 60 … 91 stand for ⟦ph_0⟧ … ⟦ph_31⟧ in the raw-id tests
WORDS = [5, 6, 7, 8, 9, 10, 11, 12]
# Three sources with different sentinel sets (one twice, one none) and different lengths, so that padding shows.
SOURCES = [
    [5, 60, 6, 61, 7],
    [8, 62, 9, 62, 10, 63, 11, 12, 5],
    [6, 7],
]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return HFAttentionForSeq2SeqLM(tiny_config("seq2seq", vocab_size=VOCAB)).eval()


def biased(model, token_bias: dict[int, float]):
    """A forward hook on `model` that adds `token_bias` to its logits at every step: a model that favours those
    tokens (sentinels, end of sequence) whatever it reads. Returns the hook's handle."""
    bias = torch.zeros(model.config.vocab_size)
    for token, value in token_bias.items():
        bias[token] = value

    def hook(module, args, output):
        output.logits += bias.to(output.logits.dtype)
        return output

    return model.register_forward_hook(hook)


def sentinel_counts(row: torch.Tensor) -> Counter:
    return Counter(token for token in row.tolist() if token in SENTINEL_IDS)


def generate(model, ids, mask, *, constrained: bool, **options):
    processors = None
    if constrained:
        processors = LogitsProcessorList([SentinelConstraint(SENTINEL_IDS, ids, model.generation_config.eos_token_id)])
    return model.generate(
        input_ids=ids, attention_mask=mask, logits_processor=processors, do_sample=False, max_new_tokens=10, **options
    )


@pytest.mark.parametrize("pad", [left_pad, right_pad])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_the_constraint_writes_exactly_the_sources_sentinels(model, pad, num_beams):
    ids, mask = pad(SOURCES)
    # Every sentinel is far likelier than any word, one far more than the others: alone, the model writes that one
    # over and over (inventing it, or duplicating it, and losing the others).
    handle = biased(model, {**dict.fromkeys(SENTINEL_IDS, 20.0), 75: 30.0})
    try:
        free = generate(model, ids, mask, constrained=False, num_beams=num_beams)
        bound = generate(model, ids, mask, constrained=True, num_beams=num_beams, num_return_sequences=num_beams)
    finally:
        handle.remove()
    wanted = [sentinel_counts(torch.tensor(source)) for source in SOURCES]
    assert all(sentinel_counts(row) != want for row, want in zip(free, wanted, strict=True))  # the test proves it
    assert all(75 in row.tolist() for row in free)  # an invented sentinel in every row
    assert bound.shape[0] == len(SOURCES) * num_beams  # each returned hypothesis of source b is row b * beams + i
    for index, row in enumerate(bound):
        assert sentinel_counts(row) == wanted[index // num_beams], (index, row)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_end_of_sequence_waits_for_the_last_sentinel(model, num_beams):
    ids, mask = right_pad(SOURCES)
    eos = model.generation_config.eos_token_id
    # End of sequence is the likeliest token, then the sentinels: alone, the model stops at once and loses them all.
    handle = biased(model, {eos: 30.0, **dict.fromkeys(SENTINEL_IDS, 20.0)})
    try:
        free = generate(model, ids, mask, constrained=False, num_beams=num_beams)
        bound = generate(model, ids, mask, constrained=True, num_beams=num_beams)
    finally:
        handle.remove()
    assert all(row[1] == eos for row in free)
    for row, source in zip(bound, SOURCES, strict=True):
        wanted = sentinel_counts(torch.tensor(source))
        placed = sum(wanted.values())
        # after the start token: the sentinels, then at once the end (the bias wants it as soon as it is allowed)
        assert sentinel_counts(row[1 : 1 + placed]) == wanted and row[1 + placed] == eos, row


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_wandering_hypothesis_still_places_every_sentinel_before_the_limit(model, num_beams):
    """A model that repeats one word whatever it reads (as a weak model does on unseen text) would run out of
    max_new_tokens before placing its sentinels: with the limit passed, the last steps write the sentinels due."""
    ids, mask = right_pad(SOURCES)
    handle = biased(model, {7: 40.0})  # the word 7, always
    try:
        options = {"input_ids": ids, "attention_mask": mask, "do_sample": False, "max_new_tokens": 8}
        processors = LogitsProcessorList([SentinelConstraint(SENTINEL_IDS, ids, model.generation_config.eos_token_id)])
        unbounded = model.generate(**options, num_beams=num_beams, logits_processor=processors)
        processors = LogitsProcessorList(
            [SentinelConstraint(SENTINEL_IDS, ids, model.generation_config.eos_token_id, max_new_tokens=8)]
        )
        bound = model.generate(**options, num_beams=num_beams, logits_processor=processors)
    finally:
        handle.remove()
    wanted = [sentinel_counts(torch.tensor(source)) for source in SOURCES]
    assert [sentinel_counts(row) for row in unbounded] == [Counter()] * 3  # only 7s: every sentinel lost
    for row, want in zip(bound, wanted, strict=True):
        placed = sum(want.values())
        assert sentinel_counts(row) == want, row
        assert row[1 : 1 + 8 - placed].tolist() == [7] * (8 - placed)  # the word until the room ran out, then them


def test_the_step_bans_exactly_what_is_not_left_to_place():
    source = torch.tensor([[60, 61, 61, 5], [0, 0, 5, 6]])  # the second row: left-padded, no sentinel at all
    constraint = SentinelConstraint(SENTINEL_IDS, source, eos_token_id=[2, 3])
    decoded = torch.tensor([[1, 61], [1, 5]])  # one hypothesis per source, each after the start token 1
    scores = constraint(decoded, torch.zeros(2, VOCAB))
    allowed_sentinels = [[s for s in SENTINEL_IDS if scores[r, s] == 0] for r in range(2)]
    assert allowed_sentinels == [[60, 61], []]  # 61 once more (the source has it twice), 60 still due
    assert torch.isinf(scores[0, [2, 3]]).all() and (scores[1, [2, 3]] == 0).all()  # row 0 must not end yet
    assert (scores[:, 4:60] == 0).all() and (scores[:, 92:] == 0).all()  # words are untouched
    done = constraint(torch.tensor([[1, 61, 60, 61], [1, 5, 6, 7]]), torch.zeros(2, VOCAB))
    assert torch.isinf(done[:, SENTINEL_IDS]).all() and (done[:, [2, 3]] == 0).all()


# ------------------------------------------------------------------------------ tokenizers, pipeline, evaluation


@pytest.fixture(scope="module")
def protected(tmp_path_factory):
    """A tiny random translation model and its tokenizer trained on protected pairs, saved with the pipeline."""
    from hf_attention.modeling.pipelines import save_translation_pipeline
    from training.data.tokenizer import train_tokenizer

    words = ["file", "folder", "name", "page", "item", "Datei", "Ordner", "Seite", "löschen", "öffnen"]
    pairs = [
        protect_pair(f"Delete %(name)s in the {w} <b>%s</b>", f"%(name)s im {w} löschen <b>%s</b>") for w in words
    ]
    texts = [text for source, target, _ in pairs for text in (source, target)] * 10
    tokenizer = train_tokenizer(texts, 320, kind="seq2seq", placeholder_sentinels=True, min_frequency=1)
    torch.manual_seed(0)
    model = HFAttentionForSeq2SeqLM(
        tiny_config("seq2seq", vocab_size=len(tokenizer), position_encoding="learned", max_position_embeddings=48)
    ).eval()
    return save_translation_pipeline(model, tokenizer, tmp_path_factory.mktemp("constrained"))


SOURCES_TEXT = ["Cannot delete %(name)s: <b>%s</b>", "Open %s", "Open the file"]


def favour_sentinels(model, tokenizer):
    """Make `model` favour the sentinels, ⟦ph_9⟧ above all: unconstrained, it invents, repeats and drops them."""
    ids = sentinel_ids(tokenizer)
    return biased(model, {**dict.fromkeys(ids, 20.0), ids[9]: 30.0})


def test_the_pipeline_decodes_constrained_by_default(protected):
    from transformers import pipeline

    from hf_attention.modeling.pipelines import TASK

    translate = pipeline(TASK, model=str(protected))
    assert translate.protects_placeholders
    favour_sentinels(translate.model, translate.tokenizer)
    for options in ({}, {"num_beams": 3}, {"num_beams": 3, "num_return_sequences": 2}):
        free = translate(SOURCES_TEXT, max_new_tokens=12, constrain_placeholders=False, batch_size=3, **options)
        bound = translate(SOURCES_TEXT, max_new_tokens=12, batch_size=3, **options)
        free, bound = [_flat(result) for result in (free, bound)]
        assert all(record["placeholder_problems"] for record in free[:2]), free  # unconstrained: problems
        assert all(not record["placeholder_problems"] for record in bound), bound
    # constrain_placeholders=False is the old behaviour: protect, generate as is, restore.
    masked, originals = protect("Open %s")
    ids = translate.model.generate(**translate.tokenizer(masked, return_tensors="pt"), max_new_tokens=12)[0]
    old = restore(translate.tokenizer.decode(ids, skip_special_tokens=True), originals)
    assert translate("Open %s", max_new_tokens=12, constrain_placeholders=False) == [
        {"generated_text": old.text, "placeholder_problems": [problem._asdict() for problem in old.problems]}
    ]


def _flat(result):
    return [record for one in result for record in (one if isinstance(one, list) else [one])]


def test_the_training_evaluation_decodes_constrained(protected):
    from accelerate import Accelerator
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from training.finish.evaluate import GenerationSettings, translate

    model = AutoModelForSeq2SeqLM.from_pretrained(protected).eval()
    tokenizer = AutoTokenizer.from_pretrained(protected)
    favour_sentinels(model, tokenizer)
    accelerator = Accelerator(cpu=True)
    for beams in (1, 3):
        settings = GenerationSettings(batch_size=3, num_beams=beams, max_new_tokens=12)
        bound = translate(accelerator, model, tokenizer, SOURCES_TEXT, settings)
        unconstrained = replace(settings, constrain_placeholders=False)
        free = translate(accelerator, model, tokenizer, SOURCES_TEXT, unconstrained)
        assert all(translation.problems for translation in free[:2])
        assert not any(translation.problems for translation in bound)


def test_without_sentinels_nothing_is_constrained(trained_tokenizer):
    from accelerate import Accelerator

    from training.finish.evaluate import GenerationSettings, generate_texts, translate

    tokenizer = trained_tokenizer("seq2seq")  # no sentinels: a model trained without protection
    assert sentinel_constraint(tokenizer, torch.tensor([[5, 6]]), 2) is None
    torch.manual_seed(0)
    seq2seq = HFAttentionForSeq2SeqLM(tiny_config("seq2seq", vocab_size=len(tokenizer))).eval()
    settings = GenerationSettings(batch_size=2, num_beams=2, max_new_tokens=6)
    texts = ["Open %s", "Cannot delete %(name)s: <b>%s</b>"]
    accelerator = Accelerator(cpu=True)
    plain = generate_texts(accelerator, seq2seq, tokenizer, texts, settings)
    assert generate_texts(accelerator, seq2seq, tokenizer, texts, settings, constrain_placeholders=True) == plain
    assert [translation.text for translation in translate(accelerator, seq2seq, tokenizer, texts, settings)] == plain


def test_the_trainer_metrics_score_the_restored_translations(protected, tmp_path, monkeypatch):
    """training.finetune's BLEU / chrF on a protected model: the predictions and labels are restored from their
    sources before scoring, as training.finish.evaluate scores (before, BLEU was scored on the sentinel text)."""
    from datasets import Dataset, DatasetDict
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, Seq2SeqTrainer, Seq2SeqTrainingArguments

    from training.finetune import trainer_metrics
    from training.finish.metrics import corpus_bleu_chrf
    from training.objectives import objective_for
    from training.objectives.translation import featurize

    model = AutoModelForSeq2SeqLM.from_pretrained(protected).eval()
    tokenizer = AutoTokenizer.from_pretrained(protected)
    split = Dataset.from_dict(
        {
            "source": ["Delete %(name)s in the file", "Open %s and <b>%d</b>", "Open the page", "Delete {0}"],
            "target": ["%(name)s im Datei löschen", "%s und <b>%d</b> öffnen", "Seite öffnen", "{0} löschen"],
        }
    )
    splits = {"train": split, "test": split}
    data_args = SimpleNamespace(max_source_length=32, max_target_length=32)
    features = DatasetDict({name: featurize(rows, tokenizer, data_args) for name, rows in splits.items()})
    # What the model "writes": sentinel text, one placeholder moved, one word wrong.
    written = ["⟦ph_0⟧ im Ordner löschen", "⟦ph_0⟧ und ⟦ph_2⟧⟦ph_1⟧⟦ph_3⟧ öffnen", "Seite öffnen", "⟦ph_0⟧ löschen"]
    answer = torch.tensor(tokenizer(text_target=written, padding=True)["input_ids"])
    monkeypatch.setattr(model, "generate", lambda **kwargs: answer)
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        predict_with_generate=True,
        use_cpu=True,
        report_to="none",
        per_device_eval_batch_size=4,
    )
    objective = objective_for("translation")
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        data_collator=objective.data.make_collator(tokenizer, model, data_args),
        compute_metrics=trainer_metrics(objective, tokenizer, splits, features, args),
    )
    scores = trainer.evaluate(features["test"], metric_key_prefix="test")
    originals = [protect(source)[1] for source in split["source"]]
    restored = [restore(text, mine).text for text, mine in zip(written, originals, strict=True)]
    bleu, chrf = corpus_bleu_chrf(restored, split["target"])
    assert scores["test_bleu"] == pytest.approx(bleu) and scores["test_chrf"] == pytest.approx(chrf)
    masked_targets = [protect_pair(*pair)[1] for pair in zip(split["source"], split["target"], strict=True)]
    assert corpus_bleu_chrf(written, masked_targets) != (bleu, chrf)  # what was scored before: another number


def test_explore_and_the_attention_maps_show_what_a_protected_model_reads(protected, tmp_path, capsys):
    """The explorer page and the heatmaps of a model trained with placeholder protection show the protected text
    (its sentinels as tokens, the tokens the model actually read) with the mapping back to the placeholders, and a
    generated target decoded under the sentinel constraint; before, they tokenised the raw text."""
    from test_explorer import embedded_data
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_attention.commands.cli import main
    from hf_attention.inspection.attention_maps import token_labels
    from hf_attention.inspection.explorer import explore
    from hf_attention.inspection.heatmaps import attention_weights

    model = AutoModelForSeq2SeqLM.from_pretrained(protected).eval()
    tokenizer = AutoTokenizer.from_pretrained(protected)
    text = "Delete %(name)s in the <b>file</b>"
    masked, originals = protect(text)
    page = explore(model, tokenizer, text, max_new_tokens=6, path=tmp_path / "page.html")
    data = embedded_data(page.html)
    assert data["text"] == masked and data["placeholders"] == [[SENTINELS[i], p] for i, p in enumerate(originals)]
    assert page.key_tokens["cross"] == token_labels(tokenizer, tokenizer(masked)["input_ids"], mathtext=False)
    assert [token for token in page.key_tokens["cross"] if token in SENTINELS] == list(SENTINELS[:3])
    assert sorted(token for token in data["kinds"]["cross"]["writes"] if token in SENTINELS) == list(SENTINELS[:3])
    target = "%(name)s in der <b>Datei</b> löschen"
    page = explore(model, tokenizer, text, target=target)
    assert embedded_data(page.html)["target"] == protect_pair(text, target)[1]
    _, queries, keys = attention_weights(model, tokenizer, text, kind="cross", target=target)
    assert [token for token in keys if token in SENTINELS] == list(SENTINELS[:3])
    assert [token for token in queries if token in SENTINELS] == list(SENTINELS[:3])
    assert "Text (protected, as the model reads it): " in page.html and 'id="meta-placeholders"' in page.html
    args = ["attention-map", "--model", str(protected), "--text", text, "--kind", "self", "--out", str(tmp_path / "m")]
    assert main(args) == 0
    assert f"protected text (as the model reads it): {masked}; placeholders: ⟦ph_0⟧ = %(name)s, ⟦ph_1⟧ = <b>, " in (
        capsys.readouterr().out
    )
