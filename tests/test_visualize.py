"""Attention heatmaps: the plotted arrays are the model's attention weights, with one labelled tick per token."""

import pytest
import torch
from conftest import tiny_config
from PIL import Image

from hf_attention import HFAttentionForCausalLM, HFAttentionForMaskedLM, HFAttentionForSeq2SeqLM
from hf_attention.commands.cli import main
from hf_attention.inspection.heatmaps import plot_attention, token_labels

TEXT = "Return the value of the named attribute"
TARGET = "Gibt den Wert zurück"
FAMILIES = {"encoder": HFAttentionForMaskedLM, "decoder": HFAttentionForCausalLM, "seq2seq": HFAttentionForSeq2SeqLM}


def model_and_tokenizer(trained_tokenizer, family: str, backend: str = "sdpa"):
    """A tiny model loaded with a fused backend (which never computes weights) unless told otherwise."""
    tokenizer = trained_tokenizer(family)
    config = tiny_config(family, vocab_size=len(tokenizer), position_encoding="rotary")
    model = FAMILIES[family]._from_config(config, attn_implementation=backend).eval()
    return model, tokenizer


def tick_labels(axis) -> tuple[list[str], list[str]]:
    return [t.get_text() for t in axis.get_xticklabels()], [t.get_text() for t in axis.get_yticklabels()]


@pytest.mark.parametrize("family", FAMILIES)
def test_self_attention_map_is_the_models_attention(trained_tokenizer, tmp_path, family):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, family)
    assert model.config._attn_implementation == "sdpa"
    result = plot_attention(model, tokenizer, TEXT, layer=-1, head="mean", target=TARGET, path=tmp_path / "map.png")

    encoded = tokenizer(TEXT, return_tensors="pt")
    extra = {"decoder_input_ids": torch.tensor([[1, 5, 6]])} if family == "seq2seq" else {}
    with torch.no_grad():
        outputs = model(**encoded, **extra, output_attentions=True)
    attentions = outputs.encoder_attentions if family == "seq2seq" else outputs.attentions
    expected = attentions[-1][0].mean(0)  # (Q, K), head average of the last layer
    torch.testing.assert_close(torch.from_numpy(result.weights), expected)
    assert model.config._attn_implementation == "sdpa"  # the per-call eager path left the model as it was

    tokens = len(encoded["input_ids"][0])
    assert result.query_tokens == result.key_tokens == token_labels(tokenizer, encoded["input_ids"][0].tolist())
    assert tick_labels(result.figure.axes[0]) == (result.key_tokens, result.query_tokens)
    assert len(result.key_tokens) == tokens and result.layer == len(attentions) - 1
    with Image.open(tmp_path / "map.png") as image:
        assert image.format == "PNG" and min(image.size) > 100


def test_one_panel_per_head(trained_tokenizer):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, "decoder")
    result = plot_attention(model, tokenizer, TEXT, layer=0)
    encoded = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        expected = model(**encoded, output_attentions=True).attentions[0][0]  # (H, Q, K)
    torch.testing.assert_close(torch.from_numpy(result.weights), expected)
    heatmaps = [axis for axis in result.figure.axes if axis.images]
    assert len(heatmaps) == model.config.num_attention_heads
    assert all(tick_labels(axis) == (result.key_tokens, result.query_tokens) for axis in heatmaps)
    assert (result.weights[:, 0, 1:] == 0).all()  # causal: the first token sees only itself
    single = plot_attention(model, tokenizer, TEXT, layer=0, head=2)
    torch.testing.assert_close(torch.from_numpy(single.weights), expected[2])


def test_cross_attention_with_a_given_target(trained_tokenizer):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, "seq2seq")
    result = plot_attention(model, tokenizer, TEXT, kind="cross", target=TARGET, head=1)
    source = tokenizer(TEXT, return_tensors="pt")
    labels = tokenizer(text_target=TARGET, return_tensors="pt")["input_ids"]
    decoder_inputs = torch.cat([torch.tensor([[model.config.decoder_start_token_id]]), labels[:, :-1]], dim=1)
    with torch.no_grad():
        outputs = model(**source, decoder_input_ids=decoder_inputs, output_attentions=True)
    torch.testing.assert_close(torch.from_numpy(result.weights), outputs.cross_attentions[-1][0, 1])
    assert result.key_tokens == token_labels(tokenizer, source["input_ids"][0].tolist())
    assert result.query_tokens == token_labels(tokenizer, decoder_inputs[0].tolist())
    decoder = plot_attention(model, tokenizer, TEXT, kind="decoder", target=TARGET, head="mean")
    torch.testing.assert_close(torch.from_numpy(decoder.weights), outputs.decoder_attentions[-1][0].mean(0))


def test_cross_attention_generates_the_target(trained_tokenizer):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, "seq2seq")
    result = plot_attention(model, tokenizer, TEXT, kind="cross", head="mean", max_new_tokens=5)
    generated = model.generate(**tokenizer(TEXT, return_tensors="pt"), max_new_tokens=5, do_sample=False)
    assert result.query_tokens == token_labels(tokenizer, generated[0, :-1].tolist())
    assert result.weights.shape == (generated.shape[1] - 1, len(result.key_tokens))


@pytest.mark.parametrize(
    ("family", "options", "message"),
    [
        ("decoder", {"kind": "cross"}, "kind='cross' needs an encoder-decoder model"),
        ("encoder", {"kind": "decoder"}, "needs an encoder-decoder model"),
        ("decoder", {"kind": "keys"}, "kind='keys' is not supported"),
        ("decoder", {"layer": 2}, "layer=2 is out of range"),
        ("decoder", {"head": 4}, "head=4 is out of range"),
        ("decoder", {"head": "max"}, "head='max' is not supported"),
    ],
)
def test_bad_options_are_clear_errors(trained_tokenizer, family, options, message):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, family)
    with pytest.raises(ValueError, match=message):
        plot_attention(model, tokenizer, TEXT, **options)


def test_empty_text_is_a_clear_error(trained_tokenizer):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, "decoder")
    with pytest.raises(ValueError, match="empty"):
        plot_attention(model, tokenizer, "  ")


@pytest.mark.parametrize(("family", "extra"), [("decoder", []), ("seq2seq", ["--kind", "cross", "--head", "mean"])])
def test_command_line(saved_checkpoint, tmp_path, capsys, family, extra):
    folder = saved_checkpoint(FAMILIES[family], family)
    out = tmp_path / "map.png"
    assert main(["attention-map", "--model", str(folder), "--text", TEXT, "--out", str(out), *extra]) == 0
    assert out.exists() and out.stat().st_size > 1000
    assert "wrote" in capsys.readouterr().out
