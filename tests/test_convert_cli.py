"""`hf-attention convert SRC DST`: a saved reference checkpoint (+ tokenizer) becomes an hf_attention checkpoint that
loads with the Auto classes and gives the reference's outputs."""

import pytest
import torch
from test_parity_hf import build_reference
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedTokenizerFast,
    RobertaConfig,
)

import hf_attention  # noqa: F401  (registers the Auto classes)
from hf_attention.commands.cli import main
from hf_attention.conversion.from_hf import convert_checkpoint

AUTO = {
    "gpt2": AutoModelForCausalLM,
    "llama": AutoModelForCausalLM,
    "llama_classifier": AutoModelForSequenceClassification,
    "bert": AutoModel,
    "bert_mlm": AutoModelForMaskedLM,
    "bart": AutoModelForSeq2SeqLM,
    "t5": AutoModelForSeq2SeqLM,
}


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer over the 99 ids of the tiny models: "w5 w17" → [5, 17]."""
    vocab = {"<pad>": 0, "<unk>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, 99)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", unk_token="<unk>", eos_token="</s>")


@pytest.mark.parametrize("name", list(AUTO))
def test_convert_command(name, tmp_path):
    source, destination = tmp_path / "source", tmp_path / "converted"
    reference = build_reference(name)
    reference.save_pretrained(source)
    tiny_tokenizer().save_pretrained(source)

    assert main(["convert", str(source), str(destination)]) == 0

    model = AUTO[name].from_pretrained(destination, attn_implementation="eager").eval()
    assert type(model).__module__.startswith("hf_attention")
    tokenizer = AutoTokenizer.from_pretrained(destination)
    batch = tokenizer(["w5 w17 w33 w8 w61 w40", "w7 w21 w3"], padding=True, return_tensors="pt")
    assert batch["input_ids"][0, :3].tolist() == [5, 17, 33]
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if reference.config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.tensor([[0, 9, 4, 12], [0, 30, 11, 6]])
    with torch.no_grad():
        theirs, ours = reference(**inputs), model(**inputs)
    key = "logits" if "logits" in theirs else "last_hidden_state"
    real = None if reference.config.is_encoder_decoder or theirs[key].dim() == 2 else batch["attention_mask"].bool()
    their_values, our_values = (theirs[key], ours[key]) if real is None else (theirs[key][real], ours[key][real])
    assert (their_values - our_values).abs().max().item() <= 1e-4
    if reference.can_generate():
        assert model.generation_config.to_diff_dict() == reference.generation_config.to_diff_dict()


def test_convert_without_tokenizer(tmp_path, caplog):
    build_reference("gpt2").save_pretrained(tmp_path / "source")
    assert main(["convert", str(tmp_path / "source"), str(tmp_path / "converted")]) == 0
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "converted").config.model_type == "hf_attention_decoder"
    assert not (tmp_path / "converted" / "tokenizer.json").exists()


def test_convert_refuses_unsupported_model_type(tmp_path, capsys):
    source = tmp_path / "roberta"
    RobertaConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4).save_pretrained(source)
    assert main(["convert", str(source), str(tmp_path / "out")]) == 1
    assert "error: " in capsys.readouterr().err.splitlines()[-1]
    with pytest.raises(ValueError, match="model_type 'roberta' is not supported"):
        convert_checkpoint(str(source), tmp_path / "out")
    assert not (tmp_path / "out").exists()
