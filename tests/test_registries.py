"""The variant registries are the one source of truth: the config, the builders, the initialisation, the SDPA rule and
the pipeline's length limit all agree with `scores.SCORES` and `positional.POSITIONAL_ENCODINGS`, and a new variant
needs one class and one registry entry, nothing else (shown with toy variants registered for one test only)."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, tiny_config
from torch import nn
from transformers import AutoModelForCausalLM

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM, positional, scores
from hf_attention.modeling import configuration_hf_attention as configuration
from hf_attention.modeling.activations import GATED_ACTIVATIONS, HIDDEN_ACTS, LEARNED_ACTIVATIONS, PLAIN_ACTIVATIONS
from hf_attention.modeling.norms import NORMS
from hf_attention.modeling.positional import (
    NO_POSITIONAL_ENCODING,
    POSITIONAL_ENCODINGS,
    PositionalEncoding,
    PositionBias,
)
from hf_attention.modeling.scores import SCORES, ScoreModule, make_score

MODELS = {"encoder": HFAttentionEncoderModel, "decoder": HFAttentionForCausalLM, "seq2seq": HFAttentionForSeq2SeqLM}
KINDS = ("absolute", "rotary", "bias")


def allowed_in_error(field: str, **overrides) -> list[str]:
    """The values a config's error message lists as allowed for `field`."""
    with pytest.raises(ValueError, match=f"{field}='no-such-variant' is not supported") as error:
        tiny_config("encoder", **{field: "no-such-variant"}, **overrides)
    return re.findall(r"'([^']+)'", str(error.value).split("allowed values are", 1)[1])


def run(model: nn.Module, family: str) -> torch.Tensor:
    """Last hidden state (or logits) of the same left-padded batch of two on every call."""
    ids = torch.randint(3, 99, (2, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = ids[:, :4]
    with torch.no_grad():
        output = model(**inputs)
    return output.logits if hasattr(output, "logits") else output.last_hidden_state


def test_the_config_accepts_exactly_the_registered_names():
    assert tuple(SCORES) == configuration.ATTENTION_SCORES
    assert (*POSITIONAL_ENCODINGS, NO_POSITIONAL_ENCODING) == configuration.POSITION_ENCODINGS
    assert POSITION_ENCODINGS == configuration.POSITION_ENCODINGS  # tests/conftest.py's parameter list
    assert allowed_in_error("attention_score") == list(SCORES)
    assert allowed_in_error("position_encoding") == [*POSITIONAL_ENCODINGS, NO_POSITIONAL_ENCODING]
    with pytest.raises(
        ValueError, match="'no-such-variant' is not supported; allowed values are " + ", ".join(map(repr, SCORES))
    ):
        make_score("no-such-variant", num_heads=2, head_dim=8)


def test_registered_classes_declare_the_interface():
    for name, score in SCORES.items():
        assert isinstance(score.dot_product, bool), name
        assert score.scaling(16) > 0, name
        module = score.build(num_heads=2, head_dim=16)
        assert (module is None) == score.dot_product, name
        assert module is None or isinstance(module, ScoreModule), name
    for name, scheme in POSITIONAL_ENCODINGS.items():
        assert issubclass(scheme, PositionalEncoding) and scheme.kind in KINDS, name


@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
@pytest.mark.parametrize("score", list(SCORES))
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_every_variant_builds_and_runs_on_every_backend_it_allows(family, score, position):
    config = tiny_config(family, attention_score=score, position_encoding=position)
    eager = MODELS[family]._from_config(config, attn_implementation="eager").eval()
    assert isinstance(eager.config.position_limit, (int, type(None)))
    expected = run(eager, family)
    assert expected.isfinite().all()
    if not SCORES[score].dot_product:
        with pytest.raises(ValueError, match="needs attn_implementation='eager'"):
            eager.set_attn_implementation("sdpa")
        with pytest.raises(ValueError, match="needs attn_implementation='eager'"):
            tiny_config(family, attention_score=score, attn_implementation="sdpa")
        return
    eager.set_attn_implementation("sdpa")
    torch.testing.assert_close(run(eager, family), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score", list(SCORES))
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_every_variant_initialises_deterministically(score, position):
    states = []
    for _ in range(2):
        torch.manual_seed(7)
        model = build(HFAttentionForSeq2SeqLM, "seq2seq", attention_score=score, position_encoding=position)
        states.append(model.state_dict())
    assert states[0].keys() == states[1].keys()
    for key, value in states[0].items():
        assert value.isfinite().all(), key  # nothing left as torch.empty's garbage
        assert torch.equal(value, states[1][key]), key


@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_position_limit_is_what_the_model_can_encode(position):
    config = tiny_config("encoder", position_encoding=position, max_position_embeddings=8)
    scheme = POSITIONAL_ENCODINGS.get(position)
    assert config.position_limit == (None if scheme is None else scheme.position_limit(config))
    model = HFAttentionEncoderModel(config).eval()
    limit = config.position_limit
    if limit is None:
        assert model(torch.randint(3, 99, (1, 12))).last_hidden_state.isfinite().all()  # extrapolates
    else:
        model(torch.randint(3, 99, (1, limit)))
        with pytest.raises(ValueError, match="beyond max_position_embeddings"):
            model(torch.randint(3, 99, (1, limit + 1)))


# --- a new variant is one class and one registry entry -------------------------------------------------------------


class CosineScore(ScoreModule):
    """score(q, k) = τ_h · cos(q, k), with a learned temperature per head that starts at √D."""

    def __init__(self, *, num_heads: int, head_dim: int):
        super().__init__()
        self.head_dim = head_dim
        self.temperature = nn.Parameter(torch.empty(num_heads))

    @classmethod
    def build(cls, *, num_heads: int, head_dim: int) -> "CosineScore":
        return cls(num_heads=num_heads, head_dim=head_dim)

    def init_weights(self, std: float) -> None:
        nn.init.constant_(self.temperature, self.head_dim**0.5)

    def forward(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        query, key = nn.functional.normalize(query, dim=-1), nn.functional.normalize(key, dim=-1)
        return self.temperature[None, :, None, None] * torch.matmul(query, key.transpose(-1, -2))


class LearnedSlopeBias(PositionBias):
    """ALiBi with a learned slope per head: score(i, j) += −softplus(a_h) · |i − j|."""

    def __init__(self, *, num_heads: int):
        super().__init__()
        self.slope = nn.Parameter(torch.empty(num_heads))

    @classmethod
    def from_config(cls, config, *, bidirectional: bool) -> "LearnedSlopeBias":
        return cls(num_heads=config.num_attention_heads)

    @classmethod
    def check_config(cls, config, *, bidirectional: bool) -> None:
        if config.num_attention_heads > 16:
            raise ValueError(
                f"position_encoding='learned_slope' takes at most 16 heads, got {config.num_attention_heads}."
            )

    def init_weights(self, std: float) -> None:
        nn.init.constant_(self.slope, -1.0)

    def forward(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
        distance = (query_positions[:, :, None] - key_positions[:, None, :]).abs().float()  # (B, T, S)
        return -nn.functional.softplus(self.slope)[None, :, None, None] * distance[:, None]  # (B, H, T, S)


@pytest.fixture
def toy_variants(monkeypatch):
    """The toy score and scheme registered for one test: a registry entry each, nothing else."""
    monkeypatch.setitem(scores.SCORES, "cosine", CosineScore)
    monkeypatch.setitem(positional.POSITIONAL_ENCODINGS, "learned_slope", LearnedSlopeBias)


def test_a_registered_toy_variant_needs_nothing_else(toy_variants, tmp_path):
    assert "cosine" in allowed_in_error("attention_score")
    assert "learned_slope" in allowed_in_error("position_encoding")
    with pytest.raises(ValueError, match="takes at most 16 heads, got 32"):  # its check_config runs in the config
        tiny_config("decoder", position_encoding="learned_slope", num_attention_heads=32, num_key_value_heads=32)
    with pytest.raises(ValueError, match="attention_score='cosine' needs attn_implementation='eager'"):
        tiny_config("decoder", attention_score="cosine", attn_implementation="sdpa")

    config = tiny_config("decoder", attention_score="cosine", position_encoding="learned_slope")
    model = AutoModelForCausalLM.from_config(config).eval()
    assert model.config._attn_implementation == "eager"  # not a dot product: the eager backend is chosen
    layer = model.model.decoder.layers[0].self_attn
    assert isinstance(layer.score, CosineScore) and isinstance(model.model.decoder.position, LearnedSlopeBias)
    torch.testing.assert_close(layer.score.temperature, torch.full((4,), 8**0.5))  # its init_weights ran
    torch.testing.assert_close(model.model.decoder.position.slope, torch.full((4,), -1.0))
    assert config.position_limit is None

    ids = torch.randint(3, 99, (2, 6))
    logits = model(ids, labels=ids).logits
    assert logits.shape == (2, 6, 99) and logits.isfinite().all()
    generated = model.generate(ids[:, :3], max_new_tokens=4, do_sample=False)
    uncached = model.generate(ids[:, :3], max_new_tokens=4, do_sample=False, use_cache=False)
    assert torch.equal(generated, uncached)

    with torch.no_grad():
        model.model.decoder.position.slope.fill_(0.25)  # a trained value must survive loading
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)


def test_a_registered_toy_positional_scheme_runs_on_sdpa(toy_variants):
    """A bias scheme with a dot-product score may use the fused backend: eager and sdpa agree."""
    model = build(HFAttentionForSeq2SeqLM, "seq2seq", position_encoding="learned_slope")
    assert model.config._attn_implementation == "sdpa"
    expected = run(model, "seq2seq")
    model.set_attn_implementation("eager")
    torch.testing.assert_close(run(model, "seq2seq"), expected, atol=1e-5, rtol=1e-5)


# --- docs/variants.md ----------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
VARIANTS_DOC = ROOT / "docs" / "variants.md"


def test_norm_names_of_the_config_are_the_registered_norms():
    assert tuple(NORMS) == configuration.NORM_TYPES
    assert allowed_in_error("norm_type") == list(NORMS)


def test_activation_names_of_the_config_are_the_registered_activations():
    assert (*PLAIN_ACTIVATIONS, *GATED_ACTIVATIONS, *LEARNED_ACTIVATIONS) == HIDDEN_ACTS
    assert allowed_in_error("hidden_act") == list(HIDDEN_ACTS)
    assert set(GATED_ACTIVATIONS.values()) <= set(PLAIN_ACTIVATIONS)  # every gate is a plain activation


def test_a_scheme_that_only_declares_its_kind_is_refused():
    """The stack asks the scheme's methods, not its `kind`: a class setting only the kind would be ignored."""
    with pytest.raises(TypeError, match="derive from AbsolutePositionalEncoding"):

        class KindOnly(PositionalEncoding):
            kind = "bias"


def test_the_worked_example_of_the_variants_doc_runs():
    snippets = re.findall(r"```python\n(.*?)```", VARIANTS_DOC.read_text(), flags=re.DOTALL)
    assert len(snippets) == 1
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    completed = subprocess.run(
        [sys.executable, "-c", snippets[0]], cwd=ROOT, capture_output=True, text=True, timeout=600, env=environment
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    assert lines[0] == "eager" and lines[1].startswith("loss after 5 steps: ")
    assert math.isfinite(float(lines[1].rsplit(" ", 1)[1]))
