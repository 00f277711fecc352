"""Positional encodings: where a token is, told to a model whose attention is otherwise order-blind.

Notation: B batch, T query length, S key length, H heads, D head dim, E model dim.

An encoding acts in one of three places, named by its `kind` and by the base class it derives from:
- "absolute" (`AbsolutePositionalEncoding`): a (B, T, E) vector added to the token embeddings (sinusoidal, learned);
- "rotary" (`RotaryEmbedding`): (cos, sin) tables that rotate queries and keys inside every attention layer (RoPE);
- "bias" (`PositionBias`): an additive (1|B, H, T, S) term on the attention scores (ALiBi, T5 relative buckets).
The stack never branches on the kind: it asks every scheme the same questions (`needs_key_positions`,
`add_to_embeddings`, `rotary_tables`, `score_bias`), and each base answers for its place, "nothing" by default.
Every encoding takes explicit position ids (never `arange(T)`), so caches and left padding stay correct. The stack
computes each signal once and hands it to every layer.

Each scheme is a `PositionalEncoding` registered by name in `POSITIONAL_ENCODINGS`, and the class says everything
else the library needs: how it is built from a config (`from_config`), what a config needs for it (`check_config`,
run when the config is created), the longest input it can encode (`position_limit`) and its initial values
(`init_weights`). Constructors stay keyword-typed, so each module also works and is tested without a config. The
config validates `position_encoding` against the registry, so this file imports only torch (which transformers loads
anyway) and transformers' init functions.
"""

import contextlib
import math

import torch
from torch import Tensor, nn
from transformers import initialization as init

from .rope_scaling import ROPE_SCALINGS, LongRopeScaling

# The config value for "no positional signal" (bag-of-words attention); it builds no module.
NO_POSITIONAL_ENCODING = "none"


class PositionalEncoding(nn.Module):
    """Base of the positional schemes: what the rest of the library asks of one, besides its forward.

    A scheme derives from the base of the place where it acts (`AbsolutePositionalEncoding`, `PositionBias`, or
    `RotaryEmbedding` itself), which sets `kind` and answers the stack's questions, and implements `from_config`; the
    other hooks default to "no requirement, no limit, no parameters of its own".
    """

    kind: str  # "absolute", "rotary" or "bias": where the signal acts (see the module docstring), for people and tests
    # Whether the stack must compute the keys' positions (B|1, S) too: a signal that depends on query-key distances.
    needs_key_positions = False
    # The config field of a width the scheme works on in pairs of coordinates (sinusoids, rotations), which must then
    # be even; None when there is none.
    paired_width: str | None = None

    @classmethod
    def from_config(cls, config, *, bidirectional: bool) -> "PositionalEncoding":
        """The module for one stack of a model with `config` (`bidirectional`: an encoder, else a causal decoder)."""
        raise NotImplementedError(f"{cls.__name__} must say how it is built from a config.")

    @classmethod
    def check_config(cls, config, *, bidirectional: bool) -> None:
        """Raise ValueError, naming the field, the value and what is allowed, when `config` cannot build a working
        module for a stack of that direction. The config runs this when it is created, before any module exists."""
        width = None if cls.paired_width is None else getattr(config, cls.paired_width)
        if width is not None and width % 2:
            raise ValueError(
                f"position_encoding={config.position_encoding!r} needs an even {cls.paired_width}, got {width}."
            )

    @classmethod
    def position_limit(cls, config) -> int | None:
        """Most positions a model with `config` can encode (a table's rows), or None when every position works."""
        return None

    def init_weights(self, std: float) -> None:
        """Initial values of the parameters this module holds directly (the models' `_init_weights` calls this);
        nn.Embedding children are initialised like every embedding, normal(0, std)."""

    def __init_subclass__(cls, **kwargs):
        """A class that declares a `kind` but answers none of the stack's questions would be silently ignored by the
        stack (which asks those questions, never the kind): refuse it, naming the base to derive from."""
        super().__init_subclass__(**kwargs)
        answers = ("add_to_embeddings", "rotary_tables", "score_bias")
        if "kind" in vars(cls) and all(getattr(cls, name) is getattr(PositionalEncoding, name) for name in answers):
            raise TypeError(
                f"{cls.__name__} sets kind={cls.kind!r} but derives from PositionalEncoding directly; derive from "
                "AbsolutePositionalEncoding (kind 'absolute'), PositionBias ('bias') or RotaryEmbedding ('rotary'), "
                "which apply the signal where it acts."
            )

    def add_to_embeddings(self, hidden: Tensor, position_ids: Tensor) -> Tensor:
        """The (B, T, E) embeddings with this scheme's absolute position vectors added; unchanged by default."""
        return hidden

    def rotary_tables(self, position_ids: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor] | None:
        """The (cos, sin) tables, each (B, 1, T, D), with which every attention layer rotates q and k; None by
        default (no rotation)."""
        return None

    def score_bias(
        self, query_positions: Tensor, key_positions: Tensor | None, *, dtype: torch.dtype, batch: int, flex: bool
    ):
        """The additive term on every layer's scores: a (B|1, H, T, S) tensor in `dtype`, or with `flex` (the
        FlexAttention backend) a score modification computing it from the positions (`score_mod`); None by default.
        """
        return None

    def score_mod(self, query_positions: Tensor, key_positions: Tensor, batch: int):
        """A "bias" scheme's bias as a FlexAttention score modification: `(score, b, h, q, kv) -> score + bias`,
        computed from the (B|1, T) and (B|1, S) positions instead of stored as a (B, H, T, S) tensor."""
        raise NotImplementedError(f"{type(self).__name__} adds no bias to the scores.")


class AbsolutePositionalEncoding(PositionalEncoding):
    """Base of the schemes whose `forward(position_ids)` gives (B, T, E) vectors added to the token embeddings."""

    kind = "absolute"

    def add_to_embeddings(self, hidden: Tensor, position_ids: Tensor) -> Tensor:
        return hidden + self(position_ids).to(hidden.dtype)


class PositionBias(PositionalEncoding):
    """Base of the schemes whose `forward(query_positions, key_positions)` gives an additive (B|1, H, T, S) term on
    the attention scores; `score_mod` gives it to FlexAttention without storing the tensor."""

    kind = "bias"
    needs_key_positions = True

    def score_bias(
        self, query_positions: Tensor, key_positions: Tensor | None, *, dtype: torch.dtype, batch: int, flex: bool
    ):
        if flex:
            return self.score_mod(query_positions, key_positions, batch)
        return self(query_positions, key_positions).to(dtype)  # (B|1, H, T, S)


class SinusoidalPositionalEmbedding(AbsolutePositionalEncoding):
    """Fixed sinusoids of "Attention Is All You Need" §3.5: PE(p, 2i) = sin(p / 10000^(2i/E)), PE(p, 2i+1) = cos(…).

    Computed on the fly in float64 from the position ids, so no table limits the length and large positions keep
    their precision.

    Args:
        embedding_dim: E (even).
        layout: "interleaved" (sin, cos, sin, cos, … as in the paper) or "concat" ([all sin, all cos], Marian/fairseq).
        base: The 10000 of the formula.
    """

    paired_width = "hidden_size"  # a (sin, cos) pair per frequency

    def __init__(self, *, embedding_dim: int, layout: str = "interleaved", base: float = 10000.0):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.layout = layout
        self.base = base

    @classmethod
    def from_config(cls, config, *, bidirectional: bool) -> "SinusoidalPositionalEmbedding":
        return cls(embedding_dim=config.hidden_size, layout=config.sinusoidal_layout)

    def forward(self, position_ids: Tensor) -> Tensor:
        """(B, T) positions → (B, T, E) encodings in float32."""
        device = position_ids.device
        work_dtype = torch.float32 if device.type == "mps" else torch.float64
        exponents = torch.arange(0, self.embedding_dim, 2, dtype=work_dtype, device=device) / self.embedding_dim
        inverse_frequencies = self.base**-exponents  # (E/2,)
        angles = position_ids.to(work_dtype)[..., None] * inverse_frequencies  # (B, T, E/2)
        sin, cos = angles.sin(), angles.cos()
        if self.layout == "interleaved":
            table = torch.stack((sin, cos), dim=-1).flatten(-2)  # (B, T, E): sin0 cos0 sin1 cos1 …
        else:
            table = torch.cat((sin, cos), dim=-1)  # (B, T, E): sin0 … sinN cos0 … cosN
        return table.float()


class LearnedPositionalEmbedding(AbsolutePositionalEncoding):
    """A trained vector per position (BERT, GPT-2, BART); cannot go beyond the table.

    Args:
        num_positions: Rows usable by positions (max_position_embeddings).
        embedding_dim: E.
        offset: Extra leading rows, skipped by adding `offset` to every position (BART reserves 2).
    """

    def __init__(self, *, num_positions: int, embedding_dim: int, offset: int = 0):
        super().__init__()
        self.num_positions = num_positions
        self.offset = offset
        self.weight = nn.Parameter(torch.empty(num_positions + offset, embedding_dim))

    @classmethod
    def from_config(cls, config, *, bidirectional: bool) -> "LearnedPositionalEmbedding":
        return cls(
            num_positions=config.max_position_embeddings,
            embedding_dim=config.hidden_size,
            offset=config.position_offset,
        )

    @classmethod
    def position_limit(cls, config) -> int:
        return config.max_position_embeddings

    def init_weights(self, std: float) -> None:
        init.normal_(self.weight, mean=0.0, std=std)

    def forward(self, position_ids: Tensor) -> Tensor:
        """(B, T) positions → (B, T, E); raises ValueError for a position outside [0, max_position_embeddings)."""
        if not torch.compiler.is_compiling() and position_ids.numel():
            first, last = (int(value) for value in torch.aminmax(position_ids))
            if last >= self.num_positions:
                raise ValueError(
                    f"position {last} is beyond max_position_embeddings={self.num_positions} of the learned position "
                    "table; shorten the input, raise max_position_embeddings, or use position_encoding='rotary', "
                    "'alibi', 'relative' or 'sinusoidal', which extrapolate."
                )
            if first < 0:
                # below 0 the lookup would fail, or with position_offset read the rows reserved before position 0
                raise ValueError(
                    f"position_ids contains {first}: positions in the learned table start at 0 (allowed: 0 to "
                    f"{self.num_positions - 1})."
                )
        return nn.functional.embedding(position_ids + self.offset, self.weight)


class RotaryEmbedding(PositionalEncoding):
    """Rotary position embedding (Su et al. 2021, RoFormer): rotate each (x_i, x_{i+R/2}) pair by angle p·θ_i.

    After rotation q·k depends only on the distance between the two positions. Uses the "rotate half" pairing of
    GPT-NeoX / Llama. The first R = int(D · partial_rotary_factor) dimensions of each head rotate, the rest pass
    through; `rope_type` stretches the frequencies for long contexts (`ROPE_SCALINGS`).

    Args:
        head_dim: D.
        base: θ_i = base^(-2i/R).
        rope_type: A name of `ROPE_SCALINGS`.
        options: That scaling's options.
        partial_rotary_factor: R / D.
        max_position_embeddings: The training length the scalings refer to.
        float32_tables: The layers' tables stay float32 whatever the model's dtype (`rope_in_float32`: the layers
            rotate in float32, ERNIE 4.5).
    """

    kind = "rotary"
    paired_width = "head_dim"  # rotates (x_i, x_{i+D/2}) pairs

    def __init__(
        self,
        *,
        head_dim: int,
        base: float = 10000.0,
        rope_type: str = "default",
        options: dict | None = None,
        partial_rotary_factor: float = 1.0,
        max_position_embeddings: int = 2048,
        float32_tables: bool = False,
    ):
        super().__init__()
        self.float32_tables = float32_tables
        self.head_dim = head_dim
        self.rotary_dim = int(head_dim * partial_rotary_factor)
        self.base = base
        self.rope_type = rope_type
        self.scaling = ROPE_SCALINGS[rope_type]
        self.options = dict(options or {})
        self.max_position_embeddings = max_position_embeddings
        # θ per device, computed on first use: a float32 table that neither a dtype cast of the model nor the
        # checkpoint may touch (so no buffer), and that a decoding step should not rebuild.
        self._inverse_frequencies: dict[torch.device, Tensor] = {}
        self.attention_factor = self.scaling.attention_factor(self.options, max_position_embeddings)
        # The dynamic scaling's state, as transformers keeps it: the longest input seen so far (frequencies computed
        # for it), back to the trained ones when a short input follows.
        self._dynamic_length = max_position_embeddings

    def _frequencies(self, device, length=None) -> tuple[Tensor, float]:
        return self.scaling.frequencies(
            base=self.base,
            dim=self.rotary_dim,
            options=self.options,
            max_positions=self.max_position_embeddings,
            device=device,
            length=length,
        )

    def inverse_frequencies(self, device: torch.device) -> Tensor:
        """θ_i for i < R/2, float32, on `device` (of the trained length, for a length-dependent scaling)."""
        table = None if torch.compiler.is_compiling() else self._inverse_frequencies.get(device)
        if table is None:
            table = self._frequencies(device)[0]  # (R/2,)
            if not (torch.compiler.is_compiling() or table.is_meta):
                self._inverse_frequencies[device] = table
        return table

    def _frequencies_for(self, position_ids: Tensor) -> Tensor:
        """The frequencies of a call with these positions: a length-dependent scaling reads the longest one."""
        if not self.scaling.length_dependent:
            return self.inverse_frequencies(position_ids.device)
        length = position_ids.max() + 1
        if self.scaling is LongRopeScaling:
            return self._frequencies(position_ids.device, length)[0]
        # dynamic: recomputed when the input outgrows what was seen; the trained table again for a short input
        if length > self._dynamic_length:
            self._inverse_frequencies[position_ids.device] = self._frequencies(position_ids.device, length)[0]
            self._dynamic_length = int(length)
        elif length < self.max_position_embeddings < self._dynamic_length:
            self._inverse_frequencies.pop(position_ids.device, None)
            self._dynamic_length = self.max_position_embeddings
        return self.inverse_frequencies(position_ids.device)

    @classmethod
    def from_config(cls, config, *, bidirectional: bool) -> "RotaryEmbedding":
        return cls(
            head_dim=config.head_dim,
            base=config.rope_theta,
            rope_type=config.rope_type,
            options=config.rope_scaling_options,
            partial_rotary_factor=config.partial_rotary_factor,
            max_position_embeddings=config.max_position_embeddings,
            float32_tables=getattr(config, "rope_in_float32", False),
        )

    @classmethod
    def local_from_config(cls, config) -> "RotaryEmbedding | None":
        """The plain rotation of the sliding-window layers when they have a base of their own (`local_rope_theta`)."""
        if config.local_rope_theta is None:
            return None
        return cls(
            head_dim=config.head_dim,
            base=config.local_rope_theta,
            partial_rotary_factor=config.partial_rotary_factor,
            max_position_embeddings=config.max_position_embeddings,
            float32_tables=getattr(config, "rope_in_float32", False),
        )

    def forward(self, position_ids: Tensor, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """(B, T) positions → (cos, sin), each (B, T, R), computed in float32 then cast to `dtype`."""
        device = position_ids.device
        inverse_frequencies = self._frequencies_for(position_ids)
        # float32 angles even under autocast (entered only then: a context per call is a measurable share of a
        # one-token decoding step)
        autocast = torch.is_autocast_enabled(device.type)
        with torch.autocast(device_type=device.type, enabled=False) if autocast else contextlib.nullcontext():
            angles = position_ids.float()[..., None] * inverse_frequencies  # (B, T, R/2)
            angles = torch.cat((angles, angles), dim=-1)  # (B, T, R)
            cos, sin = angles.cos(), angles.sin()
            if self.attention_factor != 1.0:  # YaRN, LongRoPE: q·k grows by its square
                cos, sin = cos * self.attention_factor, sin * self.attention_factor
            return cos.to(dtype), sin.to(dtype)

    def rotary_tables(self, position_ids: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        cos, sin = self(position_ids, torch.float32 if self.float32_tables else dtype)
        return cos[:, None], sin[:, None]  # (B, 1, T, R): broadcast over heads, shared by every layer


def alibi_slopes(num_heads: int) -> list[float]:
    """Head-specific slopes m_h of ALiBi: a geometric sequence starting at 2^(-8/H) (Press et al. 2022, §3).

    For a head count that is not a power of two, the paper takes the slopes of the nearest lower power of two and
    fills up with every other slope of the next power of two.
    """

    def power_of_two_slopes(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(num_heads).is_integer():
        return power_of_two_slopes(num_heads)
    lower = 2 ** math.floor(math.log2(num_heads))
    return power_of_two_slopes(lower) + alibi_slopes(2 * lower)[0::2][: num_heads - lower]


class ALiBiBias(PositionBias):
    """Attention with Linear Biases: score(i, j) += −m_h · |i − j| (Press et al. 2022).

    The causal paper bias −m_h·(i − j) for j ≤ i equals −m_h·|i − j|, so one symmetric formula serves decoders and,
    as the bidirectional variant, encoders.

    Args:
        num_heads: H.
    """

    def __init__(self, *, num_heads: int):
        super().__init__()
        self.num_heads = num_heads

    @classmethod
    def from_config(cls, config, *, bidirectional: bool) -> "ALiBiBias":
        return cls(num_heads=config.num_attention_heads)

    def slopes(self, device: torch.device) -> Tensor:
        """(H,) float32 slopes m_h."""
        return torch.tensor(alibi_slopes(self.num_heads), dtype=torch.float32, device=device)

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """(B, T) and (B, S) positions → (B, H, T, S) float32 bias."""
        slopes = self.slopes(query_positions.device)
        distance = (query_positions[:, :, None] - key_positions[:, None, :]).abs().float()  # (B, T, S)
        return -slopes[None, :, None, None] * distance[:, None]  # (B, H, T, S)

    def score_mod(self, query_positions: Tensor, key_positions: Tensor, batch: int):
        slopes = self.slopes(query_positions.device)
        queries, keys = query_positions.expand(batch, -1), key_positions.expand(batch, -1)  # (B, T), (B, S)

        def alibi(score, b, h, q, kv):
            return score - slopes[h] * (queries[b, q] - keys[b, kv]).abs().float()

        return alibi


def relative_position_bucket(
    relative_position: Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int
) -> Tensor:
    """T5's bucketing of a key-minus-query distance (Raffel et al. 2020, §2.1).

    Half the buckets (per direction when bidirectional) hold exact small distances; the rest cover distances up to
    `max_distance` on a log scale, and everything farther shares the last bucket. A decoder only looks back, so its
    positive (future) distances all fall into bucket 0.

    Args:
        relative_position: Integer tensor of key_position − query_position.
        bidirectional: Separate buckets for keys before and after the query (encoder).
        num_buckets: Total buckets.
        max_distance: Distance at which the log-spaced buckets end.

    Returns:
        Long tensor of bucket indices in [0, num_buckets).
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    exact = num_buckets // 2
    log_scaled = (
        exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact) * (num_buckets - exact)).long()
    )
    log_scaled = log_scaled.clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < exact, distance, log_scaled)


class RelativePositionBias(PositionBias):
    """T5's learned relative position bias: one scalar per (bucket, head) added to the scores, shared by all layers.

    Args:
        num_heads: H.
        num_buckets: Buckets of the distance (T5: 32).
        max_distance: Farthest distance that gets its own log bucket (T5: 128).
        bidirectional: True in the encoder, False in a causal decoder.
    """

    def __init__(self, *, num_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True):
        super().__init__()
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    @classmethod
    def from_config(cls, config, *, bidirectional: bool) -> "RelativePositionBias":
        return cls(
            num_heads=config.num_attention_heads,
            bidirectional=bidirectional,
            num_buckets=config.relative_attention_num_buckets,
            max_distance=config.relative_attention_max_distance,
        )

    @classmethod
    def check_config(cls, config, *, bidirectional: bool) -> None:
        """T5's bucket formula (`relative_position_bucket`) keeps `exact` = half the buckets of a direction for exact
        distances and spreads the rest on a log scale from `exact` to max_distance: it divides by `exact` and by
        log(max_distance / exact), so it needs exact >= 1 and max_distance > exact (else the log buckets are negative
        and index outside the bias table once inputs are long; transformers' T5 fails the same way)."""
        num_buckets, max_distance = config.relative_attention_num_buckets, config.relative_attention_max_distance
        stack, per_direction = ("an encoder", num_buckets // 2) if bidirectional else ("a decoder", num_buckets)
        exact = per_direction // 2
        if exact < 1:
            minimum = 4 if bidirectional else 2
            raise ValueError(
                f"relative_attention_num_buckets={num_buckets} is too small for {stack}: it needs at least "
                f"{minimum} (half the buckets{' of each direction' if bidirectional else ''} hold exact "
                "distances, at least one)."
            )
        if max_distance <= exact:
            raise ValueError(
                f"relative_attention_max_distance={max_distance} must be greater than {exact}: in {stack}, "
                f"relative_attention_num_buckets={num_buckets} gives distances below {exact} a bucket each and "
                "spreads the rest on a log scale from there up to max_distance."
            )

    def bucket(self, relative_position: Tensor) -> Tensor:
        """Bucket indices of key − query distances."""
        return relative_position_bucket(
            relative_position,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """(B, T) and (B, S) positions → (B, H, T, S) bias."""
        relative = key_positions[:, None, :] - query_positions[:, :, None]  # (B, T, S)
        return self.relative_attention_bias(self.bucket(relative)).permute(0, 3, 1, 2)  # (B, H, T, S)

    def score_mod(self, query_positions: Tensor, key_positions: Tensor, batch: int):
        table = self.relative_attention_bias.weight  # (buckets, H)
        queries, keys = query_positions.expand(batch, -1), key_positions.expand(batch, -1)  # (B, T), (B, S)

        def relative_bias(score, b, h, q, kv):
            return score + table[self.bucket(keys[b, kv] - queries[b, q]), h].to(score.dtype)

        return relative_bias


# name → class; the config accepts these names and NO_POSITIONAL_ENCODING (the first is its default). Adding a scheme
# = one PositionalEncoding subclass + one entry here (and its tests).
POSITIONAL_ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "sinusoidal": SinusoidalPositionalEmbedding,
    "learned": LearnedPositionalEmbedding,
    "rotary": RotaryEmbedding,
    "alibi": ALiBiBias,
    "relative": RelativePositionBias,
}
