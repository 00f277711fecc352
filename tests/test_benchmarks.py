"""The benchmark machinery (benchmarks/run.py) on a tiny configuration: parity is asserted, every section runs one
timing round, and the JSON and Markdown reports are written. No timing is asserted (the machine is shared)."""

import json

import pytest
import torch

from benchmarks import run


def test_tiny_benchmark_writes_reports(tmp_path):
    results = run.main(["--preset", "tiny", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "tiny.json").read_text())
    report = (tmp_path / "tiny.md").read_text()
    assert {"machine", "plan", "ceiling", "train", "forward", "generate", "length"} <= set(data)
    dtypes = ("fp32", "bf16") if run.native_bf16("cpu") else ("fp32",)  # slow bf16 rows need --bf16-anyway
    assert {(r["family"], r["dtype"]) for r in results["train"]} == {
        (f, d) for f in ("gpt2", "bert", "t5") for d in dtypes}
    if len(dtypes) == 1:
        assert "no native bf16 matmul" in data["notes"][0] and "no native bf16 matmul" in report
    assert all(r["parity_max_logit_diff"] <= run.PARITY_TOLERANCE for r in results["train"])
    assert all(r["ours"]["rounds"] == 1 and r["hf"]["rate"] > 0 for r in results["train"])
    assert all(all(r["same_tokens_as_hf"].values()) for r in results["generate"])
    assert {r["variant"] for r in results["length"]} == {"sdpa", "eager"}
    for heading in ("Training step", "Forward latency", "Greedy generation", "Sequence length", "Ceiling"):
        assert heading in report


def test_bf16_rows_run_on_request_whatever_the_cpu(tmp_path):
    results = run.main(["--preset", "tiny", "--sections", "train", "--families", "gpt2", "--bf16-anyway",
                        "--out", str(tmp_path)])
    assert [r["dtype"] for r in results["train"]] == ["fp32", "bf16"] and results["notes"] == []


def test_parity_assertion_refuses_different_models():
    plan = run.PRESETS["tiny"]
    reference, ours = run.make_pair("gpt2", plan, "cpu")
    with torch.no_grad():
        ours.lm_head.weight.add_(1.0)  # tied: changes the embedding too, so the logits differ
    batch = run.training_batch("gpt2", plan, 2, 8, "cpu")
    with pytest.raises(AssertionError, match="refusing to time"):
        run.assert_parity("gpt2", reference, ours, batch)


def test_flop_formula_counts_matmuls_and_causal_attention():
    plan = run.PRESETS["tiny"]
    _, ours = run.make_pair("llama", plan, "cpu")
    batch, length = 2, 16
    linear = sum(m.in_features * m.out_features for m in ours.modules() if isinstance(m, torch.nn.Linear))
    attention = plan.layers * 2 * 2 * batch * length * length * plan.hidden / 2  # causal: half of QKᵀ and AV
    expected = 3 * (2 * linear * batch * length + attention)
    assert run.model_flops(ours, batch=batch, source_length=length, target_length=length, training=True) == expected
