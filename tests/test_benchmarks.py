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


def test_encoder_batch_is_berts_masked_lm_recipe_and_its_flops_count_only_labelled_rows_backward():
    plan = run.PRESETS["full"]
    batch = run.training_batch("bert", plan, plan.batch, plan.seq, "cpu")
    labelled = batch["labels"] != -100
    assert 0.10 < labelled.float().mean() < 0.20  # 15% of 1024 positions, drawn
    assert (batch["input_ids"][~labelled] == batch["labels"].new_tensor(run.MASK_ID)).sum() == 0  # inputs kept
    masked = batch["input_ids"][labelled] == run.MASK_ID
    assert 0.7 < masked.float().mean() < 0.9  # ~80% of the labelled positions read [MASK]
    _, ours = run.make_pair("bert", run.PRESETS["tiny"], "cpu")
    head = ours.lm_head.in_features * ours.lm_head.out_features
    full = run.model_flops(ours, batch=2, source_length=16, target_length=16, training=True)
    sparse = run.model_flops(ours, batch=2, source_length=16, target_length=16, training=True, labelled_fraction=0.25)
    assert full - sparse == 4 * head * 2 * 16 * 0.75  # the head's backward (dh, dW) over the unlabelled rows
