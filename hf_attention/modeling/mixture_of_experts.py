"""The mixture-of-experts feed-forward network: a router picks k of X gated feed-forward networks for each token.

Notation: N tokens (batch × length, flattened), E model dim, X experts, k experts per token, F an expert's width.

A sparse layer (Shazeer et al. 2017; Switch Transformer, Fedus et al. 2021; Mixtral, Jiang et al. 2024) replaces the
one feed-forward network of a layer by X of them and a router, a linear map E → X whose scores choose, per token, the
k experts that run on it and the weights their outputs are mixed with: y = Σ_{e ∈ topk} w_e · FFN_e(x). Each token
pays for k experts while the layer holds X: parameters grow without the compute per token.

How the scores become choices and weights is the router's kind (`ROUTERS`, by the config's `router`): a softmax then
the k best (Mixtral, Qwen-MoE, OLMoE), the k best then a softmax over them (GPT-OSS), sigmoids chosen within the best
groups of experts with a learned balancing bias (DeepSeek-V3, GLM-4.5), or the k best whose sigmoids scale the
experts' inputs (Llama 4). The experts are gated networks, SwiGLU-like, optionally with biases and clamps (GPT-OSS).
A shared expert, which every token runs, may join the routed ones, plain (DeepSeek-V3, Llama 4) or behind a sigmoid
gate (Qwen2-MoE, Qwen3-Next).

The experts' weights are held as transformers holds them in memory (one (X, 2F, E) tensor for the gate and up
projections of all experts, one (X, E, F) for the down projections), so that a converted model's experts are a copy,
or a transpose (a view, which the export writes through) of layouts that put E first. They run without a Python loop
over tokens: the (token, expert) pairs are sorted by expert and each expert that has some multiplies its rows at once
(a grouped matrix product; a decoding step reaches only k experts). Gathering each pair's matrices for one batched
product instead copies them: on a CPU that was slower at every size measured, a decoding step's included.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from transformers import initialization as init

from .activations import GATED_ACTIVATIONS, activation_function


class Routing(NamedTuple):
    """A router's decision for N tokens: its raw scores (N, X), and per token the k experts (N, k) and the weights
    (N, k) their outputs are mixed with (or, for a router whose kind `scales_inputs`, their inputs are scaled by)."""

    logits: Tensor
    experts: Tensor
    weights: Tensor


class Router(nn.Module):
    """The scores of the X experts for each token, a linear map E → X (with a bias: GPT-OSS); each kind below turns
    them into a `Routing`. Its scores are what `recording_router_logits` records."""

    def __init__(self, *, hidden_size: int, num_experts: int, top_k: int, bias: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, hidden_size))
        if bias:
            self.bias = nn.Parameter(torch.empty(num_experts))
        else:
            self.register_parameter("bias", None)
        self.top_k = top_k

    def init_weights(self, std: float) -> None:
        init.normal_(self.weight, mean=0.0, std=std)
        if self.bias is not None:
            init.normal_(self.bias, mean=0.0, std=std)  # as GPT-OSS starts its router's bias


class SoftmaxTopKRouter(Router):
    """Softmax over all experts' scores, then the k largest probabilities (Mixtral, Qwen3-MoE, OLMoE).

    With `normalize` the k probabilities are divided by their sum (Mixtral; Qwen3-MoE's `norm_topk_prob`), so the
    mixture weights sum to 1; without, they are the probabilities themselves (OLMoE), which sum to less.
    The softmax runs in float32 whatever the weights' dtype, as transformers' routers run it.
    """

    def __init__(self, *, hidden_size: int, num_experts: int, top_k: int, normalize: bool, bias: bool = False):
        super().__init__(hidden_size=hidden_size, num_experts=num_experts, top_k=top_k, bias=bias)
        self.normalize = normalize

    def forward(self, hidden_states: Tensor) -> Routing:
        """(N, E) → Routing."""
        logits = F.linear(hidden_states, self.weight, self.bias)
        probabilities = torch.softmax(logits, dim=-1, dtype=torch.float32)
        weights, experts = torch.topk(probabilities, self.top_k, dim=-1)
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return Routing(logits, experts, weights.to(hidden_states.dtype))


class TopKSoftmaxRouter(Router):
    """The k largest scores, then a softmax over those k alone (GPT-OSS, OpenAI 2025).

    The same weights as a softmax over all X renormalised over the k kept (Mixtral's), computed from the k scores
    only; the softmax runs in the scores' dtype, as GPT-OSS's router runs it.
    """

    def forward(self, hidden_states: Tensor) -> Routing:
        """(N, E) → Routing."""
        logits = F.linear(hidden_states, self.weight, self.bias)
        top, experts = torch.topk(logits, self.top_k, dim=-1)
        return Routing(logits, experts, torch.softmax(top, dim=-1))


class SigmoidGroupTopKRouter(Router):
    """Sigmoid scores, the k experts chosen among the best groups with a balancing bias (DeepSeek-V3, DeepSeek-AI 2024;
    GLM-4.5).

    Each expert's score is s = σ(logit), in float32. The choice adds `e_score_correction_bias` (a buffer, not trained
    by the loss: DeepSeek-V3 nudges it between steps to even the experts' loads, its "auxiliary-loss-free" balancing;
    it starts at zero). The X experts fall in `n_group` equal groups, each scored by the sum of its two best biased
    scores; only the experts of the `topk_group` best groups stay eligible (DeepSeek-V3's device-limited routing), and
    the k best of them are chosen. Their weights are the unbiased scores s, divided by their sum (+1e-20) when
    `normalize`, times `routed_scaling_factor`; they stay float32, as DeepSeek-V3's do.
    """

    def __init__(
        self,
        *,
        hidden_size: int,
        num_experts: int,
        top_k: int,
        n_group: int,
        topk_group: int,
        normalize: bool,
        routed_scaling_factor: float,
        bias: bool = False,
    ):
        super().__init__(hidden_size=hidden_size, num_experts=num_experts, top_k=top_k, bias=bias)
        self.n_group = n_group
        self.topk_group = topk_group
        self.normalize = normalize
        self.routed_scaling_factor = routed_scaling_factor
        # saved with the weights (a persistent buffer under transformers' name), so that conversion copies it
        self.register_buffer("e_score_correction_bias", torch.zeros(num_experts, dtype=torch.float32))

    def init_weights(self, std: float) -> None:
        super().init_weights(std)
        init.zeros_(self.e_score_correction_bias)

    def forward(self, hidden_states: Tensor) -> Routing:
        """(N, E) → Routing."""
        bias = None if self.bias is None else self.bias.float()
        logits = F.linear(hidden_states.float(), self.weight.float(), bias)
        scores = logits.sigmoid()
        choice = scores + self.e_score_correction_bias
        if self.topk_group < self.n_group:
            groups = choice.view(-1, self.n_group, choice.shape[-1] // self.n_group)
            group_scores = groups.topk(2, dim=-1).values.sum(dim=-1)  # (N, n_group)
            kept = group_scores.topk(self.topk_group, dim=-1, sorted=False).indices
            eligible = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, kept, True)
            eligible = eligible.repeat_interleave(groups.shape[-1], dim=1)  # (N, X)
            choice = choice.masked_fill(~eligible, float("-inf"))
        experts = choice.topk(self.top_k, dim=-1, sorted=False).indices
        weights = scores.gather(1, experts)
        if self.normalize:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return Routing(logits, experts, weights * self.routed_scaling_factor)


class TopKSigmoidInputRouter(Router):
    """The k largest scores; each chosen expert runs on its token scaled by σ(its score) (Llama 4, Meta 2025).

    The sigmoid scales the expert's input, not its output: an expert is not linear, so σ·FFN(x) ≠ FFN(σ·x). Its kind
    says `scales_inputs`, which the experts read.
    """

    def forward(self, hidden_states: Tensor) -> Routing:
        """(N, E) → Routing."""
        logits = F.linear(hidden_states, self.weight, self.bias)
        top, experts = torch.topk(logits, self.top_k, dim=-1)
        return Routing(logits, experts, torch.sigmoid(top.float()).to(top.dtype))


class RouterKind(NamedTuple):
    """A kind of router: how to build it from the config (config → module), the router knobs it reads (the others of
    `ROUTER_KNOBS` must keep their defaults), a check of the config's numbers, and whether its weights scale the
    experts' inputs instead of their outputs."""

    build: Callable[..., nn.Module]
    idea: str
    reads: tuple[str, ...] = ()
    check: Callable[..., None] | None = None
    scales_inputs: bool = False
    # The weights transformers keeps in float32 when a checkpoint loads in bf16/fp16 (its
    # `_keep_in_fp32_modules_strict`), under our names; read from the installed release, which decides it
    float32_weights: Callable[[], tuple[str, ...]] | None = None


def _softmax_top_k(config) -> nn.Module:
    return SoftmaxTopKRouter(
        hidden_size=config.hidden_size,
        num_experts=config.num_experts,
        top_k=config.num_experts_per_tok,
        normalize=config.norm_topk_prob,
        bias=config.router_bias,
    )


def _top_k_then(router_class: type[Router]) -> Callable[..., nn.Module]:
    def build(config) -> nn.Module:
        return router_class(
            hidden_size=config.hidden_size,
            num_experts=config.num_experts,
            top_k=config.num_experts_per_tok,
            bias=config.router_bias,
        )

    return build


def _sigmoid_group_top_k(config) -> nn.Module:
    return SigmoidGroupTopKRouter(
        hidden_size=config.hidden_size,
        num_experts=config.num_experts,
        top_k=config.num_experts_per_tok,
        n_group=config.n_group,
        topk_group=config.topk_group,
        normalize=config.norm_topk_prob,
        routed_scaling_factor=config.routed_scaling_factor,
        bias=config.router_bias,
    )


def _deepseek_float32_weights() -> tuple[str, ...]:
    """What the installed transformers keeps in float32 in DeepSeek-V3's router, under our names: near-tied sigmoid
    scores choose the experts, and bf16 would change the choice (5.23 keeps the balancing bias; 5.25 the router's
    weight too)."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3PreTrainedModel

    kept = DeepseekV3PreTrainedModel._keep_in_fp32_modules_strict or []
    ours = {"gate.weight": ("router.weight", "router.bias"), "e_score_correction_bias": ("e_score_correction_bias",)}
    return tuple(name for theirs in kept for name in ours.get(theirs, ()))


def _check_groups(config) -> None:
    """The groups of `sigmoid_group_top_k`: equal groups, no more kept than there are, k experts among the kept."""
    experts, groups, kept, k = config.num_experts, config.n_group, config.topk_group, config.num_experts_per_tok
    if experts % groups:
        raise ValueError(
            f"n_group={groups} must divide num_experts={experts}: the experts fall in n_group equal groups."
        )
    if kept > groups:
        raise ValueError(
            f"topk_group={kept} keeps more groups than n_group={groups}; it must be between 1 and n_group."
        )
    size = experts // groups
    if kept < groups and size < 2:
        raise ValueError(
            f"n_group={groups} makes groups of {size} expert of num_experts={experts}, and a group is scored by the "
            "sum of its two best experts: groups need at least 2 experts (n_group <= num_experts / 2)."
        )
    if k > kept * size:
        raise ValueError(
            f"num_experts_per_tok={k} chooses more experts than the topk_group={kept} kept groups of {size} hold "
            f"({kept * size}); it must be at most topk_group × num_experts / n_group."
        )


# The routers, by the name the config's `router` gives them.
ROUTERS: dict[str, RouterKind] = {
    "softmax_top_k": RouterKind(
        _softmax_top_k,
        "softmax over the experts, the k largest kept (renormalised with norm_topk_prob): Mixtral, Qwen3-MoE, OLMoE",
        reads=("norm_topk_prob",),
    ),
    "top_k_softmax": RouterKind(
        _top_k_then(TopKSoftmaxRouter),
        "the k largest scores, then a softmax over those k: GPT-OSS",
    ),
    "sigmoid_group_top_k": RouterKind(
        _sigmoid_group_top_k,
        "sigmoid scores; k chosen, with a balancing bias, among the topk_group best of n_group groups; weights the "
        "unbiased sigmoids (normalised with norm_topk_prob) times routed_scaling_factor: DeepSeek-V3, GLM-4.5",
        reads=("norm_topk_prob", "n_group", "topk_group", "routed_scaling_factor"),
        check=_check_groups,
        float32_weights=_deepseek_float32_weights,
    ),
    "top_k_sigmoid_input": RouterKind(
        _top_k_then(TopKSigmoidInputRouter),
        "the k largest scores; each chosen expert's input scaled by σ(its score): Llama 4",
        scales_inputs=True,
    ),
}
# The knobs that only some kinds of router read (the config refuses them, set, with the others).
ROUTER_KNOBS = tuple(dict.fromkeys(knob for kind in ROUTERS.values() for knob in kind.reads))


class Experts(nn.Module):
    """X gated feed-forward networks held as two stacked tensors: act(x G_e) ⊙ x U_e, then D_e (SwiGLU experts).

    gate_up_proj (X, 2F, E): expert e's gate rows, then its up rows (x · gate_up_proj[e]ᵀ = [gate | up]).
    down_proj (X, E, F).
    With `bias` (GPT-OSS): gate_up_proj_bias (X, 2F) and down_proj_bias (X, E), transformers' names.
    With `swiglu_limit` L: gate ≤ L and −L ≤ up ≤ L before they combine (GPT-OSS; DeepSeek-V4, GLM-5).
    With `gpt_oss_alpha` α, GPT-OSS's unit (OpenAI 2025): (up + 1) · gate · σ(α · gate), and its layout: gate and up
    interleaved, row 2f of gate_up_proj[e] the gate of unit f and row 2f + 1 its up (and so in gate_up_proj_bias).
    With `scale_inputs` (Llama 4's router): each expert runs on its token times the routing weight, and the outputs
    are summed unweighted.

    transformers' Mixtral, Qwen-MoE, OLMoE, DeepSeek-V3 and GLM-4.5 hold these very tensors. GPT-OSS and Llama 4 hold
    gate_up_proj as (X, E, 2F) and down_proj as (X, F, E): ours are their `.transpose(1, 2)`, views that the export
    writes through (GPT-OSS's gate/up interleaving kept as it is, Llama 4's [gate | up] halves as ours); their biases
    are copies.
    """

    def __init__(
        self,
        *,
        num_experts: int,
        hidden_size: int,
        intermediate_size: int,
        activation: str,
        bias: bool = False,
        swiglu_limit: float | None = None,
        gpt_oss_alpha: float | None = None,
        scale_inputs: bool = False,
    ):
        super().__init__()
        self.num_experts = num_experts
        self.gate_up_proj = nn.Parameter(torch.empty(num_experts, 2 * intermediate_size, hidden_size))
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size))
        if bias:
            self.gate_up_proj_bias = nn.Parameter(torch.empty(num_experts, 2 * intermediate_size))
            self.down_proj_bias = nn.Parameter(torch.empty(num_experts, hidden_size))
        else:
            self.register_parameter("gate_up_proj_bias", None)
            self.register_parameter("down_proj_bias", None)
        self.act = activation_function(activation)
        self.swiglu_limit = swiglu_limit
        self.gpt_oss_alpha = gpt_oss_alpha
        self.scale_inputs = scale_inputs

    def init_weights(self, std: float) -> None:
        init.normal_(self.gate_up_proj, mean=0.0, std=std)
        init.normal_(self.down_proj, mean=0.0, std=std)
        if self.gate_up_proj_bias is not None:  # GPT-OSS starts its experts' biases at zero
            init.zeros_(self.gate_up_proj_bias)
            init.zeros_(self.down_proj_bias)

    def gated(self, gate_up: Tensor) -> Tensor:
        """The gate and up rows' product (…, 2F) → (…, F): act(gate) ⊙ up, clamped first with `swiglu_limit`, or
        GPT-OSS's (up + 1) ⊙ gate · σ(α · gate) of its interleaved rows."""
        if self.gpt_oss_alpha is None:
            gate, up = gate_up.chunk(2, dim=-1)
        else:
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        if self.swiglu_limit is not None:
            gate = gate.clamp(max=self.swiglu_limit)
            up = up.clamp(min=-self.swiglu_limit, max=self.swiglu_limit)
        if self.gpt_oss_alpha is None:
            return self.act(gate) * up
        return (up + 1) * (gate * torch.sigmoid(gate * self.gpt_oss_alpha))

    def expert(self, index: int, rows: Tensor) -> Tensor:
        """Expert `index` on its rows (n, E) → (n, E)."""
        if self.gate_up_proj_bias is None:
            return F.linear(self.gated(F.linear(rows, self.gate_up_proj[index])), self.down_proj[index])
        gate_up = F.linear(rows, self.gate_up_proj[index], self.gate_up_proj_bias[index])
        return F.linear(self.gated(gate_up), self.down_proj[index], self.down_proj_bias[index])

    def forward(self, hidden_states: Tensor, routing: Routing) -> Tensor:
        """(N, E) tokens and their routing → (N, E): Σ over each token's k experts of weight · expert(token) (with
        `scale_inputs`: of expert(weight · token)).

        One matrix product per expert over all the rows routed to it: the (token, expert) pairs sorted by expert,
        each expert's contiguous block multiplied at once, the results added back to their tokens, weighted."""
        top_k = routing.experts.shape[-1]
        experts = routing.experts.reshape(-1)
        order = experts.argsort(stable=True)  # pairs grouped by expert; within one, tokens in order
        tokens = order // top_k
        weights = routing.weights.reshape(-1)[order, None]
        counts = torch.bincount(experts, minlength=self.num_experts).tolist()
        rows = hidden_states[tokens]
        if self.scale_inputs:
            rows = rows * weights.to(rows.dtype)
        # the experts no pair went to are skipped (a decoding step reaches k of them): a loop over experts, not tokens
        blocks = rows.split(counts)
        outputs = torch.cat([self.expert(e, blocks[e]) for e in range(self.num_experts) if counts[e]])
        weighted = outputs if self.scale_inputs else outputs * weights
        return torch.zeros_like(hidden_states).index_add_(0, tokens, weighted.to(hidden_states.dtype))


class SharedExpert(nn.Module):
    """The expert every token runs beside the routed ones (DeepSeekMoE, Dai et al. 2024; DeepSeek-V3, Llama 4,
    Qwen2-MoE, Qwen3-Next): one gated feed-forward network, down(act(gate(x)) ⊙ up(x)), without biases, under
    transformers' names. DeepSeek-V3's `n_shared_experts` experts of width F are one of width n·F, as it holds them.
    The routed experts' clamp and GPT-OSS unit do not reach it: no model with a shared expert has them."""

    def __init__(self, *, hidden_size: int, intermediate_size: int, activation: str):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act = activation_function(activation)

    def forward(self, x: Tensor) -> Tensor:
        """(…, E) → (…, E)."""
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class SparseMoEFeedForward(nn.Module):
    """The mixture-of-experts feed-forward network of a layer: router, then the experts it chose, plus the shared
    expert if there is one, its output times σ(shared_expert_gate(x)) if that is given (Qwen2-MoE, Qwen3-Next).

    (B, T, E) → (B, T, E), as the dense feed-forward networks of layers.py.
    """

    def __init__(
        self,
        *,
        router: nn.Module,
        experts: Experts,
        shared_expert: SharedExpert | None = None,
        shared_expert_gate: nn.Linear | None = None,
    ):
        super().__init__()
        self.router = router
        self.experts = experts
        self.shared_expert = shared_expert
        self.shared_expert_gate = shared_expert_gate

    def forward(self, hidden_states: Tensor) -> Tensor:
        shape = hidden_states.shape
        tokens = hidden_states.reshape(-1, shape[-1])
        output = self.experts(tokens, self.router(tokens))
        if self.shared_expert is not None:
            shared = self.shared_expert(tokens)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(tokens)) * shared
            output = output + shared
        return output.reshape(shape)


def float32_weights(config) -> set[str]:
    """The weights of the config's routers that stay float32 when the model loads in bf16 or fp16, as transformers
    keeps them for the same architecture (`from_pretrained(dtype=...)`); empty without experts."""
    kept = ROUTERS[config.router].float32_weights if "mixture_of_experts" in config.feed_forward_types() else None
    return set(kept()) if kept is not None else set()


def build_mixture_of_experts(config, layer_idx: int) -> nn.Module:
    """The configured mixture of experts (layer_plan.FEED_FORWARDS' "mixture_of_experts")."""
    kind = ROUTERS[config.router]
    activation = GATED_ACTIVATIONS[config.hidden_act]
    shared_expert = shared_expert_gate = None
    if config.shared_expert_intermediate_size is not None:
        shared_expert = SharedExpert(
            hidden_size=config.hidden_size,
            intermediate_size=config.shared_expert_intermediate_size,
            activation=activation,
        )
        if config.shared_expert_gate:
            shared_expert_gate = nn.Linear(config.hidden_size, 1, bias=False)
    return SparseMoEFeedForward(
        router=kind.build(config),
        experts=Experts(
            num_experts=config.num_experts,
            hidden_size=config.hidden_size,
            intermediate_size=config.moe_intermediate_size or config.intermediate_size,
            activation=activation,
            bias=config.expert_bias,
            swiglu_limit=config.swiglu_limit,
            gpt_oss_alpha=config.swiglu_alpha,
            scale_inputs=kind.scales_inputs,
        ),
        shared_expert=shared_expert,
        shared_expert_gate=shared_expert_gate,
    )


def router_modules(model: nn.Module) -> list[nn.Module]:
    """The routers of `model`, in layer order."""
    return [module for module in model.modules() if isinstance(module, Router)]


# The modules whose parameters the models' `_init_weights` leaves to their own `init_weights(std)` (the shared
# expert and its gate are linear layers, started as every linear layer is).
EXPERT_MODULES = (Router, Experts)


@contextmanager
def recording_router_logits(model: nn.Module) -> Iterator[list[Tensor]]:
    """While the block runs, each router's scores of its last call are recorded; the list yielded is filled, in
    layer order, when the block ends (the `router_logits` of transformers' MoE outputs). A router run twice in one
    forward pass (activation checkpointing recomputes it) records its one result once."""
    recorded: list[Tensor] = []
    routers = router_modules(model)
    last: dict[int, Tensor] = {}

    def record(module, args, output):
        last[id(module)] = output.logits

    handles = [router.register_forward_hook(record) for router in routers]
    try:
        yield recorded
    finally:
        for handle in handles:
            handle.remove()
    recorded.extend(last[id(router)] for router in routers if id(router) in last)


def load_balancing_loss(
    router_logits: tuple[Tensor, ...] | list[Tensor], num_experts: int, top_k: int, attention_mask: Tensor | None
) -> Tensor:
    """The auxiliary loss that keeps the experts' loads even (Switch Transformer, Fedus et al. 2021, eqs. 4–6):
    X · Σ_e f_e · P_e, where f_e is the share of (token, choice) pairs that go to expert e (summed over the k choices)
    and P_e the mean router probability of e, over every layer's tokens that are not padding. It is smallest, k, when
    both are uniform. As transformers' MoE models compute it (`router_aux_loss_coef` times it joins the loss): the
    same softmax over the recorded scores whatever the router's kind (Mixtral, Qwen-MoE, OLMoE, GPT-OSS, Qwen3-Next;
    transformers' DeepSeek-V3 and Llama 4 return their scores and add no such loss: theirs is this library's choice).

    `attention_mask` (B, S) may also cover cached tokens (a decoding step): the scores are of its last columns, the
    tokens of this call (transformers' own function fails on such a step instead, so its `generate()` does with
    `output_router_logits` set and a padding mask).
    """
    device = router_logits[0].device
    if attention_mask is not None:
        new_tokens = router_logits[0].shape[0] // attention_mask.shape[0]
        attention_mask = attention_mask[:, attention_mask.shape[1] - new_tokens :]
    counts = torch.zeros(num_experts, dtype=torch.float32, device=device)
    probabilities = torch.zeros(num_experts, dtype=torch.float32, device=device)
    rows = torch.zeros((), dtype=torch.float32, device=device)
    keep = None if attention_mask is None else attention_mask.reshape(-1).to(device=device, dtype=torch.float32)
    for logits in router_logits:
        p = torch.softmax(logits.to(device).float(), dim=-1)
        chosen = torch.topk(p, top_k, dim=-1).indices
        weight = torch.ones(p.shape[0], device=device) if keep is None else keep
        counts = counts.scatter_add(0, chosen.reshape(-1), weight.repeat_interleave(top_k))
        probabilities = probabilities + (p * weight[:, None]).sum(dim=0)
        rows = rows + weight.sum()
    return num_experts * torch.sum((counts / rows) * (probabilities / rows))
