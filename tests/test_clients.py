"""The ecosystem's clients drive hf-attention checkpoints as they drive built-in models: TRL's SFT trainer (its fused
LM head, with and without packing) and RewardTrainer (the decoder classifier), lm-eval's HF backend,
sentence-transformers (also through remote code without hf_attention installed). Each is compared with the model's
own numbers."""

import copy
import json
import os
import subprocess
import sys
import textwrap
import warnings

import datasets
import pytest
import torch
from conftest import tiny_config
from test_save_load import thread_env
from text_fixtures import make_tokenizer, pydoc_paragraphs

from hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM, HFAttentionForMaskedLM

TEXTS = pydoc_paragraphs(40)


@pytest.fixture(scope="module")
def causal_tokenizer():
    return make_tokenizer("decoder", TEXTS)


def _sft_trainer(model, tokenizer, tmp_path, *, packing: bool):
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        packing=packing,
        max_length=64,
        per_device_train_batch_size=4,
        max_steps=2,
        report_to="none",
        use_cpu=True,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SFTTrainer(
            model=model,
            args=args,
            train_dataset=datasets.Dataset.from_dict({"text": TEXTS}),
            processing_class=tokenizer,
        )


def _per_text_loss(model, batch) -> torch.Tensor:
    """The packed row's loss computed text by text: Σ token losses / Σ target tokens."""
    ids, labels, positions = batch["input_ids"][0], batch["labels"][0], batch["position_ids"][0]
    starts = [i for i in range(len(positions)) if positions[i] == 0] + [len(positions)]
    total, count = 0.0, 0
    for start, end in zip(starts, starts[1:], strict=False):
        text_labels = labels[start:end][None]
        targets = int((text_labels[:, 1:] != -100).sum())
        if targets:
            total = total + model(ids[start:end][None], labels=text_labels, use_cache=False).loss * targets
            count += targets
    return total / count


@pytest.mark.parametrize("packing", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("head", [{}, {"scale_lm_head_input": True}], ids=["plain", "scaled_head"])
def test_trl_sft_loss_is_the_models_own(causal_tokenizer, tmp_path, packing, head):
    model = HFAttentionForCausalLM(
        tiny_config("decoder", vocab_size=len(causal_tokenizer), position_encoding="rotary", **head)
    )
    trainer = _sft_trainer(model, causal_tokenizer, tmp_path, packing=packing)
    batch = next(iter(trainer.get_train_dataloader()))
    model.eval()
    with torch.no_grad():
        trl_loss = trainer.compute_loss(model, dict(batch))  # TRL's fused LM head: backbone + lm_head.weight
        own = model(**batch).loss  # the model's forward, which TRL keeps for fused_lm_head=False
        torch.testing.assert_close(trl_loss, own, rtol=1e-5, atol=1e-6)
        if packing:
            assert "attention_mask" not in batch and batch["position_ids"].shape[0] == 1
            torch.testing.assert_close(trl_loss, _per_text_loss(model, batch), rtol=1e-5, atol=1e-6)
    trainer.train()  # and it trains through TRL's loop
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(losses)))


def test_trl_refuses_a_head_it_cannot_reproduce(causal_tokenizer, tmp_path):
    for head, named in (
        ({"lm_head_transform": True}, "lm_head_transform=True"),
        ({"scale_lm_head_input": True, "lm_head_bias": True}, "scale_lm_head_input=True with lm_head_bias=True"),
    ):
        model = HFAttentionForCausalLM(tiny_config("decoder", vocab_size=len(causal_tokenizer), **head))
        with pytest.raises(ValueError, match=f"This model's head uses {named}.*TRL computes the loss"):
            _sft_trainer(model, causal_tokenizer, tmp_path, packing=False)


def test_trl_dpo_refuses_a_head_it_cannot_reproduce(causal_tokenizer, tmp_path):
    from trl import DPOConfig, DPOTrainer

    model = HFAttentionForCausalLM(tiny_config("decoder", vocab_size=len(causal_tokenizer), lm_head_transform=True))
    pairs = datasets.Dataset.from_dict(
        {"prompt": ["Open the"] * 4, "chosen": [" file."] * 4, "rejected": [" door."] * 4}
    )
    args = DPOConfig(
        output_dir=str(tmp_path / "dpo"),
        report_to="none",
        use_cpu=True,
        max_steps=1,
        per_device_train_batch_size=2,
        disable_tqdm=True,
    )
    with pytest.raises(ValueError, match="lm_head_transform=True.*TRL computes the loss"):
        DPOTrainer(
            model=model,
            ref_model=copy.deepcopy(model),
            args=args,
            train_dataset=pairs,
            processing_class=causal_tokenizer,
        )


def test_trl_reward_trainer_scores_each_text_at_its_last_token(causal_tokenizer, tmp_path):
    """TRL's RewardTrainer on the decoder family's sequence classifier: its loss on a padded batch of preference pairs
    is the model's own reward of each text alone, and training steps run."""
    from trl import RewardConfig, RewardTrainer

    model = HFAttentionDecoderForSequenceClassification(
        tiny_config(
            "decoder",
            vocab_size=len(causal_tokenizer),
            num_labels=1,
            pad_token_id=causal_tokenizer.pad_token_id,
            position_encoding="rotary",
        )
    )
    pairs = datasets.Dataset.from_dict(
        {
            "chosen": [text[:120] for text in TEXTS[:8]],
            "rejected": [text[:40] for text in TEXTS[8:16]],
        }
    )
    args = RewardConfig(
        output_dir=str(tmp_path / "reward"),
        report_to="none",
        use_cpu=True,
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = RewardTrainer(model=model, args=args, train_dataset=pairs, processing_class=causal_tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    assert (batch["attention_mask"] == 0).any()  # the pairs differ in length: padded
    model.eval()
    with torch.no_grad():
        trl_loss = trainer.compute_loss(model, dict(batch))
        rewards = [
            model(ids[mask.bool()][None]).logits[0, 0]
            for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
        ]
    chosen, rejected = torch.stack(rewards).chunk(2)
    own = -torch.nn.functional.logsigmoid(chosen - rejected).mean()
    torch.testing.assert_close(trl_loss, own, rtol=0, atol=1e-5)
    model.train()
    result = trainer.train()
    assert torch.isfinite(torch.tensor(result.training_loss))


def test_lm_eval_loglikelihood_is_the_models_own(causal_tokenizer):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    model = HFAttentionForCausalLM(
        tiny_config("decoder", vocab_size=len(causal_tokenizer), position_encoding="alibi")
    ).eval()
    lm = HFLM(pretrained=model, tokenizer=causal_tokenizer, batch_size=2, device="cpu")
    pairs = [
        ("The with statement", " is used to wrap"),
        ("A class definition", " defines a class object."),
        ("Open", " file"),
    ]
    requests = [Instance(request_type="loglikelihood", doc={}, arguments=pair, idx=i) for i, pair in enumerate(pairs)]
    results = lm.loglikelihood(requests, disable_tqdm=True)
    for (context, continuation), (logprob, _greedy) in zip(pairs, results, strict=True):
        context_ids, continuation_ids = lm._encode_pair(context, continuation)
        ids = torch.tensor([context_ids + continuation_ids])
        with torch.no_grad():
            logprobs = model(ids[:, :-1]).logits.log_softmax(-1)[0, -len(continuation_ids) :]
        own = logprobs.gather(-1, torch.tensor(continuation_ids)[:, None]).sum().item()
        assert logprob == pytest.approx(own, abs=1e-4)


@pytest.fixture(scope="module")
def encoder_checkpoint(tmp_path_factory):
    tokenizer = make_tokenizer("encoder", TEXTS)
    directory = tmp_path_factory.mktemp("encoder")
    HFAttentionForMaskedLM(tiny_config("encoder", vocab_size=len(tokenizer), norm_position="pre")).save_pretrained(
        directory
    )
    tokenizer.save_pretrained(directory)
    return directory


SENTENCES = ["Open the file.", "The with statement wraps a block.", "Classes define objects and their methods."]


def _mean_pooled(directory) -> torch.Tensor:
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(directory), AutoModel.from_pretrained(directory).eval()
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    return (hidden * mask).sum(1) / mask.sum(1)


def test_sentence_transformers_embeddings_are_mean_pooled_hidden_states(encoder_checkpoint):
    from sentence_transformers import SentenceTransformer

    embeddings = SentenceTransformer(str(encoder_checkpoint), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(embeddings.cpu(), _mean_pooled(encoder_checkpoint), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_sentence_transformers_through_remote_code_without_hf_attention(encoder_checkpoint, tmp_path):
    script = textwrap.dedent("""
        import sys, json
        sys.modules["hf_attention"] = None  # only the checkpoint's own code may be used
        from sentence_transformers import SentenceTransformer
        model = SentenceTransformer(sys.argv[1], device="cpu", trust_remote_code=True)
        first = model[0].auto_model
        assert type(first).__module__.startswith("transformers_modules"), type(first).__module__
        print(json.dumps(model.encode(json.loads(sys.argv[2])).tolist()))
    """)
    env = {
        "PATH": os.environ.get("PATH", ""),
        **thread_env(),
        "HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, str(encoder_checkpoint), json.dumps(SENTENCES)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    embeddings = torch.tensor(json.loads(done.stdout.strip().splitlines()[-1]))
    torch.testing.assert_close(embeddings, _mean_pooled(encoder_checkpoint), rtol=0, atol=1e-5)
