"""The numbers of tutorial 12's prose and where its full run measured them (tests/test_tutorial_prose_numbers.py)."""

import numpy as np


def one(values, form: str) -> str:
    """The value that every item of `values` shows in `form` (the prose states one number for all of them)."""
    shown = {format(value, form) for value in values}
    return shown.pop() if len(shown) == 1 else f"they differ: {sorted(shown)}"


def gqa(r, kv_heads: int, key: str):
    return r["gqa"][str(kv_heads)][key]


def rope_beyond(r, name: str, length: int) -> str:
    return f"{r['rope'][name][str(length)]['accuracy_beyond_train_length']:.3f}"


def steps_watched(r) -> list:
    return r["softcap"]["trained"]["largest_score_before_cap"]


def accuracies(r, name: str) -> list:
    return [run["accuracy"] for run in r["recent"][name]["runs"]]


def head_means(r, key: str, seeds, layer: int | None = None, what: str = "mean") -> list:
    """The per-head means (or standard deviations) of `key` in the sink analysis of `seeds`, of one layer or all."""
    rows = [row for row in r["sinks_by_seed"] if row["seed"] in seeds]
    return [
        value
        for row in rows
        for index, values in enumerate(row[key][what])
        if layer is None or index == layer
        for value in values
    ]


def latent_bytes_per_number(r) -> float:
    """The formula's bytes per token over its numbers per token: the bytes of one number."""
    sizes = r["latent_sizes"]
    return (
        r["memory"]["latent"]["formula_bytes_per_token"]
        / r["layers"]
        / (sizes["kv_lora_rank"] + sizes["qk_rope_head_dim"])
    )


def latent_ratio(r) -> float:
    return (
        r["memory"]["latent"]["per_head_equivalent_bytes_per_token"] / r["memory"]["latent"]["bytes_per_token"]["32"]
    )


CLAIMS = [
    # 1 · grouped-query attention
    (
        r"1,024 bytes per token with $K = H = 4$, 512 with $K = 2$ and 256 with $K = 1$ (2 layers, "
        r"$d_\text{head} = 16$, float32)",
        lambda r, fig: [
            f"{int(gqa(r, 4, 'cache_bytes_per_token')):,}",
            str(r["heads"]),
            str(int(gqa(r, 2, "cache_bytes_per_token"))),
            "2",
            str(int(gqa(r, 1, "cache_bytes_per_token"))),
            "1",
            str(r["layers"]),
            str(r["head_dim"]),
        ],
    ),
    ("(batch, $K$, tokens, 16) tensor", lambda r, fig: str(gqa(r, 4, "cached_key_shape")[3])),
    (
        "(held-out accuracy 1.000; loss 0.0011, 0.0013 and 0.0015)",
        lambda r, fig: [
            one((row["accuracy"] for row in r["gqa"].values()), ".3f"),
            *(f"{gqa(r, k, 'loss'):.4f}" for k in (4, 2, 1)),
        ],
    ),
    (
        "512 KiB of cache per token with $K = 32$, 128 KiB with its $K = 8$, and 16 KiB with $K = 1$",
        lambda r, fig: [
            part for key, value in r["large_model_cache_kib_per_token"].items() for part in (f"{value:.0f}", key)
        ],
    ),
    # 2 · QK-norm
    (
        "at a learning rate of 0.02, against 0.003 for the others",
        lambda r, fig: [f"{r['high_learning_rate']:g}", f"{r['task']['learning_rate']:g}"],
    ),
    (
        "to 790 by step 160 and is still 660 after 400 steps; with QK-norm it creeps up to 22.8",
        lambda r, fig: [
            f"{max(r['qk_norm']['none']['largest_score']):,.0f}",
            str(r["qk_norm"]["none"]["steps"][int(np.argmax(r["qk_norm"]["none"]["largest_score"]))]),
            f"{r['qk_norm']['none']['final_largest_score']:,.0f}",
            str(r["task"]["steps"]),
            f"{r['qk_norm']['head']['final_largest_score']:.1f}",
        ],
    ),
    (
        "(held-out loss 0.0001 without, 0.0036 with)",
        lambda r, fig: [f"{r['qk_norm'][name]['loss']:.4f}" for name in ("none", "head")],
    ),
    (
        "(its training loss first falls below 0.1 at step 127, against 84 with QK-norm)",
        lambda r, fig: [
            "0.1",  # the threshold
            str(int(np.argmax(np.array(r["qk_norm"]["none"]["loss_curve"]) < 0.1))),
            str(int(np.argmax(np.array(r["qk_norm"]["head"]["loss_curve"]) < 0.1))),
        ],
    ),
    ("In float32 a score of 660 is harmless", lambda r, fig: f"{r['qk_norm']['none']['final_largest_score']:,.0f}"),
    (
        "moves them by almost 2 without QK-norm and by 0.0625 with it",
        lambda r, fig: [
            f"{r['qk_norm']['none']['bfloat16_rounding_max_abs']:.0f}",
            f"{r['qk_norm']['head']['bfloat16_rounding_max_abs']:g}",
        ],
    ),
    # 3 · soft-capping
    (
        "falls from 660 to 10.00 ($c",
        lambda r, fig: [
            f"{r['softcap']['loaded']['largest_score_without_cap']:,.0f}",
            f"{r['softcap']['loaded']['largest_score_with_cap']:.2f}",
        ],
    ),
    (
        r"But 87% of that model's scores lay beyond $\pm 10$",
        lambda r, fig: [
            f"{100 * r['softcap']['loaded']['share_of_scores_beyond_cap']:.0f}",
            f"{r['softcap']['cap']:g}",
        ],
    ),
    (
        "its accuracy falls from 1.000 to 0.154",
        lambda r, fig: [f"{r['softcap']['loaded'][k]['accuracy']:.3f}" for k in ("without_cap", "with_cap")],
    ),
    (r"a score beyond $\pm 10$ (its", lambda r, fig: f"{r['softcap']['cap']:g}"),
    ("still reaches 95.2 and is squashed", lambda r, fig: f"{max(steps_watched(r)):.1f}"),
    (
        "(loss 0.0001, accuracy 1.000)",
        lambda r, fig: [f"{r['softcap']['trained']['loss']:.4f}", f"{r['softcap']['trained']['accuracy']:.3f}"],
    ),
    ("(the accuracy stays 1.000)", lambda r, fig: f"{r['softcap']['final']['with_cap']['accuracy']:.3f}"),
    (
        "the largest logit falls from 20.16 to 5.00",
        lambda r, fig: [
            f"{r['softcap']['final']['largest_logit_without_cap']:.2f}",
            f"{r['softcap']['final']['largest_logit_with_cap']:.2f}",
        ],
    ),
    (
        "the held-out loss rises from 0.0001 to 0.3647",
        lambda r, fig: [
            f"{r['softcap']['loaded']['without_cap']['loss']:.4f}",
            f"{r['softcap']['final']['with_cap']['loss']:.4f}",
        ],
    ),
    # 4 · sliding windows
    (
        "The measured reach is exactly $L(W-1)+1$: 5, 9, 13 and 17 positions for 1 to 4 layers with $W = 5$",
        lambda r, fig: [
            "1",
            "1",
            *(str(row["measured"]) for row in r["receptive_field"].values()),
            min(r["receptive_field"]),
            max(r["receptive_field"]),
            str(r["window"]),
        ],
    ),
    ("asks for the symbol 8 back, outside one window", lambda r, fig: str(r["task"]["look_back"])),
    (
        "(accuracy 0.070; chance is 0.0625)",
        lambda r, fig: [f"{r['sliding']['1']['accuracy']:.3f}", f"{r['chance']:g}"],
    ),
    (
        "Two layers reach 9 positions, and they learn it (accuracy 1.000)",
        lambda r, fig: [str(r["receptive_field"]["2"]["measured"]), f"{r['sliding']['2']['accuracy']:.3f}"],
    ),
    (
        "With a reach of 4 per layer, the only route is two hops of exactly 4: the first layer copies into each "
        "position the symbol 4 back, the second reads that copy 4 back again",
        lambda r, fig: [str(r["window"] - 1)] * 4,
    ),
    # 5 · RoPE scaling
    (
        "The multi-head model of section 1 trained on sequences of $T$ = 32 tokens",
        lambda r, fig: ["1", str(r["task"]["train_length"])],
    ),
    (
        "($s = 1$: accuracy 1.000 for all)",
        lambda r, fig: [
            "1",
            one((row[str(r["task"]["train_length"])]["accuracy"] for row in r["rope"].values()), ".3f"),
        ],
    ),
    (
        "past position 32 it is right 0.997 of the time at length 64 and 0.943 at 128",
        lambda r, fig: [
            str(r["task"]["train_length"]),
            rope_beyond(r, "default", r["rope_lengths"][1]),
            str(r["rope_lengths"][1]),
            rope_beyond(r, "default", r["rope_lengths"][2]),
            str(r["rope_lengths"][2]),
        ],
    ),
    (
        "at length 64, dynamic 0.954, yarn 0.264, linear 0.064 and llama3 0.060; at 128 all four are near chance",
        lambda r, fig: [
            str(r["rope_lengths"][1]),
            *(rope_beyond(r, name, r["rope_lengths"][1]) for name in ("dynamic", "yarn", "linear", "llama3")),
            str(r["rope_lengths"][2]),
        ],
    ),
    (
        "a wavelength from 6.3 to 19,869 positions",
        lambda r, fig: [f"{r['rope_wavelengths'][0]:.1f}", f"{r['rope_wavelengths'][-1]:,.0f}"],
    ),
    ("With $T = 32$ only the fastest pair", lambda r, fig: str(r["task"]["train_length"])),
    (
        'The model found "8 back" through those angles, and with the frequencies halved the same angles mean 16 '
        "back: the linearly scaled model at length 64 outputs the symbol 16 back 0.887 of the time, and the one 8 "
        "back 0.064",
        lambda r, fig: [
            str(r["task"]["look_back"]),
            str(2 * r["task"]["look_back"]),
            str(r["rope_lengths"][1]),
            str(2 * r["task"]["look_back"]),
            f"{r['linear_2_outputs_symbol_2d_back']:.3f}",
            str(r["task"]["look_back"]),
            f"{r['linear_2_outputs_symbol_d_back']:.3f}",
        ],
    ),
    ("as every one of them does at a training length of 32", lambda r, fig: str(r["task"]["train_length"])),
    # 6 · sinks, latent attention, linear attention
    (
        "(held-out accuracy 1.000 for each of their 3 seeds)",
        lambda r, fig: [
            one([a for name in ("plain", "sinks", "latent") for a in accuracies(r, name)], ".3f"),
            one([len(accuracies(r, name)) for name in ("plain", "sinks", "latent")], "d"),
        ],
    ),
    (
        "(1.000, from one seed: a Gated",
        lambda r, fig: [one(accuracies(r, "hybrid"), ".3f")] if len(accuracies(r, "hybrid")) == 1 else "seeds",
    ),
    (
        "0.064 and 0.063 for its 2 seeds, where chance is 0.0625",
        lambda r, fig: [
            *(f"{a:.3f}" for a in accuracies(r, "linear")),
            str(len(accuracies(r, "linear"))),
            f"{r['chance']:g}",
        ],
    ),
    (
        r"loss ends at 2.77, the $\ln 16$ of a uniform guess",
        lambda r, fig: [
            one((run["loss_curve"][-1] for run in r["recent"]["linear"]["runs"]), ".2f"),
            str(r["task"]["vocab"]),
        ],
    ),
    ("the symbol 8 back is random", lambda r, fig: str(r["task"]["look_back"])),
    (
        "(3 tokens back per layer, 6 for two)",
        lambda r, fig: [
            str(r["linear_sizes"]["linear_conv_kernel_dim"] - 1),
            str(r["layers"] * (r["linear_sizes"]["linear_conv_kernel_dim"] - 1)),
        ],
    ),
    (
        "(83,264 plain, 83,272 with sinks, 73,056 latent, 94,064 linear, 88,664 hybrid)",
        lambda r, fig: [
            f"{r['recent'][name]['parameters']:,}" for name in ("plain", "sinks", "latent", "linear", "hybrid")
        ],
    ),
    (
        "starts at 0 and ends within 0.11 of it",
        lambda r, fig: [
            "0",
            f"{max(abs(v) for row in r['sinks_by_seed'] for layer in row['sink_logits'] for v in layer):.2f}",
        ],
    ),
    (
        "at most 0.005 per head in seeds 0 and 1 (the mean",
        lambda r, fig: [f"{max(head_means(r, 'sink', (0, 1))):.3f}", "0", "1"],
    ),
    (
        "and 0.035 to 0.047 in the first layer of seed 2 (standard deviation over the sequences at most 0.006)",
        lambda r, fig: [
            f"{min(head_means(r, 'sink', (2,), 0)):.3f}",
            f"{max(head_means(r, 'sink', (2,), 0)):.3f}",
            "2",
            f"{max(head_means(r, 'sink', (2,), 0, 'std')):.3f}",
        ],
    ),
    (
        "of the first layer give it 0.026 to 0.048 (standard deviation at most 0.011), about the even share of "
        "0.053, and those of the second layer at most 0.002",
        lambda r, fig: [
            f"{min(head_means(r, 'first_token_without_sinks', r['recent_seeds'], 0)):.3f}",
            f"{max(head_means(r, 'first_token_without_sinks', r['recent_seeds'], 0)):.3f}",
            f"{max(head_means(r, 'first_token_without_sinks', r['recent_seeds'], 0, 'std')):.3f}",
            f"{r['uniform_first_token_share']:.3f}",
            f"{max(head_means(r, 'first_token_without_sinks', r['recent_seeds'], 1)):.3f}",
        ],
    ),
    (
        r"Latent attention keeps 192 bytes per token, $2 \cdot (16 + 8) \cdot 4$: the latent ($r = 16$) and the "
        r"rotated key ($\rho = 8$) of each of the 2 layers",
        lambda r, fig: [
            f"{r['memory']['latent']['bytes_per_token']['32']:.0f}",
            str(r["layers"]),
            str(r["latent_sizes"]["kv_lora_rank"]),
            str(r["latent_sizes"]["qk_rope_head_dim"]),
            f"{latent_bytes_per_number(r):.0f}",
            str(r["latent_sizes"]["kv_lora_rank"]),
            str(r["latent_sizes"]["qk_rope_head_dim"]),
            str(r["layers"]),
        ],
    ),
    (
        "4 heads of keys and values of 16 numbers, is the plain model's 1,024 bytes: latent attention keeps 5.3 "
        "times less",
        lambda r, fig: [
            str(r["heads"]),
            str(r["latent_sizes"]["qk_nope_head_dim"] + r["latent_sizes"]["qk_rope_head_dim"]),
            f"{r['memory']['latent']['per_head_equivalent_bytes_per_token']:,}",
            f"{latent_ratio(r):.1f}",
        ],
    ),
    (
        r"Gated DeltaNet keeps 14,336 bytes after 32 tokens and after 128: per layer 4 state matrices of "
        r"$16 \times 16$ and the last 4 inputs of its convolution over 192 channels",
        lambda r, fig: [
            f"{r['memory']['linear']['bytes']['32']:,}"
            if r["memory"]["linear"]["bytes"]["128"] == r["memory"]["linear"]["bytes"]["32"]
            else "grows",
            *(str(length) for length in r["cache_lengths"]),
            str(r["linear_sizes"]["linear_num_value_heads"]),
            str(r["linear_sizes"]["linear_key_head_dim"]),
            str(r["linear_sizes"]["linear_value_head_dim"]),
            str(r["linear_sizes"]["linear_conv_kernel_dim"]),
            str(
                2 * r["linear_sizes"]["linear_num_key_heads"] * r["linear_sizes"]["linear_key_head_dim"]
                + r["linear_sizes"]["linear_num_value_heads"] * r["linear_sizes"]["linear_value_head_dim"]
            ),
        ],
    ),
    (
        "The plain model's cache is as large after 14 tokens, and holds 32,768 bytes after 32 and 131,072 after 128; "
        "the hybrid, one layer of each, 23,552 and 72,704",
        lambda r, fig: [
            f"{r['memory']['linear']['bytes']['32'] / r['memory']['plain']['formula_bytes_per_token']:g}",
            f"{r['memory']['plain']['bytes']['32']:,}",
            "32",
            f"{r['memory']['plain']['bytes']['128']:,}",
            "128",
            f"{r['memory']['hybrid']['bytes']['32']:,}",
            f"{r['memory']['hybrid']['bytes']['128']:,}",
        ],
    ),
    ("a cache 5.3 times smaller", lambda r, fig: f"{latent_ratio(r):.1f}"),
    # Answers
    ('which angle now means "8 back"', lambda r, fig: str(r["task"]["look_back"])),
    (
        r"2. Only `k_proj` and `v_proj` shrink: each maps 64 dimensions to $K \cdot 16$, so a layer holds "
        r"$2 \cdot 64 \cdot 16$ = 2,048",
        lambda r, fig: [
            "2",
            str(r["hidden_size"]),
            str(r["head_dim"]),
            "2",
            str(r["hidden_size"]),
            str(r["head_dim"]),
            f"{2 * r['hidden_size'] * r['head_dim']:,}",
        ],
    ),
    (
        "The model with $K = 4$ has 83,264 parameters, with $K = 2$ 75,072 and with $K = 1$ 70,976 (2 layers)",
        lambda r, fig: (
            [part for k in (4, 2, 1) for part in (str(k), f"{gqa(r, k, 'parameters'):,}")] + [str(r["layers"])]
        ),
    ),
]

GIVEN = [
    ("12 · Today's attention", "the tutorial's number"),
    ("The attention of a 2024 open model is still the attention of 2017", "dates"),
    ("## 1 · Grouped-query attention", "section number"),
    ("## 2 · QK-norm", "section number"),
    ("## 3 · Soft-capping", "section number"),
    ("## 4 · Sliding windows", "section number"),
    ("## 5 · RoPE scaling", "section number"),
    ("(the KV cache, tutorial 09)", "cross-reference"),
    ("(tutorial 04)", "cross-reference"),
    ("**Previous:** [11 ·", "cross-reference"),
    ("(Ainslie et al. 2023)", "citation"),
    ("(Dehghani et al. 2023; OLMo 2, Qwen 3, Gemma 3)", "citation and model names"),
    ("(Chen et al. 2023)", "citation"),
    ("## 6 · Attention of 2025–2026: sinks", "section number and dates"),
    ("GPT-OSS, after Xiao et al. 2024)", "citation"),
    ("Yang et al. 2024, Qwen3-Next)", "citation"),
    ("the training of the multi-head model of section 1 (same", "cross-reference"),
    ("a model with sinks sums to less than 1, and the library's", "definition of the sink's weight"),
    ("reads what went to the sink: 1 minus the row's sum", "definition of the sink's weight"),
    ("what a score of 0 gets beside", "the sink logit's start, the score it adds"),
    ("$K = 1$ is multi-query attention", "definition"),
    (r"\text{bytes per token} = 2 \cdot", "the formula"),
    ("with $K = H$, $H/2$ and 1, runs", "the grouping the text defines"),
    ("Llama 3 8B has 32 layers of 32 query heads of 128 dimensions", "a published configuration"),
    ("which keeps 8 significant bits", "bfloat16's format"),
    ("Gemma 2 bounds the scores", "model name"),
    ("The map has slope 1 at 0", "calculus"),
    ("can come close to 1 any more", "probabilities"),
    ("(Mistral; Gemma 2 and 3 alternate", "model names"),
    (r"positions $t-W+1 \dots t$", "definition of the window"),
    ("position $t$ depends on $L(W-1)+1$ positions", "the formula"),
    ("(masked weights are exactly 0)", "definition of the mask"),
    ("(Mistral 7B: 32 layers of $W$ = 4,096)", "a published configuration"),
    ("Gemma 2 and 3 keep some full", "model names"),
    ("and $L$ layers to $L(W-1)+1$, which", "the formula"),
    # exercises and answers: list numbers, published configurations, arithmetic
    (
        "1. Mistral 7B has the cache shape of Llama 3 8B (32 layers, $K = 8$ key/value heads of 128",
        "a published configuration",
    ),
    ("a context of 32,768 tokens, and how many would multi-head attention with 32 key/value", "the question"),
    ("2. The models of section 1 with $K = 4$, 2 and 1 differ", "the question"),
    (r"3. The slope of $c \tanh(s/c)$ is $1 - \tanh^2(s/c)$", "calculus"),
    ("4. How many sliding layers of $W = 5$ does the task need for a look-back of $d = 20$", "the question"),
    ("5. How would you make the linearly scaled model of section 5 work at length 64", "the question"),
    (
        r"1. $2 \cdot 32 \cdot 8 \cdot 128 \cdot 2$ = 131,072 bytes (128 KiB) per token, so 4 GiB for 32,768 tokens; "
        "with 32 key/value heads four times that, 16 GiB, more than the 13.5 GiB of the model's own weights "
        "(7.2 billion",
        "arithmetic and a published size",
    ),
    (
        r"3. $1 - \tanh^2(1) = 0.42$ at $s = c$ and $1 - \tanh^2(3) = 0.0099$ at $s = 3c$",
        "arithmetic",
    ),
    (r"4. $L(W-1)+1 \ge d+1$, so $L \ge 20/4 = 5$ layers (and they must learn five hops of 4)", "arithmetic"),
    ("5. Train it for a few hundred steps at length 64", "the answer"),
    ("positions up to 64 then turn no further than 32 did", "arithmetic"),
    ("with about 1,000 steps", "citation"),
]
