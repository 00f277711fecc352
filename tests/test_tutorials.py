"""The tutorials in docs/tutorials run (their --quick mode, as a user would run them) and the numbers they print and
reason about are what the text claims. Plus: the committed figures are what the committed scripts draw (their data,
not their pixels), every tutorial opens as a notebook, and docs/README.md points at files that exist."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
FIGURES = ROOT / "docs" / "figures"
SCRIPTS = sorted(p.name for p in TUTORIALS.glob("[0-9][0-9]_*.py"))


def run_tutorial(name: str, folder: Path, *extra: str, quick: bool = True) -> tuple[dict, Path, str]:
    """Run docs/tutorials/NAME as a script; returns (its reported numbers, its figures folder, its stdout)."""
    figures, results = folder / "figures", folder / "results.json"
    command = [sys.executable, str(TUTORIALS / name), "--figures", str(figures), "--results", str(results), *extra]
    if quick:
        command.append("--quick")
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, env=environment)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    return json.loads(results.read_text()), figures, completed.stdout


def figure_names(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.png")}


def assert_figures(figures: Path, prefix: str) -> None:
    """Each figure a run writes is a PNG with its data beside it, and is one of the committed figures."""
    names = {n for n in figure_names(figures) if n.startswith(prefix)}
    assert names, f"no {prefix}* figure written"
    assert names == {p.stem for p in figures.glob(f"{prefix}*.npz")}
    assert names == {n for n in figure_names(FIGURES) if n.startswith(prefix)}


def test_03_nadaraya_watson(tmp_path):
    numbers, figures, _ = run_tutorial("03_nadaraya_watson.py", tmp_path)
    assert numbers["mse_learned"] < numbers["mse_fixed_kernel"] < numbers["mse_average"]
    assert numbers["library_vs_formula_max_abs_float64"] < 1e-6  # GaussianScore + eager backend = the formula
    assert numbers["library_vs_formula_max_abs_float32"] < 2e-5  # "a few 1e-6"
    # float32 cancellation in |q|² + |k|² - 2q·k: absolute error of a few 1e-6, ~4 significant digits for neighbours.
    assert 5e-7 < numbers["float32_squared_distance_max_abs_error"] < 2e-5
    assert 3.0 < numbers["float32_near_pairs_significant_digits"] < 5.5
    assert 0.15 < numbers["sigma_learned"] < 0.4  # narrower than the fixed sigma = 1
    # Self included: w keeps growing, training loss below the leave-one-out loss, test error worse than its best.
    assert numbers["w_naive"] > numbers["w_learned"]
    assert numbers["train_loss_naive_last"] < numbers["train_loss_first_last"][1] < numbers["train_loss_first_last"][0]
    assert numbers["mse_naive"] > numbers["mse_learned"] and numbers["mse_naive"] > numbers["mse_naive_best"]
    # The width learned through the library's layer (log sigma², boolean leave-one-out mask) reaches the same minimum.
    assert abs(numbers["w_library_trained"] / numbers["w_learned"] - 1) < 0.02
    assert abs(numbers["loss_library_trained"] - numbers["train_loss_first_last"][1]) < 1e-4
    # A soft lookup: very narrow, it is the dict (and answers a query between keys with the nearest key's value);
    # very wide, the mean of all values.
    assert numbers["soft_lookup_narrow_vs_dict"] < 1e-6 and numbers["soft_lookup_narrow_vs_nearest_value"] < 1e-6
    assert numbers["soft_lookup_wide_vs_mean"] < 1e-3
    assert numbers["soft_lookup"]["100.0"]["top_weight_elsewhere"] < 0.021  # 1/50 each
    # Involuntary cue (a salience of the key alone): the same weights for every query; with the query, it wins only
    # near its key.
    assert numbers["salience_only_rows_differ"] == 0.0
    near_without, near_with = numbers["salient_key_weight_near"]
    assert near_without < 0.2 and near_with > 0.6
    assert max(numbers["salient_key_weight_far"]) < 2e-3
    # Free scores (one per training pair): memorise the training set, generalise like nearest neighbours.
    assert numbers["free_scores_parameters"] == 50 * 49
    assert numbers["free_scores_train_loss"] < 0.01 * numbers["train_loss_first_last"][1]
    assert numbers["free_scores_test_mse"] > 3 * numbers["mse_learned"]
    assert numbers["free_scores_weight_beyond_1"] > 0.3 > 0.01 > numbers["kernel_weight_beyond_1"]
    assert numbers["free_scores_vs_nearest_target_max_abs"] < 0.2
    # Borrowed rows draw a zigzag: the slope changes sign at most grid points (the kernel's fit: a few times).
    with np.load(figures / "03_free_scores.npz") as data:
        turns = {k: int((np.diff(np.sign(np.diff(data[k]))) != 0).sum()) for k in ("y_free", "y_learned")}
    assert turns["y_free"] > 24 > 8 > turns["y_learned"], turns
    # Exercise 6: the salience's reach grows faster than √b, as b must first pay for the other keys' weight (log S).
    reach, log_s = numbers["answers"]["salience_reach"], numbers["answers"]["salience_others_log_weight"]
    assert reach["8.0"] / reach["3.0"] > math.sqrt(8 / 3) + 0.2 and all(1 < v < 2.5 for v in log_s.values())
    assert numbers["answers"]["padded_bmm"]["vs_separate_max_abs"] < 1e-12  # exercise 8: padding + mask = separate
    # The batched product: the loop, bmm and the library layer on a batch of four give the same regression.
    assert numbers["bmm_shapes"] == {
        "weights": [4, 50, 50],
        "values": [4, 50, 1],
        "output": [4, 50, 1],
        "one_query_output": [4, 1, 1],
    }
    assert numbers["bmm_vs_loop_max_abs"] < 1e-12 and numbers["bmm_vs_library_max_abs"] < 1e-12
    assert all(0.02 < m < 0.08 for m in numbers["bmm_batch_test_mse"])
    assert_figures(figures, "03_")


def test_04_scoring_and_masked_softmax(tmp_path):
    numbers, figures, _ = run_tutorial("04_scoring_and_masked_softmax.py", tmp_path)
    means = [[2.0, 3.0, 4.0, 5.0], [10.0, 11.0, 12.0, 13.0]]  # the mean of the valid values
    np.testing.assert_allclose(numbers["additive_output"], means, atol=1e-5)
    np.testing.assert_allclose(numbers["dot_output"], means, atol=1e-5)
    np.testing.assert_allclose(numbers["toy_weights_row_sums"], 1.0, atol=1e-6)
    expected = [[0.5] * 2 + [0.0] * 8, [1 / 6] * 6 + [0.0] * 4]  # equal keys: uniform over the valid ones
    np.testing.assert_allclose(numbers["toy_weights_additive"], expected, atol=1e-6)
    np.testing.assert_allclose(numbers["toy_weights_dot"], expected, atol=1e-6)
    assert numbers["masked_softmax_max_abs_vs_classic"] < 1e-6
    assert numbers["classic_empty_row"] == [0.25] * 4 and numbers["library_empty_row"] == [0.0] * 4
    assert numbers["classic_float16_empty_row_is_nan"] and numbers["library_float16_empty_row"] == [0.0] * 4
    rows = numbers["variance"]
    assert [r["d"] for r in rows] == [4, 16, 64, 256, 1024]
    for r in rows:
        assert abs(r["var_unscaled"] / r["d"] - 1) < 0.15, r  # Var(q·k) ≈ d
        assert abs(r["var_scaled"] - 1) < 0.15, r  # Var(q·k / √d) ≈ 1
        assert numbers["ln_keys"] - 1 < r["entropy_scaled_dot"] < numbers["ln_keys"]  # spread, whatever d
    widest = rows[-1]
    assert widest["entropy_dot"] < 0.5 and widest["entropy_dot"] < widest["entropy_scaled_dot"] / 4  # saturated
    assert widest["max_weight_dot"] > 0.8 > widest["max_weight_scaled_dot"]
    assert widest["jacobian_dot"] < widest["jacobian_scaled_dot"] / 2
    assert [r["entropy_dot"] for r in rows] == sorted((r["entropy_dot"] for r in rows), reverse=True)
    assert [r["jacobian_dot"] for r in rows][1:] == sorted((r["jacobian_dot"] for r in rows[1:]), reverse=True)
    scaled = [r["jacobian_scaled_dot"] for r in rows]
    assert max(scaled) < 1.2 * min(scaled)  # the same gradient size whatever the width
    assert all(abs(j - 0.24) < 0.015 for j in scaled)  # "near 0.24 for every width"
    # Unscaled: larger than scaled at d = 4 and 16 (0.30), smaller from d = 64 on (0.20, 0.11, 0.07), as the text says.
    for r, text in zip(rows, (0.30, 0.30, 0.20, 0.11, 0.07), strict=True):
        assert abs(r["jacobian_dot"] - text) < 0.015, r
        assert (r["jacobian_dot"] > r["jacobian_scaled_dot"]) == (r["d"] <= 16), r
    # The sweep over the spread: uniform limit sqrt(31)/32 at small sigma, a peak at moderate sigma, ~0 when saturated.
    sweep = numbers["jacobian_sweep"]
    assert (
        abs(sweep[0] - numbers["jacobian_uniform_limit"]) < 0.01
        and abs(numbers["jacobian_uniform_limit"] - 0.174) < 1e-3
    )
    assert 1.5 < numbers["jacobian_peak_sigma"] < 4 and 0.3 < max(sweep) < 0.35  # "about 2.5"
    assert sweep[-1] < 0.05 and sweep[-1] < sweep[0] / 3
    # Equal weights on m keys: the squared Frobenius norm of diag(p) - ppᵀ is (m-1)/m², the norm sqrt(m-1)/m (the
    # text once mixed the two: "0.5 at m = 2" is the norm, whose square is 0.25).
    equal = {r["m"]: r for r in numbers["jacobian_equal_weights"]}
    assert sorted(equal) == list(range(1, 33))
    for m, r in equal.items():
        assert abs(r["squared_norm"] - (m - 1) / m**2) < 1e-12 and abs(r["norm"] - math.sqrt(m - 1) / m) < 1e-12
    assert abs(equal[2]["norm"] - 0.5) < 1e-12 and abs(equal[2]["squared_norm"] - 0.25) < 1e-12
    assert abs(equal[32]["norm"] - numbers["jacobian_uniform_limit"]) < 1e-12  # sqrt(31)/32, the norm
    assert max(equal, key=lambda m: equal[m]["norm"]) == 2
    # The sign of q·k (float64, exact identities): a key at -s gets e^(-2s/√d) times the weight of one at +s and
    # e^(-s/√d) times an orthogonal key's; among orthogonal keys it is below uniform, one at +s above; shifting every
    # score by the same amount leaves the weights alone.
    a = numbers["sign_scaled_score"]
    assert a == numbers["sign_settings"]["dot"] / math.sqrt(numbers["sign_settings"]["width"])
    assert abs(numbers["sign_away_over_towards"] / math.exp(-2 * a) - 1) < 1e-12
    assert abs(numbers["sign_away_over_towards_formula"] - math.exp(-2 * a)) < 1e-15
    assert abs(numbers["sign_towards_over_orthogonal"] / math.exp(a) - 1) < 1e-12
    away, towards, both = numbers["sign_away"], numbers["sign_towards"], numbers["sign_both"]
    assert abs(away["key"] / away["orthogonal"] / math.exp(-a) - 1) < 1e-12
    assert abs(towards["key"] / towards["orthogonal"] / math.exp(a) - 1) < 1e-12
    keys = numbers["sign_settings"]["keys"]
    assert numbers["sign_uniform"] == 1 / keys
    assert abs(away["key"] - math.exp(-a) / (keys - 1 + math.exp(-a))) < 1e-12 and away["key"] < 1 / keys
    assert abs(towards["key"] - math.exp(a) / (keys - 1 + math.exp(a))) < 1e-12 and towards["key"] > 1 / keys
    assert both["away"] < both["orthogonal"] < 1 / keys < both["towards"]
    assert numbers["sign_shifted_max_difference"] < 1e-15
    # The answers' measurements: the entropy gap grows towards 1/2 with the keys; with 8 keys the Jacobian peaks
    # earlier and higher than with 32.
    gaps = numbers["answer_entropy_gap"]
    assert 0.2 < gaps["8"] < gaps["128"] < 0.5 and 0.4 < gaps["32"] < 0.5
    sigma_8, peak_8 = numbers["answer_jacobian_peak_8_keys"]
    assert sigma_8 < numbers["jacobian_peak_sigma"] and peak_8 > max(numbers["jacobian_sweep"])
    assert abs(numbers["answer_uniform_limit_8_keys"] - math.sqrt(7) / 8) < 1e-15
    # Distinct keys (no training, the same on any CPU): the rows differ; scaling q and k by c keeps the dot product's
    # order and sharpens it to one-hot, while the additive score stays under its ceiling (‖w‖₁) and changes top key.
    distinct = numbers["distinct_keys"]
    rows = {r["scale"]: r for r in distinct["by_scale"]}
    assert max(abs(a - d) for a, d in zip(rows[1]["additive"], rows[1]["dot"], strict=True)) > 0.05
    top = [{max(range(10), key=r[name].__getitem__) for r in rows.values()} for name in ("dot", "additive")]
    assert len(top[0]) == 1 and len(top[1]) > 1
    assert max(rows[64]["dot"]) > 0.999 and max(rows[0.25]["dot"]) < 0.2
    assert all(max(r["additive"]) <= distinct["additive_largest_weight_possible"] for r in rows.values())
    assert max(max(r["additive"]) for r in rows.values()) < 0.5
    # The rank bound: the bilinear scores have rank d_k; the fit improves with d_k; the free score X W_A fits best.
    bilinear = numbers["rank_bilinear"]
    assert all(r["score_rank"] == r["head_width"] for r in bilinear)
    divergences = [r["divergence"] for r in bilinear]
    assert divergences == sorted(divergences, reverse=True) and divergences[0] > 0.5 > 0.05 > divergences[-1]
    assert numbers["rank_free"]["divergence"] < min(0.01, divergences[-2])
    assert [r["parameters"] for r in bilinear if r["head_width"] == 16] == [numbers["rank_free"]["parameters"]]
    assert_figures(figures, "04_")


def prose(name: str) -> str:
    """The Markdown cells of a tutorial as one line of text (comment marks and line breaks removed)."""
    import jupytext

    cells = jupytext.read(TUTORIALS / name).cells
    return " ".join(" ".join(c.source.split()) for c in cells if c.cell_type == "markdown")


def test_04_states_the_norm_and_its_square_apart():
    """The prose says which of (m-1)/m² and sqrt(m-1)/m is the norm (the numbers shown are norms)."""
    text = prose("04_scoring_and_masked_softmax.py")
    assert "(m-1)/m^2$, which is" not in text  # the old slip: a squared norm equated with sqrt(31)/32
    assert "that is $(m-1)/m^2$, so the norm itself (what the table and the figure show) is $\\sqrt{m-1}/m$" in text
    assert "(0.5 for two, whose squared norm is 0.25)" in text
    assert "where the norm $\\sqrt{m-1}/m$ of equal weights is largest (0.5 at $m = 2$" in text  # answer 5


def test_05_positional_encodings(tmp_path):
    numbers, figures, _ = run_tutorial("05_positional_encodings.py", tmp_path)
    assert numbers["rotation_max_error"] < 1e-5  # PE(p + k) = M_k PE(p)
    assert numbers["rotary_shift_relative_error"] < 1e-5  # RoPE scores depend on j - i only
    differences = numbers["permutation_difference"]
    assert differences["none"] < 1e-5  # permutation-equivariant without positions
    assert all(differences[s] > 0.1 for s in ("sinusoidal", "learned", "rotary", "alibi", "relative"))
    assert numbers["alibi_slopes"] == [0.25, 0.0625, 0.015625, 0.00390625]
    buckets = numbers["t5_buckets_at"]  # 16 buckets per direction: 8 exact, then log-spaced up to 128
    assert [buckets[str(d)] for d in (0, -1, -7, 1, 7)] == [0, 1, 7, 17, 23]
    assert buckets["-8"] == 8 and 8 < buckets["-20"] < 15 and buckets["-128"] == buckets["-160"] == 15
    assert buckets["128"] == buckets["160"] == 31
    assert "max_position_embeddings" in numbers["learned_past_table_error"]
    # The d = 32 table's slowest pair: period 2π·10000^((d-2)/d) ≈ 35 333, not the large-d limit 2π·10000 ≈ 62 832.
    assert abs(numbers["slowest_period"] - 35333) < 50
    assert abs(numbers["slowest_period"] / numbers["slowest_period_formula"] - 1) < 1e-4
    assert abs(numbers["large_d_limit_period"] - 62832) < 1
    periods = numbers["sinusoidal_periods"]
    assert len(periods) == 16 and abs(periods[0] - 6.2832) < 1e-3 and periods == sorted(periods)
    # Trained on 16 tokens to output the token 3 places back, tested on 64: the absolute schemes fall to near chance
    # (1/16) at the first new position, rotary holds a few positions and falls, T5's buckets decline slowly, ALiBi
    # learns the task only in part and is nearly level past the training length (means over the seeds).
    extrapolation = numbers["extrapolation"]
    for scheme in ("sinusoidal", "learned"):
        assert extrapolation[scheme]["trained_lengths"] > 0.98 and extrapolation[scheme]["longer"] < 0.2, scheme
    absolute_best = max(extrapolation[s]["longer"] for s in ("sinusoidal", "learned"))
    rotary, relative, alibi = extrapolation["rotary"], extrapolation["relative"], extrapolation["alibi"]
    assert rotary["trained_lengths"] > 0.98 and rotary["longer"] > absolute_best + 0.1 and rotary["last_16"] < 0.2
    assert relative["trained_lengths"] > 0.95 and relative["longer"] > absolute_best + 0.15
    assert alibi["trained_lengths"] < 0.8 and abs(alibi["last_16"] - alibi["longer"]) < 0.05
    # Every seed: the schemes the text says learn the task learn it, ALiBi does not; past the training length, T5's
    # buckets beat both absolute schemes with every seed (the ranges the text ranks do not overlap).
    by_seed = numbers["extrapolation_by_seed"]
    assert numbers["extrapolation_setup"]["seeds"] == 2 and all(len(v["longer"]) == 2 for v in by_seed.values())
    assert all(min(by_seed[s]["trained_lengths"]) > 0.95 for s in ("sinusoidal", "learned", "rotary", "relative"))
    assert max(by_seed["alibi"]["trained_lengths"]) < 0.8
    assert min(by_seed["relative"]["longer"]) > max(by_seed["sinusoidal"]["longer"] + by_seed["learned"]["longer"])
    # (X + P) W (X + P)ᵀ: the four terms add up to the scores; the position-position term is a function of the offset
    # for W = I, not for a random W, and for the trained W on the trained positions only.
    assert numbers["expansion_input_is_x_plus_p"] < 1e-5
    assert numbers["expansion_sum_vs_full_scores"] < 1e-4 and numbers["expansion_sum_vs_model_weights"] < 1e-5
    terms = numbers["score_terms"]
    others = max(terms[n]["std"] for n in ("content-content", "content-position", "position-content"))
    assert terms["position-position"]["std"] > 3 * others
    assert numbers["offset_share_identity_W"] > 1 - 1e-9 and numbers["offset_share_random_W"] < 0.1
    shares, peaks = numbers["position_position_offset_share"], numbers["position_position_peak_at_offset"]
    assert min(shares["trained_positions"]) > 0.7 and max(shares["new_positions"]) < 0.45
    assert peaks["trained_positions"] == [1.0] * 4 and max(peaks["new_positions"]) < 0.2
    # The settings the text states, and the answers the last cell measures.
    assert numbers["order_blindness_setup"] == {
        "layers": 2,
        "heads": 4,
        "width": 32,
        "tokens": 12,
        "initializer_range": 0.2,
    }
    setup = numbers["extrapolation_setup"]
    assert (setup["vocab"], setup["train_length"], setup["test_length"], setup["offset"]) == (16, 16, 64, 3)
    assert (setup["width"], setup["heads"]) == (64, 4)
    assert abs(numbers["answer_slowest_period_128"] / (2 * math.pi * 10000 ** (126 / 128)) - 1) < 1e-4
    omegas = [10000 ** (-2 * i / 32) for i in range(16)]
    for value in numbers["answer_gram_offset_5"]:  # PE(i)·PE(i+5) = Σ cos(5 ω_i), whatever i
        assert abs(value - sum(math.cos(5 * w) for w in omegas)) < 1e-4
    assert numbers["answer_alibi_slopes"]["8"] == [2.0**-k for k in range(1, 9)]
    assert numbers["answer_alibi_slopes"]["6"] == [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    assert numbers["answer_buckets"] == {"+9": 24, "-9": 8, "+50": 29, "-50": 13, "+100": 31, "-100": 15}
    change = numbers["answer_decoder_last_output_change"]  # a causal decoder without positions, 11 tokens shuffled
    assert change["1"] < 1e-5 and change["2"] > 0.1
    assert abs(numbers["answer_block_W_offset_share"] - 1) < 1e-12  # a W that commutes with the rotations
    assert_figures(figures, "05_")


# Figures of widths fitted in the tutorial: hundreds of gradient steps carry float rounding (which differs between
# CPUs, their vector units and thread counts, by about 1e-6 here) into the fitted values, so their data is compared
# within a tolerance.
TRAINED_FIGURES = {"03_fits.npz": 1e-4, "03_loss.npz": 1e-4, "03_per_key.npz": 1e-4, "03_free_scores.npz": 1e-4}


def test_committed_figures_are_what_the_script_draws(tmp_path):
    """Tutorial 03 (one of the shortest full runs, every kind of figure) in its full mode regenerates its figures;
    their data equals the committed .npz files."""
    _, figures, _ = run_tutorial("03_nadaraya_watson.py", tmp_path, quick=False)
    committed = sorted(FIGURES.glob("03_*.npz"))
    assert [p.name for p in committed] == sorted(p.name for p in figures.glob("03_*.npz"))
    for path in committed:
        tolerance = TRAINED_FIGURES.get(path.name)
        with np.load(path) as old, np.load(figures / path.name) as new:
            assert sorted(old.files) == sorted(new.files), path.name
            for key in old.files:
                if tolerance is None:
                    np.testing.assert_allclose(new[key], old[key], rtol=1e-5, atol=1e-6, err_msg=f"{path.name}:{key}")
                else:
                    np.testing.assert_allclose(new[key], old[key], atol=tolerance, err_msg=f"{path.name}:{key}")


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory):
    """Tutorial 06 in quick mode without a model: it trains the tutorials' own quick run (in a temporary folder)."""
    folder = tmp_path_factory.mktemp("tutorial06")
    numbers, figures, out = run_tutorial("06_multihead_self_cross_masks.py", folder, "--work-dir", str(folder / "run"))
    return numbers, figures, out, folder / "run" / "final"


@pytest.mark.slow
@pytest.mark.xdist_group("tutorial06")  # with the 09 test: one worker runs the shared quick run once
def test_06_multihead_self_cross_masks(translation_run):
    numbers, figures, out, final = translation_run
    assert "Training the tutorials' own model first" in out and "own quick run" in numbers["model_origin"]
    assert (final / "config.json").is_file()
    assert numbers["causal_allowed"] == 36 and numbers["cached_keys_seen"] == [5, 6]
    assert numbers["pad_key_weight_max"] == 0.0  # padded keys get exactly nothing
    assert numbers["real_row_sum_error"] < 1e-5
    assert numbers["padding_invariance_max_abs"] < 1e-5  # a sentence's output does not depend on the padding
    assert numbers["heads_side_by_side_max_abs"] < 1e-5  # multi-head = heads run one by one, concatenated, o_proj
    # The figure of Q, K, V and the heads as matrices: X W + b, split, softmax(Q_h K_hᵀ/√d) V_h, concatenated, W_o.
    assert numbers["matrices"]["width"] == numbers["matrices"]["heads"] * numbers["matrices"]["head_width"] == 64
    assert numbers["matrices_vs_module_max_abs"] < 1e-5  # the drawn product is the module's output
    with np.load(figures / "06_qkv_matrices.npz") as data:
        assert data["Q"].shape == data["Z"].shape == (numbers["matrices"]["tokens"], 64)
        assert data["Z_heads"].shape == (4, numbers["matrices"]["tokens"], 16)
        np.testing.assert_allclose(data["output"], data["module_output"], atol=1e-5)
        np.testing.assert_allclose(data["weights"].sum(-1), 1, atol=1e-5)
    assert 0 <= numbers["translations_exact"] <= len(numbers["translations"])
    assert numbers["decoder_future_weight_max"] == 0.0  # causal
    assert numbers["cross_row_sum_error"] < 1e-5
    assert numbers["cross_entropy_untrained"] > 0.98  # a fresh model attends almost uniformly
    assert numbers["cross_entropy_trained"] < numbers["cross_entropy_untrained"] - 0.05  # training sharpens it
    # Row t of the cross-attention figure is step t, labelled with the token it writes (as in tutorial 09's figure).
    assert list(numbers["translations"]) == ["Could not open file", "Show hidden files"]  # quick: two sentences
    rows = numbers["cross_rows_first_sentence"]
    assert rows and all(row.startswith(f"{t}: ") for t, row in enumerate(rows, start=1))
    assert 0 < numbers["heads_colour_scale_max"] <= 1  # one colour scale for every head panel
    assert_padding_panels_share_one_scale(figures / "06_padding.npz")
    assert numbers["padding_colour_range"][0] == 0.0 and numbers["padding_real_block_max_abs"] < 1e-5
    assert_figures(figures, "06_")
    assert numbers["explorer_page"] == "06_explorer.html" and (figures / "06_explorer.html").is_file()
    assert numbers["explorer_cross_layers_heads"] == [2, 4]  # the quick run's model: 2 decoder layers, 4 heads
    assert (FIGURES / "06_explorer.html").is_file()  # the committed page the text links
    assert_head_places(numbers, figures / "06_head_places.npz", layers=2, heads=4)
    assert numbers["test_strings"] == 200  # the quick run's test split, capped at 200 strings (max_test_samples)


def assert_head_places(numbers: dict, path: Path, layers: int, heads: int) -> None:
    """The share of each encoder head's attention on each place (same, previous, next token, ...): shares of a
    head are in [0, 1] and sum to 1, as do uniform attention's; the measure equals the weights' diagonals on one
    string; each head's pattern is the place where its share most exceeds uniform attention's."""
    with np.load(path) as data:
        shares, uniform = data["shares"], data["uniform"]
    assert shares.shape == (layers, heads, 7) and uniform.shape == (7,)
    assert shares.min() >= 0 and shares.max() <= 1 + 1e-6 and uniform.min() >= 0
    np.testing.assert_allclose(shares.sum(-1), 1, atol=1e-5)
    np.testing.assert_allclose(uniform.sum(), 1, atol=1e-6)
    assert numbers["place_shares_sum_error"] < 1e-5
    assert numbers["place_shares_direct_max_abs"] < 1e-6  # equals a direct computation on one example
    assert numbers["test_queries"] > numbers["test_strings"] > 0
    places = ["same", "previous", "next", "first", "last (</s>)", "punctuation", "elsewhere"]
    patterns = [places[int(i)] for i in (shares - uniform).reshape(-1, 7).argmax(-1)]
    assert list(numbers["head_patterns"].values()) == patterns
    np.testing.assert_allclose(np.asarray(numbers["head_place_shares"]), shares, atol=1e-6)


def assert_padding_panels_share_one_scale(path: Path) -> None:
    """The padding figure draws both panels with one colour range (vmin, vmax), which covers both panels' weights:
    equal weights get equal colours (each panel scaled to its own maximum, 0.419 and 0.475, once looked different)."""
    with np.load(path) as data:
        assert float(data["vmin"]) == 0.0
        assert float(data["vmax"]) == max(float(data["alone"].max()), float(data["batched"].max()))
        n_real = data["alone"].shape[0]
        np.testing.assert_allclose(data["batched"][:n_real, :n_real], data["alone"], atol=1e-5)


def test_06_committed_padding_figure_shares_one_scale():
    assert_padding_panels_share_one_scale(FIGURES / "06_padding.npz")


def test_06_committed_head_places_hold_together():
    """The committed full run's head measurement (its text's numbers are checked by test_tutorial_prose_numbers)."""
    numbers = json.loads((FIGURES / "06_results.json").read_text())
    shape = numbers["model_shape"]
    assert_head_places(numbers, FIGURES / "06_head_places.npz", layers=shape["encoder_layers"], heads=shape["heads"])


@pytest.mark.slow
@pytest.mark.xdist_group("tutorial06")
def test_09_encoder_decoder_step_by_step(translation_run, tmp_path):
    final = translation_run[3]
    numbers, figures, _ = run_tutorial("09_encoder_decoder_step_by_step.py", tmp_path, "--model", str(final))
    assert numbers["decoder_inputs_are_shifted_labels"]
    assert abs(numbers["teacher_forcing_loss_by_hand"] - numbers["teacher_forcing_loss_library"]) < 1e-4
    assert numbers["loop_tokens"] == numbers["generate_tokens"]  # the hand loop is greedy generate()
    assert numbers["loop_tokens"][0] == 1 and numbers["steps"] == len(numbers["loop_tokens"]) - 1
    assert numbers["step_vs_parallel_cross_attention_max_abs"] < 1e-5  # a step sees only its past
    assert numbers["cached_vs_parallel_logits_max_abs"] < 1e-4
    # The EncoderDecoderCache: self-attention grows by one position per step, cross-attention holds the source once.
    assert numbers["cache_self_attention_length"] == numbers["steps"]
    assert numbers["cache_cross_attention_length"] == numbers["source_length"] > 0
    # Exercise 3: the model's loss is label-smoothed with an unlikelihood term (the project's recipe), so loss × labels
    # is not −Σ log p_t; the plain cross-entropy of the same logits is, and the smoothed formula gives the loss. The
    # smoothing term is ε × the mean of −log p over the vocabulary, at least ε · ln V (Jensen).
    exercise = numbers["exercise_3"]
    assert exercise["label_smoothing"] == 0.1 and exercise["unlikelihood_weight"] == 2.0
    assert abs(exercise["plain_cross_entropy_sum"] - exercise["minus_sum_log_p"]) < 1e-3
    assert abs(exercise["loss_times_labels"] - exercise["minus_sum_log_p"]) > 0.1
    assert exercise["terms_per_label"]["smoothing"] >= 0.1 * math.log(numbers["vocab_size"]) - 1e-6
    assert abs(exercise["loss_by_hand"] - exercise["loss_library"]) < 1e-4
    assert abs(sum(exercise["terms_per_label"].values()) - exercise["loss_by_hand"]) < 1e-6
    # Exercise 6: each output that 8 beams or a length penalty of 0 change is listed with both outputs' scores; with
    # length_penalty=0 beam search ranks by the summed log-probability, so a changed output never sums lower.
    for change in numbers["exercise_6"]["length_penalty_0"]:
        assert change["output"] != change["beam"] and change["sum_log_p"] >= change["beam_sum_log_p"] - 1e-4
    # Exercises 1, 4 and 5, measured: generate() stopped after 3 new tokens is the start of the loop's output; one more
    # token through the cache grows only the self-attention part; a padded row of a batch writes what it writes alone.
    assert numbers["exercise_1"]["tokens"] == numbers["exercise_1"]["prefix_start"]
    self_lengths, cross_lengths = numbers["exercise_4"]["self_attention"], numbers["exercise_4"]["cross_attention"]
    assert self_lengths == [numbers["steps"], numbers["steps"] + 1]
    assert cross_lengths == [numbers["source_length"]] * 2
    assert numbers["exercise_5"]["pad_positions"] > 0 and numbers["exercise_5"]["same_tokens"]
    assert numbers["exercise_5"]["logits_max_abs"] < 1e-4
    # Greedy against 4 beams on 12 strings: the same output scores the same; a beam output that differs scores higher
    # (mean log p) on most strings.
    rows = numbers["greedy_vs_beam"]
    assert len(rows) == 12 and rows[0]["greedy"] == numbers["translation"]
    for row in rows:
        if row["beam"] == row["greedy"]:
            assert abs(row["beam_mean_log_p"] - row["greedy_mean_log_p"]) < 1e-4
    assert 2 * numbers["beam_scores_higher_where_different"] >= numbers["beam_differs"]
    assert_figures(figures, "09_")


def test_08_why_attention(tmp_path):
    numbers, figures, _ = run_tutorial("08_why_attention.py", tmp_path)
    assert numbers["path_length"] == {
        "convolution_k3": 32,  # centred kernel: (k - 1) / 2 = 1 position per layer
        "convolution_k5": 16,  # centred: 2 per layer
        "causal_convolution_k3": 16,  # causal: k - 1 = 2 per layer
        "dilated_convolution_k3": 6,  # reach 2^L - 1
        "self_attention": 1,
        "recurrent_steps": 33,  # measured: one GRU step per token
    }
    assert numbers["recurrent_gradient_first_over_last"] < 0.01  # the first token's signal fades over 32 steps
    assert {k: v for k, v in numbers["path_length"].items() if k != "recurrent_steps"} == numbers[
        "path_length_expected"
    ]
    # Multiply-adds with their constants: attention 4nd² + 2n²d, RNN 2nd², LSTM 8nd², convolution k·nd².
    assert numbers["multiply_add_constants"] == {
        "self_attention": [4, 2],
        "rnn": [2, 0],
        "lstm": [8, 0],
        "convolution_k3": [3, 0],
    }
    d = numbers["d_for_costs"]
    assert d == 512
    assert numbers["crossover_n"] == {"rnn": None, "lstm": 2 * d, "convolution_k3": None, "pairwise_part_vs_rnn": d}
    ratios = numbers["cost_ratio_attention_over_lstm"]
    assert ratios["1024"] == 1.0 and abs(ratios["16"] - 0.5) < 0.02 and ratios["4096"] == 2.5
    assert numbers["memory_measured"]
    rows = numbers["measured"]
    assert all(r["max_abs_difference"] < 1e-5 for r in rows)  # eager and SDPA compute the same
    last, before = rows[-1], rows[-2]
    assert 3.0 < last["eager_MiB"] / before["eager_MiB"] < 5.5  # quadratic: ×4 per doubling of n
    assert 1.5 < last["sdpa_MiB"] / before["sdpa_MiB"] < 3.0  # linear: ×2 per doubling
    assert 1.5 < last["eager_MiB"] / last["weights_MiB"] < 3.0  # scores and weights, both n×n
    assert last["sdpa_MiB"] < last["eager_MiB"] / 4
    assert last["eager_ms"] > last["sdpa_ms"]
    # What the text states from the timings is derived: least-squares exponents over the three longest lengths and a
    # ratio (their values depend on the machine's load, so only the derivation is checked here).
    assert numbers["timing_setup"]["lengths"] == [r["n"] for r in rows]
    for field, exponents in (("ms", numbers["time_exponent"]), ("MiB", numbers["memory_exponent"])):
        for name in ("eager", "sdpa"):
            slope = np.polyfit(
                np.log([r["n"] for r in rows[-3:]]), np.log([r[f"{name}_{field}"] for r in rows[-3:]]), 1
            )
            assert abs(exponents[name] - slope[0]) < 1e-9, (field, name)
    assert numbers["eager_over_sdpa_time_at_longest"] == last["eager_ms"] / last["sdpa_ms"]
    assert numbers["memory_per_doubling_at_longest"]["eager"] == last["eager_MiB"] / before["eager_MiB"]
    assert numbers["eager_memory_over_weights_at_longest"] == last["eager_MiB"] / last["weights_MiB"]
    assert numbers["memory_exponent"]["eager"] > 1.7 and numbers["memory_exponent"]["sdpa"] < 1.5  # n² against n
    # The committed whole-model benchmark (benchmarks/results/full.json), as the text describes it.
    assert numbers["benchmark_longest"] == 4096
    assert round(numbers["benchmark_eager_over_sdpa_memory_at_longest"], 1) == 4.7  # the numbers the text quotes
    assert round(numbers["benchmark_eager_over_sdpa_time_at_longest"], 1) == 7.9
    assert 9.5 < numbers["benchmark_eager_time_growth"] < 10.5  # "tenfold"
    assert round(numbers["benchmark_sdpa_time_growth"], 1) == 1.5
    assert abs(numbers["benchmark_sdpa_memory_growth"] - 1) < 0.05
    assert round(numbers["benchmark_checkpointing"]["memory_ratio"], 2) == 0.32  # "about a third"
    assert 1.25 < numbers["benchmark_checkpointing"]["time_ratio"] < 1.35  # "about 30% more time"
    # The exercises' answers, measured: PyTorch's FLOP counter agrees with 2(4nd² + 2n²d) (projections in mm, the
    # two n×n products in bmm), layers_needed with the formulas for kernel 7, the crossovers and the window's ratio.
    answers = numbers["answers"]
    assert answers["flop_counter_total"] == answers["flops_formula"] == 3_145_728
    assert answers["flop_counter_by_operation"] == {"aten.mm": 2 * 4 * 64 * 64**2, "aten.bmm": 2 * 2 * 64**2 * 64}
    assert answers["layers_kernel_7"] == {"causal": math.ceil(32 / 6), "centred": math.ceil(32 / 3)}
    assert answers["lstm_crossover_at_d_1024"] == 2048 and answers["gru_crossover_at_d_512"] == 512
    assert set(answers["window_128_over_lstm"].values()) == {(4 + 2 * 128 / 512) / 8}
    assert_figures(figures, "08_")


@pytest.mark.parametrize("name", SCRIPTS[:-1])
def test_next_link_goes_to_the_next_tutorial(name):
    """Each tutorial's "Next:" link names the next one in reading order (06's once skipped 07)."""
    following = SCRIPTS[SCRIPTS.index(name) + 1]
    links = re.findall(r"\*\*Next:\*\* \[[^]]*\]\(([^)]+)\)", prose(name))
    assert links == [following], (name, links)


@pytest.mark.parametrize("name", SCRIPTS)
def test_tutorial_opens_as_a_notebook(name):
    import jupytext

    notebook = jupytext.read(TUTORIALS / name)
    kinds = [cell.cell_type for cell in notebook.cells]
    assert kinds[0] == "markdown" and kinds.count("markdown") >= 4 and kinds.count("code") >= 3
    assert notebook.cells[0].source.startswith(f"# {name[:2]} ·")


def test_readme_lists_every_tutorial_with_a_thumbnail():
    readme = (ROOT / "docs" / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)\)|src=\"([^\"]+)\"", readme)
    targets = [a or b for a, b in links if not (a or b).startswith(("http://", "https://"))]
    assert all((ROOT / "docs" / target).exists() for target in targets), targets
    listed = [t for t in targets if t.startswith("tutorials/")]
    assert listed == [f"tutorials/{name}" for name in SCRIPTS]  # in reading order
    assert sum(t.startswith("figures/") and t.endswith(".png") for t in targets) >= len(SCRIPTS)
    assert len(SCRIPTS) >= 6


def test_a_quick_run_leaves_the_committed_figures_alone(tmp_path):
    """Without --figures a quick run writes to outputs/tutorial_figures (git-ignored) and says so; the committed
    full-run figures in docs/figures keep their bytes."""
    committed = {p.name: p.read_bytes() for p in FIGURES.glob("04_*")}
    results = tmp_path / "results.json"
    command = [
        sys.executable,
        str(TUTORIALS / "04_scoring_and_masked_softmax.py"),
        "--quick",
        "--results",
        str(results),
    ]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, env=environment)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "quick run: figures go to outputs/tutorial_figures/" in completed.stdout
    assert {p.name: p.read_bytes() for p in FIGURES.glob("04_*")} == committed
    assert (ROOT / "outputs" / "tutorial_figures" / "04_scaling.npz").is_file()
