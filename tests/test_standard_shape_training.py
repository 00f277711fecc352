"""Ours in BART's shape trains exactly as Hugging Face's BART does.

The translation model in BART's shape (learned positions with BART's 2-row offset, an embedding LayerNorm, post-norm,
ReLU, tied embeddings) once scored test BLEU 1.23 where HF's BART scored 12.3, in runs on different machines and
corpora. These tests hold what rules the model and the training step out as the cause: from the same weights, the two
take the same optimizer steps through training.train's own loss and optimizer (label smoothing and the unlikelihood
term included), and our initialisation has BART's statistics tensor by tensor.
"""

from types import SimpleNamespace

import pytest
import torch
from transformers import AutoConfig, BartForConditionalGeneration

from hf_attention import HFAttentionForSeq2SeqLM, to_hf
from training.objectives import objective_for
from training.run.losses import token_loss
from training.train import make_optimizer

VOCAB = 300
SHAPE = {  # the standard config's model, narrowed for speed: the same knobs, smaller widths
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "max_position_embeddings": 64,
    "position_encoding": "learned",
    "position_offset": 2,
    "embedding_norm": True,
    "hidden_dropout_prob": 0.0,
    "attention_dropout": 0.0,
    "label_smoothing": 0.1,
    "unlikelihood_weight": 2.0,
}
TRAIN_ARGS = SimpleNamespace(learning_rate=3e-3, weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-8)


def _ours(seed: int = 0, **overrides) -> HFAttentionForSeq2SeqLM:
    torch.manual_seed(seed)
    return HFAttentionForSeq2SeqLM(AutoConfig.for_model("hf_attention_seq2seq", **{**SHAPE, **overrides}))


def _as_bart(ours: HFAttentionForSeq2SeqLM) -> BartForConditionalGeneration:
    bart = to_hf(ours, "bart")
    # BART's config keeps the two loss options as extra fields, which training.train's loss reads (as for any HF model)
    bart.config.label_smoothing = ours.config.label_smoothing
    bart.config.unlikelihood_weight = ours.config.unlikelihood_weight
    return bart.train()


def _batches(model, count: int) -> list[dict]:
    """Right-padded rows of different lengths, labels padded with -100, decoder inputs as the collator makes them."""
    generator = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(count):
        source = torch.randint(5, VOCAB, (4, 9), generator=generator)
        mask = torch.ones_like(source)
        source[1, 6:], mask[1, 6:] = 0, 0
        labels = torch.randint(5, VOCAB, (4, 7), generator=generator)
        labels[:, 3] = labels[:, 2]  # a repeat, so the unlikelihood term has something to push on
        labels[2, 5:] = -100
        decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)
        batches.append({"input_ids": source, "attention_mask": mask, "labels": labels,
                        "decoder_input_ids": decoder_input_ids})  # fmt: skip
    return batches


def test_ours_in_bart_shape_takes_the_same_training_steps_as_hf_bart():
    objective = objective_for("translation")
    ours = _ours().train()
    bart = _as_bart(ours)
    ours_opt, bart_opt = make_optimizer(ours, TRAIN_ARGS), make_optimizer(bart, TRAIN_ARGS)
    for batch in _batches(ours, 6):
        count = torch.tensor(float((batch["labels"] != -100).sum()))
        losses = []
        for model, optimizer in ((ours, ours_opt), (bart, bart_opt)):
            loss = token_loss(objective, model, batch, count)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    # After six AdamW steps (weight decay, clipping) the weights are still BART's, tensor by tensor, to within 1/30 of
    # one step (Adam moves an entry by about the learning rate whatever its gradient's size, so an entry whose gradient
    # is zero up to rounding, as a key bias's is, may move by a rounding-sized amount in one model and not the other)
    trained = dict(to_hf(ours, "bart").named_parameters())
    for name, parameter in bart.named_parameters():
        torch.testing.assert_close(trained[name], parameter, rtol=1e-4, atol=TRAIN_ARGS.learning_rate / 30, msg=name)


def test_our_start_has_the_statistics_of_barts_own_initialisation():
    """Every tensor's spread at initialisation, ours (read through the BART export) against BART's `_init_weights`
    on the same config: a table or projection started at another scale would train differently from step one."""
    ours = _ours(hidden_size=256, intermediate_size=1024, vocab_size=2000)
    exported = dict(to_hf(ours, "bart").named_parameters())
    torch.manual_seed(0)
    reference = BartForConditionalGeneration(to_hf(ours, "bart").config)
    for name, parameter in reference.named_parameters():
        ours_std, bart_std = exported[name].float().std().item(), parameter.float().std().item()
        assert ours_std == pytest.approx(bart_std, abs=2e-3), name
        assert exported[name].float().mean().item() == pytest.approx(parameter.float().mean().item(), abs=2e-3), name
