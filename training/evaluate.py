"""Evaluation: token-level loss and perplexity on a split, and BLEU / chrF of generated translations.

Both run on every process over its shard and combine the results, so 2 processes evaluate twice as fast and give
the same numbers as 1. Evaluation never consumes the training RNG (masking for MLM uses a fixed seed inside
`torch.random.fork_rng`), so periodic evaluation does not change the training run or its resume.
"""

from __future__ import annotations

import math

import sacrebleu
import torch
from accelerate.utils import gather_object

from training.objectives import per_token_sum, target_labels


@torch.no_grad()
def evaluate_loss(accelerator, model, dataloader, objective: str, *, seed: int = 0,
                  max_batches: int | None = None) -> dict:
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
        raise ValueError("The evaluation split gave no target token (all labels are -100): there is no loss to "
                         "report. For masked LM raise --mlm_probability or --max_length; otherwise check the data.")
    loss = (totals[0] / totals[1]).item()
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0))}


@torch.no_grad()
def translate(accelerator, model, tokenizer, sources: list[str], *, batch_size: int = 64, num_beams: int = 1,
              max_new_tokens: int = 64, max_source_length: int | None = None) -> list[str]:
    """Translate `sources` (each process its share, longest first for little padding), returned in input order."""
    model = accelerator.unwrap_model(model, keep_torch_compile=False)
    model.eval()
    rank, world = accelerator.process_index, accelerator.num_processes
    mine = sorted(range(rank, len(sources), world), key=lambda i: -len(sources[i]))
    results = []
    for start in range(0, len(mine), batch_size):
        indices = mine[start:start + batch_size]
        inputs = tokenizer([sources[i] for i in indices], return_tensors="pt", padding=True, truncation=True,
                           max_length=max_source_length).to(accelerator.device)
        inputs.pop("token_type_ids", None)
        with accelerator.autocast():
            output = model.generate(**inputs, num_beams=num_beams, max_new_tokens=max_new_tokens,
                                    do_sample=False)
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
