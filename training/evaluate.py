"""Evaluation: token-level loss and perplexity on a split, and BLEU / chrF of generated translations.

Both run on every process over its shard and combine the results, so 2 processes evaluate twice as fast and give
the same numbers as 1. Evaluation never consumes the training RNG (masking for MLM uses a fixed seed inside
`torch.random.fork_rng`), so periodic evaluation does not change the training run or its resume.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

import sacrebleu
import torch
from accelerate.utils import gather_object

from training.losses import per_token_sum, target_labels
from training.objectives import Objective


@dataclass(frozen=True)
class GenerationSettings:
    """How translations are generated: at evaluations, on the test split, and by default from the export."""

    batch_size: int = 64
    num_beams: int = 1  # 1: greedy
    length_penalty: float = 1.0  # beam search: summed log-probability / length**length_penalty
    max_new_tokens: int = 64
    max_source_length: int | None = None  # where sources are cut

    @classmethod
    def from_args(cls, data_args, train_args) -> GenerationSettings:
        return cls(
            batch_size=train_args.per_device_eval_batch_size,
            num_beams=train_args.generation_num_beams,
            length_penalty=train_args.generation_length_penalty,
            max_new_tokens=train_args.generation_max_new_tokens or data_args.max_target_length,
            max_source_length=data_args.max_source_length,
        )


@torch.no_grad()
def evaluate_loss(
    accelerator, model, dataloader, objective: Objective, *, seed: int = 0, max_batches: int | None = None
) -> dict:
    """Mean cross-entropy per target token over the dataloader (all processes) and its perplexity."""
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64)  # (summed loss, target tokens)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # MLM masks drawn by the collator: the same at every evaluation
        for index, batch in enumerate(dataloader):
            if max_batches is not None and index >= max_batches:
                break
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            with accelerator.autocast():  # no cache: it is not needed, and packed rows split only without one
                logits = model(**inputs, use_cache=False).logits
            rows = per_token_sum(objective, logits, batch["labels"]).double()
            counts = (target_labels(objective, batch["labels"]) != -100).sum(dim=1).double()
            # gather_for_metrics drops the rows repeated to give every process an equal share.
            rows, counts = accelerator.gather_for_metrics((rows, counts))
            totals += torch.stack([rows.sum(), counts.sum()]).cpu()
    model.train()
    if totals[1] == 0:
        raise ValueError(
            "The evaluation split gave no target token (all labels are -100): there is no loss to "
            "report. For masked LM raise --mlm_probability or --max_length; otherwise check the data."
        )
    loss = (totals[0] / totals[1]).item()
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0))}


def score_translations(
    accelerator, model, tokenizer, split, settings: GenerationSettings, *, limit: int | None = None
) -> tuple[dict, list[tuple[str, str, str]]]:
    """`translation_scores` of the model's translations of the first `limit` rows of `split` (all by default), and
    the (source, reference, translation) triples."""
    rows = split.select(range(min(limit or len(split), len(split))))
    sources, references = list(rows["source"]), list(rows["target"])
    hypotheses = translate(accelerator, model, tokenizer, sources, settings)
    scores = translation_scores(sources, hypotheses, references)
    return scores, list(zip(sources, references, hypotheses, strict=True))


@torch.no_grad()
def translate(accelerator, model, tokenizer, sources: list[str], settings: GenerationSettings) -> list[str]:
    """Translate `sources` (each process its share, longest first for little padding), returned in input order."""
    model = accelerator.unwrap_model(model, keep_torch_compile=False)
    model.eval()
    rank, world = accelerator.process_index, accelerator.num_processes
    mine = sorted(range(rank, len(sources), world), key=lambda i: -len(sources[i]))
    results = []
    for start in range(0, len(mine), settings.batch_size):
        indices = mine[start : start + settings.batch_size]
        inputs = tokenizer(
            [sources[i] for i in indices],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=settings.max_source_length,
        ).to(accelerator.device)
        inputs.pop("token_type_ids", None)
        with accelerator.autocast():
            beams = {"num_beams": settings.num_beams}
            if settings.num_beams > 1:  # a beam-search setting: generate() warns about it with greedy decoding
                beams["length_penalty"] = settings.length_penalty
            output = model.generate(**inputs, **beams, max_new_tokens=settings.max_new_tokens, do_sample=False)
        texts = tokenizer.batch_decode(output, skip_special_tokens=True)
        results += [(i, text.strip()) for i, text in zip(indices, texts, strict=True)]
    model.train()
    gathered = gather_object(results) if world > 1 else results
    by_index = dict(gathered)
    return [by_index[i] for i in range(len(sources))]


def bleu_chrf(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus BLEU and chrF (sacrebleu defaults: 13a tokenisation, chrF with character 6-grams)."""
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)}


def translation_scores(sources: list[str], hypotheses: list[str], references: list[str]) -> dict:
    """BLEU / chrF, the share of the sources' placeholders kept (`placeholders`, %) and the share of outputs that
    stutter (`repeats`, %), and what copying the source unchanged scores (`copy_bleu`, `copy_chrf`)."""
    copy = bleu_chrf(sources, references)
    return {
        **bleu_chrf(hypotheses, references),
        "placeholders": placeholder_accuracy(sources, hypotheses),
        "repeats": repeat_rate(hypotheses),
        "copy_bleu": copy["bleu"],
        "copy_chrf": copy["chrf"],
    }


# HTML elements: a tag with another name ("<file>", "<options>", "<none>") is a metavariable or a word in brackets,
# which translators translate ("<Datei>"), so it is not a placeholder.
_HTML_TAGS = (
    "a|abbr|b|big|blockquote|body|br|center|code|dd|del|div|dl|dt|em|font|h[1-6]|head|hr|html|i|img|ins|kbd|li|"
    "ol|p|pre|q|s|samp|small|span|strike|strong|sub|sup|table|td|th|title|tr|tt|u|ul|var"
)

# What a translation must carry over unchanged, as translators' QA checks (translate-toolkit's pofilter, Pology)
# look for them: printf conversions (%s, %d, %1$s, %-5.2f, %(name)s), Qt's %1, str.format fields ({0}, {name},
# {:.2f}), HTML tags and character entities. Narrower than the tokenizer's pattern on purpose: "50% done" holds
# no placeholder, and "<file>"-style metavariables are words a translator translates.
QA_PLACEHOLDER = re.compile(
    r"%\([A-Za-z_][\w.-]*\)[-+#0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|%(?:\d+\$)?[-+#0]*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t)?[diouxXeEfFgGcsp]"
    r"|%\d+"
    r"|\{[A-Za-z0-9_.]*(?:![rsa])?(?::[^{}]*)?\}"
    rf"|</?(?i:{_HTML_TAGS})(?:\s[^<>]*)?\s*/?>"
    r"|&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);"
)


def placeholders(text: str) -> Counter:
    """The placeholders of `text` (see `QA_PLACEHOLDER`) with their counts."""
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
