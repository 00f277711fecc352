"""Evaluation: token-level loss and perplexity on a split, and the model's translations, scored by
training/finish/metrics.py (BLEU / chrF, placeholders, stutters).

A model whose tokenizer holds the placeholder sentinels (hf_attention/modeling/placeholders.py) translates protected
sources; each output is restored from its source before it is scored against the raw reference, and the sentinels it
lost, invented or duplicated are counted. Its decoding is constrained by default
(hf_attention/modeling/placeholder_constraint.py: each source's sentinels placed exactly as often as it holds them, end
of sequence held back until they are), as the translation pipeline decodes;
`GenerationSettings.constrain_placeholders=False` scores unconstrained decoding.

Both run on every process over its shard and combine the results, so 2 processes evaluate twice as fast and give
the same numbers as 1. Evaluation never consumes the training RNG (masking for MLM uses a fixed seed inside
`torch.random.fork_rng`), so periodic evaluation does not change the training run or its resume.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from accelerate.utils import gather_object

from hf_attention.modeling.placeholder_constraint import sentinel_constraint
from hf_attention.modeling.placeholders import Restored, protect_batch, restore_batch, tokenizer_protects
from training.finish.metrics import translation_scores
from training.objective import Objective
from training.run.losses import per_token_sum, target_labels


@dataclass(frozen=True)
class GenerationSettings:
    """How translations are generated: at evaluations, on the test split, and by default from the export."""

    batch_size: int = 64
    num_beams: int = 1  # 1: greedy
    length_penalty: float = 1.0  # beam search: summed log-probability / length**length_penalty
    # Beam search ends once num_beams hypotheses are finished, as in fairseq (where BART and Marian come from) and
    # CTranslate2. transformers' default instead searches on while a running beam could still overtake a finished
    # one, so the same model served by CTranslate2 would write other translations (34 of 737 in the main job's test).
    early_stopping: bool = True
    max_new_tokens: int = 64
    max_source_length: int | None = None  # where sources are cut
    constrain_placeholders: bool = True  # protected sources: each output places exactly its source's sentinels

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
    translations = translate(accelerator, model, tokenizer, sources, settings)
    hypotheses = [translation.text for translation in translations]
    problems = [translation.problems for translation in translations] if tokenizer_protects(tokenizer) else None
    scores = translation_scores(sources, hypotheses, references, problems)
    return scores, list(zip(sources, references, hypotheses, strict=True))


def translate(accelerator, model, tokenizer, sources: list[str], settings: GenerationSettings) -> list[Restored]:
    """Translate `sources`, returned in input order; protected (and restored, with the problems of each) when the
    tokenizer holds the placeholder sentinels, else as generated (no problems)."""
    if not tokenizer_protects(tokenizer):
        return [Restored(text, []) for text in generate_texts(accelerator, model, tokenizer, sources, settings)]
    masked, originals = protect_batch(sources)
    outputs = generate_texts(
        accelerator, model, tokenizer, masked, settings, constrain_placeholders=settings.constrain_placeholders
    )
    return restore_batch(outputs, originals, sources)  # the sources: their placeholders left as text are checked too


@torch.no_grad()
def generate_texts(
    accelerator, model, tokenizer, sources: list[str], settings: GenerationSettings, *, constrain_placeholders=False
) -> list[str]:
    """The model's outputs for `sources` as they are (each process its share, longest first for little padding),
    returned in input order; with `constrain_placeholders` (protected sources, a tokenizer with the sentinels), each
    output places exactly the sentinels of its source (hf_attention/modeling/placeholder_constraint.py)."""
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
                beams["early_stopping"] = settings.early_stopping
            if constrain_placeholders:
                eos = model.generation_config.eos_token_id
                eos = tokenizer.eos_token_id if eos is None else eos
                beams["logits_processor"] = sentinel_constraint(  # the config: its forced end of sequence (BART)
                    tokenizer,
                    inputs["input_ids"],
                    eos,
                    settings.max_new_tokens,
                    generation_config=model.generation_config,
                )
            output = model.generate(**inputs, **beams, max_new_tokens=settings.max_new_tokens, do_sample=False)
        texts = tokenizer.batch_decode(output, skip_special_tokens=True)
        results += [(i, text.strip()) for i, text in zip(indices, texts, strict=True)]
    model.train()
    gathered = gather_object(results) if world > 1 else results
    by_index = dict(gathered)
    return [by_index[i] for i in range(len(sources))]
