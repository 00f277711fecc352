"""Every score of a model's outputs, for both entry points: BLEU / chrF, the placeholders a translation keeps,
the share of stuttering outputs, the copy-the-source baseline (training.train, training.score), and the
`compute_metrics` functions of 🤗 Trainer (training.finetune): accuracy / macro-F1 of a classifier, BLEU / chrF of
generated translations.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import sacrebleu

from hf_attention.modeling.placeholders import PROBLEM_KINDS, QA_PLACEHOLDER, SYNTAXES, Problem, restore, syntax_of


def corpus_bleu_chrf(hypotheses: list[str], references: list[str]) -> tuple[float, float]:
    """Corpus BLEU and chrF, unrounded (sacrebleu defaults: 13a tokenisation, chrF with character 6-grams)."""
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return bleu.score, chrf.score


def bleu_chrf(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus BLEU and chrF rounded to two decimals, as runs report them."""
    bleu, chrf = corpus_bleu_chrf(hypotheses, references)
    return {"bleu": round(bleu, 2), "chrf": round(chrf, 2)}


def translation_scores(
    sources: list[str],
    hypotheses: list[str],
    references: list[str],
    problems: list[list[Problem]] | None = None,
) -> dict:
    """BLEU / chrF, the share of the sources' placeholders kept (`placeholders`, %) and its counts per syntax
    (`placeholders_by_syntax`), the share of outputs that stutter (`repeats`, %), and what copying the source unchanged
    scores (`copy_bleu`, `copy_chrf`). With the sentinel `problems` of each output (placeholder protection,
    hf_attention/modeling/placeholders.py), also how many outputs lost, invented or duplicated a sentinel
    (`sentinels_lost`, `sentinels_invented`, `sentinels_duplicated`)."""
    copy = bleu_chrf(sources, references)
    return {
        **bleu_chrf(hypotheses, references),
        "placeholders": placeholder_accuracy(sources, hypotheses),
        "placeholders_by_syntax": placeholder_counts(sources, hypotheses),
        **(sentinel_problem_counts(problems) if problems is not None else {}),
        "repeats": repeat_rate(hypotheses),
        "copy_bleu": copy["bleu"],
        "copy_chrf": copy["chrf"],
    }


def placeholders(text: str) -> Counter:
    """The placeholders of `text` (`QA_PLACEHOLDER`, hf_attention/modeling/placeholders.py) with their counts."""
    return Counter(QA_PLACEHOLDER.findall(text))


def placeholder_accuracy(sources: list[str], outputs: list[str]) -> float | None:
    """Of all placeholders in the sources (counted with repeats), the percentage found as often in the outputs;
    None when the sources hold none."""
    total = kept = 0
    for source, output in zip(sources, outputs, strict=True):
        wanted = placeholders(source)
        total += sum(wanted.values())
        kept += sum((wanted & placeholders(output)).values())
    return round(100 * kept / total, 2) if total else None


def placeholder_counts(sources: list[str], outputs: list[str]) -> dict[str, dict[str, int]]:
    """Per syntax (`SYNTAXES` order, those the sources hold), how many of the sources' placeholders (counted with
    repeats) there are (`total`) and how many are found as often in the outputs (`kept`)."""
    counts: dict[str, dict[str, int]] = {}
    for source, output in zip(sources, outputs, strict=True):
        wanted = placeholders(source)
        kept = wanted & placeholders(output)
        for placeholder, count in wanted.items():
            entry = counts.setdefault(syntax_of(placeholder), {"kept": 0, "total": 0})
            entry["kept"] += kept[placeholder]
            entry["total"] += count
    return {name: counts[name] for name in SYNTAXES if name in counts}


def sentinel_problem_counts(problems: list[list[Problem]]) -> dict[str, int]:
    """How many outputs lost, invented and duplicated at least one sentinel (`sentinels_lost`, ...). A placeholder
    left as text past the sentinels (a problem with no sentinel) is not counted: `placeholders` scores those."""
    return {
        f"sentinels_{kind}": sum(any(p.kind == kind and p.sentinel is not None for p in mine) for mine in problems)
        for kind in PROBLEM_KINDS
    }


def stutters(text: str) -> bool:
    """Whether `text` repeats a word or a pair of words right after itself ("noch noch", "ist ein ist ein");
    placeholders ("%s %s") and punctuation are not words."""
    words = [word.lower() for word in text.split()]
    wordy = [any(ch.isalpha() for ch in QA_PLACEHOLDER.sub("", word)) for word in words]
    if any(words[i] == words[i + 1] and wordy[i] for i in range(len(words) - 1)):
        return True
    return any(words[i : i + 2] == words[i + 2 : i + 4] and (wordy[i] or wordy[i + 1]) for i in range(len(words) - 3))


def repeat_rate(outputs: list[str]) -> float:
    """The percentage of `outputs` that stutter (`stutters`)."""
    return round(100 * sum(map(stutters, outputs)) / max(len(outputs), 1), 2)


# ------------------------------------------------------------------------------- 🤗 Trainer's compute_metrics


def classification_metrics(eval_pred) -> dict:
    """Accuracy and macro-F1 from (logits, labels)."""
    logits, labels = eval_pred
    logits = logits[0] if isinstance(logits, tuple) else logits
    predictions = np.asarray(logits).argmax(-1)
    labels = np.asarray(labels)
    f1s = []
    for c in np.unique(labels):
        tp = np.sum((predictions == c) & (labels == c))
        precision = tp / max(np.sum(predictions == c), 1)
        recall = tp / max(np.sum(labels == c), 1)
        f1s.append(0.0 if tp == 0 else 2 * precision * recall / (precision + recall))
    return {"accuracy": float(np.mean(predictions == labels)), "macro_f1": float(np.mean(f1s))}


def translation_metrics(tokenizer, originals_of=None):
    """compute_metrics for Seq2SeqTrainer(predict_with_generate=True): corpus BLEU and chrF, unrounded.

    With placeholder protection the predictions and labels are sentinel text: `originals_of(inputs)` (the input ids of
    the evaluation, `include_for_metrics=["inputs"]`) gives the placeholders of each row's source, and both sides are
    restored before scoring, as training.finish.evaluate scores restored translations against raw references. Scored on
    sentinel text, BLEU would count each ⟦ph_k⟧ as a word, a different number from the same model's other scores."""

    def compute(eval_pred) -> dict:
        predictions, labels = eval_pred[0], eval_pred[1]  # an EvalPrediction (or a plain pair)
        predictions = predictions[0] if isinstance(predictions, tuple) else predictions
        hypotheses, references = _decoded(tokenizer, predictions), _decoded(tokenizer, labels)
        if originals_of is not None:
            originals = originals_of(getattr(eval_pred, "inputs", None))
            hypotheses = [restore(text, mine).text for text, mine in zip(hypotheses, originals, strict=True)]
            references = [restore(text, mine).text for text, mine in zip(references, originals, strict=True)]
        bleu, chrf = corpus_bleu_chrf(hypotheses, references)
        return {"bleu": bleu, "chrf": chrf}

    return compute


def _decoded(tokenizer, ids) -> list[str]:
    """The texts of padded id rows (-100 marks padding, as gathered predictions and labels hold it)."""
    ids = np.where(np.asarray(ids) < 0, tokenizer.pad_token_id, ids)
    return [text.strip() for text in tokenizer.batch_decode(ids, skip_special_tokens=True)]
