"""Naive, loop-by-loop implementations of the formulas the attention library implements.

Everything here works on Python floats (double precision) with explicit loops and the `math`/`cmath` modules; torch
is used only to read inputs (`.tolist()`) and to hand results back as float64 tensors. Nothing imports `hf_attention`.

Notation: B batch, H query heads, K key/value heads, T queries, S keys, D head dim, A additive-attention width.
"""

import cmath
import math
from collections.abc import Callable, Sequence

import torch

Vector = Sequence[float]
# score(h, q, k) -> float: the unnormalised attention score of query vector q and key vector k in head h.
ScoreFn = Callable[[int, Vector, Vector], float]


# --- score functions --------------------------------------------------------------------------------------------


def scaled_dot_score(head: int, q: Vector, k: Vector) -> float:
    """q·k / √D (Vaswani et al. 2017, eq. 1)."""
    return sum(qi * ki for qi, ki in zip(q, k, strict=True)) / math.sqrt(len(q))


def dot_score(head: int, q: Vector, k: Vector) -> float:
    """q·k, unscaled (T5)."""
    return sum(qi * ki for qi, ki in zip(q, k, strict=True))


def additive_score(w_q: torch.Tensor, w_k: torch.Tensor, w: torch.Tensor) -> ScoreFn:
    """Bahdanau et al. 2015: score(q, k) = wᵀ tanh(W_q q + W_k k); W_q, W_k of shape (A, D), w of shape (A,)."""
    wq, wk, wv = w_q.tolist(), w_k.tolist(), w.reshape(-1).tolist()

    def score(head: int, q: Vector, k: Vector) -> float:
        total = 0.0
        for a in range(len(wv)):
            pre = sum(wq[a][d] * q[d] for d in range(len(q))) + sum(wk[a][d] * k[d] for d in range(len(k)))
            total += wv[a] * math.tanh(pre)
        return total

    return score


def gaussian_score(variances: Sequence[float]) -> ScoreFn:
    """Gaussian kernel of Nadaraya–Watson regression: −‖q − k‖² / (2σ_h²), one variance σ_h² per head."""

    def score(head: int, q: Vector, k: Vector) -> float:
        return -sum((qi - ki) ** 2 for qi, ki in zip(q, k, strict=True)) / (2.0 * variances[head])

    return score


# --- attention ----------------------------------------------------------------------------------------------------


def masked_softmax(scores: Sequence[float], allowed: Sequence[bool]) -> list[float]:
    """softmax over the allowed entries only; 0 on masked entries; all zeros when nothing is allowed."""
    kept = [s for s, a in zip(scores, allowed, strict=True) if a]
    if not kept:
        return [0.0] * len(scores)
    top = max(kept)
    exps = [math.exp(s - top) if a else 0.0 for s, a in zip(scores, allowed, strict=True)]
    total = sum(exps)
    return [e / total for e in exps]


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    score: ScoreFn,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """out[b, h, t] = Σ_s softmax_s(score(q[b,h,t], k[b,g(h),s]) + bias[b,h,t,s] | mask) · v[b, g(h), s].

    Grouped-query heads: query head h reads key/value head g(h) = h // (H / K).

    Args:
        query: (B, H, T, D).
        key, value: (B, K, S, D) and (B, K, S, Dv).
        score: Score function of (head, q, k).
        mask: Bool, broadcastable to (B, H, T, S); True = attend.
        bias: Float, broadcastable to (B, H, T, S); added to the scores.

    Returns:
        (B, H, T, Dv) output and (B, H, T, S) weights, float64.
    """
    batch, heads, queries, _ = query.shape
    kv_heads, keys, value_dim = key.shape[1], key.shape[2], value.shape[-1]
    shape = (batch, heads, queries, keys)
    allowed = torch.ones(shape, dtype=torch.bool) if mask is None else mask.expand(shape)
    additive = torch.zeros(shape, dtype=torch.float64) if bias is None else bias.double().expand(shape)
    q, k, v, allowed, additive = query.tolist(), key.tolist(), value.tolist(), allowed.tolist(), additive.tolist()
    group = heads // kv_heads
    out = [[[[0.0] * value_dim for _ in range(queries)] for _ in range(heads)] for _ in range(batch)]
    weights = [[[[0.0] * keys for _ in range(queries)] for _ in range(heads)] for _ in range(batch)]
    for b in range(batch):
        for h in range(heads):
            g = h // group
            for t in range(queries):
                scores = [score(h, q[b][h][t], k[b][g][s]) + additive[b][h][t][s] for s in range(keys)]
                row = masked_softmax(scores, allowed[b][h][t])
                weights[b][h][t] = row
                for d in range(value_dim):
                    out[b][h][t][d] = sum(row[s] * v[b][g][s][d] for s in range(keys))
    return torch.tensor(out, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)


# --- positional encodings -----------------------------------------------------------------------------------------


def sinusoidal_table(positions: Sequence[int], dim: int, layout: str = "interleaved") -> torch.Tensor:
    """ "Attention Is All You Need" §3.5: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)).

    "interleaved" is the paper's order; "concat" puts the d/2 sines first, then the d/2 cosines (Marian, fairseq).
    Returns (len(positions), dim) float64.
    """
    rows = []
    for p in positions:
        row = [0.0] * dim
        for i in range(dim // 2):
            angle = p / 10000 ** (2 * i / dim)
            if layout == "interleaved":
                row[2 * i], row[2 * i + 1] = math.sin(angle), math.cos(angle)
            elif layout == "concat":
                row[i], row[dim // 2 + i] = math.sin(angle), math.cos(angle)
            else:
                raise ValueError(layout)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def rotate_complex(x: Vector, position: float, base: float = 10000.0) -> list[float]:
    """RoPE (Su et al. 2021) on the (x_i, x_{i+D/2}) pairs: z_i = x_i + i·x_{i+D/2} multiplied by e^{i·p·θ_i}.

    θ_i = base^(−2i/D). Returns the rotated vector, pair halves in place.
    """
    half = len(x) // 2
    out = [0.0] * len(x)
    for i in range(half):
        theta = base ** (-2 * i / len(x))
        z = complex(x[i], x[i + half]) * cmath.exp(1j * position * theta)
        out[i], out[i + half] = z.real, z.imag
    return out


def alibi_slopes(num_heads: int) -> list[float]:
    """ALiBi slopes (Press et al. 2022, §3): for n a power of two, the geometric sequence 2^(−8/n), 2^(−16/n), …,
    2^(−8); otherwise the slopes of the closest lower power of two p, then every other slope of 2p (the 1st, 3rd, …)
    until there are n.
    """
    if num_heads & (num_heads - 1) == 0:  # a power of two
        return [2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)]
    closest = 1
    while closest * 2 < num_heads:
        closest *= 2
    doubled = [2.0 ** (-8.0 * (h + 1) / (2 * closest)) for h in range(2 * closest)]
    extra = [doubled[i] for i in range(0, 2 * closest, 2)]
    return alibi_slopes(closest) + extra[: num_heads - closest]


def t5_bucket(relative_position: int, *, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """T5 relative-position bucket (Raffel et al. 2020, §2.1) of one key − query distance.

    Bidirectional: half the buckets for keys before the query, half (offset by num_buckets/2) for keys after it.
    Unidirectional: keys after the query all share bucket 0. In each half, the first half of the buckets hold the
    exact distances 0 … n/2 − 1, the rest are log-spaced up to max_distance, and farther distances share the last.
    """
    n = num_buckets
    bucket = 0
    if bidirectional:
        n //= 2
        if relative_position > 0:
            bucket += n
        distance = abs(relative_position)
    else:
        distance = max(-relative_position, 0)
    exact = n // 2
    if distance < exact:
        return bucket + distance
    log_bucket = exact + int(math.log(distance / exact) / math.log(max_distance / exact) * (n - exact))
    return bucket + min(log_bucket, n - 1)


# --- norms --------------------------------------------------------------------------------------------------------


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Zhang & Sennrich 2019: y = x / sqrt(mean(x²) + ε) · g, row by row over the last axis. Returns float64."""
    rows, gain = x.reshape(-1, x.shape[-1]).tolist(), weight.tolist()
    out = []
    for row in rows:
        rms = math.sqrt(sum(v * v for v in row) / len(row) + eps)
        out.append([v / rms * g for v, g in zip(row, gain, strict=True)])
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """Ba et al. 2016: y = (x − μ) / sqrt(σ² + ε) · g + b, biased variance, row by row. Returns float64."""
    rows, gain, shift = x.reshape(-1, x.shape[-1]).tolist(), weight.tolist(), bias.tolist()
    out = []
    for row in rows:
        mean = sum(row) / len(row)
        variance = sum((v - mean) ** 2 for v in row) / len(row)
        std = math.sqrt(variance + eps)
        out.append([(v - mean) / std * g + s for v, g, s in zip(row, gain, shift, strict=True)])
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)
