"""The Markdown tables of each section, from a results dict (`python -m benchmarks.run`'s JSON).

Each renderer takes the whole results dict and returns Markdown lines, or none when its section did not run.
Results files written before a section or a column existed render with "–" in its place.
"""

from .flops import model_flops
from .models import GEMMA3_FINAL_LOGIT_SOFTCAPPING, MLM_PROBABILITY, REFERENCE_ATTENTION

DASH = "–"
# Fields of a family's own shape (`Plan.family_shapes`) other than width, heads, ffn and vocabulary, as the training
# table's heading names them.
SHAPE_EXTRAS = {
    "layers": "{} layers",
    "kv_heads": "key/value heads {}",
    "head_dim": "head_dim {}",
    "qk_rope_head_dim": "{} of it rotated",
    "q_lora_rank": "query latent {}",
    "kv_lora_rank": "key/value latent {}",
    "sliding_window": "sliding window {}",
    "experts": "{} experts",
    "experts_per_token": "{} per token",
}
# Families whose training FLOPs `benchmarks.flops` does not count whole (it counts nn.Linear layers and per-head
# attention: not routed experts, held as parameters, nor latent attention's products, nor the delta rule): their
# rows give no MFU.
FLOPS_NOT_COUNTED = ("qwen3_moe", "gpt_oss", "deepseek_v3", "qwen3_next")
# What sets an architecture apart beyond its shape, said under the training table when the family has a row there.
ARCHITECTURE_NOTES = {
    "qwen3": "Qwen3: RMSNorm on each head's queries and keys before the rotation (QK-norm), untied embeddings.",
    "gemma3": "Gemma 3: its own layer pattern, five sliding-window layers to one global (a rotary base of 10⁴ on "
    "the sliding layers, 10⁶ on the global one); q·k scaled by query_pre_attn_scalar^(-1/2) with "
    "query_pre_attn_scalar = d_model / heads, not head_dim; final logits capped by {cap:g}·tanh(x / {cap:g}); a norm "
    "before and after each sublayer (1 + w gains), QK-norm, embeddings × √d_model, a tanh-GELU gate, tied "
    "embeddings.",
    "qwen3_moe": "Qwen3-MoE: Qwen3's attention; every layer a mixture of experts a quarter of the dense ffn wide "
    "(softmax over the experts, the top k renormalised).",
    "gpt_oss": "GPT-OSS: sliding-window and full layers alternating, sliding first; a learned sink logit per head in "
    "every softmax; biases on q, k, v and o; YaRN (factor 32 over 1/32 of the positions); every layer a mixture of "
    "experts a quarter of the dense ffn wide (d_model, as in gpt-oss), with biases and the clamped unit "
    "(up + 1)·gate·σ(1.702·gate), the router's top k then a softmax over them. HF's GPT-OSS runs eager attention "
    "(transformers gives it no SDPA), ours SDPA.",
    "deepseek_v3": "DeepSeek-V3: multi-head latent attention (queries through their own latent, keys and values "
    "decompressed per head from the cached key/value latent and one rotated key shared by the heads, adjacent dims "
    "rotated in pairs, values as wide as the unrotated part of a head); the first layer dense, then a mixture of "
    "experts a quarter of the dense ffn wide, routed by sigmoid scores within the best half of groups of two, "
    "weights × 2.5, beside one shared expert as wide.",
    "qwen3_next": "Qwen3-Next: three Gated DeltaNet layers (as many key heads as heads and twice as many value heads, "
    "each d_model / heads wide, a 4-tap convolution) to one full-attention layer with an output gate, QK-norm and a "
    "quarter of each head rotated; (1 + w) RMSNorm gains; every layer a mixture of experts a quarter of the dense ffn "
    "wide beside a σ-gated shared expert as wide.",
}
MODE_NAMES = {
    "greedy": "greedy",
    "beam4": "4-beam search (no early stopping)",
    "sample": "top-k 50 sampling (the same seed before every call on both sides)",
}


def _range(summary_: dict, scale: float = 1.0, fmt: str = "{:.0f}") -> str:
    return (
        f"{fmt.format(summary_['rate'] * scale)} ({fmt.format(summary_['rate_min'] * scale)}–"
        f"{fmt.format(summary_['rate_max'] * scale)})"
    )


def _ms(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def _ms_range(summary_: dict) -> str:
    """Median (min–max) of a row's rounds in ms."""
    return f"{summary_['median_s'] * 1e3:.0f} ({summary_['min_s'] * 1e3:.0f}–{summary_['max_s'] * 1e3:.0f})"


def _mib(value: float | None) -> str:
    return DASH if value is None else f"{value / 2**20:.0f}"


def _mfu(results: dict, rate_tokens: float, flops_per_token: float | None, dtype: str) -> str:
    ceiling = results.get("ceiling", {})
    if dtype not in ceiling or flops_per_token is None:
        return DASH
    return f"{100 * rate_tokens * flops_per_token / ceiling[dtype]['flops_per_s_best']:.1f}%"


def _spread_cells(row: dict, name: str) -> list[str]:
    """Speed-up, interquartile range and 95% interval of the paired ratios `name` (older files: the median only)."""
    stats = row.get("speedup_spread", {}).get(name)
    if stats is None:
        median = row.get(f"speedup_{name}")
        return [DASH if median is None else f"**{median:.2f}×**", DASH, DASH]
    return [
        f"**{stats['median']:.2f}×**",
        f"{stats['q1']:.2f}–{stats['q3']:.2f}",
        f"{stats['ci95_low']:.2f}–{stats['ci95_high']:.2f}",
    ]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows] + [""]


def header_lines(results: dict) -> list[str]:
    """Where and how the figures were taken, the ceiling and the run's notes."""
    m, plan = results["machine"], results["plan"]
    ceiling = results.get("ceiling", {})
    gpu = f"{m['gpu']} (CUDA {m.get('cuda', '?')}) with " if m.get("gpu") else ""
    lines = [
        f"Run `{plan['name']}` on {gpu}{m.get('cpu_model', m['device'])} ({m.get('cpus', '?')} CPUs, "
        f"{m['threads']} threads, OMP_WAIT_POLICY={m['omp_wait_policy']}), torch {m['torch']}, transformers "
        f"{m['transformers']}, {m['date']}. Median (min–max) over interleaved rounds; speed-up = median of "
        "paired per-round ratios HF time / our time.",
        "",
    ]
    if ceiling:
        lines += [
            "**Ceiling** (square matmul, best round): "
            + ", ".join(
                f"{k} {v['flops_per_s_best'] / 1e9:.1f} GFLOP/s (median {v['flops_per_s_median'] / 1e9:.1f}, "
                f"{v['size']}²)"
                for k, v in ceiling.items()
            ),
            "",
        ]
    notes = results.get("notes", [])
    return lines + [f"Note: {note}" for note in notes] + ([""] if notes else [])


def train_lines(results: dict) -> list[str]:
    plan, rows = results["plan"], []
    for r in results.get("train", []):
        # None: the FLOPs of this family are not counted whole, and `_mfu` gives no figure
        per_token = None if r["family"] in FLOPS_NOT_COUNTED else r["flops_per_step"] / r["tokens_per_step"]
        extras = []
        if "ours_compiled" in r:
            extras.append(
                f"compiled: ours {r['ours_compiled']['rate']:.0f}, HF {r['hf_compiled']['rate']:.0f} "
                f"({r['speedup_compiled_vs_hf_compiled']:.2f}×; MFU ours "
                f"{_mfu(results, r['ours_compiled']['rate'], per_token, r['dtype'])}, HF "
                f"{_mfu(results, r['hf_compiled']['rate'], per_token, r['dtype'])})"
            )
        if "hf_liger" in r:
            extras.append(f"HF + liger-kernel {r['hf_liger']['rate']:.0f} ({r['speedup_vs_hf_liger']:.2f}×)")
        peaks = {name: r[name].get("peak_above_resident_bytes") for name in ("hf", "ours") if name in r}
        if None not in peaks.values() and len(peaks) == 2 and peaks["hf"]:
            extras.append(
                f"peak above resident: HF {_mib(peaks['hf'])} MiB, ours {_mib(peaks['ours'])} MiB "
                f"({peaks['ours'] / peaks['hf']:.2f}×)"
            )
        extra = "; ".join(extras)
        rows.append(
            [
                r["family"],
                r["dtype"],
                _range(r["hf"]),
                _range(r["ours"]),
                f"**{r['speedup']:.2f}×**",
                _mfu(results, r["hf"]["rate"], per_token, r["dtype"]),
                _mfu(results, r["ours"]["rate"], per_token, r["dtype"]),
                extra,
            ]
        )
    if not rows:
        return []
    trained = {r["family"] for r in results["train"]}
    shapes = "".join(
        f"; {family}: d_model {shape.get('hidden', plan['hidden'])}, {shape.get('heads', plan['heads'])} heads, "
        f"ffn {shape.get('ffn', plan['ffn'])}, vocab {shape.get('vocab', plan['vocab'])}{_shape_extras(shape)}"
        for family, shape in plan.get("family_shapes", {}).items()
        if family in trained
    )
    kv = f" ({plan['kv_heads']} key/value heads)" if plan.get("kv_heads") else ""
    return (
        [
            f"**Training step** (forward + backward + AdamW), batch {plan['batch']} × {plan['seq']} tokens, "
            f"d_model {plan['hidden']}, {plan['layers']} layers, {plan['heads']} heads{kv}, ffn {plan['ffn']}, "
            f"vocab {plan['vocab']}{shapes}; labels: next token (decoders), teacher forcing (seq2seq), BERT's "
            f"{MLM_PROBABILITY:.0%} masked positions (encoder); tokens/s:",
            "",
        ]
        + _table(["family", "dtype", "HF tokens/s", "ours tokens/s", "speed-up", "MFU HF", "MFU ours", "extra"], rows)
        + (architecture_notes(dict.fromkeys(r["family"] for r in results["train"])))
        + _uncounted_note(trained)
    )


def _uncounted_note(families) -> list[str]:
    """Why the rows of `FLOPS_NOT_COUNTED` families give no MFU (nothing for the families of older files)."""
    uncounted = [family for family in FLOPS_NOT_COUNTED if family in families]
    if not uncounted:
        return []
    return [
        f"No MFU for {', '.join(uncounted)}: the FLOP count (`benchmarks.flops`) takes nn.Linear layers and per-head "
        "attention only, not the routed experts, latent attention's products or the delta rule.",
        "",
    ]


def reference_attention_note(families) -> list[str]:
    """The families among `families` whose HF reference runs another attention than ours (`REFERENCE_ATTENTION`)."""
    other = [family for family in families if family in REFERENCE_ATTENTION]
    return [
        f"{family}: HF's reference runs {REFERENCE_ATTENTION[family]} attention (transformers gives it no SDPA), ours "
        "SDPA."
        for family in other
    ] + ([""] if other else [])


def architecture_notes(families) -> list[str]:
    """A line on each of `families` that `ARCHITECTURE_NOTES` describes (none for the families of older files)."""
    notes = [
        ARCHITECTURE_NOTES[family].format(cap=GEMMA3_FINAL_LOGIT_SOFTCAPPING)
        for family in families
        if family in ARCHITECTURE_NOTES
    ]
    return [" ".join(notes), ""] if notes else []


def _shape_extras(shape: dict) -> str:
    """What a family's own shape sets beyond width, heads, ffn and vocabulary, where it sets it (the shapes of older
    results files set none of these, or None, and render as they did)."""
    return "".join(
        f", {template.format(shape[key])}" for key, template in SHAPE_EXTRAS.items() if shape.get(key) is not None
    )


def forward_lines(results: dict) -> list[str]:
    def cell(s: dict) -> str:
        return f"{s['median_s'] * 1e3:.2f} ({s['min_s'] * 1e3:.2f}–{s['max_s'] * 1e3:.2f})"

    rows = [
        [r["family"], str(r["batch"]), cell(r["hf"]), cell(r["ours"]), f"**{r['speedup']:.2f}×**"]
        for r in results.get("forward", [])
    ]
    if not rows:
        return []
    return [f"**Forward latency** (inference, fp32, {results['plan']['seq']} tokens per sequence), ms:", ""] + _table(
        ["family", "batch", "HF ms", "ours ms", "speed-up"], rows
    )


def _same_tokens(row: dict) -> str:
    differing = [name for name, same in row["same_tokens_as_hf"].items() if not same]
    return "yes" if not differing else "no: " + ", ".join(differing) + " (not timed)"


def _rate(row: dict, name: str) -> str:
    return _range(row[name]) if name in row else DASH


def _greedy_extra_cells(row: dict) -> list[str]:
    """Our compiled static cache vs HF, both sides without a cache, and what the cache buys each side."""

    def speedup(name: str) -> list[str]:
        median, _, interval = _spread_cells(row, name)
        return [median, interval]

    gains = row.get("cache_gain", {})
    return [
        row["family"],
        str(row["batch"]),
        _rate(row, "ours_compiled_static"),
        *speedup("compiled_static"),
        _rate(row, "hf_no_cache"),
        _rate(row, "ours_no_cache"),
        *speedup("no_cache"),
        *(f"{gains[side]['median']:.2f}×" if side in gains else DASH for side in ("hf", "ours")),
    ]


def generate_lines(results: dict) -> list[str]:
    """Every mode with the dynamic cache; then greedy without a cache and through our compiled static cache."""
    plan, rows, greedy_rows = results["plan"], [], []
    for r in results.get("generate", []):
        rounds = str(r["hf_cache"]["rounds"]) if "hf_cache" in r and "ours_cache" in r else DASH
        rows.append(
            [
                r["family"],
                str(r["batch"]),
                r.get("mode", "greedy"),
                _rate(r, "hf_cache"),
                _rate(r, "ours_cache"),
                *_spread_cells(r, "cache"),
                rounds,
                _same_tokens(r),
            ]
        )
        if "hf_no_cache" in r or "ours_compiled_static" in r:
            greedy_rows.append(_greedy_extra_cells(r))
    if not rows:
        return []
    modes = dict.fromkeys(r.get("mode", "greedy") for r in results["generate"])
    lines = [
        f"**Generation** with the default dynamic cache, prompt {plan['gen_prompt']}, {plan['gen_new']} new "
        f"tokens, new tokens/s (fp32); {', '.join(MODE_NAMES[mode] for mode in modes)}. Speed-up: median, "
        "interquartile range and bootstrap 95% interval of the per-round ratios HF time / our time:",
        "",
    ]
    lines += _table(
        [
            "family",
            "batch",
            "mode",
            "HF tokens/s",
            "ours tokens/s",
            "speed-up",
            "IQR",
            "95% interval",
            "rounds",
            "same tokens",
        ],
        rows,
    )
    lines += reference_attention_note(dict.fromkeys(r["family"] for r in results["generate"]))
    if greedy_rows:
        lines += [
            "**Greedy generation without a cache, and through our compiled static cache** (new tokens/s; "
            "compiled_generate with its CPU default, inductor's C++ wrapper, vs HF's dynamic cache; cache gain = time "
            "without / time with the cache, same side):",
            "",
        ]
        lines += _table(
            [
                "family",
                "batch",
                "ours compiled static",
                "speed-up",
                "95% interval",
                "HF no cache",
                "ours no cache",
                "speed-up",
                "95% interval",
                "cache gain HF",
                "cache gain ours",
            ],
            greedy_rows,
        )
    return lines + compiled_decoding_lines(results)


def compiled_decoding_lines(results: dict) -> list[str]:
    """Greedy decoding compiled: our static-cache step without and with CUDA graphs, and HF's own static cache."""
    rows = []
    for r in results.get("generate", []):
        if "ours_cuda_graphs" not in r and "hf_compiled_static" not in r:
            continue
        rows.append(
            [
                r["family"],
                str(r["batch"]),
                _rate(r, "hf_cache"),
                _rate(r, "hf_compiled_static"),
                _rate(r, "ours_cache"),
                _rate(r, "ours_compiled_static"),
                _rate(r, "ours_cuda_graphs"),
                *_spread_cells(r, "cuda_graphs")[:1],
                *_spread_cells(r, "cuda_graphs_vs_hf_static")[:1],
            ]
        )
    if not rows:
        return []
    plan = results["plan"]
    return [
        f"**Compiled decoding** (greedy, prompt {plan['gen_prompt']}, {plan['gen_new']} new tokens, fp32, new "
        "tokens/s): HF with the dynamic cache and with its own static cache (transformers compiles it on a GPU); "
        "ours with the dynamic cache, `compiled_generate` without CUDA graphs, and with them "
        '(`mode="reduce-overhead"`):',
        "",
    ] + _table(
        [
            "family",
            "batch",
            "HF dynamic",
            "HF static",
            "ours dynamic",
            "ours compiled",
            "ours CUDA graphs",
            "graphs / HF dynamic",
            "graphs / HF static",
        ],
        rows,
    )


def generate_batch_lines(results: dict) -> list[str]:
    rows = []
    for r in results.get("generate_batch", []):
        timed = "hf" in r and "ours" in r
        rows.append(
            [
                r["family"],
                f"{r['requests']} × {r['prompt_lengths'][0]}–{r['prompt_lengths'][1]}",
                str(r["new_tokens"]),
                _rate(r, "hf"),
                _rate(r, "ours"),
                f"**{r['speedup']:.2f}×**" if timed else DASH,
                "yes" if r["same_tokens_as_hf"] else "no (not timed)",
            ]
        )
    if not rows:
        return []
    return [
        "**Continuous batching** (`generate_batch`, greedy, every request's tokens compared with HF's; new "
        "tokens/s over the whole call):",
        "",
    ] + _table(["family", "requests × prompt tokens", "new", "HF tokens/s", "ours tokens/s", "speed-up", "same"], rows)


def flex_train_lines(results: dict) -> list[str]:
    rows = []
    for r in results.get("flex_train", []):
        rows.append(
            [
                str(r["length"]),
                "yes" if r["with_grad"] else "no (CPU)",
                _ms_range(r["sdpa"]),
                _ms_range(r["flex_attention"]),
                f"{r['speedup_flex']:.2f}",
                f"{r['first_call_s']:.1f}",
                str(r["graphs_compiled"]),
            ]
        )
    if not rows:
        return []
    plan = results["plan"]
    return [
        f"**FlexAttention training on packed documents** (our Llama-architecture decoder, {plan['flex_layers']} "
        f"layers, one row of {plan['flex_documents']} texts; the lengths in turn, as packed batches change length; "
        "first call: the first FlexAttention step at that length, compiling included):",
        "",
    ] + _table(["tokens", "gradients", "sdpa ms", "flex ms", "sdpa / flex", "first call s", "graphs compiled"], rows)


def length_lines(results: dict) -> list[str]:
    rows, first = [], {}
    ceiling = results.get("ceiling", {})
    for r in results.get("length", []):
        per_token = r["flops_per_step"] / r["tokens_per_step"]
        achieved = r["rate"] * per_token / ceiling["fp32"]["flops_per_s_best"] if "fp32" in ceiling else None
        base = first.setdefault(r["variant"], (achieved, r.get("peak_bytes")))
        peak = r.get("peak_bytes")
        rows.append(
            [
                r["variant"],
                f"{r['seq']} × {r['batch']}",
                f"{r['us_per_token']:.1f} ({r['min_s'] / r['tokens_per_step'] * 1e6:.1f}–"
                f"{r['max_s'] / r['tokens_per_step'] * 1e6:.1f})",
                *([f"{100 * achieved:.1f}%", f"{achieved / base[0]:.2f}"] if achieved else [DASH, DASH]),
                *([_mib(peak), f"{peak / base[1]:.2f}"] if peak and base[1] else [DASH, DASH]),
            ]
        )
    if not rows:
        return []
    return (
        [
            f"**Sequence length** (our Llama-architecture decoder, fp32 forward + backward, "
            f"{results['plan']['length_tokens']} tokens per step):",
            "",
        ]
        + _table(
            ["variant", "seq × batch", "µs/token", "MFU", "MFU / MFU@first", "peak MiB", "peak / peak@first"], rows
        )
        + [f"Memory: {results['length'][0].get('memory_method', DASH)}.", ""]
    )


def long_attention_lines(results: dict) -> list[str]:
    rows = []
    for r in results.get("long_attention", []):
        sdpa, flex = r["sdpa"], r["flex_attention"]
        rows.append(
            [
                r["case"],
                str(r["length"]),
                _ms_range(sdpa),
                _ms_range(flex),
                f"{r['speedup_flex']:.2f}",
                f"{r['compile_s']:.0f}",
                _mib(sdpa.get("peak_bytes")),
                _mib(flex.get("peak_bytes")),
            ]
        )
    if not rows:
        return []
    plan = results["plan"]
    return (
        [
            f"**Long inputs: SDPA against FlexAttention** (our Llama-architecture decoder, {plan['long_layers']} "
            f"layers, inference at batch 1; `documents`: {plan['long_documents']} texts packed in one row, `alibi`: "
            "ALiBi biases; compile time of FlexAttention's kernel not in the timed rounds):",
            "",
        ]
        + _table(
            ["input", "tokens", "sdpa ms", "flex ms", "sdpa / flex", "compile s", "sdpa peak MiB", "flex peak MiB"],
            rows,
        )
        + [f"Memory: {results['long_attention'][0].get('memory_method', DASH)}.", ""]
    )


def decode_profile_lines(results: dict) -> list[str]:
    """The phases of one decoding step per side; then step time, aten ops and overhead over the FLOP floor."""
    phases, totals = [], []
    for r in results.get("decode_profile", []):
        if "ours" not in r:
            totals.append([r["family"], str(r["batch"]), "tokens differ: not profiled"] + [DASH] * 7)
            continue
        for side in ("hf", "ours"):
            p = r[side]
            phases.append(
                [
                    r["family"],
                    str(r["batch"]),
                    side,
                    _ms(p["embedding_ms"]),
                    _ms(p["other_ms"]),
                    " / ".join(_ms(t) for t in p["layers_ms"]),
                    _ms(p["layers_total_ms"]),
                    _ms(p["final_norm_ms"]),
                    _ms(p["lm_head_ms"]),
                    _ms(p["forward_ms"]),
                    _ms(p["generation_ms"]),
                    _ms(p["generate_step_ms"]),
                ]
            )
        totals.append(
            [
                r["family"],
                str(r["batch"]),
                _ms(r["hf"]["generate_step_ms"]),
                _ms(r["ours"]["generate_step_ms"]),
                f"{r['hf']['aten_ops_per_step']:.0f}",
                f"{r['ours']['aten_ops_per_step']:.0f}",
                _ms(r["floor_ms"]),
                _ms(r["hf"]["overhead_over_floor_ms"]),
                _ms(r["ours"]["overhead_over_floor_ms"]),
                f"{r['overhead_ours_minus_hf_ms']:+.2f}",
            ]
        )
    if not totals:
        return []
    plan = results["plan"]
    t5_note = (
        " HF's T5 computes its relative position bias in its first layer, ours before the layers (outside parts)."
        if any(r["family"] == "t5" for r in results["decode_profile"])
        else ""
    )
    lines = [
        f"**Decode-step profile** (greedy, dynamic cache, prompt {plan['gen_prompt']}, {plan['gen_new']} new "
        "tokens; ms per step, medians over the decoding steps but the first and the last). Outside parts = the "
        "model's forward minus its timed parts (masks, positions, glue); generate step = from one forward call's "
        "start to the next one's; GenerationMixin = generate step minus model forward (logits processors, "
        "stopping criteria, input preparation, cache bookkeeping). The hooks that time the LM head make ours "
        "run its plain product (a hooked module keeps its own call), so the blocked vocabulary projection of 4-11 "
        f"rows is not in these figures; the generation table above includes it.{t5_note}",
        "",
    ]
    lines += _table(
        [
            "family",
            "batch",
            "side",
            "embedding",
            "outside parts",
            "layers (each)",
            "layers",
            "final norm",
            "LM head",
            "model forward",
            "GenerationMixin",
            "generate step",
        ],
        phases,
    )
    lines += [
        "**Per-step overhead** over the FLOP floor (matmul FLOPs per step / fp32 ceiling), ms; aten ops per "
        "generate step (nested calls included):",
        "",
    ]
    return lines + _table(
        [
            "family",
            "batch",
            "HF step",
            "ours step",
            "aten ops HF",
            "aten ops ours",
            "FLOP floor",
            "overhead HF",
            "overhead ours",
            "ours − HF",
        ],
        totals,
    )


def memory_lines(results: dict) -> list[str]:
    rows = [
        [
            r["family"],
            str(r["vocab"]),
            _mib(r["hf_peak_bytes"]),
            _mib(r["ours_peak_bytes"]),
            DASH if r["ratio_hf_to_ours"] is None else f"**{r['ratio_hf_to_ours']:.2f}×**",
        ]
        for r in results.get("memory", [])
    ]
    if not rows:
        return []
    first = results["memory"][0]
    # Gemma 3's final logit cap: ours computes the whole logits then (older results files have no such row).
    capped = (
        ", except under Gemma 3's final logit cap, which ours applies to whole logits as HF does"
        if any(r["family"] == "gemma3" for r in results["memory"])
        else ""
    )
    return (
        [
            f"**Training memory by vocabulary** (peak of one fp32 training step: forward + backward + AdamW; "
            f"d_model {first['hidden']}, batch {first['batch']} × {first['seq']} tokens). HF computes the (N, V) "
            "logits, their softmax and gradient; our models fuse the vocabulary projection with the loss "
            "(`hf_attention.modeling.losses.linear_cross_entropy`) and never build the (N, V) logits while training"
            + capped
            + ":",
            "",
        ]
        + _table(["family", "vocab", "HF peak MiB", "ours peak MiB", "HF / ours"], rows)
        + [f"Memory: {first['memory_method']}.", ""]
    )


def flops_lines() -> list[str]:
    return ["FLOPs: " + model_flops.__doc__.split("Formula: ", 1)[1].replace("\n    ", " ").strip(), ""]


def window_cache_lines(results: dict) -> list[str]:
    """The cache of sliding-window decoding, each side's against the unbounded cache of the same model."""
    found = results.get("window_cache", [])
    if not found:
        return []
    unbounded = {r["side"]: r["held_end_bytes"] for r in found if r["window"] is None}

    def kib(value: int) -> str:
        return f"{value / 2**10:.1f}"

    rows = [
        [
            r["side"],
            DASH if r["window"] is None else str(r["window"]),
            str(r["positions_end"]),
            kib(r["held_end_bytes"]),
            kib(r["held_max_bytes"]),
            kib(r["expected_held_bytes"]),
            kib(r["storage_end_bytes"]),
            kib(r["storage_max_bytes"]),
            f"**{unbounded[r['side']] / r['held_end_bytes']:.1f}×**"
            if r["window"] is not None and r["side"] in unbounded
            else DASH,
            "yes" if r["same_tokens_as_hf"] else "no",
        ]
        for r in found
    ]
    first = found[0]
    shape = first["shape"]
    return [
        f"**Sliding-window decoding: the key/value cache** (a Mistral-shaped decoder, d_model {shape['hidden']}, "
        f"{shape['layers']} layers, {shape['heads']} heads of {shape['head_dim']}, {shape['kv_heads']} key/value "
        f"heads, vocab {shape['vocab']}, fp32; greedy, batch 1, prompt {first['prompt']}, {first['new_tokens']} new "
        "tokens; the window on every layer, then removed). Held: the bytes of the cached keys and values as shaped, "
        "read after every step, at the end and at the most; expected: W − 1 positions per layer with a window W, "
        "every position but the last token's without; storage: the bytes of the tensors they are views of, i.e. the "
        "memory the cache keeps alive. Unbounded / windowed: the same side's held bytes at the end without and with "
        "the window. KiB:",
        "",
    ] + _table(
        [
            "side",
            "window",
            "positions cached",
            "held",
            "held, most",
            "expected",
            "storage",
            "storage, most",
            "unbounded / windowed",
            "same tokens as HF",
        ],
        rows,
    )


# How the state_cache table names each of its models and kinds of cache layer.
STATE_MODELS = {
    "llama": "Llama (per-head keys and values)",
    "deepseek_v3": "DeepSeek-V3 (latent attention)",
    "qwen3_next": "Qwen3-Next (Gated DeltaNet + attention)",
}
STATE_KINDS = {"attention": "per-head keys, values", "latent": "latent + rotated key", "linear": "conv + recurrent"}


def _state_vs_per_head(row: dict, rows: list[dict]) -> str:
    """What a per-head cache would hold at the end over what this kind holds: for latent layers the decompressed
    keys and values of each token over its latent; for a linear layer the same model's attention layer's cache over
    the constant state; 1 for per-head layers."""
    expected = row["expected_numbers"]
    if row["kind"] == "latent":
        return f"{expected['per_head_per_token'] / expected['per_token']:.1f}×"
    if row["kind"] == "attention":
        return "1.0×"
    attention = [r for r in rows if (r["model"], r["side"], r["kind"]) == (row["model"], row["side"], "attention")]
    if not attention:
        return DASH
    per_layer = attention[0]["per_layer_bytes"]
    return f"{per_layer / row['per_layer_bytes']:.1f}×"


def state_cache_lines(results: dict) -> list[str]:
    """What latent attention's and Gated DeltaNet's caches hold per token and layer, against per-head caches."""
    found = results.get("state_cache", [])
    if not found:
        return []

    def kib(value: float) -> str:
        return f"{value / 2**10:.1f}"

    rows = []
    for r in found:
        layers = len(r["layers"])
        expected = r["expected_numbers"]
        grows = r["per_token_layer_bytes"] is not None
        numbers = (
            f"{r['per_token_layer_bytes'] / r['element_bytes']:.0f} ({expected['per_token']})"
            if grows
            else f"{r['per_layer_bytes'] / r['element_bytes']:.0f} ({expected['conv_state']} + "
            f"{expected['recurrent_state']})"
        )
        rows.append(
            [
                STATE_MODELS.get(r["model"], r["model"]),
                r["side"],
                f"{layers} × {STATE_KINDS[r['kind']]} ({', '.join(r['cache_layers'])})",
                DASH if not grows else str(r["positions_end"]),
                f"{r['per_token_layer_bytes']:.0f}" if grows else DASH,
                numbers,
                kib(r["held_first_bytes"] / layers),
                kib(r["per_layer_bytes"]),
                kib(r["held_max_bytes"] / layers),
                kib(r["storage_end_bytes"] / layers),
                f"**{_state_vs_per_head(r, found)}**",
                "yes" if r["same_tokens_as_hf"] else "no",
            ]
        )
    first = found[0]
    return [
        f"**Latent attention and linear-attention states: the decoding cache** (tiny decoders, d_model "
        f"{first['shape']['hidden']}, vocab {first['shape']['vocab']}, fp32; greedy, batch 1, prompt "
        f"{first['prompt']}, {first['new_tokens']} new tokens, HF's tokens asserted). Read after every step, per "
        "layer of each kind: bytes per cached token; numbers per token, or per layer for a Gated DeltaNet layer's "
        "state, which is its convolution's last inputs + its recurrent state (expected from the config in "
        "brackets); held per layer after the prompt, at the end and at the most, and the storage behind it at the "
        "end (KiB). Per-head / held: for latent layers, the decompressed per-head keys and values of a token over "
        "its latent and rotated key; for Gated DeltaNet layers, the same model's attention layer's cache at the end "
        "over the constant state:",
        "",
    ] + _table(
        [
            "model",
            "side",
            "layers (cache layer)",
            "positions",
            "bytes / token / layer",
            "numbers (expected)",
            "after prompt",
            "end",
            "most",
            "storage",
            "per-head / held",
            "same tokens",
        ],
        rows,
    )
