"""Qwen3-Next: Qwen3.5's layout of three Gated DeltaNet layers to one gated full-attention layer (QK-norm, a quarter of
each head rotated, the (1 + w) RMSNorm), with a mixture of experts in every layer (softmax over the experts, the top k
renormalised) beside a shared expert whose output a sigmoid gates. Its Gated DeltaNet packs the query, key, value and
gate rows of each key head together (`in_proj_qkvz`, `in_proj_ba`): they are regrouped into Qwen3.5's separate
projections, ours, and back on export."""

import torch
from torch import Tensor
from transformers import PretrainedConfig, Qwen3NextConfig, Qwen3NextForCausalLM, Qwen3NextForSequenceClassification

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .mixtral import copy_experts, experts_knobs, experts_reference_fields
from .qwen3_5 import LINEAR_SIZES, linear_knobs
from .qwen3_moe import dense_layers
from .tiny import DECODER, TinyReference
from .weights import Weights


def split_qwen3_next_projections(
    in_proj_qkvz: Tensor,
    in_proj_ba: Tensor,
    *,
    num_key_heads: int,
    num_value_heads: int,
    key_head_dim: int,
    value_head_dim: int,
) -> dict[str, Tensor]:
    """Qwen3-Next's two packed input projections → this module's four (Qwen3.5's), rows regrouped, values unchanged.

    Qwen3-Next lays `in_proj_qkvz` out per key head g as [q_g (Dk), k_g (Dk), v_g (r·Dv), z_g (r·Dv)] and `in_proj_ba`
    as [b_g (r), a_g (r)], r = Hv / Hk (its `fix_query_key_value_ordering`); here all query heads come first, then all
    key heads, then all value heads, and z, b and a are projections of their own.
    """
    group = num_value_heads // num_key_heads
    width = in_proj_qkvz.shape[-1]
    per_head = in_proj_qkvz.reshape(num_key_heads, -1, width)
    query, key, value, gate = per_head.split(
        [key_head_dim, key_head_dim, group * value_head_dim, group * value_head_dim], dim=1
    )
    b, a = in_proj_ba.reshape(num_key_heads, 2 * group, width).split([group, group], dim=1)
    return {
        "in_proj_qkv.weight": torch.cat([x.reshape(-1, width) for x in (query, key, value)]),
        "in_proj_z.weight": gate.reshape(-1, width),
        "in_proj_b.weight": b.reshape(-1, width),
        "in_proj_a.weight": a.reshape(-1, width),
    }


def merge_qwen3_next_projections(
    ours: dict[str, Tensor], *, num_key_heads: int, num_value_heads: int, key_head_dim: int, value_head_dim: int
) -> tuple[Tensor, Tensor]:
    """The inverse of `split_qwen3_next_projections`: our four projections (keys "in_proj_qkv.weight", ...) →
    Qwen3-Next's `in_proj_qkvz` and `in_proj_ba`."""
    group = num_value_heads // num_key_heads
    width = ours["in_proj_qkv.weight"].shape[-1]
    query, key, value = ours["in_proj_qkv.weight"].split(
        [num_key_heads * key_head_dim, num_key_heads * key_head_dim, num_value_heads * value_head_dim]
    )
    per_head = [x.reshape(num_key_heads, -1, width) for x in (query, key, value, ours["in_proj_z.weight"])]
    qkvz = torch.cat(per_head, dim=1).reshape(-1, width)
    b, a = (ours[name].reshape(num_key_heads, group, width) for name in ("in_proj_b.weight", "in_proj_a.weight"))
    return qkvz, torch.cat([b, a], dim=1).reshape(-1, width)


def copy_packed_linear_attention(w: Weights, c: PretrainedConfig) -> None:
    """Each Gated DeltaNet layer: the packed projections regrouped into ours (and back on export), the rest copied."""
    sizes = {
        "num_key_heads": c.linear_num_key_heads,
        "num_value_heads": c.linear_num_value_heads,
        "key_head_dim": c.linear_key_head_dim,
        "value_head_dim": c.linear_value_head_dim,
    }
    for i, kind in enumerate(c.layer_types):
        if kind != "linear_attention":
            continue
        src, dst = f"model.layers.{i}.linear_attn", f"model.decoder.layers.{i}.self_attn"
        for name in ("conv1d", "norm", "out_proj"):
            w.copy(f"{dst}.{name}", f"{src}.{name}", names=("weight",))
        w.copy(dst, src, names=("dt_bias", "A_log"))
        packed = (f"{src}.in_proj_qkvz.weight", f"{src}.in_proj_ba.weight")
        split = split_qwen3_next_projections(*(w.tensors[key] for key in packed), **sizes)

        def back(values, dst=dst, packed=packed, split=split):
            names = {f"{dst}.{name}": name for name in split}
            qkvz, ba = merge_qwen3_next_projections({names[key]: value for key, value in values.items()}, **sizes)
            return dict(zip(packed, (qkvz, ba), strict=True))

        w.rearrange({f"{dst}.{name}": value for name, value in split.items()}, packed, back)


def to_ours(model: Qwen3NextForCausalLM | Qwen3NextForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Qwen3NextForSequenceClassification)
    rope = dict(c.rope_parameters or {})
    dense = dense_layers(c)
    types = list(c.layer_types)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        qk_norm="head",
        norm_type="offset_rmsnorm",
        attention_output_gate=True,
        layer_types=types,
        moe_intermediate_size=c.moe_intermediate_size,
        shared_expert_intermediate_size=c.shared_expert_intermediate_size or None,
        shared_expert_gate=bool(c.shared_expert_intermediate_size),
        **experts_knobs(c, num_experts=c.num_experts, normalize=bool(c.norm_topk_prob), dense_layers=dense),
        **linear_knobs(c),
        **rope_knobs(rope, architecture="Qwen3-Next", partial=True),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS, qk_norm=True)
    copy_packed_linear_attention(w, c)
    copy_experts(w, c.num_hidden_layers, dense_layers=dense)
    for i in range(c.num_hidden_layers):
        if i in dense or not c.shared_expert_intermediate_size:
            continue
        src, dst = f"model.layers.{i}.mlp", f"model.decoder.layers.{i}.mlp"
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.copy(f"{dst}.shared_expert.{name}", f"{src}.shared_expert.{name}")
        w.copy(f"{dst}.shared_expert_gate", f"{src}.shared_expert_gate")
    # without a shared expert transformers still builds one, zero units wide, and its gate: they add nothing
    empty = [] if c.shared_expert_intermediate_size else [i for i in range(c.num_hidden_layers) if i not in dense]
    dropped = {
        f"model.layers.{i}.mlp.shared_expert": "shared_expert_intermediate_size=0: zero units wide" for i in empty
    }
    return decoder_head(w, config, "lm_head", classifier=classifier), config, dropped


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    sizes = {name: getattr(c, name, None) for name in LINEAR_SIZES}
    return Qwen3NextConfig(
        **reference_fields(c),
        **experts_reference_fields(c),
        num_experts=c.num_experts or 1,
        moe_intermediate_size=c.moe_intermediate_size or c.intermediate_size,
        shared_expert_intermediate_size=getattr(c, "shared_expert_intermediate_size", None) or 0,
        norm_topk_prob=c.norm_topk_prob,
        decoder_sparse_step=1,
        mlp_only_layers=list(c.mlp_only_layers or []),
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        layer_types=c.attention_types(),
        rope_parameters=reference_rope(c, partial=True),
        **{name: value for name, value in sizes.items() if value is not None},
    )


# Qwen3.5's tiny layout (three Gated DeltaNet layers, then a full one; 2 key heads shared by 4 value heads) with 4
# experts of width 32, 2 per token, and a gated shared expert of width 48; layer 1 dense (`mlp_only_layers`).
TINY_REFERENCES = {
    "qwen3_next": TinyReference(
        Qwen3NextForCausalLM,
        lambda **extra: Qwen3NextConfig(
            **{**DECODER, "num_hidden_layers": 4},
            head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            mlp_only_layers=[1],
            **extra,
        ),
    )
}
TINY_REFERENCES["qwen3_next_classifier"] = TINY_REFERENCES["qwen3_next"].classifier(Qwen3NextForSequenceClassification)

ARCHITECTURE = Architecture(
    name="qwen3_next",
    model_type="qwen3_next",
    classes={
        HFAttentionForCausalLM: Qwen3NextForCausalLM,
        HFAttentionDecoderForSequenceClassification: Qwen3NextForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", Qwen3NextForSequenceClassification),
        ("", Qwen3NextForCausalLM),
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Qwen3-Next",
        heads="LM, classifier",
        from_hf="test_modern_parity.py, test_linear_attention_models.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="experts in every layer ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it (no mixture-of-experts code)",
    ),
)
