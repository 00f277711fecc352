"""Multi-head latent attention (MLA): every head's key and value are decompressed from one small latent per token,
and the cache keeps only that latent.

Notation: B batch, T new tokens, S keys (cached + new), H heads, E model dim, r `kv_lora_rank`, r_q `q_lora_rank`,
n `qk_nope_head_dim`, ρ `qk_rope_head_dim`, v `v_head_dim`.

MLA (DeepSeek-AI 2024, "DeepSeek-V2", §2.1; DeepSeek-V3, Kimi K2; transformers' `DeepseekV2Attention` and
`DeepseekV3Attention`, whose parameter names and layout this module has, so their weights load by name). For each
token x:

    c = RMSNorm(W_DKV x)                  the key/value latent, r numbers (`kv_a_proj_with_mqa`, `kv_a_layernorm`)
    k_rot = RoPE(W_KR x)                  one rotated key of ρ numbers shared by every head (the same projection)
    [k_nope_h | v_h] = W_UKV_h c          each head's unrotated key (n) and value (v), decompressed (`kv_b_proj`)
    [q_nope_h | q_rot_h] = W_UQ_h RMSNorm(W_DQ x), or W_Q x without r_q; q_rot_h rotated
    score_h(t, s) = (q_nope_h · k_nope_h,s + q_rot_h · k_rot_s) · (n + ρ)^-1/2

Rotating the decompressed keys would put a rotation that depends on the key's position between W_UK and the query,
and W_UK could no longer be folded into the query (the absorbed form below): the position travels in the separate
k_rot instead ("decoupled RoPE", §2.1.3). Everything a later token needs of this one is c and k_rot: the cache
holds r + ρ numbers per token and layer (DeepSeek-V3: 512 + 64 = 576), where per-head keys and values would be
H·(n + ρ) + H·v (128 · 192 + 128 · 128 = 40 960).

From the cache to attention, two ways that give the same numbers (to float rounding):

- expanded (`expand_latents`), for a call with no cached tokens before it (a prompt, training): the latents of every
  position are decompressed into per-head keys (B, H, S, n + ρ) and values (B, H, S, v), as transformers does; the
  attention function sees ordinary multi-head attention.
- absorbed, for a call that reads cached tokens (decoding; with a static cache, whose length is fixed, every call),
  with our attention functions: W_UK is folded into the
  query and W_UV applied after the weighted sum (DeepSeek-V2 §2.1.2),
      q_nope_h · (W_UK_h c) = (W_UK_hᵀ q_nope_h) · c,        Σ_s p_s W_UV_h c_s = W_UV_h Σ_s p_s c_s,
  so the attention runs over the cache as it is: multi-query attention whose one key head is [c | k_rot] (r + ρ) and
  whose one value head is c (r), scaled as above. A decoding step then never decompresses the S cached latents
  (S·r·H·(n + v) products per step); it projects its T queries and outputs instead (T·H·r·(n + v)). SDPA and
  FlexAttention serve the one key head to every query head in place (`enable_gqa`); eager attention repeats it. Other
  attention functions (registered with transformers, or passed in) always get the expanded keys and values, the
  layout they are written for.

The value width v may differ from the query/key width n + ρ (and the absorbed value width r from r + ρ): SDPA,
FlexAttention and eager attention take values of their own width, so nothing is padded.

The cache (`LatentCacheLayer`, `latent_cache`) is a transformers `DynamicCache` whose latent attention slots hold c
as their "keys" (B, 1, S, r) and k_rot as their "values" (B, 1, S, ρ): every operation transformers' caches run
(beam reorders, batch selection, crops, offloading) applies unchanged. Any other cache layer works too (this module
calls `Cache.update` as transformers' DeepSeek does, which stores the same two tensors in a plain `DynamicLayer`).
"""

import torch
from torch import Tensor, nn
from transformers import PretrainedConfig
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from .attention import ATTENTION_BACKENDS, apply_rotary, eager_attention_forward, sdpa_attention_forward
from .attention_backends import get_attention_backend
from .flex import flex_attention_forward
from .norms import RMSNorm
from .rope_scaling import YarnScaling

# ε of the two latent norms: DeepSeek's RMSNorm default, which transformers' DeepSeek-V2/V3 keep whatever the config's
# own epsilon (`DeepseekV3RMSNorm(q_lora_rank)`).
LATENT_NORM_EPS = 1e-6
# The attention functions that take the absorbed form (one key/value head of another width than the queries').
_ABSORBING = (eager_attention_forward, sdpa_attention_forward, flex_attention_forward)


def pair_halves(x: Tensor) -> Tensor:
    """(x0, x1, x2, x3, …) → (x0, x2, …, x1, x3, …): DeepSeek's checkpoints rotate adjacent pairs; gathering the
    even dims, then the odd ones, makes them the (x_i, x_{i+ρ/2}) halves that `apply_rotary` turns. Queries and keys
    are reordered alike, so q·k is unchanged (transformers' `apply_rotary_pos_emb_interleave` gives the same
    layout)."""
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)


def latent_attention_scale(config: PretrainedConfig) -> float:
    """(n + ρ)^-1/2, times YaRN's mscale(factor, mscale_all_dim)² when the config stretches RoPE with YaRN and sets
    `mscale_all_dim` (DeepSeek-V3: the softmax scale grows with every dim, not only the rotated ones; transformers'
    `yarn_apply_mscale`)."""
    scale = (config.qk_nope_head_dim + config.qk_rope_head_dim) ** -0.5
    if config.position_encoding == "rotary" and config.rope_type == "yarn":
        scale *= YarnScaling.softmax_scale_factor(config.rope_scaling_options, config.max_position_embeddings)
    return scale


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2 §2.1), a decoder's self-attention whose cache is one latent per token.

    Called as `MultiHeadAttention` is for self-attention: hidden states, then the mask, the rotary tables, a score
    bias and the cache by name.

    Args:
        hidden_size: E.
        num_heads: H.
        kv_lora_rank: r, the width of the key/value latent c.
        qk_nope_head_dim: n, the query/key dims per head decompressed from c.
        qk_rope_head_dim: ρ, the query/key dims per head that rotate (the key's shared by every head).
        v_head_dim: v, the value dims per head.
        q_lora_rank: r_q, the queries' own low-rank path (None: one projection E → H·(n + ρ)).
        bias: Biases on the two down-projections (`q_a_proj`, `kv_a_proj_with_mqa`), as transformers'
            `attention_bias`; the up-projections have none.
        output_bias: A bias on the output projection; None: as `bias`.
        dropout: Attention-weight dropout (training only).
        is_causal: Queries see only earlier keys.
        layer_idx: Index of the layer, the key of its cache slot.
        scaling: Factor on q·k; None: (n + ρ)^-1/2.
        rope_interleave: The rotated dims pair up as adjacent dims (DeepSeek's checkpoints) rather than as halves.
        config: The model's config, whose `_attn_implementation` names the attention function at each call; None
            runs SDPA.
    """

    def __init__(
        self,
        *,
        hidden_size: int,
        num_heads: int,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        bias: bool = False,
        output_bias: bool | None = None,
        dropout: float = 0.0,
        is_causal: bool = True,
        layer_idx: int | None = None,
        scaling: float | None = None,
        rope_interleave: bool = False,
        config: PretrainedConfig | None = None,
    ):
        super().__init__()
        self.num_heads = num_heads
        self.kv_lora_rank, self.q_lora_rank = kv_lora_rank, q_lora_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.dropout = dropout
        self.is_causal = is_causal
        self.layer_idx = layer_idx
        self.scaling = self.qk_head_dim**-0.5 if scaling is None else scaling
        self.rope_interleave = rope_interleave
        self.config = config
        query_width = num_heads * self.qk_head_dim
        if q_lora_rank is None:
            # queries straight from x: E → H·(n + ρ)
            self.q_proj = nn.Linear(hidden_size, query_width, bias=False)
            self.q_a_proj = self.q_a_layernorm = self.q_b_proj = None
        else:
            self.q_proj = None
            # queries through their own latent: down to r_q, normalised, up to H·(n + ρ)
            self.q_a_proj = nn.Linear(hidden_size, q_lora_rank, bias=bias)
            self.q_a_layernorm = RMSNorm(q_lora_rank, eps=LATENT_NORM_EPS)
            self.q_b_proj = nn.Linear(q_lora_rank, query_width, bias=False)
        # down to the key/value latent c (r) and the shared key k_rot (ρ): all the cache keeps of a token
        self.kv_a_proj_with_mqa = nn.Linear(hidden_size, kv_lora_rank + qk_rope_head_dim, bias=bias)
        self.kv_a_layernorm = RMSNorm(kv_lora_rank, eps=LATENT_NORM_EPS)  # normalises c before it is cached
        # up from c to each head's unrotated key (n) and value (v), laid out head by head: [k_nope_h | v_h]
        self.kv_b_proj = nn.Linear(kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False)
        # the heads' values back to the model width
        self.o_proj = nn.Linear(num_heads * v_head_dim, hidden_size, bias=bias if output_bias is None else output_bias)

    @classmethod
    def from_config(
        cls, config: PretrainedConfig, layer_idx: int, is_causal: bool = True
    ) -> "MultiHeadLatentAttention":
        """The latent attention layer of the config's `kv_lora_rank`, `q_lora_rank`, head widths and biases."""
        return cls(
            hidden_size=config.hidden_size,
            num_heads=config.num_attention_heads,
            kv_lora_rank=config.kv_lora_rank,
            qk_nope_head_dim=config.qk_nope_head_dim,
            qk_rope_head_dim=config.qk_rope_head_dim,
            v_head_dim=config.v_head_dim,
            q_lora_rank=config.q_lora_rank,
            bias=config.attention_bias,
            output_bias=config.attention_output_bias,
            dropout=config.attention_dropout,
            is_causal=is_causal,
            layer_idx=layer_idx,
            scaling=latent_attention_scale(config),
            rope_interleave=config.rope_interleave,
            config=config,
        )

    def project_query(self, hidden_states: Tensor) -> tuple[Tensor, Tensor]:
        """(B, T, E) → q_nope (B, H, T, n) and q_rot (B, H, T, ρ), not yet rotated."""
        if self.q_proj is not None:
            query = self.q_proj(hidden_states)
        else:
            query = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
        batch, length, _ = hidden_states.shape
        query = query.view(batch, length, self.num_heads, self.qk_head_dim).transpose(1, 2)
        return query.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

    def project_latents(self, hidden_states: Tensor) -> tuple[Tensor, Tensor]:
        """(B, T, E) → the normalised latent c (B, 1, T, r) and the key k_rot (B, 1, T, ρ), not yet rotated: one
        "head" each, the shape every cache layer stores."""
        latent, rotated_key = self.kv_a_proj_with_mqa(hidden_states).split(
            [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1
        )
        return self.kv_a_layernorm(latent)[:, None], rotated_key[:, None]

    def rotate(self, query: Tensor, key: Tensor, position_embeddings: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """RoPE on the ρ rotated dims of the queries (B, H, T, ρ) and of the shared key (B, 1, T, ρ)."""
        if self.rope_interleave:
            query, key = pair_halves(query), pair_halves(key)
        return apply_rotary(query, *position_embeddings), apply_rotary(key, *position_embeddings)

    def expand_latents(self, latent: Tensor, rotated_key: Tensor) -> tuple[Tensor, Tensor]:
        """The per-head keys (B, H, S, n + ρ) and values (B, H, S, v) of cached latents (B, 1, S, r) and rotated keys
        (B, 1, S, ρ): [W_UK_h c | k_rot] and W_UV_h c, what per-head attention would have cached."""
        batch, _, length, _ = latent.shape
        decompressed = self.kv_b_proj(latent[:, 0]).view(batch, length, self.num_heads, -1).transpose(1, 2)
        key_nope, value = decompressed.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        key = torch.cat((key_nope, rotated_key.expand(-1, self.num_heads, -1, -1)), dim=-1)
        return key, value

    def up_projections(self) -> tuple[Tensor, Tensor]:
        """`kv_b_proj`'s weight as W_UK (H, n, r) and W_UV (H, v, r): the absorbed form's factors."""
        weight = self.kv_b_proj.weight.view(self.num_heads, self.qk_nope_head_dim + self.v_head_dim, -1)
        return weight.split([self.qk_nope_head_dim, self.v_head_dim], dim=1)

    def forward(
        self,
        hidden_states: Tensor,
        *,
        attention_mask: Tensor | None = None,
        position_embeddings: tuple[Tensor, Tensor] | None = None,
        position_bias: Tensor | None = None,
        cache: Cache | None = None,
        attention_function=None,
        output_attentions: bool = False,
        **kwargs,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from `hidden_states` (B, T, E) to itself and the cached tokens; arguments as
        `MultiHeadAttention.forward`'s. Returns (B, T, E) and the (B, H, T, S) weights when the backend computes
        them."""
        batch, length, _ = hidden_states.shape
        query_nope, query_rot = self.project_query(hidden_states)  # (B, H, T, n), (B, H, T, ρ)
        latent, rotated_key = self.project_latents(hidden_states)  # (B, 1, T, r), (B, 1, T, ρ)
        if position_embeddings is not None:
            query_rot, rotated_key = self.rotate(query_rot, rotated_key, position_embeddings)
        if cache is not None:
            if not isinstance(cache, Cache):
                raise ValueError(
                    f"latent attention layers cache their latents in a transformers Cache (DynamicCache), not in a "
                    f"{type(cache).__name__}: continuous batching's paged cache holds per-head keys and values."
                )
            latent, rotated_key = cache.update(latent, rotated_key, self.layer_idx)  # (B, 1, S, r), (B, 1, S, ρ)
        function = attention_function or self.backend_function(output_attentions)
        common = {
            "scaling": self.scaling,
            "dropout": self.dropout if self.training else 0.0,
            "position_bias": position_bias,
            **kwargs,
        }
        if latent.shape[2] > length and function in _ABSORBING:  # reading cached tokens: the absorbed form
            up_key, up_value = self.up_projections()
            query = torch.cat((torch.matmul(query_nope, up_key), query_rot), dim=-1)  # (B, H, T, r + ρ)
            key = torch.cat((latent, rotated_key), dim=-1)  # (B, 1, S, r + ρ)
            output, weights = function(self, query, key, latent, attention_mask, **common)  # (B, T, H, r)
            output = torch.matmul(output.transpose(1, 2), up_value.transpose(1, 2)).transpose(1, 2)  # (B, T, H, v)
        else:
            key, value = self.expand_latents(latent, rotated_key)  # (B, H, S, n + ρ), (B, H, S, v)
            query = torch.cat((query_nope, query_rot), dim=-1)  # (B, H, T, n + ρ)
            output, weights = function(self, query, key, value, attention_mask, **common)  # (B, T, H, v)
        return self.o_proj(output.reshape(batch, length, self.num_heads * self.v_head_dim)), weights

    def backend_function(self, output_attentions: bool = False):
        """The attention function of `config._attn_implementation`, looked up at each call (eager when the weights
        are asked for, SDPA without a config), as `MultiHeadAttention.backend_function`."""
        if output_attentions:
            return eager_attention_forward
        if self.config is None:
            return sdpa_attention_forward
        name = self.config._attn_implementation
        return (ATTENTION_BACKENDS.get(name) or get_attention_backend(name)).function


class LatentCacheLayer(DynamicLayer):
    """The cache slot of one latent attention layer: per token, the normalised latent c and the rotated key k_rot,
    nothing per head.

    They are held where a `DynamicLayer` holds keys and values, `keys` (B, 1, S, r) and `values` (B, 1, S, ρ), so
    that every operation transformers' caches run on a layer (beam search's reorders, batch selection and
    repetition, crops, offloading) applies unchanged; `latents` and `rotated_keys` name them. The layer refuses
    per-head states (a second axis other than 1: a per-head attention layer writing to this slot) and tells its size
    (`bytes_per_token`).
    """

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs) -> tuple[Tensor, Tensor]:
        """Append latents (B, 1, T, r) and rotated keys (B, 1, T, ρ); returns all of them, (B, 1, S, ·) each."""
        if key_states.shape[1] != 1 or value_states.shape[1] != 1:
            raise ValueError(
                f"A LatentCacheLayer holds one latent and one rotated key per token, (B, 1, T, ·) each; got "
                f"{tuple(key_states.shape)} and {tuple(value_states.shape)}: per-head keys and values belong in a "
                "DynamicLayer."
            )
        return super().update(key_states, value_states, *args, **kwargs)

    @property
    def latents(self) -> Tensor | None:
        """c, (B, 1, S, r)."""
        return self.keys

    @property
    def rotated_keys(self) -> Tensor | None:
        """k_rot, (B, 1, S, ρ)."""
        return self.values

    def bytes_per_token(self) -> int:
        """Bytes one cached position of one sequence takes here: (r + ρ) × the element size (0 while empty)."""
        positions = self.keys.shape[0] * self.keys.shape[2] if self.get_seq_length() else 0
        if not positions:
            return 0
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values)) // positions


def latent_cache(config: PretrainedConfig) -> DynamicCache:
    """`DynamicCache(config=config)` with a `LatentCacheLayer` in the slot of every latent attention layer (the
    layers `layer_types` calls full_attention when `kv_lora_rank` is set; other kinds keep transformers' layers)."""
    cache = DynamicCache(config=config)
    for index, kind in enumerate(config.attention_types()):
        if kind == "full_attention":
            cache.layers[index] = LatentCacheLayer()
    return cache
