"""Tutorial 12 (today's attention knobs: grouped-query attention, QK-norm, soft-capping, sliding windows, RoPE
scaling, attention sinks, latent attention, Gated DeltaNet) runs in its --quick mode, and what it measures is what its
text says: the exact things exactly (cache bytes, receptive fields, the cap's bound, the recorded scores being the
library's), the trained things by orderings with wide margins, which hold on any CPU."""

import math

import pytest
from test_tutorials import assert_figures, run_tutorial

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("tutorial12")


@pytest.fixture(scope="module")
def todays_attention(tmp_path_factory):
    return run_tutorial("12_todays_attention.py", tmp_path_factory.mktemp("tutorial12"))


def test_the_kv_cache_holds_what_the_formula_says(todays_attention):
    numbers, _, _ = todays_attention
    layers, head_dim = numbers["layers"], numbers["head_dim"]
    assert numbers["heads"] == 4 and [int(k) for k in numbers["gqa"]] == [4, 2, 1]
    for kv_heads, row in numbers["gqa"].items():
        kv_heads = int(kv_heads)
        assert row["cache_bytes_per_token"] == row["formula_bytes_per_token"] == 2 * layers * kv_heads * head_dim * 4
        assert row["cached_key_shape"] == [1, kv_heads, numbers["task"]["train_length"], head_dim]
    # k_proj and v_proj lose E·D parameters each per key/value head and layer: nothing else changes
    parameters = {int(k): row["parameters"] for k, row in numbers["gqa"].items()}
    per_kv_head = 2 * layers * numbers["hidden_size"] * head_dim
    assert parameters[4] - parameters[2] == 2 * per_kv_head and parameters[2] - parameters[1] == per_kv_head
    assert numbers["large_model_cache_kib_per_token"] == {"32": 512.0, "8": 128.0, "1": 16.0}
    assert all(row["accuracy"] > 0.5 for row in numbers["gqa"].values())  # every K learns the task


def test_the_exercises_answers(todays_attention):
    numbers, _, _ = todays_attention
    exercises = numbers["exercises"]
    heads, length = exercises["mistral_heads"], numbers["task"]["train_length"]
    # 1: a model with Mistral 7B's heads caches, per layer and token, K keys and K values of 128 bfloat16 numbers
    assert heads == {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128}
    for kv_heads, row in exercises["cache"].items():
        assert row["cached_layers"] == 32 and row["cached_dtype"] == "torch.bfloat16"
        assert row["cached_key_shape"] == [1, int(kv_heads), length, 128]
        assert row["bytes_per_token"] == row["formula_bytes_per_token"] == 2 * 32 * int(kv_heads) * 128 * 2
    assert exercises["cache"]["8"]["gib_at_context"] == 4 and exercises["cache"]["32"]["gib_at_context"] == 16
    assert exercises["mistral_parameters"] == 7_241_732_096  # Mistral 7B's published count, from its sizes alone
    # 2: the rebuilt models are section 1's, and only k_proj and v_proj change: E·D each per key/value head and layer
    assert exercises["parameters"] == {k: row["parameters"] for k, row in numbers["gqa"].items()}
    assert exercises["matrices_that_change"] == ["k_proj", "v_proj"]
    per_kv_head = numbers["layers"] * numbers["hidden_size"] * numbers["head_dim"]
    for kv_heads, counts in exercises["parameters_by_matrix"].items():
        assert counts["k_proj"] == counts["v_proj"] == int(kv_heads) * per_kv_head
    # 3: autograd through the cap gives its slope 1 - tanh²(s/c) (float32)
    slope = exercises["softcap_slope"]
    assert slope["at_c"] == pytest.approx(1 - math.tanh(1) ** 2, rel=1e-4)
    assert slope["at_3c"] == pytest.approx(1 - math.tanh(3) ** 2, rel=1e-4)
    # 4: the composed masks reach L(W-1)+1 positions, what the gradients measured; 5 layers of W = 5 reach 20 back;
    # one full layer, wherever it stands in a stack, reaches the whole sequence
    reach, window = exercises["sliding_reach_by_depth"], numbers["window"]
    assert reach == [layers * (window - 1) + 1 for layers in range(1, 6)] and exercises["far_look_back"] == 20
    assert reach[:4] == [row["measured"] for row in numbers["receptive_field"].values()]
    full = exercises["reach_with_one_full_layer"]
    assert [len(row) for row in full] == [1, 2, 3, 4, 5] and {n for row in full for n in row} == {length}


def test_qk_norm_bounds_the_scores(todays_attention):
    numbers, _, _ = todays_attention
    assert numbers["recorded_vs_library_weights_max_abs"] < 1e-5  # the hook's scores are the ones the layers used
    plain, normed = numbers["qk_norm"]["none"], numbers["qk_norm"]["head"]
    assert plain["final_largest_score"] > 3 * normed["final_largest_score"]
    assert plain["largest_score"][-1] > 10 * plain["largest_score"][0]  # it grows during training
    assert plain["bfloat16_rounding_max_abs"] > normed["bfloat16_rounding_max_abs"]
    # the bound holds in every seed; training speed is not asserted (the text says the seeds disagree on it)
    seeds = numbers["qk_seeds"]
    assert [run["seed"] for run in plain["by_seed"]] == [run["seed"] for run in normed["by_seed"]] == list(seeds)
    for without, with_norm in zip(plain["by_seed"], normed["by_seed"], strict=True):
        assert without["final_largest_score"] > 3 * with_norm["final_largest_score"]


def test_the_soft_cap_bounds_the_scores_and_the_logits(todays_attention):
    numbers, _, _ = todays_attention
    softcap = numbers["softcap"]
    cap, final_cap = softcap["cap"], softcap["final_cap"]
    assert softcap["recorded_vs_library_weights_max_abs"] < 1e-5
    loaded, final, trained = softcap["loaded"], softcap["final"], softcap["trained"]
    assert loaded["largest_score_without_cap"] > cap >= loaded["largest_score_with_cap"]
    assert max(trained["largest_score_after_cap"]) <= cap < max(trained["largest_score_before_cap"])
    assert final["largest_logit_without_cap"] > final_cap >= final["largest_logit_with_cap"]
    # tanh is increasing: the same predictions, hence exactly the same accuracy; a capped model is less sure
    assert final["same_predictions"] and final["with_cap"]["accuracy"] == loaded["without_cap"]["accuracy"]
    assert final["with_cap"]["loss"] > loaded["without_cap"]["loss"]
    # a cap added after training breaks a model that relies on large scores; one trained with it learns the task
    assert loaded["with_cap"]["accuracy"] < loaded["without_cap"]["accuracy"] - 0.3
    assert trained["accuracy"] > loaded["with_cap"]["accuracy"] + 0.3


def test_the_receptive_field_of_sliding_windows(todays_attention):
    numbers, _, _ = todays_attention
    window = numbers["window"]
    assert window == 5
    for layers, row in numbers["receptive_field"].items():
        assert row["measured"] == row["formula"] == int(layers) * (window - 1) + 1 and row["contiguous"]
    assert [row["measured"] for row in numbers["receptive_field"].values()] == [5, 9, 13, 17]
    # look back 8 > W: out of one layer's reach (chance 1/16), within two layers' 9 positions
    one, two = numbers["sliding"]["1"]["accuracy"], numbers["sliding"]["2"]["accuracy"]
    assert one < 0.2 and two > 0.5


def test_rope_scalings_on_the_trained_weights(todays_attention):
    numbers, _, _ = todays_attention
    rope = numbers["rope"]
    train, double = (str(length) for length in numbers["rope_lengths"][:2])
    at_train = [rope[name][train]["accuracy"] for name in rope]
    assert max(at_train) - min(at_train) < 0.01  # s = 1: every scaling is the plain rotation
    # linear scaling by 2 halves every frequency: the model now looks 2d back
    assert (
        rope["default"][double]["accuracy_beyond_train_length"]
        > rope["linear"][double]["accuracy_beyond_train_length"] + 0.3
    )
    assert numbers["linear_2_outputs_symbol_2d_back"] > numbers["linear_2_outputs_symbol_d_back"] + 0.3
    # trained briefly at 2T with the scaling on, dynamic, YaRN and Llama 3 read it (as does the plain rotation)
    tuned = numbers["rope_fine_tuned"]
    assert set(tuned) == set(rope)
    for name in ("default", "dynamic", "yarn", "llama3"):
        assert tuned[name]["accuracy_beyond_train_length"] > 0.8, name
    assert all(0.0 <= row["accuracy_at_train_length"] <= 1.0 for row in tuned.values())
    ratio = numbers["rope_frequency_ratio_at_2"]
    assert ratio["linear"] == [0.5] * 8 and ratio["yarn"][0] == ratio["llama3"][0] == 1.0


def test_figures(todays_attention):
    _, figures, _ = todays_attention
    assert_figures(figures, "12_")


def test_sinks_latent_and_linear_attention(todays_attention):
    numbers, _, _ = todays_attention
    recent, memory = numbers["recent"], numbers["memory"]
    layers, heads, short, long = numbers["layers"], numbers["heads"], *(str(n) for n in numbers["cache_lengths"])
    # the same model but for one sink logit per head and layer
    assert recent["sinks"]["parameters"] == recent["plain"]["parameters"] + layers * heads
    # every seed of every softmax model learns the task; Gated DeltaNet alone stays near chance (1/16) at each seed
    for name in ("plain", "sinks", "latent", "hybrid"):
        assert all(run["accuracy"] > 0.5 for run in recent[name]["runs"]), name
    assert all(run["accuracy"] < 0.2 for run in recent["linear"]["runs"])
    assert all(run["loss_curve"][-1] > 2.5 for run in recent["linear"]["runs"])  # ln 16 = 2.77: a uniform guess
    assert recent["plain"]["accuracy_min"] > recent["linear"]["accuracy_max"] + 0.5
    # the weights a model without sinks returns are softmax rows. Every query has a symbol to fetch: the sinks stay
    # near their starting logit 0 and take little weight, and without sinks no head piles weight on the first token
    # (it gets at most about the share of weight spread evenly)
    even = numbers["uniform_first_token_share"]
    for row in numbers["sinks_by_seed"]:
        assert row["row_sum_without_sinks_min"] > 1 - 1e-5
        assert all(len(layer) == heads and max(abs(s) for s in layer) < 0.5 for layer in row["sink_logits"])
        assert max(max(layer) for layer in row["sink"]["mean"]) < 2 * even
        assert max(max(layer) for layer in row["first_token_without_sinks"]["mean"]) < 2 * even
    # the caches hold what their formulas say, measured at two lengths
    latent = numbers["latent_sizes"]
    assert (
        memory["latent"]["formula_bytes_per_token"]
        == layers * (latent["kv_lora_rank"] + latent["qk_rope_head_dim"]) * 4
    )
    for name in ("plain", "latent"):
        assert memory[name]["bytes_per_token"][short] == memory[name]["bytes_per_token"][long]
        assert memory[name]["bytes_per_token"][short] == memory[name]["formula_bytes_per_token"]
    assert memory["latent"]["per_head_equivalent_bytes_per_token"] == memory["plain"]["formula_bytes_per_token"]
    assert memory["latent"]["cached_shapes"] == [
        [1, 1, 8, latent["kv_lora_rank"]],
        [1, 1, 8, latent["qk_rope_head_dim"]],
    ]
    assert memory["linear"]["bytes"][short] == memory["linear"]["bytes"][long] == memory["linear"]["formula_bytes"]
    assert memory["hybrid"]["bytes"] == memory["hybrid"]["formula_bytes"]
