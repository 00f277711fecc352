"""Gated DeltaNet: linear attention whose state is a fast-weight memory rewritten by the gated delta rule.

Notation: B batch, T new tokens, E model dim, Hk query/key heads, Hv value heads (a multiple of Hk), Dk and Dv their
widths, K convolution taps, C chunk length.

Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks: Improving Mamba2 with Delta Rule"; the
`linear_attention` layers of Qwen3-Next and Qwen3.5, transformers' `Qwen3NextGatedDeltaNet`) replaces softmax
attention by a recurrence. Each value head keeps a state S (Dk × Dv, a matrix that maps keys to values); at token t,
with gate g_t ≤ 0 and write strength β_t ∈ (0, 1):

    S ← S · e^{g_t}                       forget: the whole memory decays (Mamba2's gate)
    S ← S + k_t ⊗ β_t (v_t − Sᵀ k_t)       delta rule: move what S recalls for k_t towards v_t (Widrow & Hoff 1960;
                                           DeltaNet, Schlag et al. 2021)
    o_t = Sᵀ q_t                           read

so the cost is linear in the length and a decoder's cache is S and the convolution's last K inputs: constant in the
length. Training and prefill run the same recurrence chunk by chunk (`chunked_gated_delta_rule`: within a chunk, the
UT transform of Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length", turns
C updates into triangular solves and products); decoding runs it one token at a time
(`recurrent_gated_delta_rule`). Both are transformers' `torch_chunk_gated_delta_rule` and
`torch_recurrent_gated_delta_rule`, written out here.

Parameter layout. The module's parameters are Qwen3.5's (`Qwen3_5GatedDeltaNet`), by name and shape: `in_proj_qkv`
(rows: every query head, then every key head, then every value head), `in_proj_z`, `in_proj_b`, `in_proj_a`,
`conv1d`, `dt_bias`, `A_log`, `norm`, `out_proj`, so a Qwen3.5 layer converts by copying. Qwen3-Next packs the same
rows per key head into `in_proj_qkvz` and `in_proj_ba` (its `fix_query_key_value_ordering`): they convert by regrouping
rows (architectures/qwen3_next.py). The convolution's channels are [q, k, v] in both. No projection has a bias, the
convolution's activation is SiLU and the output norm a plain RMSNorm, as in both models.

The cache is transformers' own: `DynamicCache(config=...)` makes a `LinearAttentionLayer` for each layer that
`layer_types` calls `linear_attention`, holding the convolution state (B, 2·Hk·Dk + Hv·Dv, K) and the recurrent state
(B, Hv, Dk, Dv); its `reorder_cache` serves beam search, and its past recording (`get_recurrent_states_to_keep`) the
rollbacks of assisted decoding.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, LinearAttentionCacheLayerMixin

from .norms import RMSNorm

# Whether transformers' cache records a linear-attention layer's past states (5.24 on), so that assisted decoding can
# roll it back over rejected tokens; without it, a state cannot return to an earlier token.
CACHE_RECORDS_PAST_STATES = hasattr(DynamicCache, "get_recurrent_states_to_keep")
CHUNK_SIZE = 64  # C of the chunked form: transformers' and the FLA kernels' default
CONV_KERNEL_SIZE = 4  # K when `linear_conv_kernel_dim` is None: Qwen3-Next's and Qwen3.5's


def l2_normalize(x: Tensor, eps: float = 1e-6) -> Tensor:
    """x / sqrt(Σx² + ε) over the last dim: ε inside the root, as the FLA kernels and transformers' `l2norm`."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def recurrent_gated_delta_rule(
    query: Tensor, key: Tensor, value: Tensor, decay: Tensor, beta: Tensor, state: Tensor
) -> tuple[Tensor, list[Tensor]]:
    """The gated delta rule one token at a time (decoding; transformers' `torch_recurrent_gated_delta_rule`).

    Args:
        query, key: (B, Hv, T, Dk), normalised (and q scaled), float32.
        value: (B, Hv, T, Dv).
        decay: (B, Hv, T), g_t ≤ 0 (log of the forget factor).
        beta: (B, Hv, T), β_t.
        state: (B, Hv, Dk, Dv), S before the first token.

    Returns:
        The outputs (B, Hv, T, Dv), and the state after each token (the last one is the final state).
    """
    outputs, states = [], []
    for t in range(query.shape[2]):
        k_t = key[:, :, t, :, None]  # (B, Hv, Dk, 1)
        state = state * decay[:, :, t].exp()[..., None, None]  # S ← S·e^{g_t}
        recalled = (state * k_t).sum(dim=-2)  # Sᵀk_t: what the memory returns for k_t, (B, Hv, Dv)
        correction = beta[:, :, t, None] * (value[:, :, t] - recalled)  # β_t (v_t − Sᵀk_t)
        state = state + k_t * correction[:, :, None, :]  # S ← S + k_t ⊗ β_t (v_t − Sᵀk_t)
        outputs.append((state * query[:, :, t, :, None]).sum(dim=-2))  # o_t = Sᵀq_t
        states.append(state)
    return torch.stack(outputs, dim=2), states


def chunked_gated_delta_rule(
    query: Tensor, key: Tensor, value: Tensor, decay: Tensor, beta: Tensor, state: Tensor, chunk_size: int
) -> tuple[Tensor, Tensor]:
    """The gated delta rule over chunks of C tokens (training, prefill; transformers' `torch_chunk_gated_delta_rule`).

    Within a chunk, with S₀ the state at its start and Γ_t = e^{g_1 + … + g_t} the decay from its start to token t,
    the recurrence unrolls to S_t = Γ_t S₀ + Σ_{s≤t} (Γ_t / Γ_s) k_s u_sᵀ, where u_s = β_s (v_s − (e^{g_s} S_{s−1})ᵀ
    k_s) is what token s writes. Substituting S_{s−1} gives a unit lower-triangular system for all u of the chunk at
    once (the UT transform, Yang et al. 2024):

        (I + A) U = diag(β) V − diag(βΓ) K S₀,    A_sr = β_s (Γ_s / Γ_r) k_sᵀ k_r  for r < s,

    and then o_t = Γ_t S₀ᵀ q_t + Σ_{s≤t} (Γ_t / Γ_s)(q_tᵀ k_s) u_s, S_C = Γ_C S₀ + Σ_s (Γ_C / Γ_s) k_s u_sᵀ. Only the
    last two steps run chunk after chunk.

    Args:
        query, key, value, decay, beta, state: As `recurrent_gated_delta_rule` (T ≥ 1).
        chunk_size: C.

    Returns:
        The outputs (B, Hv, T, Dv) and the final state (B, Hv, Dk, Dv).
    """
    length = query.shape[2]
    # Right-pad to whole chunks: a padded step has k = 0, β = 0 and g = 0, so it neither decays nor writes the state.
    pad = -length % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad)) for x in (query, key, value))
    decay, beta = (F.pad(x, (0, pad)) for x in (decay, beta))
    chunks = (length + pad) // chunk_size
    # (B, Hv, N, C, D) and (B, Hv, N, C)
    query, key, value = (x.unflatten(2, (chunks, chunk_size)) for x in (query, key, value))
    decay, beta = (x.unflatten(2, (chunks, chunk_size)) for x in (decay, beta))

    log_decay = decay.cumsum(dim=-1)  # log Γ_t within each chunk
    # Γ_t / Γ_s for s ≤ t, 0 above the diagonal; taken in log space so that it never overflows
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device).tril()
    between = (log_decay[..., :, None] - log_decay[..., None, :]).masked_fill(~causal, float("-inf")).exp()
    key_beta = key * beta[..., None]
    # I + A: the solve reads only the strictly lower triangle (its diagonal is taken as 1)
    system = (key_beta @ key.transpose(-1, -2)) * between
    # U = (I + A)⁻¹ diag(β) V − (I + A)⁻¹ diag(βΓ) K · S₀: the two solves do not depend on S₀
    written = torch.linalg.solve_triangular(system, value * beta[..., None], upper=False, unitriangular=True)
    read_back = torch.linalg.solve_triangular(
        system, key_beta * log_decay.exp()[..., None], upper=False, unitriangular=True
    )
    scores = (query @ key.transpose(-1, -2)) * between  # (Γ_t / Γ_s) q_tᵀ k_s for s ≤ t
    decayed_query = query * log_decay.exp()[..., None]  # Γ_t q_t
    chunk_decay = log_decay[..., -1:]  # log Γ_C
    key_to_end = key * (chunk_decay - log_decay).exp()[..., None]  # (Γ_C / Γ_s) k_s
    outputs = []
    for n in range(chunks):
        updates = written[:, :, n] - read_back[:, :, n] @ state  # U of chunk n, given its S₀
        outputs.append(decayed_query[:, :, n] @ state + scores[:, :, n] @ updates)  # o_t
        state = state * chunk_decay[:, :, n].exp()[..., None] + key_to_end[:, :, n].transpose(-1, -2) @ updates
    return torch.cat(outputs, dim=2)[:, :, :length], state


class GatedDeltaNet(nn.Module):
    """The Gated DeltaNet token mixer of a `linear_attention` layer (see the module docstring).

    Args:
        hidden_size: E.
        num_key_heads, num_value_heads: Hk, Hv (Hv a multiple of Hk).
        key_head_dim, value_head_dim: Dk, Dv.
        conv_kernel_size: K.
        norm_eps: ε of the output's RMSNorm.
        layer_idx: The layer's index, its slot in the cache.
        chunk_size: C of the chunked form.
    """

    def __init__(
        self,
        *,
        hidden_size: int,
        num_key_heads: int,
        num_value_heads: int,
        key_head_dim: int,
        value_head_dim: int,
        conv_kernel_size: int,
        norm_eps: float,
        layer_idx: int,
        chunk_size: int = CHUNK_SIZE,
    ):
        super().__init__()
        self.num_key_heads, self.num_value_heads = num_key_heads, num_value_heads
        self.key_head_dim, self.value_head_dim = key_head_dim, value_head_dim
        self.layer_idx = layer_idx
        self.chunk_size = chunk_size
        key_dim, value_dim = num_key_heads * key_head_dim, num_value_heads * value_head_dim
        self.split_sizes = [key_dim, key_dim, value_dim]  # the channels [q, k, v] of the projection and convolution
        channels = 2 * key_dim + value_dim
        self.in_proj_qkv = nn.Linear(hidden_size, channels, bias=False)
        self.in_proj_z = nn.Linear(hidden_size, value_dim, bias=False)  # the output gate's input
        self.in_proj_b = nn.Linear(hidden_size, num_value_heads, bias=False)  # β = σ(b)
        self.in_proj_a = nn.Linear(hidden_size, num_value_heads, bias=False)  # g from softplus(a + dt_bias)
        # a depthwise filter per channel, applied causally (F.conv1d in `convolve`: the padding here is not used)
        self.conv1d = nn.Conv1d(channels, channels, conv_kernel_size, groups=channels, bias=False)
        # Mamba2's discretisation (Dao & Gu 2024): g = −exp(A_log)·softplus(a + dt_bias); A starts in [0.01, 16]
        self.dt_bias = nn.Parameter(torch.ones(num_value_heads))
        self.A_log = nn.Parameter(torch.empty(num_value_heads).uniform_(0.01, 16).log())
        self.norm = RMSNorm(value_head_dim, eps=norm_eps)
        self.out_proj = nn.Linear(value_dim, hidden_size, bias=False)

    def init_weights(self, std: float) -> None:
        """The start of the parameters it holds directly, as transformers' Qwen3-Next starts them (its projections
        are nn.Linear layers, started by the models' `_init_weights`): the filter normal(0, std), dt_bias 1, A drawn
        in [0.01, 16]."""
        init.normal_(self.conv1d.weight, mean=0.0, std=std)
        init.ones_(self.dt_bias)
        init.copy_(self.A_log, torch.empty_like(self.A_log).uniform_(0.01, 16).log_())

    @classmethod
    def from_config(cls, config, layer_idx: int) -> "GatedDeltaNet":
        """The mixer of layer `layer_idx` of a decoder config (its `linear_*` sizes, derived when it was built)."""
        return cls(
            hidden_size=config.hidden_size,
            num_key_heads=config.linear_num_key_heads,
            num_value_heads=config.linear_num_value_heads,
            key_head_dim=config.linear_key_head_dim,
            value_head_dim=config.linear_value_head_dim,
            conv_kernel_size=config.linear_conv_kernel_dim,
            norm_eps=config.layer_norm_eps,
            layer_idx=layer_idx,
        )

    def forward(
        self,
        hidden_states: Tensor,
        position_bias: Tensor | None = None,
        *,
        attention_mask: Tensor | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> tuple[Tensor, None]:
        """(B, T) new tokens' states (B, T, E) → (B, T, E), and no attention weights (there are none).

        `attention_mask` is the new tokens' (B, T) 0/1 padding mask (the stack gives it when some token is padding,
        None otherwise): padded positions are zeroed before anything else (transformers'
        `apply_mask_to_padding_states`), so in a left-padded row they write nothing into the state. Positions, score
        biases and other keyword arguments are for attention layers and are not read.
        """
        if attention_mask is not None:
            hidden_states = (hidden_states * attention_mask[:, :, None]).to(hidden_states.dtype)
        batch, length, _ = hidden_states.shape
        # read before the convolution updates the cache, which marks the layer as holding a previous state
        state = cache.get_recurrent_state(self.layer_idx) if self._reads_cache(cache) else None
        mixed = self.convolve(self.in_proj_qkv(hidden_states).transpose(1, 2), cache).transpose(1, 2)
        query, key, value = mixed.split(self.split_sizes, dim=-1)
        query = query.reshape(batch, length, self.num_key_heads, self.key_head_dim)
        key = key.reshape(batch, length, self.num_key_heads, self.key_head_dim)
        value = value.reshape(batch, length, self.num_value_heads, self.value_head_dim)
        beta = self.in_proj_b(hidden_states).sigmoid()  # β = σ(b): how much of the correction is written
        # g = −exp(A_log)·softplus(a + dt_bias) ≤ 0, in float32 (exp(A_log) may overflow half precision)
        decay = -self.A_log.float().exp() * F.softplus(self.in_proj_a(hidden_states).float() + self.dt_bias)
        output = self.delta_rule(query, key, value, decay, beta, state, cache)  # (B, T, Hv, Dv)
        # o = RMSNorm(o)·w·SiLU(z) per value head (Qwen3-Next's gated RMSNorm), then the output projection
        gate = self.in_proj_z(hidden_states).reshape(batch, length, self.num_value_heads, self.value_head_dim)
        output = (self.norm(output) * F.silu(gate.float())).to(hidden_states.dtype)
        return self.out_proj(output.reshape(batch, length, -1)), None

    def convolve(self, mixed: Tensor, cache: Cache | None) -> Tensor:
        """(B, 2·Hk·Dk + Hv·Dv, T) → the same: each channel's K-tap causal filter, then SiLU (transformers'
        `causal_conv1d_forward`). With a cache, the last K inputs of the earlier calls are the left context (zeros
        before the first), and the cache keeps the last K inputs of this one."""
        length, taps = mixed.shape[-1], self.conv1d.kernel_size[0]
        if cache is not None:  # (B, channels, K + T) after earlier calls, (B, channels, max(T, K)) on the first
            mixed = cache.update_conv_state(mixed, self.layer_idx, conv_kernel_size=taps)
        filtered = F.conv1d(mixed, self.conv1d.weight, padding=taps - 1, groups=mixed.shape[1])[..., : mixed.shape[-1]]
        return F.silu(filtered[..., -length:])

    def delta_rule(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        decay: Tensor,
        beta: Tensor,
        state: Tensor | None,
        cache: Cache | None,
    ) -> Tensor:
        """The gated delta rule over the new tokens from the cached state (zeros without one), the new state written
        back to the cache: one token after cached ones runs the recurrent form, anything else the chunked form.
        (B, T, H, D) inputs → (B, T, Hv, Dv)."""
        dtype, length = query.dtype, query.shape[1]
        group = self.num_value_heads // self.num_key_heads
        # each query/key head serves `group` consecutive value heads
        query, key = (x.repeat_interleave(group, dim=2) for x in (query, key))
        # (B, Hv, T, D) in float32, as transformers' and the FLA kernels compute
        query, key, value, decay, beta = (x.transpose(1, 2).float() for x in (query, key, value, decay, beta))
        # unit queries and keys (so that the delta rule's step is bounded), queries over √Dk
        query = l2_normalize(query) * self.key_head_dim**-0.5
        key = l2_normalize(key)
        if state is not None and length == 1:  # decoding: one token after cached ones
            output, states = recurrent_gated_delta_rule(query, key, value, decay, beta, state.to(value))
            final = states[-1]
        else:
            final = value.new_zeros(value.shape[0], self.num_value_heads, self.key_head_dim, self.value_head_dim)
            if state is not None:  # more tokens after cached ones (chunked prefill, assisted decoding)
                final = state.to(value)
            # Assisted decoding may roll the cache back over up to `keep` of the last tokens (transformers' past
            # recording): those run the recurrent form, which gives the state after each, and the cache gets the state
            # before them too. (transformers' own layers leave that one out, so that rejecting every drafted token
            # restores the state before the call, not after its first token: their prompt lookup then strays from
            # greedy decoding, in 5.25.)
            # (transformers before 5.24 records no past states: nothing to keep)
            states_to_keep = getattr(cache, "get_recurrent_states_to_keep", None)
            keep = min(states_to_keep(self.layer_idx) or 0, length) if states_to_keep is not None else 0
            parts = []
            if length > keep:
                chunked = (x[:, :, : length - keep] for x in (query, key, value, decay, beta))
                output, final = chunked_gated_delta_rule(*chunked, final, self.chunk_size)
                parts.append(output)
            if keep:
                recurrent = (x[:, :, length - keep :] for x in (query, key, value, decay, beta))
                output, states = recurrent_gated_delta_rule(*recurrent, final)
                parts.append(output)
                final = [final, *states]  # the cache keeps the last as its state, the others to roll back to
            output = torch.cat(parts, dim=2) if len(parts) > 1 else parts[0]
        if cache is not None:
            cache.update_recurrent_state(final, self.layer_idx)
        return output.transpose(1, 2).to(dtype)

    def _reads_cache(self, cache: Cache | None) -> bool:
        """Whether there is a cache; raises ValueError when its slot for this layer holds no linear-attention state
        (a cache made without the config)."""
        if cache is None:
            return False
        layers = getattr(cache, "layers", ())
        if self.layer_idx < len(layers) and isinstance(layers[self.layer_idx], LinearAttentionCacheLayerMixin):
            return True
        held = type(layers[self.layer_idx]).__name__ if self.layer_idx < len(layers) else "nothing"
        raise ValueError(
            f"Layer {self.layer_idx} is a 'linear_attention' layer, and the cache given ({type(cache).__name__}) "
            f"holds {held} for it: make the cache with DynamicCache(config=model.config), which gives these layers "
            "their convolution and recurrent states (transformers' LinearAttentionLayer)."
        )
