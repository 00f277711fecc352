"""The benchmark machinery (benchmarks/) on a tiny configuration: parity and identical tokens are asserted, every
section runs one or two timing rounds, and the JSON, the Markdown report and the documentation page are written.
No timing is asserted (the machine is shared)."""

import json
import re
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from transformers import AutoConfig, AutoModelForCausalLM

from benchmarks import before_after, report, run
from benchmarks.flops import decode_step_flops, model_flops
from benchmarks.generate import MODES
from benchmarks.harness import paired_ratio_spread
from benchmarks.machine import native_bf16
from benchmarks.models import MASK_ID, PARITY_TOLERANCE, assert_parity, make_pair, training_batch
from benchmarks.plan import PRESETS
from hf_attention import HFAttentionForCausalLM

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("benchmarks")

HEADINGS = (
    "Ceiling",
    "Training step",
    "Forward latency",
    "Generation",
    "Greedy generation without a cache",
    "Sequence length",
    "Long inputs: SDPA against FlexAttention",
    "Decode-step profile",
    "Per-step overhead",
    "Training memory by vocabulary",
    "Latent attention and linear-attention states: the decoding cache",
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny preset through every section, once for the module: (results returned, its output folder)."""
    out = tmp_path_factory.mktemp("tiny")
    return run.main(["--preset", "tiny", "--out", str(out)]), out


def test_tiny_benchmark_writes_reports(tiny_run):
    results, out = tiny_run
    data = json.loads((out / "tiny.json").read_text())
    markdown = (out / "tiny.md").read_text()
    assert {"machine", "plan", *PRESETS["tiny"].sections} <= set(data)
    dtypes = ("fp32", "bf16") if native_bf16("cpu") else ("fp32",)  # slow bf16 rows need --bf16-anyway
    assert {(r["family"], r["dtype"]) for r in results["train"]} == {
        (f, d) for f in ("gpt2", "bert", "t5") for d in dtypes
    }
    if len(dtypes) == 1:
        assert "no native bf16 matmul" in data["notes"][0] and "no native bf16 matmul" in markdown
    assert all(r["parity_max_logit_diff"] <= PARITY_TOLERANCE for r in results["train"])
    assert all(r["ours"]["rounds"] == 1 and r["hf"]["rate"] > 0 for r in results["train"])
    assert {r["variant"] for r in results["length"]} == {"sdpa", "eager"}
    assert {r["case"] for r in results["long_attention"]} == {"causal", "documents", "alibi"}
    assert all(
        r["parity_max_logit_diff"] <= 1e-4 and r["flex_attention"]["rate"] > 0 for r in results["long_attention"]
    )
    assert {"avx512_bf16", "amx"} <= set(data["machine"]) or "cpu_model" not in data["machine"]
    for heading in HEADINGS:
        assert heading in markdown


def test_every_generation_mode_gives_hfs_tokens_and_a_paired_spread(tiny_run):
    results, _ = tiny_run
    plan = PRESETS["tiny"]
    rows = results["generate"]
    assert {(r["family"], r["batch"], r["mode"]) for r in rows} == {
        (f, b, m) for f in plan.gen_families for b in plan.gen_batches for m in MODES
    }
    for row in rows:
        assert all(row["same_tokens_as_hf"].values()), row
        assert row["hf_cache"]["rounds"] == row["ours_cache"]["rounds"] == plan.gen_rounds
        spread = row["speedup_spread"]["cache"]
        assert {"median", "q1", "q3", "ci95_low", "ci95_high", "rounds"} <= set(spread)
        assert spread["ci95_low"] <= spread["median"] <= spread["ci95_high"]
        assert row["speedup_cache"] == spread["median"]
        if row["mode"] == "greedy":  # the uncached rows, and what the cache buys each side
            assert {"hf_no_cache", "ours_no_cache", "speedup_no_cache"} <= set(row)
            assert set(row["cache_gain"]) == {"hf", "ours"}


def test_decode_profile_and_memory_sections(tiny_run):
    results, _ = tiny_run
    plan = PRESETS["tiny"]
    profile = results["decode_profile"]
    pairs = {(f, b) for f in plan.gen_families for b in plan.gen_batches}
    assert {(r["family"], r["batch"]) for r in profile} == pairs
    for row in profile:
        assert row["same_tokens_as_hf"] and row["flops_per_step"] > 0 and row["floor_ms"] is not None
        assert "overhead_ours_minus_hf_ms" in row
        for side in ("hf", "ours"):
            phases = row[side]
            assert {
                "embedding_ms",
                "other_ms",
                "layers_total_ms",
                "final_norm_ms",
                "lm_head_ms",
                "forward_ms",
                "generation_ms",
                "generate_step_ms",
                "overhead_over_floor_ms",
            } <= set(phases)
            assert len(phases["layers_ms"]) == plan.layers and phases["decode_steps_timed"] > 0
            assert phases["aten_ops_per_step"] > 0
    memory = results["memory"]
    assert [(r["family"], r["vocab"]) for r in memory] == [
        (f, v) for f in plan.memory_families for v in plan.memory_vocabs
    ]
    assert all({"hf_peak_bytes", "ours_peak_bytes", "ratio_hf_to_ours", "memory_method"} <= set(r) for r in memory)


def test_report_rerenders_a_results_file_as_the_docs_page(tiny_run, tmp_path):
    _, out = tiny_run
    page = tmp_path / "benchmarks.md"
    report.main([str(out / "tiny.json"), "--docs", str(page)])
    text = page.read_text()
    assert text.startswith("<!-- Generated by `python -m benchmarks.run`") and "do not edit it by hand" in text
    assert "**Machine.**" in text and "AVX512-BF16" in text
    for heading in HEADINGS:
        assert heading in text


def test_committed_docs_page_is_the_render_of_the_results_file_it_names():
    page = Path(__file__).parent.parent / "docs" / "benchmarks.md"
    source = re.search(r"generated by `python -m benchmarks.run` from `([^`]+\.json)`", page.read_text())
    assert source, "docs/benchmarks.md does not name its results file"
    results_file = Path(__file__).parent.parent / source.group(1)
    assert page.read_text() == report.docs_page(json.loads(results_file.read_text()), f"`{source.group(1)}`")


def test_bf16_rows_run_on_request_whatever_the_cpu(tmp_path):
    results = run.main(
        ["--preset", "tiny", "--sections", "train", "--families", "gpt2", "--bf16-anyway", "--out", str(tmp_path)]
    )
    assert [r["dtype"] for r in results["train"]] == ["fp32", "bf16"] and results["notes"] == []
    assert (tmp_path / "tiny-train.json").is_file() and not (
        tmp_path / "tiny.json"
    ).exists()  # a part never replaces the whole


def test_parity_assertion_refuses_different_models():
    plan = PRESETS["tiny"]
    reference, ours = make_pair("gpt2", plan, "cpu")
    with torch.no_grad():
        ours.lm_head.weight.add_(1.0)  # tied: changes the embedding too, so the logits differ
    batch = training_batch("gpt2", plan, 2, 8, "cpu")
    with pytest.raises(AssertionError, match="refusing to time"):
        assert_parity("gpt2", reference, ours, batch)


def test_flop_formula_counts_matmuls_and_causal_attention():
    plan = PRESETS["tiny"]
    _, ours = make_pair("llama", plan, "cpu")
    batch, length = 2, 16
    linear = sum(m.in_features * m.out_features for m in ours.modules() if isinstance(m, torch.nn.Linear))
    attention = plan.layers * 2 * 2 * batch * length * length * plan.hidden / 2  # causal: half of QKᵀ and AV
    expected = 3 * (2 * linear * batch * length + attention)
    assert model_flops(ours, batch=batch, source_length=length, target_length=length, training=True) == expected


def test_decode_step_flops_count_one_token_and_skip_the_cached_cross_attention_projections():
    plan = PRESETS["tiny"]
    _, decoder = make_pair("llama", plan, "cpu")
    linear = sum(m.in_features * m.out_features for m in decoder.modules() if isinstance(m, torch.nn.Linear))
    attention = plan.layers * 2 * 2 * 3 * 10 * plan.hidden  # one query against 10 keys, batch 3
    assert decode_step_flops(decoder, batch=3, context=10) == 2 * linear * 3 + attention
    _, seq2seq = make_pair("bart", plan, "cpu")
    decoder_side = [(n, m) for n, m in seq2seq.named_modules() if ".encoder." not in f".{n}."]
    cross_kv = [m for n, m in decoder_side if "cross_attn" in n and n.endswith(("k_proj", "v_proj"))]
    assert len(cross_kv) == 2 * plan.layers
    linear = sum(m.in_features * m.out_features for _, m in decoder_side if isinstance(m, torch.nn.Linear))
    linear -= sum(m.in_features * m.out_features for m in cross_kv)
    attention = plan.layers * 2 * 2 * (10 + 7) * plan.hidden  # self-attention over 10 keys, cross over 7 sources
    assert decode_step_flops(seq2seq, batch=1, context=10, source_length=7) == 2 * linear + attention


def test_paired_ratio_spread_brackets_the_median():
    spread = paired_ratio_spread([2.0, 2.2, 1.8, 2.0, 2.4], [1.0, 2.0, 1.5, 1.6, 2.0])
    ratios = sorted([2.0, 1.1, 1.2, 1.25, 1.2])
    assert spread["median"] == ratios[2] and spread["rounds"] == 5
    assert ratios[0] <= spread["ci95_low"] <= spread["q1"] <= spread["median"] <= spread["q3"] <= ratios[-1]
    assert spread["ci95_high"] <= ratios[-1]
    assert paired_ratio_spread([1.0], [2.0]) == {
        "median": 0.5,
        "q1": 0.5,
        "q3": 0.5,
        "ci95_low": 0.5,
        "ci95_high": 0.5,
        "rounds": 1,
    }


def test_encoder_batch_is_berts_masked_lm_recipe_and_its_flops_count_only_labelled_rows_backward():
    plan = PRESETS["full"]
    batch = training_batch("bert", plan, plan.batch, plan.seq, "cpu")
    labelled = batch["labels"] != -100
    assert 0.10 < labelled.float().mean() < 0.20  # 15% of 1024 positions, drawn
    assert (batch["input_ids"][~labelled] == batch["labels"].new_tensor(MASK_ID)).sum() == 0  # inputs kept
    masked = batch["input_ids"][labelled] == MASK_ID
    assert 0.7 < masked.float().mean() < 0.9  # ~80% of the labelled positions read [MASK]
    _, ours = make_pair("bert", PRESETS["tiny"], "cpu")
    head = ours.lm_head.in_features * ours.lm_head.out_features
    full = model_flops(ours, batch=2, source_length=16, target_length=16, training=True)
    sparse = model_flops(ours, batch=2, source_length=16, target_length=16, training=True, labelled_fraction=0.25)
    assert full - sparse == 4 * head * 2 * 16 * 0.75  # the head's backward (dh, dW) over the unlabelled rows


def test_before_after_compares_our_code_at_a_revision_with_our_code_now(tmp_path, capsys):
    """HEAD against the working tree: the old package is imported under another name, logits and tokens are checked
    equal before timing, and every row gives a paired ratio with its interval (no timing asserted)."""
    out = tmp_path / "a folder made for it" / "before_after.json"
    families = "gpt2,bert,t5"
    assert (
        before_after.main(["HEAD", "--preset", "tiny", "--rounds", "2", "--families", families, "--out", str(out)])
        == 0
    )
    report_ = json.loads(out.read_text())
    assert report_["revision"] == "HEAD" and report_["machine"]["torch"] == torch.__version__
    rows = report_["rows"]
    assert [(r["section"], r["family"]) for r in rows if r["section"] == "train"] == [
        ("train", "gpt2"),
        ("train", "bert"),
        ("train", "t5"),
    ]
    generated = {(r["family"], r["batch"], r["mode"]) for r in rows if r["section"] == "generate"}
    assert generated == {
        (f, b, m) for f in ("gpt2", "t5") for b in PRESETS["tiny"].gen_batches for m in before_after.TIMED_MODES
    }
    assert all(r["rounds"] == 2 and r["ci95"][0] <= r["before_over_now"] <= r["ci95"][1] for r in rows)
    printed = capsys.readouterr().out.splitlines()  # one JSON line per row as it is measured, then the table
    assert [json.loads(line) for line in printed[: len(rows)]] == rows
    table = printed[len(rows) :]
    assert len(table) == len(rows) + 2 and out.with_suffix(".md").read_text().splitlines() == table
    assert before_after.main(["--render", str(out)]) == 0 and capsys.readouterr().out.splitlines() == table
    # The old copy registered nothing: the Auto classes still build today's classes.
    config = tiny_config("decoder")
    assert type(AutoConfig.for_model(config.model_type)) is type(config)  # what from_pretrained reads config.json as
    assert type(AutoModelForCausalLM.from_config(config)) is HFAttentionForCausalLM


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no-such-revision-anywhere"], "is not a revision of"),
        (["HEAD", "--families", "gpt3"], "unknown section or family: gpt3"),
        (["HEAD", "--rounds", "1"], "at least 2 rounds"),
        (["HEAD", "--preset", "gpu"], "invalid choice: 'gpu'"),
        (["HEAD", "--out", "/dev/null/results.json"], "its folder cannot be created"),
        ([], "give the revision to compare with"),
    ],
)
def test_before_after_refuses_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as raised:
        before_after.main(argv)
    assert message in str(raised.value) + capsys.readouterr().err


def test_memory_section_gives_no_ratio_for_a_peak_too_small_to_see(monkeypatch):
    """A tiny step can need no memory beyond what is resident (RSS peak 0 bytes): the section reports no ratio,
    where it divided by zero (seen once in CI on the tiny preset)."""
    import dataclasses

    from benchmarks import memory
    from benchmarks.harness import Session

    plan = dataclasses.replace(PRESETS["tiny"], memory_vocabs=PRESETS["tiny"].memory_vocabs[:1])
    monkeypatch.setattr(memory, "isolated_peak_memory", lambda step, args, device: 0 if args[2] == "ours" else 4096)
    rows = memory.measure(plan, Session(device="cpu", log=lambda message: None, results={}))
    assert rows and all(r["ours_peak_bytes"] == 0 and r["ratio_hf_to_ours"] is None for r in rows)


def test_qwen3_and_gemma3_rows_and_the_sliding_window_cache(tiny_run):
    """Qwen3 and Gemma 3 through every section a decoder has, at the tiny size: each reference has what sets its
    architecture apart (Qwen3's own head_dim; Gemma 3's five sliding layers to one global with a window shorter than
    the decoded length, query_pre_attn_scalar ≠ head_dim, a final logit cap), parity and HF's tokens hold, and the
    training table names their shapes. Then the tiny run's window_cache section: both sides hold the window's W − 1
    positions, less than the unbounded cache, with HF's tokens."""
    import dataclasses

    from benchmarks import tables
    from benchmarks.harness import Session
    from benchmarks.models import reference_model

    families = ("qwen3", "gemma3")
    plan = dataclasses.replace(
        PRESETS["tiny"],
        train_families=families,
        train_dtypes=("fp32",),
        gen_families=families,
        gen_batches=(1,),
        gen_modes=("greedy",),
    )
    qwen3, gemma3 = (reference_model(family, plan).config for family in families)
    assert qwen3.head_dim != qwen3.hidden_size // qwen3.num_attention_heads
    assert gemma3.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    assert gemma3.sliding_window < plan.gen_prompt + plan.gen_new and gemma3.sliding_window < plan.seq
    assert gemma3.query_pre_attn_scalar != gemma3.head_dim and gemma3.final_logit_softcapping is not None
    results = {"plan": dataclasses.asdict(plan)}
    session = Session(device="cpu", log=lambda message: None, results=results)
    for section in ("train", "forward", "generate", "decode_profile"):
        results[section] = run.MEASURE[section](plan, session)
    assert [(r["family"], r["dtype"]) for r in results["train"]] == [(f, "fp32") for f in families]
    assert all(r["parity_max_logit_diff"] <= PARITY_TOLERANCE for r in results["train"])
    assert [r["family"] for r in results["forward"]] == list(families)
    assert all(all(r["same_tokens_as_hf"].values()) and "speedup_cache" in r for r in results["generate"])
    assert all(r["same_tokens_as_hf"] and "ours" in r for r in results["decode_profile"])
    heading = tables.train_lines(results)[0]
    assert "qwen3: d_model 32, 4 heads, ffn 64, vocab 99, key/value heads 2, head_dim 12" in heading
    assert "gemma3: d_model 32, 4 heads, ffn 64, vocab 99, 6 layers, key/value heads 1, head_dim 12" in heading

    rows, out = tiny_run[0]["window_cache"], tiny_run[1]
    assert [(r["side"], r["window"]) for r in rows] == [
        (s, w) for w in (PRESETS["tiny"].window_size, None) for s in ("hf", "ours")
    ]
    assert all(r["same_tokens_as_hf"] and r["held_end_bytes"] == r["expected_held_bytes"] for r in rows)
    windowed, unbounded = rows[:2], rows[2:]
    assert all(r["positions_max"] == PRESETS["tiny"].window_size - 1 for r in windowed)
    assert all(w["held_max_bytes"] < u["held_end_bytes"] for w, u in zip(windowed, unbounded, strict=True))
    assert "Sliding-window decoding: the key/value cache" in (out / "tiny.md").read_text()


MIXTURE_FAMILIES = ("qwen3_moe", "gpt_oss", "deepseek_v3", "qwen3_next")


def test_mixture_of_experts_families_are_the_real_models_in_miniature():
    """The full run's references of GPT-OSS, DeepSeek-V3, Qwen3-Next and Qwen3-MoE have what sets each apart (built,
    not run), and `--sections train,generate --families ...` measures exactly them."""
    from benchmarks.models import reference_model

    full = PRESETS["full"]
    args = run.parse_args(["--sections", "train,generate", "--families", ",".join(MIXTURE_FAMILIES)])
    plan = run.make_plan(args)
    assert plan.sections == ("train", "generate")
    assert plan.train_families == plan.gen_families == MIXTURE_FAMILIES
    gpt_oss, deepseek, qwen3_next, qwen3_moe = (
        reference_model(family, full).config for family in ("gpt_oss", "deepseek_v3", "qwen3_next", "qwen3_moe")
    )
    assert gpt_oss._attn_implementation == "eager" and qwen3_moe._attn_implementation == "sdpa"
    assert gpt_oss.layer_types == ["sliding_attention", "full_attention"] * 2
    assert gpt_oss.sliding_window < full.seq and gpt_oss.sliding_window < full.gen_prompt + full.gen_new
    assert (gpt_oss.num_local_experts, gpt_oss.num_experts_per_tok, gpt_oss.intermediate_size) == (8, 2, 256)
    assert gpt_oss.rope_parameters["rope_type"] == "yarn" and gpt_oss.attention_bias
    assert (deepseek.q_lora_rank, deepseek.kv_lora_rank) == (192, 64)
    assert (deepseek.qk_nope_head_dim, deepseek.qk_rope_head_dim, deepseek.v_head_dim) == (64, 32, 64)
    assert (deepseek.first_k_dense_replace, deepseek.n_shared_experts) == (1, 1)
    assert (deepseek.n_routed_experts, deepseek.n_group, deepseek.topk_group) == (8, 4, 2)
    assert qwen3_next.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert (qwen3_next.linear_num_key_heads, qwen3_next.linear_num_value_heads) == (4, 8)
    assert (qwen3_next.num_experts, qwen3_next.shared_expert_intermediate_size) == (8, 256)
    assert (qwen3_moe.num_experts, qwen3_moe.num_experts_per_tok) == (8, 2)


def test_mixture_of_experts_rows_train_and_decode_as_hf_does():
    """GPT-OSS, DeepSeek-V3, Qwen3-Next and Qwen3-MoE through the train and generate sections at the tiny size:
    parity holds, every decoding mode gives HF's tokens, HF's GPT-OSS runs eager attention and ours SDPA, and the
    tables name the shapes, the architectures, the eager reference and why these rows give no MFU."""
    import dataclasses

    from benchmarks import tables
    from benchmarks.harness import Session

    plan = dataclasses.replace(
        PRESETS["tiny"],
        train_families=MIXTURE_FAMILIES,
        train_dtypes=("fp32",),
        gen_families=MIXTURE_FAMILIES,
        gen_batches=(1, 2),
        gen_uncached=False,
    )
    hf, ours = make_pair("gpt_oss", plan.for_family("gpt_oss"), "cpu")
    assert (hf.config._attn_implementation, ours.config._attn_implementation) == ("eager", "sdpa")
    results = {"plan": dataclasses.asdict(plan)}
    session = Session(device="cpu", log=lambda message: None, results=results)
    for section in ("train", "generate"):
        results[section] = run.MEASURE[section](plan, session)
    assert [r["family"] for r in results["train"]] == list(MIXTURE_FAMILIES)
    assert all(r["parity_max_logit_diff"] <= PARITY_TOLERANCE for r in results["train"])
    assert {(r["family"], r["batch"], r["mode"]) for r in results["generate"]} == {
        (f, b, m) for f in MIXTURE_FAMILIES for b in (1, 2) for m in MODES
    }
    assert all(all(r["same_tokens_as_hf"].values()) and "speedup_cache" in r for r in results["generate"])
    train = "\n".join(tables.train_lines(results))
    assert "deepseek_v3: d_model 32, 4 heads, ffn 64, vocab 99, 2 layers, head_dim 12, 4 of it rotated, " in train
    assert "query latent 24, key/value latent 8, 4 experts, 2 per token" in train
    assert "gpt_oss: d_model 32, 4 heads, ffn 64, vocab 99, 2 layers, key/value heads 2, head_dim 8, " in train
    assert "qwen3_next: d_model 32, 4 heads, ffn 64, vocab 99, 4 layers, key/value heads 2, head_dim 16, " in train
    for name in ("Qwen3-MoE:", "GPT-OSS:", "DeepSeek-V3:", "Qwen3-Next:", "No MFU for qwen3_moe, gpt_oss"):
        assert name in train
    rows = [line for line in train.splitlines() if line.startswith(("| gpt_oss", "| deepseek_v3", "| qwen3_"))]
    assert len(rows) == 4 and all(line.split(" | ")[5:7] == ["–", "–"] for line in rows)  # no MFU
    generate = "\n".join(tables.generate_lines(results))
    assert "gpt_oss: HF's reference runs eager attention (transformers gives it no SDPA), ours SDPA." in generate
    assert sum(line.startswith("| deepseek_v3 |") for line in generate.splitlines()) == 2 * len(MODES)


def test_state_cache_holds_latents_and_constant_linear_states_with_hfs_tokens(tiny_run):
    """The tiny run's state_cache section (64 new tokens): both sides give HF's tokens; a latent attention layer
    holds kv_lora_rank + qk_rope_head_dim numbers per token (ours in a LatentCacheLayer, HF's in a DynamicLayer), the
    Llama's 2 · heads · head_dim; a Gated DeltaNet layer's state is its config's conv + recurrent numbers, the same
    after the 4-token prompt as after 67 tokens; and the table renders."""
    from benchmarks.state_cache import MODELS

    results, out = tiny_run
    plan = PRESETS["tiny"]
    rows = {(r["model"], r["side"], r["kind"]): r for r in results["state_cache"]}
    assert set(rows) == {
        (model, side, kind)
        for side in ("hf", "ours")
        for model, kind in (
            ("llama", "attention"),
            ("deepseek_v3", "latent"),
            ("qwen3_next", "attention"),
            ("qwen3_next", "linear"),
        )
    }
    assert all(r["same_tokens_as_hf"] and r["new_tokens"] == plan.state_new == 64 for r in rows.values())
    positions = plan.state_prompt + plan.state_new - 1  # generate() never feeds the last token back
    deepseek, llama = MODELS["deepseek_v3"], MODELS["llama"]
    latent = deepseek["kv_lora_rank"] + deepseek["qk_rope_head_dim"]
    for side in ("hf", "ours"):
        row = rows[("deepseek_v3", side, "latent")]
        assert row["per_token_layer_bytes"] == 4 * latent == 4 * row["expected_numbers"]["per_token"]
        assert row["positions_end"] == positions and row["held_end_bytes"] == 4 * latent * positions * 2
        per_head = rows[("llama", side, "attention")]
        assert per_head["per_token_layer_bytes"] == 4 * 2 * llama["heads"] * llama["hidden"] // llama["heads"]
        linear = rows[("qwen3_next", side, "linear")]
        assert linear["held_first_bytes"] == linear["held_end_bytes"] == linear["held_max_bytes"]
        assert linear["per_layer_bytes"] == 4 * linear["expected_numbers"]["state"] and len(linear["layers"]) == 3
        attention = rows[("qwen3_next", side, "attention")]
        assert attention["held_end_bytes"] > attention["held_first_bytes"] and attention["layers"] == [3]
    assert rows[("deepseek_v3", "ours", "latent")]["cache_layers"] == ["LatentCacheLayer"]
    assert rows[("deepseek_v3", "hf", "latent")]["cache_layers"] == ["DynamicLayer"]
    assert rows[("qwen3_next", "hf", "linear")]["cache_layers"] == ["LinearAttentionLayer"]
    markdown = (out / "tiny.md").read_text()
    assert (
        "| DeepSeek-V3 (latent attention) | ours | 2 × latent + rotated key (LatentCacheLayer) | 67 | 96 | 24 (24)"
        in (markdown)
    )
    assert (
        "| Qwen3-Next (Gated DeltaNet + attention) | hf | 3 × conv + recurrent (LinearAttentionLayer) | – | – |"
        in (markdown)
    )


def test_llama_cpp_architecture_cases_name_the_registrys_references_and_fields():
    """benchmarks/llama_cpp_architectures.py runs by hand (it needs llama.cpp built): its cases must stay true to
    the registry (each reference of the named architecture, each change a field of its config), and its table must
    render every kind of row it can produce."""
    from benchmarks.llama_cpp_architectures import CASES, markdown
    from hf_attention.architectures import REGISTRY

    for case, (architecture, reference, changes) in CASES.items():
        assert "," not in case, case  # --cases is comma-separated
        assert reference in REGISTRY[architecture].tiny_references, case
        config = REGISTRY[architecture].tiny_references[reference].config()
        assert all(hasattr(config, field) for field in changes), case
    base = {"export_class": "X", "numbers_in_gguf": 5, "numbers_in_export": 5, "gguf_architecture": "x"}
    prompts = [{"ours": [1], "f16": [1], "f32": [2], "same_tokenization": True}] * 2
    rows = [
        {
            **base,
            "case": "ran",
            "prompts": prompts,
            "largest_logit_difference": 3e-5,
            "largest_logit": 9.5,
            "logit_positions": 40,
        },
        {**base, "case": "refused", "converter_error": "ValueError: Can not map tensor"},
        {**base, "case": "not loaded", "load_error": "check_tensor_dims"},
        {**base, "case": "aborted", "crash": "GGML_ASSERT(x) failed"},
    ]
    table = markdown(rows, "a CPU", 24).splitlines()
    assert len(table) == 4 + len(rows) and all(line.count("|") == 8 for line in table[2:])
    assert "| 2/2 | 2/2 / 0/2 | 3.0e-05" in table[4]
    assert "converter fails" in table[5] and "cannot load" in table[6] and "aborts" in table[7]
