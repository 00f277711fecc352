"""Every knob of the Transformer families' configurations, declared once: `KNOBS`.

A knob is a field of the config that chooses what the model computes or how it trains. Its row says everything about
it: its default, the check its value must pass (run whenever the field is set: in the constructor, when a
config.json is loaded, and on assignment), the idea it stands for with its source, and what `to_hf` does with it when
a model is exported to a standard architecture:
- "compared" (the default): the standard class must compute the same, or the export is refused;
- "training": it changes only training (dropout, the loss, the initialisation): a difference is reported, not refused;
- "lm_head": it belongs to the vocabulary head: compared only for models that have one;
- with `scheme`, it acts only with that positional scheme: compared only when the model uses it;
- with `needs`, it acts only when that other knob is set (the experts' knobs, with `num_experts`).
The configuration classes (configuration_hf_attention.py) read this table for their constructors, their field
checks and their documentation, and to_hf.py for its field lists. Checks across fields (the head dim dividing the
width, the rotary knobs needing rotary positions, ...) are the configuration's `_validate_knobs`.

This file is shipped with every checkpoint (remote code): it imports the standard library and the registries
(scores.py, positional.py, norms.py, activations.py, rope_scaling.py, mixture_of_experts.py), which import only torch
and transformers.
"""

import inspect
import textwrap
from collections.abc import Callable
from typing import NamedTuple

from .activations import HIDDEN_ACTS
from .field_checks import (
    check_at_least_zero,
    check_at_most_zero,
    check_bool,
    check_choice,
    check_fraction,
    check_greater_than_zero,
    check_layer_indices,
    check_non_negative,
    check_optional_bool,
    check_options,
    check_positive,
    check_probability,
    check_token_id_type,
    optional,
)
from .mixture_of_experts import ROUTERS
from .norms import NORMS
from .positional import NO_POSITIONAL_ENCODING, POSITIONAL_ENCODINGS
from .rope_scaling import ROPE_SCALINGS
from .scores import SCORES

FAMILIES = ("encoder", "decoder", "seq2seq")  # the Transformer families (the recurrent one has its own table)


class Knob(NamedTuple):
    """One field of the configs: its default, its check, its idea, what to_hf does with it, the families it is for."""

    default: object
    check: Callable[[str, object], None] | None  # check(field, value): raises ValueError/TypeError naming the field
    idea: str  # the sentence of the docs, with its source
    to_hf: str = "compared"  # "compared", "training" or "lm_head" (see the module docstring)
    scheme: str | None = None  # the positional scheme it acts with, if only one
    families: tuple[str, ...] = FAMILIES  # the config classes that have it
    needs: str | None = None  # the knob that must be set (not None) for this one to act: compared only then


def position_encodings() -> tuple[str, ...]:
    """The registered positional schemes and "none"."""
    return (*POSITIONAL_ENCODINGS, NO_POSITIONAL_ENCODING)


def choice(allowed) -> Callable[[str, object], None]:
    """The check that a value is one of `allowed`: a tuple, a registry (read at each check, so that an entry
    registered later is allowed too) or a function returning the names."""

    def check_one_of(field: str, value) -> None:
        check_choice(field, value, tuple(allowed() if callable(allowed) else allowed))

    return check_one_of


def check_layer_types(field: str, value) -> None:
    """None, or one of `LAYER_TYPES` per layer (the count is checked against the layers by the config)."""
    if value is None:
        return
    if not isinstance(value, (list, tuple)) or not all(kind in LAYER_TYPES for kind in value):
        raise ValueError(
            f"{field}={value!r} must be None or a list with one entry per layer, each one of "
            f"{', '.join(map(repr, LAYER_TYPES))}."
        )


# The allowed values of the string knobs that no registry names.
NORM_POSITIONS = ("post", "pre", "sandwich", "output")
# Per-layer token mixers, named as transformers 5 names them in `layer_types` (so its caches read them too, and its
# config checks them against its own list of names): keys of layer_plan.TOKEN_MIXERS, which also has the mixers a
# plan gives layers of these types by other knobs (`latent_attention`: the full layers when `kv_lora_rank` is set).
LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention", "chunked_attention")
QK_NORMS = ("none", "head", "projection", "per_head")
SINUSOIDAL_LAYOUTS = ("interleaved", "concat")
CLASSIFIER_POOLINGS = ("mean", "first")

KNOBS: dict[str, Knob] = {
    "vocab_size": Knob(8000, check_positive, "Size of the token vocabulary."),
    "hidden_size": Knob(512, check_positive, "Model width d_model (E)."),
    "num_attention_heads": Knob(8, check_positive, "Query heads H."),
    "num_key_value_heads": Knob(
        None,
        check_positive,
        "Key/value heads K for grouped-query attention; `None` means K = H (multi-head).",
    ),
    "head_dim": Knob(
        None,
        optional(check_positive),
        "Width of one head D; `None` means hidden_size // num_attention_heads.",
    ),
    "intermediate_size": Knob(2048, check_positive, "Inner width of the position-wise feed-forward network."),
    "hidden_act": Knob(
        "relu",
        choice(HIDDEN_ACTS),
        "`relu`, `gelu`, `gelu_new`, `silu`, or the gated `swiglu` / `geglu` (Shazeer 2020); `geglu_new` gates "
        'with the tanh-approximated `gelu_new` (T5 v1.1\'s "gated-gelu"); `xielu` is learned: α_p·x² + β·x for '
        "x > 0, α_n·(expm1(min(x, ε)) − x) + β·x below, α_p and α_n trained per layer (xIELU, Huang & Schlag 2024; "
        "Apertus), in the plain network down(act(up(x))).",
    ),
    # xIELU's start (activations.XIELU): each layer's α_p, α_n are trained from these; β and ε stay fixed, held with
    # the weights (a converted checkpoint brings its own).
    "xielu_alpha_p_init": Knob(
        0.8,
        check_greater_than_zero,
        "With `hidden_act='xielu'`: α_p at the start, the scale of x² for x > 0 (> 0; the xIELU paper's 0.8).",
        to_hf="training",
    ),
    "xielu_alpha_n_init": Knob(
        0.8,
        check_greater_than_zero,
        "With `hidden_act='xielu'`: α_n at the start, the scale of the negative piece (> xielu_beta; 0.8).",
        to_hf="training",
    ),
    "xielu_beta": Knob(
        0.5,
        check_at_least_zero,
        "With `hidden_act='xielu'`: β, the slope of both pieces at 0 (≥ 0; 0.5), fixed in training.",
        to_hf="training",
    ),
    "xielu_eps": Knob(
        -1e-6,
        check_at_most_zero,
        "With `hidden_act='xielu'`: ε, the largest argument of the negative piece's exponential (≤ 0; −1e-6), fixed "
        "in training.",
        to_hf="training",
    ),
    "max_position_embeddings": Knob(
        512,
        check_positive,
        "Longest sequence the `learned` table covers (other schemes extrapolate).",
    ),
    "attention_score": Knob(
        "scaled_dot",
        choice(SCORES),
        "`scaled_dot` softmax(QKᵀ/√D)V (Vaswani 2017), `dot` unscaled (T5), `additive` wᵀtanh(W_q q + W_k k) "
        "(Bahdanau 2015), `gaussian` kernel −‖q−k‖²/(2σ²) (Nadaraya–Watson).",
    ),
    "position_encoding": Knob(
        "sinusoidal",
        choice(position_encodings),
        "`sinusoidal`, `learned`, `rotary` (Su 2021), `alibi` (Press 2022), `relative` (T5 buckets, Raffel 2020) "
        "or `none`.",
    ),
    "norm_position": Knob(
        "post",
        choice(NORM_POSITIONS),
        "`post` (Add & Norm of the 2017 paper), `pre` (GPT-2 / Llama), `sandwich` (a norm before the sublayer and "
        "one on its output, before the residual add: Gemma 2/3) or `output` (only the norm on the sublayer's "
        "output, x + Norm(Sublayer(x)): OLMo 2).",
    ),
    "norm_type": Knob(
        "layernorm",
        choice(NORMS),
        "`layernorm`, `rmsnorm` (Zhang & Sennrich 2019) or `offset_rmsnorm` (RMSNorm with gain 1 + w, w starting "
        "at 0: Gemma).",
    ),
    "scale_embeddings": Knob(True, check_bool, "Multiply token embeddings by √hidden_size (paper §3.4)."),
    "embedding_multiplier": Knob(
        1.0,
        check_greater_than_zero,
        "Multiply token embeddings by this number too (after √hidden_size when `scale_embeddings`): µP's input "
        "multiplier (Yang et al. 2022, Tensor Programs V; Granite: 12). Default 1.0.",
    ),
    "attention_bias": Knob(True, check_bool, "Biases on the q/k/v/o projections."),
    "mlp_bias": Knob(True, check_bool, "Biases on the feed-forward projections."),
    "embedding_norm": Knob(False, check_bool, "A norm right after the embeddings (BERT, BART)."),
    # The mixture of experts (mixture_of_experts.py): a decoder's feed-forward networks become routed experts.
    "num_experts": Knob(
        None,
        optional(check_positive),
        "X experts in each feed-forward layer, of which a router runs `num_experts_per_tok` per token (Shazeer et al. "
        "2017; Mixtral); None: the one dense feed-forward network. Needs a gated `hidden_act`.",
        families=("decoder",),
    ),
    "num_experts_per_tok": Knob(
        2, check_positive, "k: the experts each token runs.", families=("decoder",), needs="num_experts"
    ),
    "moe_intermediate_size": Knob(
        None,
        optional(check_positive),
        "Width of each expert (Qwen3-MoE); None: `intermediate_size`.",
        families=("decoder",),
        needs="num_experts",
    ),
    "router": Knob(
        "softmax_top_k",
        choice(lambda: ROUTERS),
        "How the router's scores become k experts and their weights (`mixture_of_experts.ROUTERS`): "
        "`softmax_top_k` (Mixtral, Qwen-MoE, OLMoE), `top_k_softmax` (the k best, then a softmax over them: "
        "GPT-OSS), `sigmoid_group_top_k` (sigmoids chosen among the best expert groups with a balancing bias: "
        "DeepSeek-V3, GLM-4.5), `top_k_sigmoid_input` (σ of the k best scales the experts' inputs: Llama 4).",
        families=("decoder",),
        needs="num_experts",
    ),
    "norm_topk_prob": Knob(
        True,
        check_bool,
        "Divide the k chosen probabilities by their sum (Mixtral; Qwen3-MoE's option), or keep them (OLMoE); read "
        "by the `softmax_top_k` and `sigmoid_group_top_k` routers only.",
        families=("decoder",),
        needs="num_experts",
    ),
    "router_bias": Knob(
        False, check_bool, "A bias on the router's scores (GPT-OSS).", families=("decoder",), needs="num_experts"
    ),
    "n_group": Knob(
        1,
        check_positive,
        "With the `sigmoid_group_top_k` router: the experts fall in n_group equal groups, each scored by the sum of "
        "its two best scores, and only those of the `topk_group` best groups can be chosen (DeepSeek-V3's "
        "device-limited routing); 1: one group.",
        families=("decoder",),
        needs="num_experts",
    ),
    "topk_group": Knob(
        1, check_positive, "The groups of `n_group` kept (DeepSeek-V3).", families=("decoder",), needs="num_experts"
    ),
    "routed_scaling_factor": Knob(
        1.0,
        check_greater_than_zero,
        "With the `sigmoid_group_top_k` router: the routed experts' weights times this (DeepSeek-V3's 2.5).",
        families=("decoder",),
        needs="num_experts",
    ),
    "expert_bias": Knob(
        False,
        check_bool,
        "Biases on the experts' projections (GPT-OSS's gate_up_proj_bias, down_proj_bias).",
        families=("decoder",),
        needs="num_experts",
    ),
    "swiglu_limit": Knob(
        None,
        optional(check_greater_than_zero),
        "L: the experts clamp gate ≤ L and −L ≤ up ≤ L before the gated product (GPT-OSS; DeepSeek-V4, GLM-5); None: "
        "no clamp.",
        families=("decoder",),
        needs="num_experts",
    ),
    "swiglu_alpha": Knob(
        None,
        optional(check_greater_than_zero),
        "α: the experts are GPT-OSS's, (up + 1) · gate · σ(α · gate) with gate and up rows interleaved as GPT-OSS "
        "holds them (OpenAI 2025: 1.702); None: act(gate) · up of `hidden_act`.",
        families=("decoder",),
        needs="num_experts",
    ),
    "shared_expert_intermediate_size": Knob(
        None,
        optional(check_positive),
        "Width of a shared expert that every token runs beside the routed ones (DeepSeekMoE: DeepSeek-V3's "
        "n_shared_experts × moe_intermediate_size, Llama 4, Qwen2-MoE, Qwen3-Next); None: none.",
        families=("decoder",),
        needs="num_experts",
    ),
    "shared_expert_gate": Knob(
        False,
        check_bool,
        "The shared expert's output times σ(x · w), a learned scalar per token (Qwen2-MoE, Qwen3-Next).",
        families=("decoder",),
        needs="num_experts",
    ),
    "mlp_only_layers": Knob(
        None,
        optional(check_layer_indices),
        "Layers that keep a dense feed-forward network when `num_experts` is set (Qwen3-MoE's `mlp_only_layers`, "
        "DeepSeek-V3's first dense layers).",
        families=("decoder",),
        needs="num_experts",
    ),
    "router_aux_loss_coef": Knob(
        0.001,
        check_at_least_zero,
        "Weight of the load-balancing loss (Switch Transformer eqs. 4–6) added to the loss when "
        "`output_router_logits` is set.",
        to_hf="training",
        families=("decoder",),
        needs="num_experts",
    ),
    "output_router_logits": Knob(
        False,
        check_bool,
        "Return each layer's router scores and add the load-balancing loss to the loss (transformers' MoE models; "
        "the same softmax loss for every router, which transformers' DeepSeek-V3 and Llama 4 do not add).",
        to_hf="training",
        families=("decoder",),
        needs="num_experts",
    ),
    "final_norm": Knob(
        None,
        check_optional_bool,
        'A norm after the last layer; `None` means "yes for pre-norm, no for post-norm".',
    ),
    "type_vocab_size": Knob(
        0,
        check_non_negative,
        "Number of token-type (segment) embeddings; 0 disables them (BERT uses 2).",
    ),
    "position_offset": Knob(
        0,
        check_non_negative,
        "Added to position ids before the learned-table lookup (BART reserves 2 rows).",
        scheme="learned",
    ),
    "sinusoidal_layout": Knob(
        "interleaved",
        choice(SINUSOIDAL_LAYOUTS),
        "`interleaved` (sin, cos, sin, … as in the paper) or `concat` ([sin…, cos…], Marian).",
        scheme="sinusoidal",
    ),
    "rope_theta": Knob(10000.0, check_greater_than_zero, "Base of the rotary frequencies.", scheme="rotary"),
    "rope_type": Knob(
        "default",
        choice(ROPE_SCALINGS),
        "How the rotary frequencies stretch to contexts longer than training's (`ROPE_SCALINGS`): `default` "
        "(none), `linear` (position interpolation, Chen et al. 2023), `dynamic` (NTK-aware, recomputed once the "
        "input outgrows max_position_embeddings), `yarn` (Peng et al. 2023), `llama3` (Llama 3.1's per-wavelength "
        "blend), `longrope` (Phi-3's per-frequency factors, Ding et al. 2024), `ntk_alpha` (the base times "
        "α^(R/(R−2)) once, for any length: Hunyuan-7B's `dynamic` with an `alpha`).",
    ),
    "rope_scaling_options": Knob(
        None,
        check_options,
        "That scaling's numbers, named as transformers names them (`factor`, `original_max_position_embeddings`, "
        "`low_freq_factor`, `high_freq_factor`, `beta_fast`, `beta_slow`, `mscale`, `mscale_all_dim`, "
        "`attention_factor`, `truncate`, `short_factor`, `long_factor`, `alpha`).",
    ),
    "longrope_recompute_cache": Knob(
        False,
        check_bool,
        "With `longrope`, generate() runs the step at which the sequence first grows past the original length "
        "without its cache, so that the cached keys, rotated with the short factors, are rotated again with the "
        "long ones (Phi-3's generate()). Default False: cached keys keep their rotation.",
    ),
    "partial_rotary_factor": Knob(
        1.0,
        check_fraction,
        "The share of each head's dimensions that rotate (the first int(D · factor); the rest carry no position: "
        "GPT-NeoX, Phi-4-mini). Default 1.0.",
    ),
    "local_rope_theta": Knob(
        None,
        optional(check_greater_than_zero),
        "Base of the rotary frequencies of the sliding-window layers (Gemma 3: 10 000 locally, 10⁶ globally; "
        "ModernBERT); None: the same rotation as the full layers.",
    ),
    "nope_layers": Knob(
        None,
        check_layer_indices,
        'Indices of layers whose attention gets no rotary positions at all ("NoPE", Kazemnejad et al. 2023; '
        "SmolLM3 every fourth layer): the causal mask alone tells them the order.",
    ),
    "sliding_window": Knob(
        None,
        optional(check_positive),
        "W of local attention (Beltagy et al. 2020; Mistral): a query sees only keys less than W positions away "
        "(in a decoder the W most recent tokens, itself included). Which layers it applies to: `layer_types`. "
        "None: no window.",
        # The encoder-decoder family has no windowed layers, so its config does not carry the field at all (code
        # that sets a window on every config that has one, as transformers' own model tests do, leaves it alone).
        families=("encoder", "decoder"),
    ),
    "layer_types": Knob(
        None,
        check_layer_types,
        "One entry per layer, `full_attention`, `sliding_attention`, `linear_attention` or `chunked_attention` "
        "(transformers' names; Gemma 3's five local layers to one global, ModernBERT's alternation, Qwen3-Next's "
        "three Gated DeltaNet layers to one full, Llama 4's three chunked layers to one full; `linear_attention` and "
        "`chunked_attention` in decoders only); None: every layer sliding when `sliding_window` is set, else every "
        "layer chunked when `attention_chunk_size` is set, else every layer full.",
        families=("encoder", "decoder"),
    ),
    "attention_chunk_size": Knob(
        None,
        optional(check_positive),
        "C of chunked attention (Llama 4): the `chunked_attention` layers cut each row into chunks of C tokens, "
        "counted from its first real token, and a query sees only the earlier keys of its own chunk; their cache "
        "keeps the last C − 1 tokens. None: no chunked layer.",
        families=("decoder",),
    ),
    # The sizes of the `linear_attention` layers (gated_deltanet.py), under transformers' names (Qwen3-Next, Qwen3.5).
    "linear_num_value_heads": Knob(
        None,
        optional(check_positive),
        "Value heads Hv of the `linear_attention` layers (Gated DeltaNet, Yang et al. 2024: each head keeps a "
        "Dk × Dv state that the gated delta rule rewrites at every token); None: num_attention_heads.",
        families=("decoder",),
    ),
    "linear_num_key_heads": Knob(
        None,
        optional(check_positive),
        "Query/key heads Hk of those layers, each shared by Hv / Hk value heads (Qwen3-Next: 16 for 32); None: "
        "linear_num_value_heads.",
        families=("decoder",),
    ),
    "linear_key_head_dim": Knob(
        None,
        optional(check_positive),
        "Dk, the width of their query/key heads (the rows of each state); None: head_dim.",
        families=("decoder",),
    ),
    "linear_value_head_dim": Knob(
        None,
        optional(check_positive),
        "Dv, the width of their value heads (the columns of each state); None: head_dim.",
        families=("decoder",),
    ),
    "linear_conv_kernel_dim": Knob(
        None,
        optional(check_positive),
        "Taps of the depthwise causal convolution on their queries, keys and values (Qwen3-Next, Qwen3.5: 4; the "
        "short convolution of Mamba and DeltaNet); None: 4.",
        families=("decoder",),
    ),
    "qk_norm": Knob(
        "none",
        choice(QK_NORMS),
        "A norm (`norm_type`) on queries and keys before the rotation: `head` normalises each head's D values "
        "(Qwen3, Gemma 3), `projection` the whole H·D projection (OLMo 2), `per_head` each head's D values with a "
        "gain (and bias) of that head's own, weights (H, D) and (K, D) (Cohere's `use_qk_norm`); `none` by default.",
    ),
    "qk_norm_after_rotation": Knob(
        False,
        check_bool,
        "The `qk_norm='head'` norms, weights and all, run after the rotation instead of before it, on every layer "
        "(Hunyuan-7B's `query_layernorm` / `key_layernorm`, Tencent 2025). Default False.",
        families=("decoder",),
    ),
    # Multi-head latent attention (latent_attention.py), under transformers' names (DeepSeek-V2/V3, Kimi K2).
    "kv_lora_rank": Knob(
        None,
        optional(check_positive),
        "r: with it, every `full_attention` layer is multi-head latent attention (DeepSeek-V2, 2024): keys and "
        "values are decompressed per head from a normalised r-dim latent, and the cache keeps only that latent and "
        "one rotated key per token (r + qk_rope_head_dim numbers per layer). None: the configured attention.",
        families=("decoder",),
    ),
    "q_lora_rank": Knob(
        None,
        optional(check_positive),
        "Rank of the queries' own low-rank path, q = W_UQ RMSNorm(W_DQ x) (DeepSeek-V2/V3); None: one projection.",
        families=("decoder",),
        needs="kv_lora_rank",
    ),
    "qk_nope_head_dim": Knob(
        None,
        optional(check_positive),
        "Query/key dims per head that carry no position (decompressed from the latent). Needed with kv_lora_rank.",
        families=("decoder",),
        needs="kv_lora_rank",
    ),
    "qk_rope_head_dim": Knob(
        None,
        optional(check_positive),
        "Query/key dims per head that rotate (RoPE); the key's are one vector shared by every head. Needed with "
        "kv_lora_rank; it is the rotary tables' width, so head_dim becomes it (as in transformers' DeepSeek-V3).",
        families=("decoder",),
        needs="kv_lora_rank",
    ),
    "v_head_dim": Knob(
        None,
        optional(check_positive),
        "Value dims per head of the latent attention layers; None: qk_nope_head_dim.",
        families=("decoder",),
        needs="kv_lora_rank",
    ),
    "rope_interleave": Knob(
        False,
        check_bool,
        "The rotated dims of every attention layer pair up as adjacent (x0, x1), (x2, x3), … (DeepSeek's latent "
        "attention checkpoints; Llama 4's rotation in complex form) rather than as halves (x_i, x_{i+R/2}). "
        "Default False.",
        families=("decoder",),
    ),
    "rope_in_float32": Knob(
        False,
        check_bool,
        "Queries and keys are rotated in float32 (float32 tables and products), then cast back to their dtype, "
        "rather than in the model's dtype: the same numbers in float32, fewer roundings in bf16 or fp16 (ERNIE 4.5, "
        "transformers' Ernie4_5 `apply_rotary_pos_emb`). Default False.",
        families=("decoder",),
    ),
    # Llama 4's two other turns of queries and keys (query_key_tuning.py), under transformers' names.
    "rotated_qk_norm": Knob(
        False,
        check_bool,
        "After the rotation, a weightless RMS norm of each head's queries and keys, x·(mean(x²) + ε)^-1/2 with ε = "
        "layer_norm_eps, on the layers that rotate (Llama 4's `use_qk_norm`). Default False.",
        families=("decoder",),
    ),
    "attn_temperature_tuning": Knob(
        False,
        check_bool,
        "On the `nope_layers`, the queries of the token in cache slot p (its column, padding included, plus the "
        "cached tokens) are multiplied by 1 + attn_scale·log(1 + ⌊(p + 1) / floor_scale⌋), sharpening attention "
        "over long contexts (Llama 4; Nakanishi 2025, Scalable-Softmax). Default False.",
        families=("decoder",),
    ),
    "floor_scale": Knob(
        8192,
        check_positive,
        "The step of that temperature, in tokens: it grows every floor_scale positions (Llama 4: 8192).",
        families=("decoder",),
    ),
    "attn_scale": Knob(
        0.1,
        check_at_least_zero,
        "The strength of that temperature (Llama 4: 0.1).",
        families=("decoder",),
    ),
    # Ministral 3's scale of the queries by position (query_key_tuning.py), under transformers' name.
    "llama_4_scaling_beta": Knob(
        None,
        optional(check_at_least_zero),
        "β: on every attention layer, after the rotation, the query of the token at position id p is multiplied by "
        "1 + β·ln(1 + ⌊p / llama_4_scaling_length⌋): 1 within the trained length, larger by steps past it "
        "(Ministral 3, transformers' `get_llama_4_attn_scale`: 0.1). None: off.",
        families=("decoder",),
    ),
    "llama_4_scaling_length": Knob(
        16384,
        check_positive,
        "L, the positions per step of that scale: the RoPE's original length (Ministral 3: 16384).",
        families=("decoder",),
        needs="llama_4_scaling_beta",
    ),
    "attention_output_bias": Knob(
        None,
        check_optional_bool,
        "A bias on the output projection; None: as `attention_bias` (Qwen2 has q/k/v biases and none on the output).",
    ),
    "attn_logit_softcapping": Knob(
        None,
        optional(check_greater_than_zero),
        "c in scores ← c·tanh(scores / c), after the scaling and before the mask (Gemma 2): no score can grow "
        "beyond ±c. None: no cap. Fused SDPA kernels cannot apply it (eager or flex_attention).",
    ),
    # Two attention ideas of 2025 models (attention.py): a sink column in the softmax, a gate on the output.
    "attention_sinks": Knob(
        False,
        check_bool,
        "A learned logit per query head that joins every softmax of its self-attention and is dropped after it, "
        "p = softmax([s_1 … s_S, sink_h])[:S], so that a head can give part of its weight to no token (GPT-OSS; "
        "Xiao et al. 2024's attention sinks, learned): each attention layer's parameter `sinks` (H,). Its rows then "
        "sum to less than 1; the heatmaps show the rest as a sink column.",
        families=("encoder", "decoder"),
    ),
    "attention_output_gate": Knob(
        False,
        check_bool,
        "Gated attention (Qiu et al. 2025; Qwen3-Next, Qwen3.5): q_proj also gives each head a gate g, side by side "
        "with its query ([q_h | g_h], 2·D values per head), and the attention output is multiplied by σ(g) before "
        "o_proj.",
        families=("encoder", "decoder"),
    ),
    "final_logit_softcapping": Knob(
        None,
        optional(check_greater_than_zero),
        "The same cap on the vocabulary logits (Gemma 2/3). None: no cap.",
    ),
    "query_pre_attn_scalar": Knob(
        None,
        optional(check_greater_than_zero),
        "Scale q·k by this number's -1/2 power instead of head_dim's (Gemma).",
    ),
    "attention_multiplier": Knob(
        None,
        optional(check_greater_than_zero),
        "Scale q·k by this number itself instead of head_dim^-1/2: µP's attention scale, 1/head_dim rather than "
        "1/√head_dim (Yang et al. 2022, Tensor Programs V; Granite). None: the score's own scale.",
    ),
    "norm_bias": Knob(True, check_bool, "LayerNorm with a bias (False: ModernBERT's norms, which have none)."),
    "first_attention_norm": Knob(
        True,
        check_bool,
        "Whether the first layer has its attention norm; False where the embedding norm already normalised its "
        "input (ModernBERT). Needs pre-norm.",
    ),
    "parallel_block": Knob(
        False,
        check_bool,
        "Attention and the feed-forward network read one norm of the layer's input and add to the residual stream "
        "side by side, x + Attn(Norm(x)) + MLP(Norm(x)), one norm per layer (GPT-J; PaLM, Chowdhery et al. 2022; "
        "Cohere's Command R), rather than one after the other. Needs pre-norm. Default False.",
        families=("decoder",),
    ),
    "head_transform_bias": Knob(
        True,
        check_bool,
        "A bias on the dense layer of `lm_head_transform` and of the encoder's `classifier_transform` (BERT has "
        "one, ModernBERT not).",
    ),
    "relative_attention_num_buckets": Knob(
        32,
        check_positive,
        "T5 bucketing of relative distances. Half the buckets (per direction in an encoder) hold exact distances, "
        "so an encoder needs at least 4 buckets and a decoder 2, and max_distance must exceed the exact range "
        "(num_buckets // 4 in an encoder, // 2 in a decoder), or the log-spaced buckets come out negative.",
        scheme="relative",
    ),
    "relative_attention_max_distance": Knob(
        128,
        check_positive,
        "T5 bucketing of relative distances. Half the buckets (per direction in an encoder) hold exact distances, "
        "so an encoder needs at least 4 buckets and a decoder 2, and max_distance must exceed the exact range "
        "(num_buckets // 4 in an encoder, // 2 in a decoder), or the log-spaced buckets come out negative.",
        scheme="relative",
    ),
    "layer_norm_eps": Knob(1e-05, check_greater_than_zero, "Epsilon of the norms (> 0)."),
    "hidden_dropout_prob": Knob(
        0.1,
        check_probability,
        "Dropout on embeddings and on each sub-layer output before the residual add.",
        to_hf="training",
    ),
    "residual_multiplier": Knob(
        1.0,
        check_greater_than_zero,
        "Multiply each sublayer's output (after its output norm, if any) by this number before the residual add: "
        "µP's branch multiplier (Yang et al. 2022, Tensor Programs V; Granite: 0.22). Default 1.0.",
    ),
    "activation_dropout": Knob(
        0.0,
        check_probability,
        "Dropout inside the feed-forward network, after the activation.",
        to_hf="training",
    ),
    "attention_dropout": Knob(
        0.0,
        check_probability,
        "Dropout on the attention weights (training only).",
        to_hf="training",
    ),
    "initializer_range": Knob(0.02, check_at_least_zero, "Std of the normal initialisation.", to_hf="training"),
    "label_smoothing": Knob(
        0.0,
        check_probability,
        "ε of the token losses computed from `labels` (language-model and token-classification heads), as "
        "`F.cross_entropy(label_smoothing=ε)`: (1 − ε)(−log p[y]) + ε · mean over the vocabulary of −log p[v]. In "
        "[0, 1); default 0.0, the plain cross-entropy.",
        to_hf="training",
    ),
    "unlikelihood_weight": Knob(
        0.0,
        check_at_least_zero,
        "α of the token-level unlikelihood term added to the loss of the heads that generate left to right, "
        "causal LM and encoder-decoder, not the masked LM (`losses.repeat_unlikelihood`): α · Σ −log(1 − p[c]) "
        "over the one or two previous target tokens c that differ from the target, which trains the model not to "
        "repeat the token it has just written. ≥ 0; default 0.0, no term.",
        to_hf="training",
    ),
    "use_cache": Knob(
        True,
        check_bool,
        "forward() returns the KV cache that generate() reads at the next step (not while training).",
        to_hf="training",
    ),
    "tie_word_embeddings": Knob(
        True,
        check_bool,
        "Share the input embedding matrix with the output projection.",
        to_hf="lm_head",
    ),
    "pad_token_id": Knob(0, check_token_id_type, "Id of the padding token (None: none)."),
    "bos_token_id": Knob(
        1,
        check_token_id_type,
        "Id of the beginning-of-sequence token; the encoder-decoder's default decoder start.",
    ),
    "eos_token_id": Knob(
        2,
        check_token_id_type,
        "Id of the end-of-sequence token (or a list of them): generation stops there.",
    ),
    "lm_head_bias": Knob(
        False,
        check_bool,
        "A bias on the vocabulary projection `lm_head` (BERT's MLM bias, BART/Marian's `final_logits_bias`). "
        "Default False: the paper's output layer is the (tied) embedding matrix alone.",
        to_hf="lm_head",
    ),
    "freeze_lm_head_bias": Knob(
        False,
        check_bool,
        "Keep that bias out of training (`requires_grad=False`), as BART/Marian's `final_logits_bias`, a buffer "
        "that HF never updates. Needs `lm_head_bias`. Default False.",
        to_hf="training",
    ),
    "lm_head_transform": Knob(
        False,
        check_bool,
        "Before the vocabulary projection, map the last hidden state through dense → activation (`hidden_act`, or "
        "its gate for gated ones) → norm (BERT's MLM head). Default False.",
        to_hf="lm_head",
    ),
    "scale_lm_head_input": Knob(
        False,
        check_bool,
        "Multiply the last hidden state by hidden_size**-0.5 before the vocabulary projection (T5 with tied "
        "embeddings: the mirror of `scale_embeddings` on the way out). Default False.",
        to_hf="lm_head",
    ),
    "logits_scaling": Knob(
        1.0,
        check_greater_than_zero,
        "Divide the vocabulary logits by this number (before a `final_logit_softcapping` cap): µP's output "
        "multiplier (Yang et al. 2022, Tensor Programs V; Granite: 8). Applied to the projection's input, "
        "(h / L)Wᵀ = (hWᵀ) / L, so it needs `lm_head_bias=False`. Default 1.0.",
        to_hf="lm_head",
    ),
    "logit_multiplier": Knob(
        1.0,
        check_greater_than_zero,
        "Multiply the vocabulary logits by this number (before a `final_logit_softcapping` cap): Cohere's "
        "`logit_scale` (Command R: 0.0625), which keeps the logits of a wide tied embedding small. Applied to the "
        "projection's input, (m·h)Wᵀ = m·(hWᵀ), so it needs `lm_head_bias=False`. Default 1.0.",
        to_hf="lm_head",
    ),
    "num_hidden_layers": Knob(6, check_positive, "Number of layers of the stack.", families=("encoder", "decoder")),
    "classifier_dropout": Knob(
        None,
        optional(check_probability),
        "Dropout before the classification heads; `None` uses hidden_dropout_prob.",
        to_hf="training",
        families=("encoder", "decoder"),
    ),
    "classifier_pooling": Knob(
        "mean",
        choice(CLASSIFIER_POOLINGS),
        'How the sequence classifier summarises a text: "mean" of the real tokens\' states, or the "first" token\'s '
        "state (BERT's [CLS]).",
        families=("encoder",),
    ),
    # An encoder's text markers, as BERT-style tokenizers and ModernBERT's config name them: no layer reads them,
    # but a converted config keeps its source's (and an export writes them back) rather than the defaults of the
    # standard class, which may lie outside a small vocabulary.
    "cls_token_id": Knob(
        None,
        check_token_id_type,
        "Id of the classification token that starts a text ([CLS]; ModernBERT's config has it). None: none.",
        families=("encoder",),
    ),
    "sep_token_id": Knob(
        None,
        check_token_id_type,
        "Id of the separator token that ends a text or segment ([SEP]; ModernBERT's config has it). None: none.",
        families=("encoder",),
    ),
    "classifier_transform": Knob(
        False,
        check_bool,
        "The classifiers map each vector through dense → activation → norm before their linear layer "
        "(ModernBERT's heads). Default False.",
        families=("encoder",),
    ),
    "encoder_layers": Knob(6, check_positive, "Number of encoder layers.", families=("seq2seq",)),
    "decoder_layers": Knob(6, check_positive, "Number of decoder layers.", families=("seq2seq",)),
    "decoder_start_token_id": Knob(
        None,
        check_token_id_type,
        "First decoder input; `None` uses bos_token_id.",
        families=("seq2seq",),
    ),
}


def knobs_of(family: str | None) -> dict[str, Knob]:
    """The knobs a family's config has, in the order of the table; None: those every family has."""
    families = FAMILIES if family is None else (family,)
    return {name: knob for name, knob in KNOBS.items() if all(kind in knob.families for kind in families)}


def field_checks() -> dict[str, Callable[[str, object], None]]:
    """Every knob's check, by field name (what `field_checks.CheckedFields` runs on assignment)."""
    return {name: knob.check for name, knob in KNOBS.items() if knob.check is not None}


def documentation(knobs: dict[str, Knob], indent: str = "        ") -> str:
    """The "Args:" lines of a config's docstring: one entry per knob, its idea, wrapped as the code is."""
    return "\n".join(
        textwrap.fill(f"{name}: {knob.idea}", 119, initial_indent=indent, subsequent_indent=indent + "    ")
        for name, knob in knobs.items()
    )


def document_constructor(config_class: type, knobs: dict[str, Knob], listed: dict[str, Knob], note: str = "") -> None:
    """`config_class`'s docstring gets an "Args:" list of the `listed` knobs (and `note`), and its constructor, which
    takes keyword arguments, a signature naming all its `knobs` with their defaults, so that help() and IDEs show
    what it takes."""
    config_class.__doc__ = f"{config_class.__doc__.rstrip()}\n\n    Args:\n{documentation(listed)}{note}\n    "
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=knob.default) for name, knob in knobs.items()
    ]
    parameters.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    config_class.__init__.__signature__ = inspect.Signature(parameters)
