"""The gpu preset's code on the CPU: `--preset gpu-tiny` runs every section and contender of `--preset gpu` at a tiny
size, so that what a GPU run measures keeps working between the (rare) runs on a GPU. No timing is asserted."""

import json

import pytest
import torch

from benchmarks import report, run
from benchmarks.models import reference_model
from benchmarks.plan import PRESETS
from hf_attention.runtime.compiled_generation import CPU_INDUCTOR_OPTIONS, default_compile_config

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("benchmarks_gpu")


@pytest.fixture(scope="module")
def gpu_tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-tiny")
    return run.main(["--preset", "gpu-tiny", "--bf16-anyway", "--out", str(out)]), out


def test_gpu_preset_models_are_gpt2_124m_and_a_200m_llama():
    plan = PRESETS["gpu"]
    with torch.device("meta"):
        sizes = {
            family: sum(p.numel() for p in reference_model(family, plan).parameters())
            for family in plan.train_families
        }
    assert 124e6 < sizes["gpt2"] < 125e6
    assert 190e6 < sizes["llama"] < 210e6
    assert plan.seq == 1024 and plan.train_dtypes == ("bf16",) and plan.gen_batches == (1, 32)


@pytest.mark.slow
def test_gpu_tiny_runs_every_section_and_contender(gpu_tiny_run):
    results, out = gpu_tiny_run
    plan = PRESETS["gpu-tiny"]
    assert json.loads((out / "gpu-tiny.json").read_text())["plan"]["name"] == "gpu-tiny"
    train = {row["family"]: row for row in results["train"]}
    assert set(train) == {"gpt2", "llama"}
    assert train["gpt2"]["shape"]["hidden"] == 48 and train["llama"]["shape"]["kv_heads"] == 2  # each its own shape
    assert all(row["parity_max_logit_diff"] <= 1e-4 and row["dtype"] == "bf16" for row in train.values())
    greedy = [row for row in results["generate"] if row["batch"] in plan.gen_compiled_batches]
    for row in greedy:
        assert all(row["same_tokens_as_hf"].values()), row
        assert {"ours_compiled_static", "ours_cuda_graphs", "hf_compiled_static"} <= set(row)
        assert {"cuda_graphs", "cuda_graphs_vs_hf_static"} <= set(row["speedup_spread"])
    (served,) = results["generate_batch"]
    assert served["same_tokens_as_hf"] and served["requests"] == plan.batch_requests and served["speedup"] > 0
    assert [row["length"] for row in results["flex_train"]] == list(plan.flex_lengths)
    assert all(row["loss_difference"] <= 1e-3 and not row["with_grad"] for row in results["flex_train"])
    markdown = (out / "gpu-tiny.md").read_text()
    for heading in ("Compiled decoding", "Continuous batching", "FlexAttention training on packed documents"):
        assert heading in markdown


@pytest.mark.slow
def test_a_gpu_run_fills_only_the_generated_block_of_the_performance_page(gpu_tiny_run, tmp_path):
    results, out = gpu_tiny_run
    page = tmp_path / "performance.md"
    original = report.GPU_PAGE.read_text()
    page.write_text(original)
    report.main([str(out / "gpu-tiny.json"), "--gpu-docs", str(page)])
    start, end = report.GPU_BLOCK
    written = page.read_text()
    assert written.split(start)[0] == original.split(start)[0]
    assert written.split(end)[1] == original.split(end)[1]
    assert "Compiled decoding" in written.split(start)[1] and "torch " + torch.__version__ in written
    # a run split by sections: the tables of both files
    first, second = ({k: v for k, v in results.items() if k not in drop} for drop in (("train",), ("generate",)))
    for name, part in (("first.json", first), ("second.json", second)):
        (tmp_path / name).write_text(json.dumps(part))
    page.write_text(original)
    report.main([str(tmp_path / "first.json"), str(tmp_path / "second.json"), "--gpu-docs", str(page)])
    assert "Training step" in page.read_text() and "Compiled decoding" in page.read_text()
    page.write_text("no block here")
    with pytest.raises(ValueError, match="no generated GPU block"):
        report.main([str(out / "gpu-tiny.json"), "--gpu-docs", str(page)])


def test_cuda_device_without_cuda_is_refused(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        run.main(["--preset", "gpu-tiny", "--device", "cuda"])
    assert "sees no CUDA device" in capsys.readouterr().err


def test_compiled_generate_uses_cuda_graphs_on_a_gpu_and_the_cpp_wrapper_on_a_cpu():
    on_gpu, on_cpu = default_compile_config(torch.device("cuda")), default_compile_config(torch.device("cpu"))
    assert on_gpu.mode == "reduce-overhead" and on_gpu.fullgraph and on_gpu._compile_all_devices
    assert on_cpu.options == CPU_INDUCTOR_OPTIONS and on_cpu.fullgraph


def test_the_liger_contender_leaves_transformers_llama_plain_for_the_other_contenders(monkeypatch):
    """liger-kernel, given a model, also replaces transformers' Llama classes for models built later; the benchmark
    puts them back (a stand-in for liger-kernel here: it needs a GPU)."""
    import sys
    import types

    from transformers.models.llama import modeling_llama

    from benchmarks.train import LIGER_PATCHED_NAMES, liger_model

    patched = []

    def apply_liger_kernel_to_llama(rope, model):
        assert rope is False
        patched.append(model)
        for name in LIGER_PATCHED_NAMES:
            setattr(modeling_llama, name, object())

    fake = types.ModuleType("liger_kernel.transformers")
    fake.apply_liger_kernel_to_llama = apply_liger_kernel_to_llama
    monkeypatch.setitem(sys.modules, "liger_kernel", types.ModuleType("liger_kernel"))
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", fake)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    before = {name: getattr(modeling_llama, name) for name in LIGER_PATCHED_NAMES}
    reference = reference_model("llama", PRESETS["gpu-tiny"])
    model = liger_model(reference, "llama", "cuda")
    assert patched == [model] and model is not reference
    assert {name: getattr(modeling_llama, name) for name in LIGER_PATCHED_NAMES} == before
    assert liger_model(reference, "gpt2", "cuda") is None and liger_model(reference, "llama", "cpu") is None
