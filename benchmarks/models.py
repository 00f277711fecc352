"""The contenders: a Hugging Face reference model of each family and our twin converted from it, plus their inputs.

Every pair is the reference model (GPT-2, Llama, BERT, BART, T5, Qwen3, Qwen3-MoE, Gemma 3, GPT-OSS, DeepSeek-V3,
Qwen3-Next, and the window_cache section's Mistral; random weights, the plan's dimensions) and our model converted
from it with `hf_attention.from_hf`, so weights and maths are identical; `assert_parity` checks the logits before
anything is timed. Every reference runs SDPA attention but GPT-OSS's, which transformers gives no SDPA
(`REFERENCE_ATTENTION`): HF's GPT-OSS runs eager attention, ours SDPA (with its sinks, `attention._sdpa_with_sinks`).
"""

import torch
from torch import nn
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertForMaskedLM,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    GptOssConfig,
    GptOssForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
    T5Config,
    T5ForConditionalGeneration,
)

from hf_attention import from_hf

from .plan import Plan

PARITY_TOLERANCE = 1e-4
FAMILY_KIND = {
    "gpt2": "decoder",
    "llama": "decoder",
    "bert": "encoder",
    "bart": "seq2seq",
    "t5": "seq2seq",
    "qwen3": "decoder",
    "gemma3": "decoder",
    "mistral": "decoder",
    "qwen3_moe": "decoder",
    "gpt_oss": "decoder",
    "deepseek_v3": "decoder",
    "qwen3_next": "decoder",
}
# The attention each reference runs where not SDPA: transformers' GPT-OSS supports no SDPA (`_supports_sdpa = False`;
# its sinks need a column SDPA has no room for), so its reference runs eager attention; ours runs SDPA all the same.
REFERENCE_ATTENTION = {"gpt_oss": "eager"}
# Gemma 3's two knobs that no other family here has, at values that make them matter (`_modern_decoder`): q·k scaled
# by (d_model / heads)^(-1/2) rather than head_dim^(-1/2) (as Gemma 3 27B does: 168 = 5376 / 32, with heads of 128),
# and the final logits capped by tanh at Gemma 2's 30 (Gemma 3's checkpoints leave it unset, but the cap is part of
# the architecture the conversion covers, and it changes how our training step computes its loss).
GEMMA3_FINAL_LOGIT_SOFTCAPPING = 30.0
MLM_PROBABILITY = 0.15  # BERT's recipe, and `DataCollatorForLanguageModeling`'s default (our masked_lm config's too)
MASK_ID = 3  # a special id of the reference configs' range, never drawn by `random_ids`


def reference_model(family: str, plan: Plan, max_positions: int | None = None) -> nn.Module:
    """A randomly initialised HF reference of `family` with the plan's dimensions (the family's own, where the plan
    gives it some), sdpa attention, no dropout; `max_positions` defaults to what the plan needs."""
    p = plan.for_family(family)
    max_positions = max_positions or plan.max_positions
    if family == "gpt2":
        model_class, config = (
            GPT2LMHeadModel,
            GPT2Config(
                vocab_size=p.vocab,
                n_embd=p.hidden,
                n_layer=p.layers,
                n_head=p.heads,
                n_inner=p.ffn,
                n_positions=max_positions,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                bos_token_id=0,
                eos_token_id=0,
                pad_token_id=0,
            ),
        )
    elif family == "llama":
        model_class, config = (
            LlamaForCausalLM,
            LlamaConfig(
                vocab_size=p.vocab,
                hidden_size=p.hidden,
                intermediate_size=p.ffn,
                num_hidden_layers=p.layers,
                num_attention_heads=p.heads,
                num_key_value_heads=p.kv_heads or p.heads,
                max_position_embeddings=max_positions,
                bos_token_id=1,
                eos_token_id=2,
                pad_token_id=0,
            ),
        )
    elif family == "bert":
        model_class, config = (
            BertForMaskedLM,
            BertConfig(
                vocab_size=p.vocab,
                hidden_size=p.hidden,
                num_hidden_layers=p.layers,
                num_attention_heads=p.heads,
                intermediate_size=p.ffn,
                max_position_embeddings=max_positions,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
            ),
        )
    elif family == "bart":
        model_class, config = (
            BartForConditionalGeneration,
            BartConfig(
                vocab_size=p.vocab,
                d_model=p.hidden,
                encoder_layers=p.layers,
                decoder_layers=p.layers,
                encoder_attention_heads=p.heads,
                decoder_attention_heads=p.heads,
                encoder_ffn_dim=p.ffn,
                decoder_ffn_dim=p.ffn,
                max_position_embeddings=max_positions,
                dropout=0.0,
                attention_dropout=0.0,
                activation_dropout=0.0,
            ),
        )
    elif family == "t5":
        model_class, config = (
            T5ForConditionalGeneration,
            T5Config(
                vocab_size=p.vocab,
                d_model=p.hidden,
                d_kv=p.hidden // p.heads,
                d_ff=p.ffn,
                num_layers=p.layers,
                num_heads=p.heads,
                dropout_rate=0.0,
                decoder_start_token_id=0,
                pad_token_id=0,
                eos_token_id=1,
            ),
        )
    elif family in ("qwen3", "gemma3", "mistral", "qwen3_moe"):
        model_class, config = _modern_decoder(family, p, max_positions)
    elif family in MIXTURE_DECODERS:
        model_class, config = MIXTURE_DECODERS[family](p, max_positions)
    else:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILY_KIND)}")
    return model_class._from_config(config, attn_implementation=REFERENCE_ATTENTION.get(family, "sdpa"))


def _modern_decoder(family: str, p: Plan, max_positions: int) -> tuple[type[nn.Module], object]:
    """Qwen3, Qwen3-MoE, Gemma 3 or Mistral with the plan's dimensions, `head_dim` and `sliding_window`, the Llama
    row's special ids and untied embeddings except where the architecture ties them by default (Gemma 3)."""
    common = _common_fields(p, max_positions)
    if family == "qwen3":
        return Qwen3ForCausalLM, Qwen3Config(**common)
    if family == "qwen3_moe":  # every layer a mixture of experts, each a quarter of the dense width
        return Qwen3MoeForCausalLM, Qwen3MoeConfig(
            **common,
            num_experts=p.experts,
            num_experts_per_tok=p.experts_per_token,
            moe_intermediate_size=p.ffn // 4,
            norm_topk_prob=True,
        )
    if family == "mistral":  # every layer sliding when a window is given, none when it is None
        return MistralForCausalLM, MistralConfig(**common, sliding_window=p.sliding_window)
    # Gemma 3's own layer pattern (`sliding_window_pattern`, 6: layers 5, 11, … global), not an explicit list.
    return Gemma3ForCausalLM, Gemma3TextConfig(
        **common,
        sliding_window=p.sliding_window,
        query_pre_attn_scalar=p.hidden // p.heads,
        final_logit_softcapping=GEMMA3_FINAL_LOGIT_SOFTCAPPING,
    )


def _common_fields(p: Plan, max_positions: int, head_dim: bool = True) -> dict:
    """The config fields every modern decoder here shares: the plan's dimensions, `head_dim` (where the architecture
    takes one), the Llama row's special ids."""
    common = {
        "vocab_size": p.vocab,
        "hidden_size": p.hidden,
        "intermediate_size": p.ffn,
        "num_hidden_layers": p.layers,
        "num_attention_heads": p.heads,
        "num_key_value_heads": p.kv_heads or p.heads,
        "max_position_embeddings": max_positions,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }
    if head_dim:
        common["head_dim"] = p.head_dim or p.hidden // p.heads
    return common


def _required(p: Plan, family: str, *fields: str) -> None:
    """A ValueError naming each of `fields` that the plan leaves None but `family` needs."""
    missing = [field for field in (*fields, "experts") if getattr(p, field) is None]
    if missing:
        raise ValueError(
            f"{family}: the plan's shape needs {', '.join(missing)} (None given); set them in family_shapes"
        )


def _gpt_oss(p: Plan, max_positions: int) -> tuple[type[nn.Module], object]:
    """GPT-OSS (gpt-oss-20b, -120b) in miniature: sliding and full layers alternating, sliding first, with the plan's
    window; a sink logit per head; biases on q, k, v and o; YaRN stretching 1/32 of the positions by 32 (gpt-oss:
    4096 × 32); `experts` experts as wide as d_model (gpt-oss: 2880 for d_model 2880), i.e. a quarter of the dense
    ffn here, with its clamped SwiGLU (limit 7)."""
    _required(p, "gpt_oss", "sliding_window")
    return GptOssForCausalLM, GptOssConfig(
        **{**_common_fields(p, max_positions), "intermediate_size": p.ffn // 4},
        layer_types=["sliding_attention" if index % 2 == 0 else "full_attention" for index in range(p.layers)],
        sliding_window=p.sliding_window,
        num_local_experts=p.experts,
        num_experts_per_tok=p.experts_per_token,
        attention_bias=True,
        rope_parameters={
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": max_positions // 32,
            "rope_theta": 150000.0,
        },
    )


def _deepseek_v3(p: Plan, max_positions: int) -> tuple[type[nn.Module], object]:
    """DeepSeek-V3 in miniature: multi-head latent attention with queries through their own latent (`q_lora_rank`,
    3 × `kv_lora_rank` as in DeepSeek-V3: 1536 and 512); each query/key head `head_dim` wide, `qk_rope_head_dim` of
    it rotated (pairs of adjacent dims, `rope_interleave`), values as wide as the unrotated part (DeepSeek-V3: 128 +
    64, values 128); the first layer dense (DeepSeek-V3: three of 61), then `experts` routed experts of a quarter of
    the dense width in groups of two, the best half of the groups kept (DeepSeek-V3: 256 in 8 groups of 32, 4 kept),
    sigmoid scores, weights × 2.5, and one shared expert as wide as a routed one."""
    _required(p, "deepseek_v3", "head_dim", "qk_rope_head_dim", "q_lora_rank", "kv_lora_rank")
    groups = max(1, p.experts // 2)
    return DeepseekV3ForCausalLM, DeepseekV3Config(
        **_common_fields(p, max_positions, head_dim=False),
        q_lora_rank=p.q_lora_rank,
        kv_lora_rank=p.kv_lora_rank,
        qk_rope_head_dim=p.qk_rope_head_dim,
        qk_nope_head_dim=p.head_dim - p.qk_rope_head_dim,
        v_head_dim=p.head_dim - p.qk_rope_head_dim,
        rope_interleave=True,
        first_k_dense_replace=1,
        n_routed_experts=p.experts,
        num_experts_per_tok=p.experts_per_token,
        moe_intermediate_size=p.ffn // 4,
        n_group=groups,
        topk_group=max(1, groups // 2),
        n_shared_experts=1,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
    )


def _qwen3_next(p: Plan, max_positions: int) -> tuple[type[nn.Module], object]:
    """Qwen3-Next (80B-A3B) in miniature: three Gated DeltaNet layers to one gated full-attention layer (its default
    `full_attention_interval` of 4), the DeltaNet with `heads` key heads and twice as many value heads, each d_model
    / heads wide (Qwen3-Next: 16 and 32 heads of 128 on d_model 2048), a quarter of each attention head rotated;
    `experts` experts of a quarter of the dense width beside a σ-gated shared expert as wide as one."""
    _required(p, "qwen3_next")
    width = p.hidden // p.heads
    return Qwen3NextForCausalLM, Qwen3NextConfig(
        **_common_fields(p, max_positions),
        linear_num_key_heads=p.heads,
        linear_num_value_heads=2 * p.heads,
        linear_key_head_dim=width,
        linear_value_head_dim=width,
        num_experts=p.experts,
        num_experts_per_tok=p.experts_per_token,
        moe_intermediate_size=p.ffn // 4,
        shared_expert_intermediate_size=p.ffn // 4,
        norm_topk_prob=True,
    )


# The mixture-of-experts decoders of 2025 whose references take more than `_modern_decoder`'s fields.
MIXTURE_DECODERS = {"gpt_oss": _gpt_oss, "deepseek_v3": _deepseek_v3, "qwen3_next": _qwen3_next}


def make_pair(family: str, plan: Plan, device: str, max_positions: int | None = None) -> tuple[nn.Module, nn.Module]:
    """(reference, ours) with identical weights, on `device`, in eval mode; ours runs SDPA even where the reference
    runs eager attention (`REFERENCE_ATTENTION`), the backend each side runs by default."""
    torch.manual_seed(0)
    reference = reference_model(family, plan, max_positions).to(device).eval()
    ours = from_hf(reference).to(device).eval()
    if family in REFERENCE_ATTENTION:  # from_hf copies the reference's backend
        ours.set_attn_implementation("sdpa")
    return reference, ours


def make_generation_pair(
    family: str, plan: Plan, device: str, max_positions: int | None = None
) -> tuple[nn.Module, nn.Module]:
    """`make_pair`, with no forced tokens or n-gram rules on either side: the decoding strategy alone decides."""
    pair = make_pair(family, plan, device, max_positions)
    for model in pair:
        config = model.generation_config
        config.forced_bos_token_id = config.forced_eos_token_id = None
        config.no_repeat_ngram_size = 0
    return pair


def random_ids(plan: Plan, batch: int, length: int, device: str, seed: int) -> torch.Tensor:
    """Token ids clear of the special tokens (0-3 in every reference config here)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(4, plan.vocab, (batch, length), generator=generator).to(device)


def prompt_inputs(plan: Plan, batch: int, device: str) -> dict:
    """The generation prompt (decoders) or source (encoder-decoders): `gen_prompt` random ids, no padding."""
    prompt = random_ids(plan, batch, plan.gen_prompt, device, seed=5)
    return {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}


def training_batch(family: str, plan: Plan, batch: int, length: int, device: str) -> dict:
    """Inputs + labels: next-token LM (decoders), teacher forcing (seq2seq), masked LM (encoder).

    The encoder's batch is what `DataCollatorForLanguageModeling` makes for BERT pre-training: 15% of the positions
    carry a label (-100 elsewhere); of those, 80% read [MASK], 10% a random token and 10% stay as they are. Both
    contenders compute the logits of every position; what each does with the unlabelled rows is its own business.
    """
    ids = random_ids(plan, batch, length, device, seed=1)
    if FAMILY_KIND[family] == "seq2seq":
        return {"input_ids": ids, "labels": random_ids(plan, batch, length, device, seed=2)}
    if FAMILY_KIND[family] == "decoder":
        return {"input_ids": ids, "labels": ids}
    generator = torch.Generator().manual_seed(3)
    draw = torch.rand(batch, length, generator=generator).to(device)
    chosen = draw < MLM_PROBABILITY
    masked = chosen & (draw < 0.8 * MLM_PROBABILITY)
    randomised = chosen & (draw >= 0.9 * MLM_PROBABILITY)
    inputs = ids.masked_fill(masked, MASK_ID)
    inputs = torch.where(randomised, random_ids(plan, batch, length, device, seed=4), inputs)
    return {"input_ids": inputs, "labels": ids.masked_fill(~chosen, -100)}


def assert_parity(family: str, reference: nn.Module, ours: nn.Module, inputs: dict) -> float:
    """Max |logit difference| in fp32 eval mode; raises AssertionError above PARITY_TOLERANCE."""
    with torch.no_grad():
        theirs, mine = reference(**inputs), ours(**inputs)
    diff = (theirs.logits.float() - mine.logits.float()).abs().max().item()
    loss_diff = abs(theirs.loss.item() - mine.loss.item()) if theirs.loss is not None else 0.0
    assert diff <= PARITY_TOLERANCE and loss_diff <= PARITY_TOLERANCE, (
        f"{family}: logits differ by {diff:.3g} (loss by {loss_diff:.3g}); refusing to time non-equivalent models"
    )
    return diff
