"""The standard architectures hf-attention converts from (`from_hf`) and exports to (`to_hf`): one module each.

`REGISTRY` is the one list conversion/from_hf.py and to_hf.py read; its order is `to_hf(model, "auto")`'s preference
when several architectures could hold a model. Adding an architecture is its module (an `ARCHITECTURE` record, see
base.py) and one line here.
"""

from . import (
    apertus,
    bart,
    bert,
    cohere,
    cohere2,
    deepseek_v3,
    ernie4_5,
    exaone4,
    gemma2,
    gemma3,
    glm4,
    gpt2,
    gpt_oss,
    granite,
    hunyuan_v1_dense,
    llama,
    llama4,
    marian,
    ministral,
    ministral3,
    mistral,
    mixtral,
    modernbert,
    olmo2,
    olmoe,
    phi3,
    qwen2,
    qwen3,
    qwen3_5,
    qwen3_moe,
    qwen3_next,
    seed_oss,
    smollm3,
    t5,
)
from .base import Architecture

REGISTRY: dict[str, Architecture] = {
    architecture.name: architecture
    for architecture in (
        gpt2.ARCHITECTURE,
        llama.ARCHITECTURE,
        bert.ARCHITECTURE,
        bart.ARCHITECTURE,
        marian.ARCHITECTURE,
        t5.ARCHITECTURE,
        mistral.ARCHITECTURE,
        qwen2.ARCHITECTURE,
        qwen3.ARCHITECTURE,
        gemma3.ARCHITECTURE,
        phi3.ARCHITECTURE,
        olmo2.ARCHITECTURE,
        smollm3.ARCHITECTURE,
        modernbert.ARCHITECTURE,
        gemma2.ARCHITECTURE,
        seed_oss.ARCHITECTURE,
        ministral.ARCHITECTURE,
        mixtral.ARCHITECTURE,
        qwen3_moe.ARCHITECTURE,
        olmoe.ARCHITECTURE,
        qwen3_5.ARCHITECTURE,
        gpt_oss.ARCHITECTURE,
        deepseek_v3.ARCHITECTURE,
        qwen3_next.ARCHITECTURE,
        llama4.ARCHITECTURE,
        glm4.ARCHITECTURE,
        exaone4.ARCHITECTURE,
        ernie4_5.ARCHITECTURE,
        granite.ARCHITECTURE,
        ministral3.ARCHITECTURE,
        apertus.ARCHITECTURE,
        hunyuan_v1_dense.ARCHITECTURE,
        cohere.ARCHITECTURE,
        cohere2.ARCHITECTURE,
    )
}


def by_model_type(model_type: str) -> Architecture | None:
    """The architecture whose configs have this `model_type`, if any."""
    return next((a for a in REGISTRY.values() if a.model_type == model_type), None)


def by_reference_class(reference_class: type) -> Architecture | None:
    """The architecture one of whose classes is exactly `reference_class`, if any."""
    return next((a for a in REGISTRY.values() if reference_class in a.classes.values()), None)
