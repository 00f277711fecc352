"""How rotary frequencies stretch to contexts longer than training's (`rope_type`): one class per published recipe
(linear interpolation, dynamic NTK, YaRN, Llama 3.1's per-wavelength blend, LongRoPE, NTK by a fixed α), registered
by name in `ROPE_SCALINGS`. The rotary embedding (positional.py) asks its scaling for the inverse frequencies and the
factor on cos and sin; the config checks a scaling's options against its class.

This file is shipped with every checkpoint (remote code): it imports the standard library and torch only.
"""

import math

import torch
from torch import Tensor


class RopeScaling:
    """How rotary frequencies stretch to contexts longer than training's: a `rope_type` and the options it reads.

    `frequencies` gives the inverse frequencies θ_i of the rotated dimensions (float32) and the factor on cos and sin
    ("attention factor": q·k then grows by its square). Each subclass writes one published recipe, in transformers'
    order of float32 operations, so that a converted model rotates by the same bits. A scaling whose frequencies
    depend on how long the input is (`length_dependent`) gets that length at every call.

    Options are named as transformers names them in `rope_parameters`, so a converted config reads like its source.
    """

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    # The options whose value 0 the formula reads as transformers does: as "unset" (YaRN's `mscale`, whose 0 means
    # "no mscale", as None does) or as a number it computes with (a LongRoPE `factor` <= 1 means no attention
    # factor). Every other number must be > 0.
    zero_allowed: tuple[str, ...] = ()
    length_dependent = False

    @classmethod
    def check_options(cls, options: dict, *, rotary_dim: int, field: str = "rope_scaling_options") -> None:
        """Raise ValueError naming the option when `options` does not fit this scaling. `field` names the options in
        the message: ours, or the `rope_parameters` of a config being converted."""
        name = next(key for key, value in ROPE_SCALINGS.items() if value is cls)
        allowed = (*cls.required, *cls.optional)
        unknown = [key for key in options if key not in allowed]
        if unknown:
            listed = ", ".join(allowed) if allowed else "none"
            raise ValueError(
                f"{field} has {', '.join(map(repr, unknown))}, which rope_type={name!r} does not read "
                f"(it reads: {listed})."
            )
        missing = [key for key in cls.required if options.get(key) is None]
        if missing:
            raise ValueError(f"rope_type={name!r} needs {field} {', '.join(map(repr, missing))}.")
        for key, value in options.items():
            if key in ("short_factor", "long_factor"):
                if not isinstance(value, (list, tuple)) or len(value) != rotary_dim // 2:
                    raise ValueError(
                        f"{field}[{key!r}] must be a list of {rotary_dim // 2} numbers (one per rotated pair of "
                        f"dimensions), got {value!r}."
                    )
            elif key == "truncate":
                # None reads as transformers reads it: false (`if truncate:`), no rounding of the ramp's ends
                if value is not None and not isinstance(value, bool):
                    raise ValueError(f"{field}['truncate']={value!r} must be true, false or null.")
            elif value is not None and (
                not isinstance(value, (int, float))
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
                or (value == 0 and key not in cls.zero_allowed)
            ):
                bound = ">= 0" if key in cls.zero_allowed else "> 0"
                raise ValueError(f"{field}[{key!r}]={value!r} must be a number {bound} (rope_type={name!r}).")

    @staticmethod
    def base_frequencies(base, dim: int, device) -> Tensor:
        """θ_i = 1 / base^(2i/D) of the plain RoPE, float32 (D the rotated dims)."""
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim))

    @classmethod
    def frequencies(cls, *, base: float, dim: int, options: dict, max_positions: int, device, length=None):
        return cls.base_frequencies(base, dim, device), cls.attention_factor(options, max_positions)

    @classmethod
    def attention_factor(cls, options: dict, max_positions: int) -> float:
        """The factor on cos and sin (plain numbers: known before any tensor exists)."""
        return 1.0


class LinearScaling(RopeScaling):
    """Position interpolation (Chen et al. 2023): every frequency divided by `factor`, so positions up to
    factor × the training length turn no further than the training length did."""

    required = ("factor",)

    @classmethod
    def frequencies(cls, *, base, dim, options, max_positions, device, length=None):
        return cls.base_frequencies(base, dim, device) / options["factor"], 1.0


class DynamicScaling(RopeScaling):
    """NTK-aware scaling computed for the input's length L (bloc97, emozilla 2023): once L exceeds
    max_position_embeddings M, the base grows to base·(factor·L/M − (factor − 1))^(D/(D−2)), which stretches the
    slow dimensions most and leaves the fast ones nearly as trained. `RotaryEmbedding` recomputes it as inputs grow."""

    required = ("factor",)
    zero_allowed = ("factor",)  # base·(0·L/M + 1)^…: the plain frequencies, as transformers computes them
    length_dependent = True

    @classmethod
    def frequencies(cls, *, base, dim, options, max_positions, device, length=None):
        factor = options["factor"]
        if length is None:
            length = max_positions
        else:  # a 0-d tensor, as transformers computes it (the same float32 rounding)
            length = torch.maximum(length, torch.tensor(max_positions, dtype=length.dtype, device=length.device))
        base = base * ((factor * length / max_positions) - (factor - 1)) ** (dim / (dim - 2))
        return cls.base_frequencies(base, dim, device), 1.0


class NtkAlphaScaling(RopeScaling):
    """NTK-aware scaling by a fixed `alpha` (Hunyuan-7B; transformers' `compute_ntk_alpha_rope_parameters`): the base
    becomes base·α^(D/(D−2)) once, whatever the input's length, so it stretches the slow dimensions as `dynamic` does
    at α but never recomputes. transformers' checkpoints write it as rope_type "dynamic" with an `alpha`."""

    required = ("alpha",)

    @classmethod
    def frequencies(cls, *, base, dim, options, max_positions, device, length=None):
        return cls.base_frequencies(base * options["alpha"] ** (dim / (dim - 2)), dim, device), 1.0


def _original_length(options: dict, max_positions: int) -> int:
    return options.get("original_max_position_embeddings") or max_positions


class YarnScaling(RopeScaling):
    """YaRN (Peng et al. 2023): dimensions that turn many times within the original length keep their frequency,
    those that turn less than once are interpolated by `factor`, a linear ramp between; cos and sin grow by
    0.1·ln(factor) + 1 to keep the attention's entropy."""

    required = ("original_max_position_embeddings",)
    optional = ("factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate")
    # transformers reads beta_fast/beta_slow with `or` (0: 32 and 1), mscale/mscale_all_dim with `if mscale and
    # mscale_all_dim` (0: unset, as DeepSeek-style configs write it), attention_factor with `is None` (0 is a factor).
    zero_allowed = ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim")

    @staticmethod
    def _mscale(scale: float, mscale: float = 1) -> float:
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    @staticmethod
    def _factor(options: dict, max_positions: int) -> float:
        factor = options.get("factor")  # None only: transformers' `if factor is None`
        return max_positions / _original_length(options, max_positions) if factor is None else factor

    @classmethod
    def attention_factor(cls, options: dict, max_positions: int) -> float:
        factor = cls._factor(options, max_positions)
        attention_factor = options.get("attention_factor")
        mscale, mscale_all_dim = options.get("mscale"), options.get("mscale_all_dim")
        if attention_factor is None:
            if mscale and mscale_all_dim:
                attention_factor = float(cls._mscale(factor, mscale) / cls._mscale(factor, mscale_all_dim))
            else:
                attention_factor = cls._mscale(factor)
        return attention_factor

    @classmethod
    def softmax_scale_factor(cls, options: dict, max_positions: int) -> float:
        """mscale(factor, mscale_all_dim)², the factor DeepSeek's latent attention puts on its softmax scale, so on
        every dimension of q·k and not only the rotated ones (transformers' `yarn_apply_mscale`); 1.0 without
        `mscale_all_dim` (0 counts as unset, as above)."""
        mscale_all_dim = options.get("mscale_all_dim")
        if not mscale_all_dim:
            return 1.0
        return cls._mscale(cls._factor(options, max_positions), mscale_all_dim) ** 2

    @classmethod
    def frequencies(cls, *, base, dim, options, max_positions, device, length=None):
        original = _original_length(options, max_positions)
        factor = cls._factor(options, max_positions)
        attention_factor = cls.attention_factor(options, max_positions)
        beta_fast, beta_slow = options.get("beta_fast") or 32, options.get("beta_slow") or 1

        def dimension_turning(turns: float) -> float:  # the dimension that turns `turns` times in `original`
            return (dim * math.log(original / (turns * 2 * math.pi))) / (2 * math.log(base))

        low, high = dimension_turning(beta_fast), dimension_turning(beta_slow)
        if options.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001  # no zero-width ramp
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32, device=device) - low) / (high - low), 0, 1)
        extrapolated = cls.base_frequencies(base, dim, device)
        interpolated = 1.0 / (factor * (base ** (torch.arange(0, dim, 2).to(device=device, dtype=torch.float) / dim)))
        keep = 1 - ramp  # 1 for the fast dimensions, which keep their frequency
        return interpolated * (1 - keep) + extrapolated * keep, attention_factor


class Llama3Scaling(RopeScaling):
    """Llama 3.1's scaling: wavelengths shorter than original/high_freq_factor stay, longer than
    original/low_freq_factor are divided by `factor`, and those between blend the two smoothly."""

    required = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")

    @classmethod
    def frequencies(cls, *, base, dim, options, max_positions, device, length=None):
        inverse = cls.base_frequencies(base, dim, device)
        factor, low, high = options["factor"], options["low_freq_factor"], options["high_freq_factor"]
        original = options["original_max_position_embeddings"]
        low_wavelength, high_wavelength = original / low, original / high
        wavelength = 2 * math.pi / inverse
        scaled = torch.where(wavelength > low_wavelength, inverse / factor, inverse)
        smooth = (original / wavelength - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
        return torch.where(medium, blended, scaled), 1.0


class LongRopeScaling(RopeScaling):
    """LongRoPE (Ding et al. 2024; Phi-3): one searched factor per frequency, `short_factor` while the input fits
    the original length and `long_factor` beyond it; cos and sin grow by sqrt(1 + ln s / ln original) with
    s = max_position_embeddings / original."""

    required = ("short_factor", "long_factor", "original_max_position_embeddings")
    optional = ("factor", "attention_factor")
    # `factor` only chooses the attention factor (none when <= 1, so 0 too); attention_factor is read with `is None`
    zero_allowed = ("factor", "attention_factor")
    length_dependent = True

    @classmethod
    def attention_factor(cls, options: dict, max_positions: int) -> float:
        original = options["original_max_position_embeddings"]
        factor = options.get("factor")  # None only, as transformers reads it: a factor of 0 is <= 1, no scaling
        if factor is None:
            factor = max_positions / original
        attention_factor = options.get("attention_factor")
        if attention_factor is None:
            attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
        return attention_factor

    @classmethod
    def frequencies(cls, *, base, dim, options, max_positions, device, length=None):
        original = options["original_max_position_embeddings"]
        attention_factor = cls.attention_factor(options, max_positions)
        shape = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
        short = 1.0 / (torch.tensor(options["short_factor"], dtype=torch.float32, device=device) * base**shape)
        if length is None:
            return short, attention_factor
        long = 1.0 / (torch.tensor(options["long_factor"], dtype=torch.float32, device=device) * base**shape)
        # one choice for the whole batch and call, by its longest position (no host read)
        return torch.where(length > original, long, short), attention_factor


# rope_type → scaling; the config accepts these names (the first is its default).
ROPE_SCALINGS: dict[str, type[RopeScaling]] = {
    "default": RopeScaling,
    "linear": LinearScaling,
    "dynamic": DynamicScaling,
    "yarn": YarnScaling,
    "llama3": Llama3Scaling,
    "longrope": LongRopeScaling,
    "ntk_alpha": NtkAlphaScaling,
}
