"""Packed sequences (several texts in one row, `position_ids` restarting at 0 for each, no attention mask): every
text attends only to itself, for every positional scheme and both backends, as transformers' own models do."""

import pytest
import torch
from conftest import POSITION_ENCODINGS, build
from transformers import DataCollatorWithFlattening, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM, from_hf
from hf_attention.modeling.masks import packed_documents

LENGTHS = (6, 5, 3)


def _texts() -> list[torch.Tensor]:
    return [torch.randint(3, 99, (1, n)) for n in LENGTHS]


def _packed(texts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """One row holding `texts` back to back, positions restarting at each: what DataCollatorWithFlattening gives."""
    batch = DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": t[0].tolist()} for t in texts])
    return batch["input_ids"], batch["position_ids"]


def _pieces(output: torch.Tensor) -> list[torch.Tensor]:
    return list(output.split(list(LENGTHS), dim=1))


def test_documents_are_found_where_positions_restart():
    positions = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2], [0, 1, 2, 3, 4, 5, 6, 7]])
    assert packed_documents(positions).tolist() == [[0, 0, 0, 1, 1, 2, 2, 2], [0] * 8]


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
@pytest.mark.parametrize("family", ["decoder", "encoder"])
def test_packed_row_equals_its_texts_one_by_one(family, position_encoding, backend):
    model_class = HFAttentionForCausalLM if family == "decoder" else HFAttentionEncoderModel
    model = build(model_class, family, position_encoding=position_encoding, norm_position="pre")
    model.set_attn_implementation(backend)
    texts = _texts()
    ids, positions = _packed(texts)
    with torch.no_grad():
        call = {"use_cache": False} if family == "decoder" else {}
        packed = model(ids, position_ids=positions, **call)
        packed = packed.logits if family == "decoder" else packed.last_hidden_state
        for piece, text in zip(_pieces(packed), texts, strict=True):
            alone = model(text, **call)
            alone = alone.logits if family == "decoder" else alone.last_hidden_state
            torch.testing.assert_close(piece, alone, rtol=0, atol=1e-5)


def test_several_packed_rows_in_a_batch():
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="alibi")
    texts = _texts()
    ids, positions = _packed(texts)
    ids2, positions2 = _packed(texts[::-1])  # other boundaries in the second row
    with torch.no_grad():
        batch = model(torch.cat([ids, ids2]), position_ids=torch.cat([positions, positions2]), use_cache=False).logits
        single = model(ids, position_ids=positions, use_cache=False).logits
        single2 = model(ids2, position_ids=positions2, use_cache=False).logits
    torch.testing.assert_close(batch, torch.cat([single, single2]), rtol=0, atol=1e-5)


def test_consecutive_positions_change_nothing():
    """One text per row with explicit positions 0..T-1 is the ordinary causal case (the fast path stays)."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")
    ids = torch.randint(3, 99, (2, 9))
    with torch.no_grad():
        explicit = model(ids, position_ids=torch.arange(9)[None], use_cache=False).logits
        default = model(ids, use_cache=False).logits
    torch.testing.assert_close(explicit, default, rtol=0, atol=0)


@pytest.mark.parametrize("reference", ["llama", "gpt2"])
def test_packed_batch_matches_hf_reference(reference):
    if reference == "llama":
        hf = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=99,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=64,
            )
        )
    else:
        hf = GPT2LMHeadModel(
            GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=1, eos_token_id=2)
        )
    hf.eval()
    ours = from_hf(hf).eval()
    texts = _texts()
    ids, positions = _packed(texts)
    with torch.no_grad():
        expected = hf(ids, position_ids=positions, use_cache=False).logits
        got = ours(ids, position_ids=positions, use_cache=False).logits
        alone = hf(texts[1], use_cache=False).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)
    torch.testing.assert_close(_pieces(expected)[1], alone, rtol=0, atol=1e-4)  # the reference does split them


def test_seq2seq_decoder_self_attention_splits_too():
    """Restarting `decoder_position_ids` split the decoder's self-attention; cross-attention sees the source."""
    model = build(HFAttentionForSeq2SeqLM, "seq2seq", position_encoding="learned")
    source = torch.randint(3, 99, (1, 7))
    texts = _texts()
    ids, positions = _packed(texts)
    with torch.no_grad():
        packed = model(source, decoder_input_ids=ids, decoder_position_ids=positions, use_cache=False).logits
        alone = model(source, decoder_input_ids=texts[2], use_cache=False).logits
    torch.testing.assert_close(_pieces(packed)[2], alone, rtol=0, atol=1e-5)


# ------------------------------------------------------------------------------- padding-free causal LM training


def _document_features(packed: bool, block_size: int = 48):
    import datasets
    from text_fixtures import make_tokenizer, pydoc_paragraphs

    from training.objectives.causal_lm import causal_lm_document_features

    texts = pydoc_paragraphs(60)
    tokenizer = make_tokenizer("decoder", texts)
    split = datasets.Dataset.from_dict({"text": texts})
    return tokenizer, causal_lm_document_features(split, tokenizer, block_size=block_size, packed=packed)


def _pieces_of(row: dict) -> list[tuple[int, ...]]:
    starts = [i for i, p in enumerate(row["position_ids"]) if p == 0] + [len(row["input_ids"])]
    return [tuple(row["input_ids"][a:b]) for a, b in zip(starts, starts[1:], strict=False)]


def test_packed_rows_are_full_rows_of_the_texts_with_restarting_positions():
    from text_fixtures import pydoc_paragraphs

    tokenizer, packed = _document_features(packed=True)
    assert all(len(row["input_ids"]) == 48 for row in packed)  # no padding
    stream = [
        t
        for text in tokenizer(pydoc_paragraphs(60))["input_ids"]  # the texts (+ eos) one after the other
        for t in (text if text[-1] == tokenizer.eos_token_id else text + [tokenizer.eos_token_id])
    ]
    packed_stream = [t for row in packed for t in row["input_ids"]]
    assert packed_stream == stream[: len(packed_stream)]
    shared = 0
    for row in packed:
        starts = {i for i, p in enumerate(row["position_ids"]) if p == 0}
        assert 0 in starts
        shared += len(starts) > 1  # texts sharing a row
        assert all((row["labels"][i] == -100) == (i in starts) for i in range(len(row["labels"])))
        assert all(b in (a + 1, 0) for a, b in zip(row["position_ids"], row["position_ids"][1:], strict=False))
    assert shared > len(packed) // 4


def test_a_packed_batch_has_the_loss_of_its_texts_padded_one_per_row():
    """Packed rows (positions restarting, no attention mask, no padding) and the same texts one per row, padded:
    the same token-normalised loss."""
    from training.args import DataArguments
    from training.objectives import OBJECTIVES

    tokenizer, packed = _document_features(packed=True)
    model = build(
        HFAttentionForCausalLM,
        "decoder",
        vocab_size=len(tokenizer),
        position_encoding="alibi",
        max_position_embeddings=64,
    )
    rows = [packed[i] for i in range(4)]
    texts = [
        {"input_ids": list(piece), "labels": [-100, *piece[1:]]}
        for row in rows
        for piece in _pieces_of(row)
        if len(piece) > 1
    ]
    make_collator = OBJECTIVES["causal_lm"].data.make_collator
    packed_batch = make_collator(tokenizer, model, DataArguments(causal_lm_layout="packed"))(rows)
    padded_batch = make_collator(tokenizer, model, DataArguments(causal_lm_layout="padded"))(texts)
    assert "attention_mask" not in packed_batch and packed_batch["position_ids"].shape == (4, 48)
    with torch.no_grad():
        packed_loss = model(**packed_batch, use_cache=False).loss
        torch.testing.assert_close(packed_loss, model(**padded_batch, use_cache=False).loss, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_training_job_with_document_layouts(tmp_path, layout):
    from test_training import argv, train_losses

    from training.args import parse_args
    from training.train import run

    results = run(
        *parse_args(
            argv(
                "causal_lm",
                tmp_path / layout,
                "--causal_lm_layout",
                layout,
                "--max_train_samples",
                "128",
                "--max_steps",
                "12",
                "--eval_steps",
                "0",
            )
        )
    )
    losses = train_losses(tmp_path / layout)
    assert len(losses) == 12 and losses[-1] < losses[0] and results["test_loss"] > 0
    with pytest.raises(ValueError, match="--causal_lm_layout='flat' is not supported; allowed values are 'blocks'"):
        parse_args(["--objective", "causal_lm", "--causal_lm_layout", "flat"])
