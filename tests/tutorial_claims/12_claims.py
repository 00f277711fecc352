"""The numbers of tutorial 12's prose and where its full run measured them (tests/test_tutorial_prose_numbers.py)."""

import numpy as np


def one(values, form: str):
    """The value that every item of `values` shows in `form` (the prose states one number for all of them)."""
    values = list(values)
    shown = {format(value, form) for value in values}
    return values[0] if len(shown) == 1 else f"they differ: {sorted(shown)}"


def gqa(r, kv_heads: int, key: str):
    return r["gqa"][str(kv_heads)][key]


def rope_beyond(r, name: str, length: int) -> str:
    return r["rope"][name][str(length)]["accuracy_beyond_train_length"]


SCALINGS = ("linear", "dynamic", "yarn", "llama3")


def tuned(r, name: str, key: str) -> float:
    return r["rope_fine_tuned"][name][key]


def same_at_train_length(r) -> bool:
    """s = 1: every scaling scores what the plain rotation scores at the training length."""
    length = str(r["task"]["train_length"])
    return len({row[length]["accuracy"] for row in r["rope"].values()}) == 1


def steps_watched(r) -> list:
    return r["softcap"]["trained"]["largest_score_before_cap"]


def qk_seeds(r, name: str, key: str) -> list:
    """`key` of each seed's run with qk_norm = `name`."""
    return [run[key] for run in r["qk_norm"][name]["by_seed"]]


def neither_always_faster(r) -> bool:
    """No qk_norm setting first gets its training loss below 0.1 earlier in every seed."""
    pairs = list(
        zip(qk_seeds(r, "none", "first_step_below_0.1"), qk_seeds(r, "head", "first_step_below_0.1"), strict=True)
    )
    return not all(a < b for a, b in pairs) and not all(b < a for a, b in pairs)


def slowest_seed(r, name: str) -> int:
    """The seed whose training loss took longest to fall below 0.1 with qk_norm = `name`."""
    runs = r["qk_norm"][name]["by_seed"]
    return max(runs, key=lambda run: run["first_step_below_0.1"])["seed"]


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


def exercises(r) -> dict:
    return r["exercises"]


def mistral_cache(r, kv_heads: int, key: str):
    """`key` of the cache the model with Mistral 7B's heads and `kv_heads` key/value heads returned."""
    return r["exercises"]["cache"][str(kv_heads)][key]


def cache_formula_parts(r) -> list:
    """The factors of 2 · layers · K · D · bytes for Mistral's K = 8, if the cache measured is what they give."""
    row, heads = r["exercises"]["cache"]["8"], r["exercises"]["mistral_heads"]
    parts = [row["tensors_per_layer"], row["cached_layers"], *row["cached_key_shape"][1::2], row["bytes_per_number"]]
    same = row["bytes_per_token"] == row["formula_bytes_per_token"] == np.prod(parts)
    return [str(n) for n in parts] if same and row["cached_layers"] == heads["num_hidden_layers"] else ["differs"]


def exercise_parameters(r, kv_heads: int, matrices: tuple | None = None) -> int:
    """The parameters of section 1's model with `kv_heads` rebuilt by the exercises' cell, of `matrices` or all."""
    counts = r["exercises"]["parameters_by_matrix"][str(kv_heads)]
    return sum(n for name, n in counts.items() if matrices is None or name in matrices)


def times(a: float, b: float) -> int | float:
    """a / b, as the whole number a word like "four" states when it is one."""
    ratio = a / b
    return int(ratio) if ratio.is_integer() else ratio


KEY_VALUE = ("k_proj", "v_proj")


def full_layer_reaches_everything(r) -> bool:
    """Every stack of the exercise with one full layer, wherever it stands, reaches every position of the sequence."""
    return {n for row in r["exercises"]["reach_with_one_full_layer"] for n in row} == {r["task"]["train_length"]}


CLAIMS = [
    # 1 · grouped-query attention
    (
        r"1,024 bytes per token with $K = H = 4$, 512 with $K = 2$ and 256 with $K = 1$ (2 layers, "
        r"$d_\text{head} = 16$, float32)",
        lambda r, fig: [
            int(gqa(r, 4, "cache_bytes_per_token")),
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
        "All three models learn the task (held-out accuracy 1.000; loss 0.0011, 0.0013 and 0.0015)",
        lambda r, fig: [
            "All" if all(row["accuracy"] > 0.99 for row in r["gqa"].values()) else "Not all",
            len(r["gqa"]),
            one((row["accuracy"] for row in r["gqa"].values()), ".3f"),
            *(gqa(r, k, "loss") for k in (4, 2, 1)),
        ],
    ),
    (
        "512 KiB of cache per token with $K = 32$, 128 KiB with its $K = 8$, and 16 KiB with $K = 1$",
        lambda r, fig: [part for key, value in r["large_model_cache_kib_per_token"].items() for part in (value, key)],
    ),
    # 2 · QK-norm
    (
        "at a learning rate of 0.02, against 0.003 for the others",
        lambda r, fig: [r["high_learning_rate"], r["task"]["learning_rate"]],
    ),
    (
        "grows to 790 by step 160 and is still 660 after 400 steps; with QK-norm it creeps up to 22.8",
        lambda r, fig: [
            "grows"
            if max(r["qk_norm"]["none"]["largest_score"]) > r["qk_norm"]["none"]["largest_score"][0]
            else "does not grow",
            max(r["qk_norm"]["none"]["largest_score"]),
            str(r["qk_norm"]["none"]["steps"][int(np.argmax(r["qk_norm"]["none"]["largest_score"]))]),
            r["qk_norm"]["none"]["final_largest_score"],
            str(r["task"]["steps"]),
            r["qk_norm"]["head"]["final_largest_score"],
        ],
    ),
    (
        "The same pair from 3 seeds ends with a largest score of 660, 264 and 118 without QK-norm and 22.8, 11.0 "
        "and 12.9 with it: the bound holds in every seed.",
        lambda r, fig: [
            len(r["qk_seeds"]),
            *qk_seeds(r, "none", "final_largest_score"),
            *qk_seeds(r, "head", "final_largest_score"),
            "every"
            if all(
                a > b
                for a, b in zip(
                    qk_seeds(r, "none", "final_largest_score"), qk_seeds(r, "head", "final_largest_score"), strict=True
                )
            )
            else "not every",
        ],
    ),
    (
        "every run learns the task (held-out loss at most 0.0036), and the training loss first falls below 0.1 at "
        "steps 127, 23 and 26 without QK-norm and 84, 27 and 35 with it, so neither is the faster in every seed (the "
        "slow start of seed 0 without",
        lambda r, fig: [
            "every" if min(qk_seeds(r, "none", "accuracy") + qk_seeds(r, "head", "accuracy")) > 0.99 else "not every",
            max(qk_seeds(r, "none", "loss") + qk_seeds(r, "head", "loss")),
            "falls"
            if None not in qk_seeds(r, "none", "first_step_below_0.1") + qk_seeds(r, "head", "first_step_below_0.1")
            else "does not fall",
            0.1,  # the threshold
            *(str(step) for step in qk_seeds(r, "none", "first_step_below_0.1")),
            *(str(step) for step in qk_seeds(r, "head", "first_step_below_0.1")),
            "every" if neither_always_faster(r) else "one is faster in every seed",
            str(slowest_seed(r, "none")),
        ],
    ),
    (
        "the largest score of a model trained at a high learning rate ends between 118 and 660 (3 seeds); with it, "
        "between 11.0 and 22.8",
        lambda r, fig: [
            min(qk_seeds(r, "none", "final_largest_score")),
            max(qk_seeds(r, "none", "final_largest_score")),
            len(r["qk_seeds"]),
            min(qk_seeds(r, "head", "final_largest_score")),
            max(qk_seeds(r, "head", "final_largest_score")),
        ],
    ),
    ("In float32 a score of 660 is harmless", lambda r, fig: r["qk_norm"]["none"]["final_largest_score"]),
    (
        "moves them by almost 2 without QK-norm and by 0.0625 with it",
        lambda r, fig: [
            r["qk_norm"]["none"]["bfloat16_rounding_max_abs"],
            r["qk_norm"]["head"]["bfloat16_rounding_max_abs"],
        ],
    ),
    # 3 · soft-capping
    (
        "falls from 660 to 10.00 ($c",
        lambda r, fig: [
            "falls"
            if r["softcap"]["loaded"]["largest_score_with_cap"] < r["softcap"]["loaded"]["largest_score_without_cap"]
            else "rises",
            r["softcap"]["loaded"]["largest_score_without_cap"],
            r["softcap"]["loaded"]["largest_score_with_cap"],
        ],
    ),
    (
        r"But 87% of that model's scores lay beyond $\pm 10$",
        lambda r, fig: [
            100 * r["softcap"]["loaded"]["share_of_scores_beyond_cap"],
            r["softcap"]["cap"],
        ],
    ),
    (
        "its accuracy falls from 1.000 to 0.154",
        lambda r, fig: [
            "falls"
            if r["softcap"]["loaded"]["with_cap"]["accuracy"] < r["softcap"]["loaded"]["without_cap"]["accuracy"]
            else "does not fall",
            *(r["softcap"]["loaded"][k]["accuracy"] for k in ("without_cap", "with_cap")),
        ],
    ),
    (
        r"never gives the softmax a score beyond $\pm 10$ (its",
        lambda r, fig: [
            "never"
            if max(r["softcap"]["trained"]["largest_score_after_cap"]) <= r["softcap"]["cap"]
            else "not always",
            r["softcap"]["cap"],
        ],
    ),
    (
        "Sliding windows: reach grows with depth",
        lambda r, fig: "grows" if np.all(np.diff(fig("12_sliding")["measured"]) > 0) else "does not grow",
    ),
    (
        "the gradient is nonzero at every position in between",
        lambda r, fig: "every" if all(row["contiguous"] for row in r["receptive_field"].values()) else "not every",
    ),
    (
        "At a high learning rate they do grow",
        # seed 0 without QK-norm: its largest score at the end against at the start, watched every 20 steps
        lambda r, fig: (
            "grow"
            if r["qk_norm"]["none"]["largest_score"][-1] > 10 * r["qk_norm"]["none"]["largest_score"][0]
            else "not grow"
        ),
    ),
    ("still reaches 95.2 and is squashed", lambda r, fig: max(steps_watched(r))),
    (
        "(loss 0.0001, accuracy 1.000)",
        lambda r, fig: [r["softcap"]["trained"]["loss"], r["softcap"]["trained"]["accuracy"]],
    ),
    ("(the accuracy stays 1.000)", lambda r, fig: r["softcap"]["final"]["with_cap"]["accuracy"]),
    (
        "the largest logit falls from 20.16 to 5.00",
        lambda r, fig: [
            "falls"
            if r["softcap"]["final"]["largest_logit_with_cap"] < r["softcap"]["final"]["largest_logit_without_cap"]
            else "rises",
            r["softcap"]["final"]["largest_logit_without_cap"],
            r["softcap"]["final"]["largest_logit_with_cap"],
        ],
    ),
    (
        "the held-out loss rises from 0.0001 to 0.3647",
        lambda r, fig: [
            "rises"
            if r["softcap"]["final"]["with_cap"]["loss"] > r["softcap"]["loaded"]["without_cap"]["loss"]
            else "falls",
            r["softcap"]["loaded"]["without_cap"]["loss"],
            r["softcap"]["final"]["with_cap"]["loss"],
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
        lambda r, fig: [r["sliding"]["1"]["accuracy"], r["chance"]],
    ),
    (
        "Two layers reach 9 positions, and they learn it (accuracy 1.000)",
        lambda r, fig: [2, str(r["receptive_field"]["2"]["measured"]), r["sliding"]["2"]["accuracy"]],
    ),
    (
        "With a reach of 4 per layer, the only route is two hops of exactly 4: the first layer copies into each "
        "position the symbol 4 back, the second reads that copy 4 back again",
        # two hops: the look-back over the reach of one layer, when it divides it
        lambda r, fig: [
            str(r["window"] - 1),
            r["task"]["look_back"] // (r["window"] - 1) if r["task"]["look_back"] % (r["window"] - 1) == 0 else "no",
            *[str(r["window"] - 1)] * 3,
        ],
    ),
    # 5 · RoPE scaling
    (
        "The multi-head model of section 1 trained on sequences of $T$ = 32 tokens",
        lambda r, fig: ["1", str(r["task"]["train_length"])],
    ),
    (
        "every scaling is the plain rotation ($s = 1$: accuracy 1.000 for all)",
        lambda r, fig: [
            "every" if same_at_train_length(r) else "not every",
            "1",
            one((row[str(r["task"]["train_length"])]["accuracy"] for row in r["rope"].values()), ".3f"),
            "all" if same_at_train_length(r) else "not all",
        ],
    ),
    (
        "past position 32 it is right 0.997 of the time at length 64 and 0.943 at 128, where the scaled models score, "
        "at length 64, dynamic 0.954, yarn 0.264, linear 0.064 and llama3 0.060, and at 128 at most 0.107",
        lambda r, fig: [
            str(r["task"]["train_length"]),
            rope_beyond(r, "default", r["rope_lengths"][1]),
            str(r["rope_lengths"][1]),
            rope_beyond(r, "default", r["rope_lengths"][2]),
            str(r["rope_lengths"][2]),
            str(r["rope_lengths"][1]),
            *(rope_beyond(r, name, r["rope_lengths"][1]) for name in ("dynamic", "yarn", "linear", "llama3")),
            str(r["rope_lengths"][2]),
            max(rope_beyond(r, name, r["rope_lengths"][2]) for name in SCALINGS),
        ],
    ),
    (
        "After 100 steps on sequences of 64 (the same batches for each), the models with `dynamic`, `yarn` and "
        "`llama3` are right past position 32 1.000, 1.000 and 1.000 of the time, as is the plain rotation trained the "
        "same way (1.000), and still 1.000, 1.000 and 1.000 on sequences of 32. The linearly scaled model is not "
        "there yet: 0.201 at length 64 and 0.210 at 32.",
        lambda r, fig: [
            str(r["rope_fine_tune_steps"]),
            str(r["rope_lengths"][1]),
            str(r["task"]["train_length"]),
            *(tuned(r, name, "accuracy_beyond_train_length") for name in ("dynamic", "yarn", "llama3")),
            tuned(r, "default", "accuracy_beyond_train_length"),
            *(tuned(r, name, "accuracy_at_train_length") for name in ("dynamic", "yarn", "llama3")),
            str(r["task"]["train_length"]),
            tuned(r, "linear", "accuracy_beyond_train_length"),
            str(r["rope_lengths"][1]),
            tuned(r, "linear", "accuracy_at_train_length"),
            str(r["task"]["train_length"]),
        ],
    ),
    (
        "On this task none of the scalings beats the plain rotation",
        lambda r, fig: (
            "none"
            if all(
                tuned(r, name, "accuracy_beyond_train_length") <= tuned(r, "default", "accuracy_beyond_train_length")
                for name in SCALINGS
            )
            and all(
                rope_beyond(r, name, r["rope_lengths"][1]) <= rope_beyond(r, "default", r["rope_lengths"][1])
                for name in SCALINGS
            )
            else "some"
        ),
    ),
    (
        "as `linear` divides all",
        lambda r, fig: "all" if all(x == 0.5 for x in r["rope_frequency_ratio_at_2"]["linear"]) else "not all",
    ),
    (
        'It has to learn new angles for "8 back" in every pair',
        lambda r, fig: [
            str(r["task"]["look_back"]),
            "every" if all(x != 1 for x in r["rope_frequency_ratio_at_2"]["linear"]) else "not every",
        ],
    ),
    (
        "its training length, which a look-back of 8 never asks for",
        lambda r, fig: [
            str(r["task"]["look_back"]),
            "never" if r["task"]["look_back"] < r["task"]["train_length"] else "sometimes",
        ],
    ),
    (
        "100 steps at the new length repair `dynamic`, `yarn` and `llama3`, not yet `linear`, and none beats the "
        "plain rotation",
        lambda r, fig: [
            str(r["rope_fine_tune_steps"]),
            "none"
            if all(
                tuned(r, name, "accuracy_beyond_train_length") <= tuned(r, "default", "accuracy_beyond_train_length")
                for name in SCALINGS
            )
            else "some",
        ],
    ),
    (
        "Section 5 measured it with 100 steps: 0.201 past position 32",
        lambda r, fig: [
            "5",
            str(r["rope_fine_tune_steps"]),
            tuned(r, "linear", "accuracy_beyond_train_length"),
            str(r["task"]["train_length"]),
        ],
    ),
    (
        "a wavelength from 6.3 to 19,869 positions",
        lambda r, fig: [r["rope_wavelengths"][0], r["rope_wavelengths"][-1]],
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
            r["linear_2_outputs_symbol_2d_back"],
            str(r["task"]["look_back"]),
            r["linear_2_outputs_symbol_d_back"],
        ],
    ),
    ("Applied without training at a training length of 32", lambda r, fig: str(r["task"]["train_length"])),
    # 6 · sinks, latent attention, linear attention
    (
        "Every seed of the plain model, of the one with sinks and of the one with latent attention learns the task "
        "(held-out accuracy 1.000 for each of their 3 seeds)",
        lambda r, fig: [
            "Every"
            if min(a for name in ("plain", "sinks", "latent") for a in accuracies(r, name)) > 0.99
            else "Not every",
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
            *(a for a in accuracies(r, "linear")),
            str(len(accuracies(r, "linear"))),
            r["chance"],
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
            r["layers"],
        ],
    ),
    (
        "(83,264 plain, 83,272 with sinks, 73,056 latent, 94,064 linear, 88,664 hybrid)",
        lambda r, fig: [r["recent"][name]["parameters"] for name in ("plain", "sinks", "latent", "linear", "hybrid")],
    ),
    (
        "starts at 0 and ends within 0.11 of it",
        lambda r, fig: [
            "0",
            max(abs(v) for row in r["sinks_by_seed"] for layer in row["sink_logits"] for v in layer),
        ],
    ),
    (
        "at most 0.005 per head in seeds 0 and 1 (the mean",
        lambda r, fig: [max(head_means(r, "sink", (0, 1))), "0", "1"],
    ),
    (
        "and 0.035 to 0.047 in the first layer of seed 2 (standard deviation over the sequences at most 0.006)",
        lambda r, fig: [
            min(head_means(r, "sink", (2,), 0)),
            max(head_means(r, "sink", (2,), 0)),
            "2",
            max(head_means(r, "sink", (2,), 0, "std")),
        ],
    ),
    (
        "of the first layer give it 0.026 to 0.048 (standard deviation at most 0.011), about the even share of "
        "0.053, and those of the second layer at most 0.002",
        lambda r, fig: [
            min(head_means(r, "first_token_without_sinks", r["recent_seeds"], 0)),
            max(head_means(r, "first_token_without_sinks", r["recent_seeds"], 0)),
            max(head_means(r, "first_token_without_sinks", r["recent_seeds"], 0, "std")),
            r["uniform_first_token_share"],
            max(head_means(r, "first_token_without_sinks", r["recent_seeds"], 1)),
        ],
    ),
    (
        r"Latent attention keeps 192 bytes per token, $2 \cdot (16 + 8) \cdot 4$: the latent ($r = 16$) and the "
        r"rotated key ($\rho = 8$) of each of the 2 layers",
        lambda r, fig: [
            r["memory"]["latent"]["bytes_per_token"]["32"],
            str(r["layers"]),
            str(r["latent_sizes"]["kv_lora_rank"]),
            str(r["latent_sizes"]["qk_rope_head_dim"]),
            latent_bytes_per_number(r),
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
            r["memory"]["latent"]["per_head_equivalent_bytes_per_token"],
            latent_ratio(r),
        ],
    ),
    (
        r"Gated DeltaNet keeps 14,336 bytes after 32 tokens and after 128: per layer 4 state matrices of "
        r"$16 \times 16$ and the last 4 inputs of its convolution over 192 channels",
        lambda r, fig: [
            r["memory"]["linear"]["bytes"]["32"]
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
            r["memory"]["linear"]["bytes"]["32"] / r["memory"]["plain"]["formula_bytes_per_token"],
            r["memory"]["plain"]["bytes"]["32"],
            "32",
            r["memory"]["plain"]["bytes"]["128"],
            "128",
            r["memory"]["hybrid"]["bytes"]["32"],
            r["memory"]["hybrid"]["bytes"]["128"],
        ],
    ),
    ("a cache 5.3 times smaller", lambda r, fig: latent_ratio(r)),
    (
        "whose state does not grow",
        lambda r, fig: "grow" if r["memory"]["linear"]["bytes"]["32"] == r["memory"]["linear"]["bytes"]["128"] else "",
    ),
    # Answers
    ('which angle now means "8 back"', lambda r, fig: str(r["task"]["look_back"])),
    (
        "(32 layers of 32 query heads and $K = 8$ key/value heads of 128 dimensions; a hidden size of 8, since",
        lambda r, fig: [
            *(str(exercises(r)["mistral_heads"][key]) for key in ("num_hidden_layers", "num_attention_heads")),
            *(str(exercises(r)["mistral_heads"][key]) for key in ("num_key_value_heads", "head_dim")),
            str(exercises(r)["small_hidden_size"]),
        ],
    ),
    (
        "per layer keys and values of shape (batch, 8, tokens, 128) in bfloat16, 131,072 bytes (128 KiB) per token, "
        r"what $2 \cdot 32 \cdot 8 \cdot 128 \cdot 2$ gives, so 4 GiB for 32,768 tokens",
        lambda r, fig: [
            *(str(n) for n in mistral_cache(r, 8, "cached_key_shape")[1::2]),
            mistral_cache(r, 8, "bytes_per_token") if mistral_cache(r, 8, "cached_dtype") == "torch.bfloat16" else 0,
            mistral_cache(r, 8, "bytes_per_token") / 1024,
            *cache_formula_parts(r),
            mistral_cache(r, 8, "gib_at_context"),
            exercises(r)["context"],
        ],
    ),
    (
        "With 32 key/value heads it holds 524,288 bytes per token, four times as many: 16 GiB, more than the 13.5 GiB "
        "of the model's own weights in bfloat16 (7.2 billion",
        lambda r, fig: [
            str(mistral_cache(r, 32, "cached_key_shape")[1]),
            mistral_cache(r, 32, "bytes_per_token"),
            times(mistral_cache(r, 32, "bytes_per_token"), mistral_cache(r, 8, "bytes_per_token")),
            mistral_cache(r, 32, "gib_at_context"),
            "more"
            if mistral_cache(r, 32, "gib_at_context") > exercises(r)["mistral_weights_gib_bfloat16"]
            else "less",
            exercises(r)["mistral_weights_gib_bfloat16"],
            exercises(r)["mistral_parameters"] / 1e9,
        ],
    ),
    (
        "the window of 4,096 tokens of v0.1 bounds it at about 512 MiB",
        lambda r, fig: [
            exercises(r)["mistral_sliding_window"],
            mistral_cache(r, 8, "bytes_per_token") * exercises(r)["mistral_sliding_window"] / 2**20,
        ],
    ),
    (
        "83,264 with $K = 4$, 75,072 with $K = 2$ and 70,976 with $K = 1$ (2 layers), so 8,192 and then 4,096 fewer",
        lambda r, fig: [
            *(part for k in (4, 2, 1) for part in (exercise_parameters(r, k), str(k))),
            str(r["layers"]),
            exercise_parameters(r, 4) - exercise_parameters(r, 2),
            exercise_parameters(r, 2) - exercise_parameters(r, 1),
        ],
    ),
    (
        "Only `k_proj` and `v_proj` shrink (together 16,384, 8,192 and 4,096 parameters); every other matrix "
        "keeps its size",
        lambda r, fig: [
            "shrink"
            if exercise_parameters(r, 4, KEY_VALUE)
            > exercise_parameters(r, 2, KEY_VALUE)
            > exercise_parameters(r, 1, KEY_VALUE)
            else "grow",
            *(exercise_parameters(r, k, KEY_VALUE) for k in (4, 2, 1)),
            "every" if exercises(r)["matrices_that_change"] == list(KEY_VALUE) else "not every",
        ],
    ),
    (
        r"Each of the two maps 64 dimensions to $K \cdot 16$, so a layer holds $2 \cdot 64 \cdot 16$ = 2,048 "
        "parameters per key/value head less",
        lambda r, fig: [
            len(exercises(r)["matrices_that_change"]),
            str(r["hidden_size"]),
            str(r["head_dim"]),
            str(len(exercises(r)["matrices_that_change"])),
            str(r["hidden_size"]),
            str(r["head_dim"]),
            # measured: what one key/value head less costs a layer, from the rebuilt models' counts
            (exercise_parameters(r, 4) - exercise_parameters(r, 1)) / (4 - 1) / r["layers"],
        ],
    ),
    (
        "at $c = 10$ gives a slope of 0.42 at $s = c$ and 0.0099 at $s = 3c$",
        lambda r, fig: [r["softcap"]["cap"], *exercises(r)["softcap_slope"].values()],
    ),
    (
        "through 1 to 5 sliding layers of $W = 5$ the last position reaches 5, 9, 13, 17 and 21 positions (the first "
        "four are the reaches the gradients measured above), so the task needs 5 layers, the fewest that reach the 21 "
        "positions from $t - 20$ to $t$, and they must learn five hops of 4",
        lambda r, fig: [
            "1",  # the first depth of the list
            str(len(exercises(r)["sliding_reach_by_depth"])),
            str(r["window"]),
            *exercises(r)["sliding_reach_by_depth"],
            # how many of the depths section 4's gradients measured give the same reach
            sum(
                row["measured"] == reach
                for row, reach in zip(
                    r["receptive_field"].values(), exercises(r)["sliding_reach_by_depth"], strict=False
                )
            ),
            str(len(exercises(r)["sliding_reach_by_depth"])),
            exercises(r)["sliding_reach_by_depth"][-1],
            str(exercises(r)["far_look_back"]),
            len(exercises(r)["sliding_reach_by_depth"]),  # one hop per layer
            str(r["window"] - 1),
        ],
    ),
    (
        "With one full layer among them the last position reaches all 32 positions of the sequence, in every stack of "
        "1 to 5 layers",
        lambda r, fig: [
            "all" if full_layer_reaches_everything(r) else "not all",
            r["task"]["train_length"],
            "every" if full_layer_reaches_everything(r) else "not every",
            "1",  # the smallest stack: the full layer alone
            str(len(exercises(r)["reach_with_one_full_layer"])),
        ],
    ),
    # Self-test
    ("given a soft-cap of $c = 10$ after training", lambda r, fig: r["softcap"]["cap"]),
    (
        "how many layers of $W = 5$ did a look-back of 8 need?",
        lambda r, fig: [str(r["window"]), str(r["task"]["look_back"])],
    ),
    (
        "e. Linear scaling with $s = 2$, applied without training, ruins the model at length 64.",
        lambda r, fig: [str(r["rope_lengths"][1] // r["task"]["train_length"]), str(r["rope_lengths"][1])],
    ),
    (
        "The cell found 1,024, 512 and 256 bytes per token for $K$ = 4, 2 and 1, what the formula gives",
        lambda r, fig: [
            *(gqa(r, k, "cache_bytes_per_token") for k in (4, 2, 1)),
            *(str(k) for k in sorted(map(int, r["gqa"]), reverse=True)),
        ],
    ),
    (
        "the largest score ended at 118 to 660 without QK-norm, 11.0 to 22.8 with it",
        lambda r, fig: [
            min(qk_seeds(r, "none", "final_largest_score")),
            max(qk_seeds(r, "none", "final_largest_score")),
            min(qk_seeds(r, "head", "final_largest_score")),
            max(qk_seeds(r, "head", "final_largest_score")),
        ],
    ),
    (
        r"c. Its accuracy goes from 1.000 to 0.154: the cap squashes the scores beyond $\pm c$, and 87% of this "
        "model's scores lay there",
        lambda r, fig: [
            *(r["softcap"]["loaded"][k]["accuracy"] for k in ("without_cap", "with_cap")),
            100 * r["softcap"]["loaded"]["share_of_scores_beyond_cap"],
        ],
    ),
    (
        "d. $L(W-1)+1$, as the gradients measured. One layer reaches 5 positions and guesses (accuracy 0.070, chance "
        "0.0625); two reach 9 and learn it (accuracy 1.000), relaying the symbol in two hops of 4",
        lambda r, fig: [
            "1",
            "1",
            str(r["receptive_field"]["1"]["measured"]),
            r["sliding"]["1"]["accuracy"],
            r["chance"],
            # the fewest sliding layers that learn the task
            min(int(k) for k, row in r["sliding"].items() if row["accuracy"] > 0.99),
            str(r["receptive_field"]["2"]["measured"]),
            r["sliding"]["2"]["accuracy"],
            r["task"]["look_back"] // (r["window"] - 1) if r["task"]["look_back"] % (r["window"] - 1) == 0 else "no",
            str(r["window"] - 1),
        ],
    ),
    (
        'the angle the model learned for "8 back" now stands for 16 back: at length 64 the scaled model outputs the '
        "symbol 16 back 0.887 of the time (RoPE scaling). After 100 steps at the new length its accuracy there is "
        "only 0.201.",
        lambda r, fig: [
            str(r["task"]["look_back"]),
            str(2 * r["task"]["look_back"]),
            str(r["rope_lengths"][1]),
            str(2 * r["task"]["look_back"]),
            r["linear_2_outputs_symbol_2d_back"],
            str(r["rope_fine_tune_steps"]),
            tuned(r, "linear", "accuracy_beyond_train_length"),
        ],
    ),
    (
        "Gated DeltaNet: 0.064 and 0.063 over its seeds, at chance.",
        lambda r, fig: accuracies(r, "linear"),
    ),
    (
        "the hybrid, with one softmax layer on top, learns it (1.000)",
        lambda r, fig: [one(accuracies(r, "hybrid"), ".3f")],
    ),
]

GIVEN = [
    ("12 · Today's attention", "the tutorial's number"),
    ("stretch their rotary positions to read longer texts than they were trained on", "what the method is for"),
    ("on one small task that every section shares", "the tutorial's plan"),
    ("The last section measures three knobs", "the sections' plan: sinks, latent, linear attention"),
    ("Every model below reads a sequence of random symbols", "definition of the task"),
    ("the same sequences on every machine", "seeded generator"),
    ("keeps the keys and values of every token it has read (the KV cache, tutorial 09), in every layer", "definition"),
    ("nothing in plain attention stops training from growing $q$ and $k$", "what the formula allows"),
    ("a score can only grow as fast as those gains do", "what the norm implies"),
    ("Soft-capping: a smooth ceiling", "tanh is smooth"),
    (r"never reaches $\pm c$", "tanh's range"),
    (r"since $\tanh$ is increasing", "calculus"),
    ("with respect to every input embedding", "definition of the measurement"),
    ("RoPE scaling: reading longer texts than training's", "the section's subject"),
    ("rotations of distant keys that training never showed them", "by construction: trained on length 32"),
    ("`linear` divides every frequency by a factor $s$", "definition of the method"),
    ("None of them stores anything in the weights", "the library computes the rotation from the config"),
    ("Three newer knobs change what attention is", "the section's plan"),
    ("joins every row's softmax", "definition of a sink"),
    ("shared by all heads, and rebuilds every head's keys and values", "definition of latent attention"),
    ("instead of a cache that grows with the text", "definition of a KV cache"),
    ("a ranking is claimed only where every seed agrees", "the text's rule"),
    ("where the first token is never the symbol to fetch", "by definition of t > d"),
    ("at two lengths and adds up the bytes of every tensor", "the lengths the script sets; what it adds"),
    ("The model whose two layers are both Gated DeltaNet", "the config sets 2 layers"),
    ("has no positions at all", "the method's definition"),
    ("(Qwen3-Next: one in every four)", "a published configuration"),
    ("Here every query has one symbol to fetch", "definition of the task"),
    ("Soft-capping bounds them too, smoothly", "tanh is smooth"),
    ("on a task where every query has something to fetch", "definition of the task"),
    ("[the list of all of them]", "link text"),
    ("The attention of a 2024 open model is still the attention of 2017", "dates"),
    ("## 1 · Grouped-query attention", "section number"),
    ("## 2 · QK-norm", "section number"),
    ("## 3 · Soft-capping", "section number"),
    ("## 4 · Sliding windows", "section number"),
    ("## 5 · RoPE scaling", "section number"),
    ("(the KV cache, tutorial 09)", "cross-reference"),
    ("position interpolation, YaRN and Llama 3 are published", "model name"),
    ("a model must use distances longer than its training length", "what a scaling is for"),
    ("on a task that never needs a distance beyond its training length", "the task: d = 8 < T = 32"),
    ("the task asks only for a distance of 8, which training showed at every position", "the task: d = 8 < T = 32"),
    (
        "(YaRN's $\\beta_\\text{fast} = 32$ and $\\beta_\\text{slow} = 1$, Llama 3's low and high frequency "
        "factors 1 and 4",
        "the published defaults the script sets",
    ),
    ("Chen et al. trained it for about 1,000 steps", "citation"),
    ("each scaled model ($s = 2$), and the plain one beside them", "the script's setting"),
    ("(tutorial 04)", "cross-reference"),
    ("**Previous:** [11 ·", "cross-reference"),
    ("[13 · attention in a pretrained model]", "cross-reference"),
    ("[Tutorial 13](13_attention_in_a_pretrained_model.py)", "cross-reference"),
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
    ("The cell below the answers measures those of 1 to 4 with the library", "the numbers of the answers"),
    ("1. The cell builds the library's model", "list number"),
    ("2. The cell rebuilds the three models", "list number"),
    ("3. Autograd through the library's `soft_cap`", "list number"),
    (
        r"the values of $1 - \tanh^2(1)$ and $1 - \tanh^2(3)$",
        "the slope's formula at s = c and 3c (the test checks it)",
    ),
    ("4. The cell composes the library's boolean masks", "list number"),
    ("5. Train it at length 64", "the question's length"),
    ("positions up to 64 then turn no further than 32 did", "arithmetic"),
    ("with about 1,000 steps", "citation"),
]
