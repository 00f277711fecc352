"""Fine-tuning a converted Qwen3 and Gemma 3 as their users do, with PEFT's LoRA and with 🤗 Trainer, against the same
steps on transformers' own classes: the loss, the logits and the gradients of every trained parameter agree before
the step, and the logits after it.

The references are tiny random models (modern_references.py). Training runs our fused training paths (the q/k/v
product, the fused vocabulary loss), which sum in another order than HF's: hence a relative tolerance on gradients
rather than bit equality.
"""

import copy

import pytest
import torch
from modern_references import generate_positions, padded_batch, reference
from peft import LoraConfig, get_peft_model
from transformers import Trainer, TrainingArguments

from hf_attention import from_hf

CASES = ["qwen3", "gemma3", "mixtral", "qwen3_moe", "gpt_oss", "qwen3_next", "deepseek_v3", "qwen3_5"]


def _batch(name: str) -> dict:
    """A left-padded batch with its labels, and positions counted from each row's first real token: transformers'
    models count from the first column unless given them, hf-attention from the first real token.

    A row's first real token is not a target either: it would be predicted from a padding position, whose output
    no backend defines (HF's eager and sdpa already disagree there)."""
    batch = padded_batch(name)
    mask = batch["attention_mask"]
    predicted_from_padding = torch.nn.functional.pad(mask, (1, 0))[:, :-1] == 0
    labels = batch["input_ids"].masked_fill((mask == 0) | predicted_from_padding, -100)
    return {**batch, "position_ids": generate_positions(batch["attention_mask"]), "labels": labels}


def _pair(name: str):
    theirs = copy.deepcopy(reference(name))
    ours = from_hf(theirs)
    return theirs.train(), ours.train()


def _our_name(name: str) -> str:
    """Our parameter name for one of the reference's (the stack is `model.decoder` in ours, `model` in theirs)."""
    return name.replace("model.layers.", "model.decoder.layers.")


def _assert_gradients_match(theirs, ours) -> None:
    our_parameters = dict(ours.named_parameters())
    compared = 0
    for name, parameter in theirs.named_parameters():
        if not parameter.requires_grad:
            continue
        mine = our_parameters[_our_name(name)]
        torch.testing.assert_close(mine.grad, parameter.grad, rtol=1e-4, atol=1e-6, msg=name)
        compared += 1
    assert compared


@pytest.mark.parametrize("name", CASES)
def test_lora_gradients_and_step_match_the_reference(name):
    theirs, ours = _pair(name)
    lora = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
    theirs = get_peft_model(theirs, LoraConfig(**lora))
    ours = get_peft_model(ours, LoraConfig(**lora))
    # LoRA's B starts at zero and A at random: give both the reference's adapter values (B made non-zero, so that
    # A gets a gradient too)
    adapters = {}
    torch.manual_seed(0)
    for key, value in theirs.state_dict().items():
        if "lora_" in key:
            adapters[_our_name(key)] = value.add_(0.05 * torch.randn_like(value)).clone()
    missing = ours.load_state_dict(adapters, strict=False).unexpected_keys
    assert not missing
    batch = _batch(name)
    their_output, our_output = theirs(**batch), ours(**batch)
    mask = batch["attention_mask"].bool()
    torch.testing.assert_close(our_output.loss, their_output.loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(our_output.logits[mask], their_output.logits[mask], rtol=1e-5, atol=1e-5)
    their_output.loss.backward()
    our_output.loss.backward()
    _assert_gradients_match(theirs, ours)
    for model in (theirs, ours):
        torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5).step()
    with torch.no_grad():
        after_theirs, after_ours = theirs.eval()(**batch).logits, ours.eval()(**batch).logits
    torch.testing.assert_close(after_ours[mask], after_theirs[mask], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(after_theirs[mask], their_output.logits[mask].detach())  # the step changed something


class _Rows(torch.utils.data.Dataset):
    def __init__(self, batch: dict):
        self.batch = batch

    def __len__(self):
        return self.batch["input_ids"].shape[0]

    def __getitem__(self, index):
        return {key: value[index] for key, value in self.batch.items()}


@pytest.mark.parametrize("name", CASES)
def test_a_trainer_step_matches_the_reference(name, tmp_path):
    batch = _batch(name)
    after = {}
    for side, model in zip(("theirs", "ours"), _pair(name), strict=True):
        args = TrainingArguments(
            output_dir=str(tmp_path / side),
            per_device_train_batch_size=3,
            max_steps=1,
            learning_rate=1e-3,
            lr_scheduler_type="constant",
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            seed=0,
            dataloader_drop_last=False,
        )
        Trainer(model=model, args=args, train_dataset=_Rows(batch)).train()
        with torch.no_grad():
            after[side] = model.eval()(**batch).logits[batch["attention_mask"].bool()]
    before = reference(name)(**batch).logits[batch["attention_mask"].bool()]
    torch.testing.assert_close(after["ours"], after["theirs"], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(after["theirs"], before)
