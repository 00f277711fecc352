"""Export: ONNX through PyTorch's dynamo exporter (dynamic batch and length) run by onnxruntime, and TorchScript
tracing (also the TorchScript ONNX exporter), for the encoder, the decoder without a cache and the seq2seq encoder."""

import numpy as np
import onnxruntime
import pytest
import torch
from conftest import build

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM


class _Outputs(torch.nn.Module):
    """(input_ids, attention_mask) → one tensor: the exported graph's single output."""

    def __init__(self, family: str, model: torch.nn.Module):
        super().__init__()
        self.family, self.model = family, model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.family == "decoder":
            return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        if self.family == "seq2seq":
            return self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


CASES = [
    ("decoder", HFAttentionForCausalLM, "rotary"),
    ("decoder", HFAttentionForCausalLM, "alibi"),
    ("decoder", HFAttentionForCausalLM, "relative"),
    ("encoder", HFAttentionEncoderModel, "learned"),
    ("seq2seq", HFAttentionForSeq2SeqLM, "sinusoidal"),
]


def _inputs(shape: tuple[int, int], padded: bool) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(3, 99, shape)
    mask = torch.ones_like(ids)
    if padded:  # left padding in the first rows, as batched prompts have
        mask[0, :3] = 0
        mask[1, :1] = 0
        ids[mask == 0] = 0
    return ids, mask


def _close_on_real_tokens(got: np.ndarray, expected: torch.Tensor, mask: torch.Tensor) -> None:
    real = mask.bool().numpy()
    np.testing.assert_allclose(got[real], expected.detach().numpy()[real], rtol=0, atol=1e-4)


@pytest.mark.parametrize(("family", "model_class", "position_encoding"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_onnx_dynamo_export_runs_in_onnxruntime_at_other_shapes(tmp_path, family, model_class, position_encoding):
    module = _Outputs(family, build(model_class, family, position_encoding=position_encoding)).eval()
    sample = _inputs((2, 7), padded=False)
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    path = tmp_path / f"{family}.onnx"
    torch.onnx.export(
        module,
        sample,
        str(path),
        dynamo=True,
        input_names=["input_ids", "attention_mask"],
        output_names=["output"],
        dynamic_shapes=({0: batch, 1: length}, {0: batch, 1: length}),
        verbose=False,
    )
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for shape, padded in (((3, 11), False), ((3, 11), True), ((1, 4), False), ((4, 9), True)):
        ids, mask = _inputs(shape, padded)
        (got,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        with torch.no_grad():
            _close_on_real_tokens(got, module(ids, mask), mask)


@pytest.mark.parametrize(("family", "model_class", "position_encoding"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_torchscript_trace(family, model_class, position_encoding):
    """A traced module equals the eager one (on its sample shape: tracing records one path through the model)."""
    module = _Outputs(family, build(model_class, family, position_encoding=position_encoding)).eval()
    for padded in (False, True):
        ids, mask = _inputs((2, 7), padded)
        with torch.no_grad():
            traced = torch.jit.trace(module, (ids, mask), check_trace=False)
            torch.testing.assert_close(traced(ids, mask), module(ids, mask), rtol=0, atol=1e-5)


def test_torchscript_onnx_exporter_on_the_decoder(tmp_path):
    """The TorchScript-based exporter (dynamo=False) with an unpadded sample used to fail on the causal flag."""
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")
    model.config.use_cache = False
    ids = torch.randint(3, 99, (1, 7))
    torch.onnx.export(model, (ids,), str(tmp_path / "raw.onnx"), dynamo=False)  # the call that used to fail
    module = _Outputs("decoder", model).eval()
    mask = torch.ones_like(ids)
    torch.onnx.export(
        module,
        (ids, mask),
        str(tmp_path / "d.onnx"),
        dynamo=False,
        input_names=["input_ids", "attention_mask"],
        output_names=["logits"],
    )
    session = onnxruntime.InferenceSession(str(tmp_path / "d.onnx"), providers=["CPUExecutionProvider"])
    (got,) = session.run(["logits"], {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(got, module(ids, mask).numpy(), rtol=0, atol=1e-4)
