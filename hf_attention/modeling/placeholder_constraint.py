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
  sentinel is lost only when the source holds more of them than max_new_tokens (less the steps whose token the
  generation config forces: `forced_bos_token_id` at the first, `forced_eos_token_id` at the last, as BART has it);
- generate() runs the generation config's processors (forced tokens, min_length, suppressed or bad words,
  no_repeat_ngram_size, repetition_penalty, ...) before this one and its sampling warpers (temperature, top-k,
  top-p, ...) after it, on what it left. Where a processor before it and the constraint together would leave a
  hypothesis no token at all, the constraint relaxes for that row (first the room rule, then the held-back end of
  sequence), so a sentinel is lost, and reported by `restore`, instead of greedy search writing token 0, beam search
  NaN or sampling crashing. Options that ban a sentinel the source holds at every step (`suppress_tokens`,
  `bad_words_ids`) are refused before generating.

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
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from .placeholders import SENTINELS, tokenizer_protects


class SentinelConstraint(LogitsProcessor):
    """Bans, per hypothesis, the sentinels its source does not have left to place, and end of sequence until every
    one is placed.

    Args:
        sentinel_ids: The token ids of the sentinels (`sentinel_ids(tokenizer)`).
        source_ids: (B, S) the encoder's input ids of the batch (protected sources, padded either side).
        eos_token_id: The end-of-sequence id(s) to hold back; None or empty: none.
        max_new_tokens: generate()'s limit, to keep room for the unplaced sentinels; None: `max_length` bounds it.
        max_length: generate()'s limit on the whole decoder sequence (start token included), used when
            `max_new_tokens` is None; both None: no room is kept.
        forced_bos: generate() forces the first token (`forced_bos_token_id`): that step cannot place a sentinel.
        forced_eos: generate() forces end of sequence at the last step (`forced_eos_token_id`): that step cannot
            place a sentinel, so the sentinels are placed one step earlier.
    """

    def __init__(
        self,
        sentinel_ids: Sequence[int],
        source_ids: torch.Tensor,
        eos_token_id: int | Sequence[int] | None,
        max_new_tokens: int | None = None,
        *,
        max_length: int | None = None,
        forced_bos: bool = False,
        forced_eos: bool = False,
    ):
        self.sentinel_ids = torch.as_tensor(list(sentinel_ids), dtype=torch.long, device=source_ids.device)
        # (B, K): how often source row b holds sentinel k, i.e. how often its output must write it.
        self.quota = self._counts(source_ids)
        eos = [] if eos_token_id is None else [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
        self.eos_ids = torch.as_tensor(eos, dtype=torch.long, device=source_ids.device)
        self.max_new_tokens = max_new_tokens
        self.max_length = max_length
        self.forced_bos = forced_bos
        self.forced_eos = forced_eos
        self.start_length: int | None = None  # the decoder's length at the first step (its start token(s))

    def _counts(self, ids: torch.Tensor) -> torch.Tensor:
        """(R, K): how often each row of `ids` holds each sentinel."""
        return (ids.unsqueeze(-1) == self.sentinel_ids.to(ids.device)).sum(dim=1)

    def _steps_left(self, length: int) -> int | None:
        """The steps generate() has left, this one included, that may write a sentinel (None: no known limit)."""
        if self.start_length is None:
            self.start_length = length
        if self.max_new_tokens is not None:
            left = self.max_new_tokens - (length - self.start_length)
        elif self.max_length is not None:
            left = self.max_length - length
        else:
            return None
        # The forced steps write their own token: a sentinel planned for them would be -inf twice over.
        forced_first = self.forced_bos and length == 1
        return left - self.forced_eos - forced_first

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # input_ids: (R, T) the decoder's tokens so far, R = sources × hypotheses per source. They start with the
        # decoder start token, which is no sentinel: counting every position counts the generated ones.
        quota = self.quota.to(input_ids.device).repeat_interleave(input_ids.shape[0] // self.quota.shape[0], dim=0)
        left = (quota - self._counts(input_ids)).to(scores.device)  # (R, K) still to place
        sentinels = self.sentinel_ids.to(scores.device)
        no_extra = torch.zeros_like(scores, dtype=torch.bool)  # no invented or duplicated sentinel
        no_extra[:, sentinels] = left <= 0
        no_early_end = no_extra.clone()  # ... and no end of sequence while one is unplaced
        if self.eos_ids.numel():
            no_early_end[:, self.eos_ids.to(scores.device)] = (left > 0).any(dim=1, keepdim=True)
        only_due = torch.ones_like(no_extra)  # ... and, out of room, nothing but the sentinels due
        only_due[:, sentinels] = left <= 0
        steps_left = self._steps_left(input_ids.shape[1])
        unplaced = left.clamp(min=0).sum(dim=1, keepdim=True)  # (R, 1)
        cornered = (unplaced > 0) & (unplaced >= steps_left if steps_left is not None else False)
        strictest = torch.where(cornered, only_due, no_early_end)
        return self._never_all_banned(scores, [strictest, no_early_end, no_extra])

    @staticmethod
    def _never_all_banned(scores: torch.Tensor, bans: list[torch.Tensor]) -> torch.Tensor:
        """`scores` under the first of `bans` (strictest first) that leaves each row a finite score.

        The processors before this one ban tokens too (a forced end of sequence bans every other token,
        no_repeat_ngram_size or begin_suppress_tokens may ban a sentinel due): a row that nothing may continue would
        make greedy search write token 0, beam search NaN and sampling crash. A looser ban loses a sentinel instead,
        which `restore` reports; the last resort leaves the row as the other processors made it."""
        result = scores
        pending = torch.ones(scores.shape[0], 1, dtype=torch.bool, device=scores.device)
        for ban in bans:
            masked = scores.masked_fill(ban, -float("inf"))
            usable = torch.isfinite(masked).any(dim=1, keepdim=True) & pending
            result = torch.where(usable, masked, result)
            pending = pending & ~usable
        return result


def sentinel_ids(tokenizer) -> list[int]:
    """The token ids of `SENTINELS` in `tokenizer` (which must hold them: `tokenizer_protects`)."""
    return tokenizer.convert_tokens_to_ids(list(SENTINELS))


def sentinel_constraint(
    tokenizer,
    source_ids: torch.Tensor,
    eos_token_id,
    max_new_tokens: int | None = None,
    *,
    generation_config: GenerationConfig | None = None,
) -> LogitsProcessorList | None:
    """`generate(logits_processor=...)` for a batch of protected sources (which generate() merges with the processors
    of the generation config), or None when `tokenizer` holds no sentinels (nothing to constrain: generate as is).
    Pass generate()'s `max_new_tokens` so that the sentinels are placed before it runs out, and the generation config
    generate() will use (with the call's options applied) so that the constraint plans around its forced tokens and
    refuses the options that ban a sentinel outright.

    Raises:
        ValueError: If `generation_config` bans a sentinel that a source holds (`suppress_tokens`, `bad_words_ids`).
    """
    if not tokenizer_protects(tokenizer):
        return None
    ids = sentinel_ids(tokenizer)
    if generation_config is None:
        return LogitsProcessorList([SentinelConstraint(ids, source_ids, eos_token_id, max_new_tokens)])
    constraint = constraint_for_config(
        ids,
        source_ids,
        generation_config,
        eos_token_id=eos_token_id,
        max_new_tokens=max_new_tokens,
        tokenizer=tokenizer,
    )
    return LogitsProcessorList([constraint])


def constraint_for_config(
    sentinel_ids: Sequence[int],
    source_ids: torch.Tensor,
    generation_config: GenerationConfig,
    *,
    eos_token_id=None,
    max_new_tokens: int | None = None,
    tokenizer=None,
) -> SentinelConstraint:
    """The constraint for generate() with `generation_config` (the call's options applied): its limit, its forced
    first and last tokens, its end of sequence (unless `eos_token_id` is given); `tokenizer`, if given, names the
    sentinels in errors.

    Raises:
        ValueError: If `generation_config` bans a sentinel that a source holds (`suppress_tokens`, `bad_words_ids`).
    """
    _check_no_sentinel_banned(generation_config, list(sentinel_ids), source_ids, tokenizer)
    return SentinelConstraint(
        sentinel_ids,
        source_ids,
        generation_config.eos_token_id if eos_token_id is None else eos_token_id,
        generation_config.max_new_tokens if max_new_tokens is None else max_new_tokens,
        max_length=generation_config.max_length,
        forced_bos=generation_config.forced_bos_token_id is not None,
        forced_eos=generation_config.forced_eos_token_id is not None,
    )


def _check_no_sentinel_banned(config: GenerationConfig, ids: list[int], source_ids: torch.Tensor, tokenizer) -> None:
    """Refuse generation options that ban, at every step, a sentinel the batch's sources hold: the constraint would
    have to write it, the options forbid it, so it would be lost however much room there is."""
    needed = {token for token in ids if (source_ids == token).any()}
    banned = {
        "suppress_tokens": set(config.suppress_tokens or ()),
        "bad_words_ids": {words[0] for words in config.bad_words_ids or () if len(words) == 1},
    }
    for option, tokens in banned.items():
        clash = sorted(needed & tokens)
        if clash:
            names = ", ".join(f"{_token_name(tokenizer, token)} (id {token})" for token in clash)
            raise ValueError(
                f"{option} bans the placeholder sentinel(s) {names}, which the protected source holds and its "
                f"translation must write; take them out of {option}, or decode with constrain_placeholders=False."
            )


def _token_name(tokenizer, token: int) -> str:
    return repr(tokenizer.convert_ids_to_tokens(token)) if tokenizer is not None else f"sentinel {token}"
