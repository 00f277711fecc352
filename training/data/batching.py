"""How features become batches: a sampler that groups rows of similar length, and the three data loaders."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from datasets import Dataset
from torch.utils.data import DataLoader


class LengthBatchSampler:
    """Shuffled batches, reshuffled every epoch from `seed + epoch` (so a resumed run sees the same order).

    With `max_tokens`, rows of similar length are grouped (shuffle, sort within chunks of 100 batches, cut batches
    whose padded size rows × longest ≤ max_tokens, shuffle the batches): little padding, similar tokens per step.
    Without it, plain batches of `batch_size` rows. Accelerate shards the batches across processes.
    """

    def __init__(self, lengths: list[int], *, batch_size: int, max_tokens: int | None = None, seed: int = 0):
        self.lengths, self.batch_size, self.max_tokens, self.seed = lengths, batch_size, max_tokens, seed
        self.epoch = 0
        self.drop_last = False
        self._batches = None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self._batches = epoch, None

    def batches(self) -> list[list[int]]:
        if self._batches is None:
            rng = random.Random(self.seed + self.epoch)
            order = list(range(len(self.lengths)))
            rng.shuffle(order)
            if self.max_tokens is None:
                self._batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            else:
                self._batches = self._token_batches(order, rng)
        return self._batches

    def _token_batches(self, order: list[int], rng: random.Random) -> list[list[int]]:
        batches, chunk = [], self.batch_size * 100
        for start in range(0, len(order), chunk):
            rows = sorted(order[start : start + chunk], key=lambda i: self.lengths[i])
            batch, longest = [], 0
            for row in rows:
                width = max(longest, self.lengths[row])
                if batch and width * (len(batch) + 1) > self.max_tokens:
                    batches.append(batch)
                    batch, width = [], self.lengths[row]
                batch.append(row)
                longest = width
            if batch:
                batches.append(batch)
        rng.shuffle(batches)
        return batches

    def __iter__(self):
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())


@dataclass(frozen=True)
class Loaders:
    """The training batches with the sampler that orders them each epoch, and the validation and test batches."""

    train: DataLoader
    sampler: LengthBatchSampler
    eval: DataLoader
    test: DataLoader


def make_loaders(features, collator, train_args) -> Loaders:
    """Loaders over the tokenised splits; the training one batches by `LengthBatchSampler`."""
    sampler = train_sampler(features["train"], train_args)
    # A generator of its own: starting an iterator draws a seed from it, and a draw from the global RNG would shift
    # the dropout stream of a resumed run (which starts an iterator right after restoring the RNG).
    train = DataLoader(
        features["train"],
        batch_sampler=sampler,
        collate_fn=collator,
        generator=torch.Generator().manual_seed(train_args.seed),
    )
    evaluation, test = (
        DataLoader(features[name], batch_size=train_args.per_device_eval_batch_size, collate_fn=collator)
        for name in ("validation", "test")
    )
    return Loaders(train=train, sampler=sampler, eval=evaluation, test=test)


def train_sampler(train_features: Dataset, train_args) -> LengthBatchSampler:
    """The sampler that cuts the training split into batches (training.train also counts them before it writes)."""
    return LengthBatchSampler(
        row_lengths(train_features),
        batch_size=train_args.per_device_train_batch_size,
        max_tokens=train_args.max_tokens_per_batch,
        seed=train_args.seed,
    )


def row_lengths(features: Dataset) -> list[int]:
    """The padded-size driver of each row, for batching by tokens: its longest sequence, inputs or labels
    (translation targets can be longer than their sources; masked-LM rows get their labels in the collator)."""
    columns = [column for column in ("input_ids", "labels") if column in features.column_names]
    return [max(lengths) for lengths in zip(*(map(len, features[column]) for column in columns), strict=True)]
