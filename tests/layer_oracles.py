"""What the tests that compare one attention layer with transformers' own layer share: weights drawn anew, a
left-padded mask, and transformers' mask as its model builds it and as each backend takes it.

The layers under test (Llama 4's, Hunyuan's, ERNIE 4.5's, Ministral 3's attention) are called directly, without their
model, so the tests build the mask that model would hand them: `hf_mask` runs transformers' own builder (the causal
one, or the chunked one of Llama 4's chunked layers) in its boolean form; `hf_form` gives it to the eager backend as
the additive mask it expects.
"""

import torch
from transformers.masking_utils import create_causal_mask

from hf_attention.architectures.tiny import LENGTH
from hf_attention.modeling.cache_argument import CACHE_FIELD


def randomised(module: torch.nn.Module, scale: float, gains: str | None = None) -> torch.nn.Module:
    """Every parameter drawn anew at scale·N(0, 1) (seed 3); those whose name holds `gains` (norm weights) at
    1 + scale·N(0, 1). Returns the module in eval mode."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = scale * torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + noise if gains is not None and gains in name else noise)
    return module.eval()


def left_padded_mask(length: int = LENGTH) -> torch.Tensor:
    """Rows of `length` (24), 3/4 and 1/2 of it real tokens, padded on the left."""
    real = torch.tensor([length, length * 3 // 4, length // 2])
    return (torch.arange(length)[None] >= length - real[:, None]).long()


def hf_mask(
    config, hidden, attention_mask, cache, position_ids, *, builder=create_causal_mask, layer_idx=None
) -> torch.Tensor:
    """transformers' (B, 1, T, S) boolean mask, as its model builds it (`builder`, sized by the cache's layer
    `layer_idx`, by default the first of the mask's kind)."""
    sdpa = type(config)(**config.to_dict())
    sdpa._attn_implementation = "sdpa"  # the builder's boolean form
    extra = {} if layer_idx is None else {"layer_idx": layer_idx}
    return builder(
        config=sdpa,
        inputs_embeds=hidden,
        attention_mask=attention_mask,
        **{CACHE_FIELD: cache},
        position_ids=position_ids,
        allow_is_causal_skip=False,
        **extra,
    )


def hf_form(mask: torch.Tensor, attn: str) -> torch.Tensor:
    """The mask as transformers' backend takes it: boolean for sdpa, additive for eager."""
    return mask if attn == "sdpa" else torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)


def one_training_step(model: torch.nn.Module, inputs: dict) -> None:
    """One AdamW step on `inputs` (padding left out of the labels): a finite loss, finite gradients on every
    parameter, every parameter moved, and a lower loss after it. Leaves the model in eval mode, its gradients kept."""
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    loss = model(**inputs, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    optimizer.step()
    assert all(not torch.equal(before[name], p) for name, p in model.named_parameters())
    model.eval()
    with torch.no_grad():
        assert model(**inputs, labels=labels).loss < loss
