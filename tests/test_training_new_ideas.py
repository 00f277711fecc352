"""Each idea of 2025–2026's models trains from scratch through the training CLI on the embedded corpus: a short
causal-LM run (tests/test_training.py's tiny run) whose loss falls, with the final checkpoint loading through the
Auto class and giving the trained model's logits."""

import pytest
import torch
from test_training import argv, train_losses
from transformers import AutoModelForCausalLM

from training.train import parse_args, run

# The model-config fields of each idea, over test_training's tiny decoder (2 layers, width 32, 4 heads).
ROTARY = {"position_encoding": "rotary", "norm_position": "pre", "norm_type": "rmsnorm", "hidden_act": "swiglu"}
IDEAS = {
    # GPT-OSS: a learned sink logit per head in every softmax, sliding and full layers alternating
    "attention_sinks": {
        **ROTARY,
        "attention_sinks": True,
        "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    # Qwen3-Next / Qwen3.5's full layers: a sigmoid gate from the query projection on each head's output
    "gated_attention": {**ROTARY, "attention_output_gate": True, "qk_norm": "head", "partial_rotary_factor": 0.5},
    # Qwen3-Next / Qwen3.5: a Gated DeltaNet layer before a full-attention one
    "gated_deltanet": {**ROTARY, "layer_types": ["linear_attention", "full_attention"]},
    # DeepSeek-V3: multi-head latent attention, queries through their own low-rank path
    "latent_attention": {
        **ROTARY,
        "kv_lora_rank": 16,
        "q_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
    },
    "mixture_of_experts": {
        "hidden_act": "swiglu",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "output_router_logits": True,  # the load-balancing loss trains too
        "router_aux_loss_coef": 0.01,
    },
    # GPT-OSS's experts: the k best scores then a softmax over them, a router bias, biased experts with the clamped
    # SwiGLU (up + 1) · gate · σ(1.702 · gate)
    "mixture_of_experts_gpt_oss": {
        "hidden_act": "swiglu",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "router": "top_k_softmax",
        "router_bias": True,
        "expert_bias": True,
        "swiglu_limit": 7.0,
        "swiglu_alpha": 1.702,
    },
    # DeepSeek-V3's routing: sigmoids chosen among the best 2 of 4 groups with a balancing bias, weights scaled, a
    # shared expert beside the routed ones
    "mixture_of_experts_deepseek_v3": {
        "hidden_act": "swiglu",
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 16,
        "router": "sigmoid_group_top_k",
        "n_group": 4,
        "topk_group": 2,
        "routed_scaling_factor": 2.5,
        "shared_expert_intermediate_size": 32,
    },
    # Qwen3-Next's shared expert, gated by σ(x · w)
    "mixture_of_experts_gated_shared_expert": {
        "hidden_act": "swiglu",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 32,
        "shared_expert_gate": True,
    },
    # Llama 4's routing: the best expert runs on its token scaled by σ(its score), beside a shared expert
    "mixture_of_experts_llama4": {
        "hidden_act": "swiglu",
        "num_experts": 4,
        "num_experts_per_tok": 1,
        "moe_intermediate_size": 32,
        "router": "top_k_sigmoid_input",
        "shared_expert_intermediate_size": 32,
    },
}


@pytest.mark.parametrize("idea", list(IDEAS))
def test_a_model_with_the_idea_trains_through_the_cli(idea, tmp_path):
    results = run(*parse_args(argv("causal_lm", tmp_path, model=IDEAS[idea])))
    losses = train_losses(tmp_path)
    assert len(losses) == 24 and results["steps"] == 24
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.3, losses
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "final")
    for field, value in IDEAS[idea].items():
        assert getattr(model.config, field) == value, field
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    assert torch.isfinite(model(input_ids=ids).logits).all()
