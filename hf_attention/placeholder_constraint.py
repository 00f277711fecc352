"""Constrained decoding for protected sources: each sentinel of the source placed exactly as often as the source
holds it, none invented, none repeated, none dropped.

With placeholder protection (placeholders.py) the model only has to choose where each placeholder goes; this
`LogitsProcessor` takes every other choice away from it, as production localisation MT does. At each step, for each
hypothesis:

- a sentinel that its source does not hold, or that it already wrote as often as the source holds it, gets -inf
  (no invented or duplicated sentinel);
- end of sequence gets -inf while a sentinel of its source is still unplaced;
- when the steps left (`max_new_tokens`) are as few as the sentinels still unplaced, only those sentinels may be
  written: a hypothesis that wanders (repeating a word until the limit) still places every one, at its end. A
  sentinel is lost only when the source holds more of them than max_new_tokens.

It works with greedy and beam search (and num_return_sequences): generate() repeats each source row once per beam /
returned sequence, so hypothesis row r belongs to source row r // (rows / sources). Padding, left or right, is never
a sentinel, so it counts for nothing. CTranslate2 takes no per-step logits processor: it decodes unconstrained, and
`restore` reports what went wrong.

A separate file from placeholders.py, which imports only the standard library (the CTranslate2 route uses it without
torch); shipped beside the weights with the translation pipeline, it imports only torch, transformers and siblings.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from .placeholders import SENTINELS, tokenizer_protects


class SentinelConstraint(LogitsProcessor):
    """Bans, per hypothesis, the sentinels its source does not have left to place, and end of sequence until every
    one is placed.

    Args:
        sentinel_ids: The token ids of the sentinels (`sentinel_ids(tokenizer)`).
        source_ids: (B, S) the encoder's input ids of the batch (protected sources, padded either side).
        eos_token_id: The end-of-sequence id(s) to hold back; None or empty: none.
        max_new_tokens: generate()'s limit, to keep room for the unplaced sentinels; None: no such room is kept.
    """

    def __init__(
        self,
        sentinel_ids: Sequence[int],
        source_ids: torch.Tensor,
        eos_token_id: int | Sequence[int] | None,
        max_new_tokens: int | None = None,
    ):
        self.sentinel_ids = torch.as_tensor(list(sentinel_ids), dtype=torch.long, device=source_ids.device)
        # (B, K): how often source row b holds sentinel k, i.e. how often its output must write it.
        self.quota = self._counts(source_ids)
        eos = [] if eos_token_id is None else [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
        self.eos_ids = torch.as_tensor(eos, dtype=torch.long, device=source_ids.device)
        self.max_new_tokens = max_new_tokens
        self.start_length: int | None = None  # the decoder's length at the first step (its start token(s))

    def _counts(self, ids: torch.Tensor) -> torch.Tensor:
        """(R, K): how often each row of `ids` holds each sentinel."""
        return (ids.unsqueeze(-1) == self.sentinel_ids.to(ids.device)).sum(dim=1)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # input_ids: (R, T) the decoder's tokens so far, R = sources × hypotheses per source. They start with the
        # decoder start token, which is no sentinel: counting every position counts the generated ones.
        quota = self.quota.to(input_ids.device).repeat_interleave(input_ids.shape[0] // self.quota.shape[0], dim=0)
        left = quota - self._counts(input_ids)  # (R, K) still to place
        banned = torch.zeros_like(scores, dtype=torch.bool)
        banned[:, self.sentinel_ids.to(scores.device)] = left <= 0
        if self.eos_ids.numel():
            banned[:, self.eos_ids.to(scores.device)] = (left > 0).any(dim=1, keepdim=True)
        if self.max_new_tokens is not None:
            if self.start_length is None:
                self.start_length = input_ids.shape[1]
            steps_left = self.max_new_tokens - (input_ids.shape[1] - self.start_length)  # this one included
            cornered = left.clamp(min=0).sum(dim=1) >= steps_left  # (R,) no room left for anything else
            if cornered.any():
                only_sentinels = torch.ones_like(banned)
                only_sentinels[:, self.sentinel_ids.to(scores.device)] = left <= 0
                banned = torch.where(cornered[:, None].to(scores.device), only_sentinels, banned)
        return scores.masked_fill(banned, -float("inf"))


def sentinel_ids(tokenizer) -> list[int]:
    """The token ids of `SENTINELS` in `tokenizer` (which must hold them: `tokenizer_protects`)."""
    return tokenizer.convert_tokens_to_ids(list(SENTINELS))


def sentinel_constraint(
    tokenizer, source_ids: torch.Tensor, eos_token_id, max_new_tokens: int | None = None
) -> LogitsProcessorList | None:
    """`generate(logits_processor=...)` for a batch of protected sources (which generate() merges with the processors
    of the generation config), or None when `tokenizer` holds no sentinels (nothing to constrain: generate as is).
    Pass generate()'s `max_new_tokens` so that the sentinels are placed before it runs out."""
    if not tokenizer_protects(tokenizer):
        return None
    constraint = SentinelConstraint(sentinel_ids(tokenizer), source_ids, eos_token_id, max_new_tokens)
    return LogitsProcessorList([constraint])
