"""Hypothesis strategies for tests/test_fuzz_conversion.py: tiny Hugging Face configs of every class the converters
take, drawn by perturbing the tiny references the architectures' modules declare (`Architecture.tiny_references`;
`parity_references` for GPT-2, Llama, BERT, BART, Marian and T5) with the fields a user sets on that config class.

What is drawn, per class (each field keeps its reference value with a fair probability, so that one change at a time
is common and a failure shrinks to the field that causes it):

- sizes: layers, heads, key/value heads, `head_dim` different from hidden / heads where the class has one;
- positions: `rope_parameters` (or the legacy `rope_scaling` with `rope_theta` beside it) of the types default,
  linear, dynamic, yarn (factor, original length, attention_factor, beta_fast/beta_slow, mscale/mscale_all_dim with
  0.0, truncate), longrope (short/long factors of the right length, and one too long) and llama3; Phi-3's partial
  rotation; Gemma 3's and ModernBERT's per-layer-type rotations; SmolLM3's `no_rope_layers` /
  `no_rope_layer_interval`;
- windows: `sliding_window`, `use_sliding_window`, `max_window_layers`, explicit `layer_types` (all full with a window
  set, all sliding, mixed), Gemma's `sliding_window_pattern`, ModernBERT's `local_attention` and
  `global_attn_every_n_layers`;
- the special ids (pad, bos, eos, and cls/sep, decoder_start, forced_eos where the class has them), inside and
  outside the vocabulary, None, and eos lists;
- activations (`hidden_act`, `hidden_activation`, `activation_function`, `classifier_activation`,
  `feed_forward_proj`), bias switches, `tie_word_embeddings`, Gemma's caps and `query_pre_attn_scalar`,
  ModernBERT's `sparse_prediction`, `sparse_pred_ignore_index` and pooling, and the options a converter refuses
  (bidirectional Gemma, GPT-2's per-layer scaling, BART's mBART options, Marian's separate vocabularies, ...).

`drawn_references(architecture, model_class)` returns the keyword arguments of the config class and what was drawn
(`DrawnReference`); it does not build the model. Whether transformers accepts them is its own business: the tests
build the model and reject a draw that transformers refuses while building or running it, so that only the
reference's own behaviour is the oracle. With `refusals=False` the values the converters are known to refuse are not
drawn, for the properties of a converted model.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import zlib
from dataclasses import dataclass

from hypothesis import strategies as st
from transformers import PretrainedConfig, PreTrainedModel

from hf_attention.architectures import REGISTRY
from hf_attention.architectures.tiny import TinyReference


class _Default:
    """A field left out of the config's keyword arguments: the class's default (or what it derives) applies."""

    def _repr_pretty_(self, printer, cycle) -> None:  # how hypothesis prints a falsifying example
        printer.text(repr(self))

    def __repr__(self) -> str:
        return "<class default>"


DEFAULT = _Default()

# Fields the config classes derive in __post_init__ from others (written by to_diff_dict, never typed by a user).
_DERIVED = (
    "model_type",
    "transformers_version",
    "architectures",
    "dense_act_fn",
    "is_gated_act",
    "_sliding_window_pattern",
)
# transformers' ACT2FN names a user may write: those the converters read, and rarer ones that they refuse.
SUPPORTED_ACTIVATIONS = ("silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "swish")
OTHER_ACTIVATIONS = ("gelu_fast", "quick_gelu", "tanh", "gelu_10")
# A gated feed-forward network's (Llama's `act(gate) * up`): no converter has a ReLU gate
GATES = ("silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "swish")
OTHER_GATES = ("relu", "gelu_fast", "quick_gelu", "tanh")


def reference_cases(architecture: str) -> dict[str, TinyReference]:
    """The references an architecture declares, by case name: its tiny references and the first suite's ones (Llama
    has both: its classifier is among the latter)."""
    declared = REGISTRY[architecture]
    return {**declared.parity_references, **declared.tiny_references}


@functools.cache
def reference_fields(architecture: str, case: str) -> dict:
    """The keyword arguments that rebuild the case's config: what differs from the class's defaults, less what the
    class derives (the layer types of a window pattern, T5's activation split)."""
    config = reference_cases(architecture)[case].config()
    fields = {key: value for key, value in config.to_diff_dict().items() if key not in _DERIVED}
    if "scale_decoder_outputs" in fields:  # T5 reads its untied head from `tie_word_embeddings` and keeps the flag
        fields["tie_word_embeddings"] = fields.pop("scale_decoder_outputs")
    if "id2label" in fields:  # JSON keys are strings; the classes take the ints they wrote
        fields["id2label"] = {int(index): label for index, label in fields["id2label"].items()}
    return fields


@functools.cache
def _class_fields(architecture: str, case: str) -> dict:
    """Every field of the case's config as the class holds it (its defaults included)."""
    return reference_cases(architecture)[case].config().to_dict()


def _changes(architecture: str, case: str, base: dict, drawn: dict) -> dict:
    """The drawn fields that change the case's config (the others say nothing about a refusal): a value other than
    the reference's, or a field left to the class where the class then derives another value."""
    held = _class_fields(architecture, case)
    changes = {}
    for key, value in drawn.items():
        if value is not DEFAULT and base.get(key, held.get(key, DEFAULT)) != value:
            changes[key] = value
    config_class = _config_class(architecture, case)
    for key, value in drawn.items():
        if value is DEFAULT and key in base and _derived(config_class, base, changes, key) != base[key]:
            changes[key] = value
    return changes


def _derived(config_class: type[PretrainedConfig], base: dict, changes: dict, key: str):
    """What the class derives for `key` when it is left out of the changed config (None when it refuses it)."""
    try:
        return getattr(config_class(**_apply(base, {**changes, key: DEFAULT})), key, None)
    except Exception:  # transformers refuses the draw: the test rejects it, the field stays listed
        return None


@dataclass(frozen=True)
class DrawnReference:
    """One drawn reference: the case it perturbs, its classes and config keyword arguments, and what was drawn."""

    architecture: str
    case: str
    model_class: type[PreTrainedModel]
    config_class: type[PretrainedConfig]
    fields: dict
    # The fields drawn (name → value; DEFAULT: left to the class): what a refusal of this draw may name.
    drawn: dict
    attn_implementation: str = "eager"
    seed: int = 0

    def config(self) -> PretrainedConfig:
        return self.config_class(**copy.deepcopy(self.fields))

    @property
    def vocab_size(self) -> int:
        return self.fields["vocab_size"]

    def special_ids(self) -> set[int]:
        """Every special id of the config that is a row of the embedding (real tokens avoid them)."""
        ids = set()
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id"):
            value = self.fields.get(name)
            for token in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(token, int) and 0 <= token < self.vocab_size:
                    ids.add(token)
        return ids

    def source_names(self) -> set[str]:
        """The names a refusal of this draw may give the field responsible: each drawn field, the keys of a drawn
        dict (rope options) and the fields a drawn one is written into by the class (`ALIASES`)."""
        names = set()
        for name, value in self.drawn.items():
            names.add(name)
            names.update(ALIASES.get(name, ()))
            if isinstance(value, dict):
                names.update(_keys(value))
        return names

    def _repr_pretty_(self, printer, cycle) -> None:  # how hypothesis prints a falsifying example
        printer.text(repr(self))

    def __repr__(self) -> str:
        drawn = ", ".join(f"{key}={value!r}" for key, value in self.drawn.items())
        return (
            f"{self.model_class.__name__}({self.config_class.__name__}) from case {self.case!r}, "
            f"attn={self.attn_implementation!r}, drawn: {drawn or 'nothing'}"
        )


def _keys(value: dict) -> set[str]:
    keys = set()
    for key, inner in value.items():
        keys.add(str(key))
        if isinstance(inner, dict):
            keys.update(_keys(inner))
    return keys


# A drawn field → other names the class files it under, which a refusal may use instead: the legacy `rope_scaling`
# becomes `rope_parameters`, an interval becomes the list it describes, a window switch the layer types it derives.
ALIASES = {
    "rope_scaling": ("rope_parameters",),
    "rope_theta": ("rope_parameters",),
    "partial_rotary_factor": ("rope_parameters",),
    "global_rope_theta": ("rope_parameters",),
    "local_rope_theta": ("rope_parameters",),
    "no_rope_layer_interval": ("no_rope_layers",),
    "global_attn_every_n_layers": ("layer_types",),
    "sliding_window_pattern": ("layer_types",),
    "use_sliding_window": ("sliding_window", "layer_types"),
    "max_window_layers": ("layer_types",),
    "sliding_window": ("layer_types",),
    "local_attention": ("sliding_window",),
}


def _apply(base: dict, drawn: dict) -> dict:
    fields = copy.deepcopy(base)
    for key, value in drawn.items():
        if value is DEFAULT:
            fields.pop(key, None)
        else:
            fields[key] = copy.deepcopy(value)
    return fields


def _keep_or(current, *others) -> st.SearchStrategy:
    """The current value half of the time (and what shrinking returns to), else one of `others`."""
    others = [value for value in others if value is DEFAULT or value != current]
    return st.one_of(st.just(current), st.sampled_from(others)) if others else st.just(current)


# Whether the fields being drawn may take the values a converter refuses (`drawn_references(refusals=...)`): read by
# the pieces below while `drawn_references` draws, so that each architecture's fields are listed once.
_REFUSALS = contextvars.ContextVar("refusals", default=True)


def _rarely(current, other) -> st.SearchStrategy:
    """The current value three times in four, else `other`: an option that a converter refuses (never drawn
    without refusals), which most draws leave alone so that their other fields get converted."""
    if not _REFUSALS.get():
        return st.just(current)
    return st.one_of(st.just(current), st.just(current), st.just(current), st.just(other))


def _activation(current, supported=SUPPORTED_ACTIVATIONS, others=OTHER_ACTIVATIONS) -> st.SearchStrategy:
    """An activation name: the reference's, one the converters read, or (one draw in three) one they refuse."""
    if not _REFUSALS.get():
        return _keep_or(current, *supported)
    return st.one_of(_keep_or(current, *supported), _keep_or(current, *supported), st.sampled_from(others))


# ---------------------------------------------------------------------------------------------------------------------
# Shared pieces


def _token_id(vocab: int, current, *, pad: bool = False) -> st.SearchStrategy:
    """A special id: the reference's, none, small ones, the last row; one in five outside the vocabulary (just past
    it, far past it, -1). Most classes make the pad id their embedding's padding row, which must exist (-1 counts
    from the end): a pad id is outside one time in six, and then mostly -1."""
    inside = _keep_or(current, None, 0, 1, 2, vocab - 1)
    if not _REFUSALS.get():  # (a marker id outside is converted as None, but a pad id may be refused)
        return inside
    if pad:
        return st.one_of(inside, inside, inside, inside, inside, st.sampled_from((-1, -1, vocab)))
    return st.one_of(inside, inside, inside, inside, st.sampled_from((vocab, vocab + 10, -1)))


def _eos_id(vocab: int, current) -> st.SearchStrategy:
    """An eos id, or a list of them (generation stops at any), inside or partly outside the vocabulary."""
    lists = ([2, vocab - 1], [2, vocab + 3]) if _REFUSALS.get() else ([2, vocab - 1],)
    return st.one_of(_token_id(vocab, current), st.sampled_from(lists))


@st.composite
def _special_ids(draw, base: dict, names: tuple[str, ...]) -> dict:
    vocab = base["vocab_size"]
    return {
        name: draw(
            _eos_id(vocab, base.get(name))
            if name == "eos_token_id"
            else _token_id(vocab, base.get(name), pad=name == "pad_token_id")
        )
        for name in names
    }


@st.composite
def _rope_options(
    draw, rotary_dim: int, *, types=("default", "linear", "dynamic", "yarn", "longrope", "llama3")
) -> dict:
    """A `rope_parameters` dict (without rope_theta) of one of `types`, its options drawn around the ones the
    references use; zeros where transformers reads a zero as "unset", lists of the wrong length now and then."""
    rope_type = draw(st.sampled_from(types))
    options: dict = {"rope_type": rope_type}
    original = draw(st.sampled_from((16, 32, 8)))
    if rope_type in ("linear", "dynamic"):
        options["factor"] = draw(st.sampled_from((2.0, 4.0, 1.0, 0.5, 0.0)))
    elif rope_type == "yarn":
        options["factor"] = draw(st.sampled_from((4.0, 2.0, 1.0, 8.0)))
        options["original_max_position_embeddings"] = original
        for key, values in (
            ("attention_factor", (0.8, 1.3, 0.0)),
            ("beta_fast", (16.0, 32.0, 0.0, 4)),
            ("beta_slow", (2.0, 1.0, 0.0)),
            ("mscale", (1.0, 0.707, 0.0)),
            ("mscale_all_dim", (1.0, 0.5, 0.0)),
            ("truncate", (False, True)),
        ):
            value = draw(st.sampled_from((DEFAULT, *values)))
            if value is not DEFAULT:
                options[key] = value
    elif rope_type == "longrope":
        pairs = draw(_rarely(rotary_dim // 2, rotary_dim // 2 + 1))  # one pair too many: transformers refuses
        options["original_max_position_embeddings"] = original
        options |= _longrope_factors(pairs)
        factor = draw(st.sampled_from((DEFAULT, 4.0, 0.5, 1.0)))
        if factor is not DEFAULT:
            options["factor"] = factor
        attention_factor = draw(st.sampled_from((DEFAULT, 1.2, 0.0)))
        if attention_factor is not DEFAULT:
            options["attention_factor"] = attention_factor
    elif rope_type == "llama3":
        options["factor"] = draw(st.sampled_from((8.0, 2.0)))
        options["low_freq_factor"] = draw(st.sampled_from((1.0, 2.0)))
        options["high_freq_factor"] = draw(st.sampled_from((4.0, 1.0)))
        options["original_max_position_embeddings"] = draw(st.sampled_from((32, 16)))
    return options


@st.composite
def _rope(draw, base: dict, rotary_dim: int) -> dict:
    """The rotation as a user writes it: `rope_parameters` (new style, theta inside) or the legacy `rope_scaling`
    ("type" or "rope_type") with `rope_theta` beside it; or the reference's own."""
    form = draw(st.sampled_from(("keep", "rope_parameters", "rope_scaling")))
    if form == "keep":
        return _refit(base, rotary_dim)
    options = draw(_rope_options(rotary_dim))
    theta = draw(st.sampled_from((10000.0, 100.0, 1000000.0)))
    if form == "rope_parameters":
        return {"rope_parameters": {**options, "rope_theta": theta}}
    if draw(st.booleans()):
        options["type"] = options.pop("rope_type")
    return {"rope_parameters": DEFAULT, "rope_scaling": options, "rope_theta": theta}


def _longrope_factors(pairs: int) -> dict:
    """Distinct short and long factors per rotated pair (as the references' own, architectures/llama.py)."""
    return {
        "short_factor": [1.0 + index / max(pairs - 1, 1) for index in range(pairs)],
        "long_factor": [1.0 + 2.0 * index / max(pairs - 1, 1) for index in range(pairs)][::-1],
    }


def _refit(base: dict, rotary_dim: int) -> dict:
    """The reference's own rotation, its LongRoPE factors refitted to the rotated width drawn (other heads)."""
    rope = base.get("rope_parameters") or {}
    if rope.get("rope_type") != "longrope" or len(rope["short_factor"]) == rotary_dim // 2:
        return {}
    return {"rope_parameters": {**rope, **_longrope_factors(rotary_dim // 2)}}


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(k for k in (1, 2, 4, 8) if n % k == 0)


@st.composite
def _layer_types(draw, layers: int) -> list[str]:
    """Explicit layer types: all full, all sliding, or a mix."""
    kind = draw(st.sampled_from(("mixed", "full", "sliding")))
    if kind == "full":
        return ["full_attention"] * layers
    if kind == "sliding":
        return ["sliding_attention"] * layers
    return [draw(st.sampled_from(("sliding_attention", "full_attention"))) for _ in range(layers)]


@st.composite
def _decoder(
    draw,
    base: dict,
    config_class: type[PretrainedConfig],
    *,
    activation_field: str = "hidden_act",
    activations=(GATES, OTHER_GATES),
    switches: tuple[str, ...] = (),
    rope: bool = True,
) -> dict:
    """The fields every Llama-shaped decoder config shares: depth, heads, head width, activation, bias switches,
    tied embeddings, special ids, length and rotation."""
    drawn: dict = {}
    drawn["num_hidden_layers"] = draw(_keep_or(base["num_hidden_layers"], 1, 2, 3, 4))
    heads = draw(_keep_or(base["num_attention_heads"], 2, 4, 8))
    drawn["num_attention_heads"] = heads
    kv_choices = _divisors(heads)
    kv = base.get("num_key_value_heads")
    drawn["num_key_value_heads"] = draw(_keep_or(kv, *kv_choices) if kv in kv_choices else st.sampled_from(kv_choices))
    has_head_dim = "head_dim" in config_class.__dataclass_fields__
    head_dim = base.get("head_dim", DEFAULT)
    if has_head_dim:
        head_dim = draw(_keep_or(head_dim, DEFAULT, 8, 16, 24, 32))
        drawn["head_dim"] = head_dim
    if head_dim is DEFAULT or head_dim is None:  # None: the class derives it (Mixtral)
        class_default = config_class.__dataclass_fields__["head_dim"].default if has_head_dim else None
        head_dim = class_default if isinstance(class_default, int) else base["hidden_size"] // heads
    drawn[activation_field] = draw(_activation(base[activation_field], *activations))
    for switch in switches:
        drawn[switch] = draw(_keep_or(base.get(switch, False), True, False))
    drawn["tie_word_embeddings"] = draw(_keep_or(base.get("tie_word_embeddings", False), True, False))
    drawn |= draw(_special_ids(base, ("pad_token_id", "bos_token_id", "eos_token_id")))
    drawn["max_position_embeddings"] = draw(_keep_or(base["max_position_embeddings"], 16, 32, 64))
    if rope:
        drawn |= draw(_rope(base, head_dim))
    return drawn


# ---------------------------------------------------------------------------------------------------------------------
# Each architecture's fields


@functools.cache
def _config_class(architecture: str, case: str) -> type[PretrainedConfig]:
    return type(reference_cases(architecture)[case].config())


@st.composite
def _llama(draw, base, config_class):
    return draw(_decoder(base, config_class, switches=("attention_bias", "mlp_bias")))


@st.composite
def _mistral(draw, base, config_class):
    drawn = draw(_decoder(base, config_class))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 30, 64))
    return drawn


@st.composite
def _qwen(draw, base, config_class, *, switches=()):
    drawn = draw(_decoder(base, config_class, switches=switches))
    drawn["use_sliding_window"] = draw(_keep_or(base.get("use_sliding_window", False), True, False))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 8, 30))
    drawn["max_window_layers"] = draw(_keep_or(base.get("max_window_layers", 28), 0, 1, 2, 28))
    drawn["layer_types"] = draw(st.just(DEFAULT) | _layer_types(drawn["num_hidden_layers"]))
    return drawn


@st.composite
def _qwen2(draw, base, config_class):
    return draw(_qwen(base, config_class))


@st.composite
def _qwen3(draw, base, config_class):
    return draw(_qwen(base, config_class, switches=("attention_bias",)))


@st.composite
def _ministral(draw, base, config_class):
    drawn = draw(_decoder(base, config_class))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 30))
    drawn["layer_types"] = draw(st.just(DEFAULT) | _layer_types(drawn["num_hidden_layers"]))
    return drawn


@st.composite
def _ministral3(draw, base, config_class):
    """Ministral 3: Mistral's window (every layer or none), and its query scale's β (0: none) and length, written into
    whichever rope dict the rotation was drawn as (a YaRN, llama3 or LongRoPE original length is that length too)."""
    drawn = draw(_decoder(base, config_class))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 30))
    field = "rope_scaling" if "rope_scaling" in drawn else "rope_parameters"
    own = base.get("rope_parameters") or {}
    rope = dict(drawn[field] if isinstance(drawn.get(field), dict) else own)
    rope["llama_4_scaling_beta"] = draw(_keep_or(own.get("llama_4_scaling_beta", 0.1), 0.0, 0.1, 1.0))
    if rope.get("rope_type", rope.get("type")) not in ("yarn", "llama3", "longrope"):
        rope["original_max_position_embeddings"] = draw(st.sampled_from((4, 16, 64)))
    drawn[field] = rope
    return drawn


@st.composite
def _smollm3(draw, base, config_class):
    drawn = draw(_decoder(base, config_class, switches=("attention_bias", "mlp_bias")))
    layers = drawn["num_hidden_layers"]
    nope = draw(st.sampled_from(("interval", "list")))
    if nope == "interval":
        drawn["no_rope_layers"] = DEFAULT
        drawn["no_rope_layer_interval"] = draw(_keep_or(base.get("no_rope_layer_interval", 4), 1, 2, 3, 4))
    else:  # transformers' 1 means "this layer rotates"
        drawn["no_rope_layers"] = [draw(st.sampled_from((1, 0))) for _ in range(layers)]
    drawn["use_sliding_window"] = draw(_keep_or(base.get("use_sliding_window", False), True, False))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 8))
    drawn["layer_types"] = draw(st.just(DEFAULT) | _layer_types(layers))
    return drawn


@st.composite
def _olmo2(draw, base, config_class):
    return draw(_decoder(base, config_class, switches=("attention_bias",)))


@st.composite
def _seed_oss(draw, base, config_class):
    return draw(_decoder(base, config_class, switches=("attention_bias", "attention_out_bias", "mlp_bias")))


@st.composite
def _apertus(draw, base, config_class):
    """Apertus: its activation (xIELU, a plain one, or one refused: its network has no gate) and its q/k/v/o biases,
    with the Llama-shaped fields."""
    activations = (("xielu", *SUPPORTED_ACTIVATIONS), OTHER_ACTIVATIONS)
    return draw(_decoder(base, config_class, activations=activations, switches=("attention_bias",)))


@st.composite
def _experts(draw, base, *, experts_field: str = "num_experts") -> dict:
    """A mixture of experts: how many, how many per token (never more), the auxiliary loss's settings."""
    drawn = {}
    experts = draw(_keep_or(base.get(experts_field, 4), 1, 2, 3, 5))
    drawn[experts_field] = experts
    per_token = min(base.get("num_experts_per_tok", 2), experts)
    drawn["num_experts_per_tok"] = draw(_keep_or(per_token, *range(1, experts + 1)))
    drawn["router_aux_loss_coef"] = draw(_keep_or(base.get("router_aux_loss_coef", 0.001), 0.0, 0.02))
    drawn["output_router_logits"] = draw(st.booleans())
    return drawn


@st.composite
def _mixtral(draw, base, config_class):
    drawn = draw(_mistral(base, config_class))
    drawn |= draw(_experts(base, experts_field="num_local_experts"))
    drawn["router_jitter_noise"] = draw(_rarely(0.0, 0.1))
    return drawn


@st.composite
def _qwen3_moe(draw, base, config_class):
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",)))
    drawn |= draw(_experts(base))
    drawn["use_sliding_window"] = draw(_keep_or(base.get("use_sliding_window", False), True, False))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 8, 30))
    drawn["norm_topk_prob"] = draw(st.booleans())
    drawn["moe_intermediate_size"] = draw(
        _keep_or(base.get("moe_intermediate_size", 48), 16, base["intermediate_size"])
    )
    drawn["decoder_sparse_step"] = draw(_keep_or(base.get("decoder_sparse_step", 1), 2, 3))
    layers = drawn["num_hidden_layers"]
    drawn["mlp_only_layers"] = draw(st.lists(st.integers(0, layers - 1), unique=True, max_size=layers))
    return drawn


@st.composite
def _olmoe(draw, base, config_class):
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",)))
    drawn |= draw(_experts(base))
    drawn["norm_topk_prob"] = draw(st.booleans())
    drawn["clip_qkv"] = draw(_rarely(None, 2.0))
    return drawn


@st.composite
def _qwen3_5(draw, base, config_class):
    """Qwen3.5 text: its head width, the rotated share of each head, a mix of Gated DeltaNet and full layers, and the
    Gated DeltaNet sizes (value heads a multiple of key heads, as transformers' layer needs)."""
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",), rope=False))
    head_dim = drawn.get("head_dim", DEFAULT)
    head_dim = base.get("head_dim", 16) if head_dim in (DEFAULT, None) else head_dim
    factor = draw(st.sampled_from((0.25, 0.5, 1.0)))
    options = draw(_rope_options(int(head_dim * factor), types=("default", "linear", "yarn")))
    drawn["rope_parameters"] = {**options, "rope_theta": 10000.0, "partial_rotary_factor": factor}
    layers = drawn["num_hidden_layers"]
    drawn["layer_types"] = [draw(st.sampled_from(("linear_attention", "full_attention"))) for _ in range(layers)]
    key_heads = draw(st.sampled_from((1, 2)))
    drawn["linear_num_key_heads"] = key_heads
    drawn["linear_num_value_heads"] = key_heads * draw(st.sampled_from((1, 2)))
    drawn["linear_key_head_dim"] = draw(st.sampled_from((4, 8)))
    drawn["linear_value_head_dim"] = draw(st.sampled_from((4, 8, 12)))
    drawn["linear_conv_kernel_dim"] = draw(st.sampled_from((2, 4)))
    return drawn


@st.composite
def _gpt_oss(draw, base, config_class):
    """GPT-OSS: sliding and full layers, its experts (the clamp's limit among them) and YaRN or plain RoPE."""
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",), activations=(("silu",), ("gelu",))))
    drawn |= draw(_experts(base, experts_field="num_local_experts"))
    drawn["swiglu_limit"] = draw(_keep_or(base.get("swiglu_limit", 0.5), 7.0, 0.1))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), 4, 30))
    drawn["layer_types"] = draw(_layer_types(drawn["num_hidden_layers"]))
    return drawn


@st.composite
def _deepseek_v3(draw, base, config_class):
    """DeepSeek-V3: the latent attention's ranks and widths (plain or low-rank queries, interleaved rotation or
    not), the grouped router and its shared experts, the first dense layers."""
    drawn = draw(_decoder(base, config_class, rope=False))
    drawn["num_key_value_heads"] = drawn["num_attention_heads"]  # latent attention has one key per query head
    drawn["kv_lora_rank"] = draw(st.sampled_from((8, 16)))
    drawn["q_lora_rank"] = draw(st.sampled_from((None, 12, 24)))
    drawn["qk_nope_head_dim"] = draw(st.sampled_from((4, 8)))
    rope_dim = draw(st.sampled_from((2, 4, 8)))
    drawn["qk_rope_head_dim"] = rope_dim
    drawn["v_head_dim"] = draw(st.sampled_from((4, 8, 12)))
    drawn["rope_interleave"] = draw(st.booleans())
    options = draw(_rope_options(rope_dim, types=("default", "yarn")))
    drawn["rope_parameters"] = {**options, "rope_theta": 10000.0}
    experts = draw(st.sampled_from((2, 4, 6)))
    groups = draw(st.sampled_from([g for g in (1, 2) if experts % g == 0]))
    kept = draw(st.integers(1, groups))
    drawn["n_routed_experts"] = experts
    drawn["n_group"] = groups
    drawn["topk_group"] = kept
    group_size = experts // groups
    drawn["num_experts_per_tok"] = draw(st.integers(1, min(kept * group_size, experts)))
    drawn["n_shared_experts"] = draw(st.sampled_from((0, 1, 2)))
    drawn["first_k_dense_replace"] = draw(st.integers(0, drawn["num_hidden_layers"]))
    drawn["routed_scaling_factor"] = draw(_keep_or(base.get("routed_scaling_factor", 2.5), 1.0))
    drawn["norm_topk_prob"] = draw(st.booleans())
    return drawn


@st.composite
def _qwen3_next(draw, base, config_class):
    """Qwen3-Next: Qwen3.5's fields, and its experts with a gated shared expert (or none) and dense layers."""
    drawn = draw(_qwen3_5(base, config_class))
    drawn |= draw(_experts(base))
    drawn["norm_topk_prob"] = draw(st.booleans())
    drawn["moe_intermediate_size"] = draw(_keep_or(base.get("moe_intermediate_size", 32), 16))
    drawn["shared_expert_intermediate_size"] = draw(_keep_or(base.get("shared_expert_intermediate_size", 48), 0, 16))
    drawn["decoder_sparse_step"] = draw(_keep_or(base.get("decoder_sparse_step", 1), 2))
    layers = drawn["num_hidden_layers"]
    drawn["mlp_only_layers"] = draw(st.lists(st.integers(0, layers - 1), unique=True, max_size=layers))
    return drawn


@st.composite
def _phi3(draw, base, config_class):
    drawn = draw(_decoder(base, config_class, rope=False))
    head_dim = base["hidden_size"] // drawn["num_attention_heads"]
    rope = draw(st.sampled_from(("keep", "rope_parameters")))
    if rope == "rope_parameters":  # the part of each head that rotates, and the type (Phi-3's config refuses others)
        factor = draw(st.sampled_from((0.5, 1.0, 0.75, 0.25)))
        options = draw(_rope_options(int(head_dim * factor), types=("default", "longrope")))
        drawn["rope_parameters"] = {**options, "rope_theta": 10000.0, "partial_rotary_factor": factor}
    else:
        kept = base.get("rope_parameters") or {}
        drawn |= _refit(base, int(head_dim * kept.get("partial_rotary_factor", 1.0)))
    drawn["original_max_position_embeddings"] = draw(
        _keep_or(base.get("original_max_position_embeddings", DEFAULT), DEFAULT, 16, 32)
    )
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 8))
    return drawn


# Gemma's gate: its own tanh-GELU and the names the converters read for it, then others they refuse
_GEMMA_GATES = (("gelu_pytorch_tanh", "gelu_new"), ("gelu", "silu", "relu", "gelu_fast"))


@st.composite
def _gemma(draw, base, config_class, *, gemma3: bool):
    drawn = draw(
        _decoder(
            base,
            config_class,
            activation_field="hidden_activation",
            activations=_GEMMA_GATES,
            switches=("attention_bias",),
            rope=not gemma3,  # Gemma 3's rotations are per layer type: drawn below
        )
    )
    layers = drawn["num_hidden_layers"]
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), 4, 30, None))
    pattern = draw(st.sampled_from(("keep", "explicit", "pattern")))
    if pattern == "explicit":
        drawn["layer_types"] = draw(_layer_types(layers))
    elif pattern == "pattern" and gemma3:  # Gemma 3 reads the legacy pattern; Gemma 2 alternates
        drawn["layer_types"] = DEFAULT
        drawn["sliding_window_pattern"] = draw(st.sampled_from((2, 3, 6, 1)))
    else:
        drawn["layer_types"] = DEFAULT
    drawn["query_pre_attn_scalar"] = draw(_keep_or(base.get("query_pre_attn_scalar"), 16, 256, 1))
    drawn["final_logit_softcapping"] = draw(_keep_or(base.get("final_logit_softcapping"), None, 30.0))
    drawn["attn_logit_softcapping"] = draw(_keep_or(base.get("attn_logit_softcapping"), None, 0.1, 50.0))
    drawn["use_bidirectional_attention"] = draw(_rarely(base.get("use_bidirectional_attention"), True))
    if gemma3:
        head_dim = drawn.get("head_dim")
        if not isinstance(head_dim, int):
            head_dim = config_class.__dataclass_fields__["head_dim"].default
        rope = draw(st.sampled_from(("keep", "rope_parameters", "rope_scaling")))
        if rope == "rope_parameters":
            full = draw(_rope_options(head_dim))
            local_type = draw(_rarely("default", "linear"))  # Gemma 3 scales its global layers only
            local = {"rope_type": local_type, **({"factor": 2.0} if local_type == "linear" else {})}
            drawn["rope_parameters"] = {
                "full_attention": {**full, "rope_theta": draw(st.sampled_from((1000000.0, 10000.0)))},
                "sliding_attention": {**local, "rope_theta": draw(st.sampled_from((10000.0, 100.0)))},
            }
        elif rope == "rope_scaling":  # transformers 4's form: scaling for the global layers, a local base beside
            drawn["rope_parameters"] = DEFAULT
            drawn["rope_scaling"] = draw(_rope_options(head_dim))
            drawn["rope_theta"] = 1000000.0
            drawn["rope_local_base_freq"] = draw(st.sampled_from((10000.0, 100.0)))
    return drawn


@st.composite
def _gemma2(draw, base, config_class):
    return draw(_gemma(base, config_class, gemma3=False))


@st.composite
def _gemma3(draw, base, config_class):
    return draw(_gemma(base, config_class, gemma3=True))


@st.composite
def _modernbert(draw, base, config_class):
    drawn: dict = {}
    layers = draw(_keep_or(base["num_hidden_layers"], 1, 2, 4))
    drawn["num_hidden_layers"] = layers
    drawn["num_attention_heads"] = draw(_keep_or(base["num_attention_heads"], 2, 8))
    drawn["hidden_activation"] = draw(_activation(base["hidden_activation"], GATES, OTHER_GATES))
    # the head's activation: the gate's (as the released models have it), or now and then another one, which the
    # converter takes only where it computes the same (a synonym)
    gate = drawn["hidden_activation"]
    other = draw(_rarely(False, True))
    drawn["classifier_activation"] = draw(st.sampled_from(SUPPORTED_ACTIVATIONS)) if other else gate
    drawn["local_attention"] = draw(_keep_or(base["local_attention"], 2, 4, 16, 128, 7))
    layout = draw(st.sampled_from(("keep", "every", "explicit")))
    if layout == "every":
        drawn["layer_types"] = DEFAULT
        drawn["global_attn_every_n_layers"] = draw(st.sampled_from((1, 2, 3)))
    elif layout == "explicit":
        drawn["layer_types"] = draw(_layer_types(layers))
    else:
        drawn["layer_types"] = DEFAULT  # the reference's every-third pattern, for the depth drawn
        drawn["global_attn_every_n_layers"] = 3
    rope = draw(st.sampled_from(("keep", "rope_parameters", "thetas")))
    if rope == "rope_parameters":
        global_type = draw(_rarely("default", "linear"))  # ModernBERT scales no rotation
        drawn["rope_parameters"] = {
            "full_attention": {
                "rope_type": global_type,
                "rope_theta": draw(st.sampled_from((160000.0, 10000.0))),
                **({"factor": 2.0} if global_type == "linear" else {}),
            },
            "sliding_attention": {"rope_type": "default", "rope_theta": draw(st.sampled_from((10000.0, 500.0)))},
        }
    elif rope == "thetas":  # transformers 4's names, still read
        drawn["rope_parameters"] = DEFAULT
        drawn["global_rope_theta"] = draw(st.sampled_from((160000.0, 10000.0)))
        drawn["local_rope_theta"] = draw(st.sampled_from((10000.0, 500.0)))
    for switch in ("norm_bias", "attention_bias", "mlp_bias", "classifier_bias", "decoder_bias"):
        drawn[switch] = draw(_keep_or(base.get(switch, False), True, False))
    drawn["classifier_pooling"] = draw(_keep_or(base["classifier_pooling"], "cls", "mean"))
    drawn["sparse_prediction"] = draw(_rarely(base["sparse_prediction"], True))
    drawn["sparse_pred_ignore_index"] = draw(_keep_or(base["sparse_pred_ignore_index"], 0, 5))
    drawn["tie_word_embeddings"] = draw(_keep_or(base["tie_word_embeddings"], False))
    names = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")
    drawn |= draw(_special_ids(base, names))
    return drawn


@st.composite
def _gpt2(draw, base, config_class):
    drawn: dict = {}
    drawn["n_layer"] = draw(_keep_or(base["n_layer"], 1, 3))
    drawn["n_head"] = draw(_keep_or(base["n_head"], 2, 8))
    drawn["n_inner"] = draw(_keep_or(base.get("n_inner"), 48))
    drawn["activation_function"] = draw(_activation(base["activation_function"]))
    for switch in ("scale_attn_weights", "reorder_and_upcast_attn", "tie_word_embeddings"):
        drawn[switch] = draw(_keep_or(base[switch], not base[switch]))
    for refused in ("scale_attn_by_inverse_layer_idx", "add_cross_attention"):
        drawn[refused] = draw(_rarely(base[refused], not base[refused]))
    drawn |= draw(_special_ids(base, ("pad_token_id", "bos_token_id", "eos_token_id")))
    return drawn


@st.composite
def _bert(draw, base, config_class):
    drawn: dict = {}
    drawn["num_hidden_layers"] = draw(_keep_or(base["num_hidden_layers"], 1, 3))
    drawn["num_attention_heads"] = draw(_keep_or(base["num_attention_heads"], 2, 8))
    drawn["hidden_act"] = draw(_activation(base["hidden_act"]))
    drawn["type_vocab_size"] = draw(_keep_or(base["type_vocab_size"], 1, 3))
    drawn["tie_word_embeddings"] = draw(_keep_or(base["tie_word_embeddings"], False))
    drawn["is_decoder"] = draw(_rarely(base["is_decoder"], True))
    names = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")
    drawn |= draw(_special_ids(base, names))
    return {
        key: value for key, value in drawn.items() if not (key in ("cls_token_id", "sep_token_id") and value is None)
    }


@st.composite
def _bart_like(draw, base, config_class, *, marian: bool):
    drawn: dict = {}
    drawn["activation_function"] = draw(_activation(base["activation_function"]))
    drawn["scale_embedding"] = draw(_keep_or(base["scale_embedding"], True, False))
    # both stacks as wide (as every released model), or now and then one field of one stack its own, which the
    # converters refuse
    heads = draw(_keep_or(base["encoder_attention_heads"], 2))
    ffn = draw(_keep_or(base["encoder_ffn_dim"], 20))
    for side in ("encoder", "decoder"):
        drawn[f"{side}_layers"] = draw(_keep_or(base[f"{side}_layers"], 1, 3))
        drawn[f"{side}_attention_heads"], drawn[f"{side}_ffn_dim"] = heads, ffn
    if draw(_rarely(False, True)):
        side, field = (
            draw(st.sampled_from(("encoder", "decoder"))),
            draw(st.sampled_from(("attention_heads", "ffn_dim"))),
        )
        drawn[f"{side}_{field}"] = 8 // heads if field == "attention_heads" else 57 - ffn
    # untied, each stack has an embedding of its own (which the perturbed weights make differ): refused
    drawn["tie_word_embeddings"] = draw(_rarely(base["tie_word_embeddings"], False))
    names = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "forced_eos_token_id")
    drawn |= draw(_special_ids(base, names))
    if marian:
        drawn["share_encoder_decoder_embeddings"] = draw(_rarely(base["share_encoder_decoder_embeddings"], False))
        drawn["decoder_vocab_size"] = draw(_rarely(base.get("decoder_vocab_size"), 50))
    else:  # mBART's options, which transformers 5's BART no longer reads but a config may carry
        option = draw(_rarely(None, "normalize_before") | _rarely(None, "add_final_layer_norm"))  # one in four
        if option is not None:
            drawn[option] = True
    return drawn


@st.composite
def _bart(draw, base, config_class):
    return draw(_bart_like(base, config_class, marian=False))


@st.composite
def _marian(draw, base, config_class):
    return draw(_bart_like(base, config_class, marian=True))


@st.composite
def _t5(draw, base, config_class):
    drawn: dict = {}
    projections = ("relu", "gelu", "gated-gelu", "gated-silu", "silu", "gelu_new", "gated-gelu_new")
    drawn["feed_forward_proj"] = draw(_activation(base["feed_forward_proj"], projections, ("gated-relu", "tanh")))
    drawn["d_kv"] = draw(_keep_or(base["d_kv"], 4, 16))
    drawn["num_heads"] = draw(_keep_or(base["num_heads"], 2))
    drawn["num_layers"] = draw(_keep_or(base["num_layers"], 1))
    drawn["num_decoder_layers"] = draw(_keep_or(base.get("num_decoder_layers"), 1, 3))
    drawn["relative_attention_num_buckets"] = draw(_keep_or(base["relative_attention_num_buckets"], 8))
    drawn["relative_attention_max_distance"] = draw(_keep_or(base["relative_attention_max_distance"], 20))
    drawn["tie_word_embeddings"] = draw(_keep_or(base["tie_word_embeddings"], not base["tie_word_embeddings"]))
    drawn |= draw(_special_ids(base, ("pad_token_id", "eos_token_id", "decoder_start_token_id")))
    return drawn


@st.composite
def _llama4(draw, base, config_class):
    """Llama 4 text: which layers rotate (NoPE elsewhere, by interval or list), which are chunked and by how much,
    the norm after the rotation, the NoPE layers' temperature; now and then layers of experts (refused for now)."""
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",)))
    layers = drawn["num_hidden_layers"]
    if draw(st.sampled_from(("interval", "list"))) == "interval":
        drawn["no_rope_layers"] = DEFAULT
        drawn["no_rope_layer_interval"] = draw(_keep_or(base.get("no_rope_layer_interval", 4), 1, 2, 3))
    else:  # transformers' 1 means "this layer rotates"
        drawn["no_rope_layers"] = [draw(st.sampled_from((1, 0))) for _ in range(layers)]
    drawn["attention_chunk_size"] = draw(_keep_or(base.get("attention_chunk_size"), None, 3, 8, 30))
    kinds = st.sampled_from(("chunked_attention", "full_attention"))
    drawn["layer_types"] = draw(st.just(DEFAULT) | st.lists(kinds, min_size=layers, max_size=layers))
    drawn["use_qk_norm"] = draw(st.booleans())
    drawn["attn_temperature_tuning"] = draw(st.booleans())
    drawn["floor_scale"] = draw(_keep_or(base.get("floor_scale", 8192), 1, 3, 8192))
    drawn["attn_scale"] = draw(_keep_or(base.get("attn_scale", 0.1), 0.0, 0.1, 1.0))
    drawn["intermediate_size_mlp"] = draw(_keep_or(base["intermediate_size_mlp"], 64, 96))
    drawn["moe_layers"] = draw(_rarely(base.get("moe_layers", []), DEFAULT))  # every layer of experts
    return drawn


@st.composite
def _glm4(draw, base, config_class):
    """GLM-4: the q/k/v bias switch, and the share of each head that rotates (adjacent pairs) with every scaling;
    now and then a share that rotates an odd number of dims (refused: a rotation turns pairs)."""
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",), rope=False))
    head_dim = drawn["head_dim"]
    if not isinstance(head_dim, int):
        head_dim = config_class.__dataclass_fields__["head_dim"].default
    if draw(st.sampled_from(("keep", "rope_parameters"))) == "rope_parameters":
        factor = draw(st.sampled_from((0.5, 1.0, 0.25, 0.75)) | _rarely(0.5, 0.3))
        options = draw(_rope_options(int(head_dim * factor)))
        theta = draw(st.sampled_from((10000.0, 100.0)))
        drawn["rope_parameters"] = {**options, "rope_theta": theta, "partial_rotary_factor": factor}
    return drawn


@st.composite
def _exaone4(draw, base, config_class):
    """EXAONE 4: the window (whose presence also makes the global layers NoPE) and which layers slide, by pattern
    or list; `head_dim`, a keyword its config keeps (no declared field) and its attention and RoPE read."""
    drawn = draw(_decoder(base, config_class, rope=False))
    layers = drawn["num_hidden_layers"]
    head_dim = draw(_keep_or(base.get("head_dim", DEFAULT), DEFAULT, 8, 16, 32))
    drawn["head_dim"] = head_dim
    if not isinstance(head_dim, int):  # left to the class: hidden / heads
        head_dim = base["hidden_size"] // drawn["num_attention_heads"]
    drawn |= draw(_rope(base, head_dim))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 30))
    # Without a window the layer types are written out: transformers derives them dividing by the pattern, which it
    # sets to 0 (and writes so: the window-less reference's pattern is 0, which a window drawn for it replaces).
    layouts = ("pattern", "explicit") if drawn["sliding_window"] is not None else ("explicit",)
    if draw(st.sampled_from(layouts)) == "explicit":
        drawn["layer_types"] = draw(_layer_types(layers))
    else:
        drawn["layer_types"] = DEFAULT
        drawn["sliding_window_pattern"] = draw(st.sampled_from((DEFAULT, 1, 2, 3)))
    return drawn


@st.composite
def _ernie4_5(draw, base, config_class):
    """ERNIE 4.5: its one bias switch (q/k/v/o and the feed-forward network's), and the rotation (adjacent pairs) with
    every scaling."""
    return draw(_decoder(base, config_class, switches=("use_bias",)))


@st.composite
def _granite(draw, base, config_class):
    """Granite: Llama's bias switches and µP's four multipliers, each kept, 1.0 (the class's default) or another
    value (the attention's also the plain head_dim^-1/2, our default); rarely one of them 0, which none converts."""
    drawn = draw(_decoder(base, config_class, switches=("attention_bias", "mlp_bias")))
    head_dim = base.get("head_dim") or base["hidden_size"] // drawn["num_attention_heads"]
    others = {
        "embedding_multiplier": (1.0, 12.0, 0.5),
        "residual_multiplier": (1.0, 0.22, 2.0),
        "attention_multiplier": (1.0, 0.0078125, head_dim**-0.5),
        "logits_scaling": (1.0, 8.0, 0.25),
    }
    for field, values in others.items():
        drawn[field] = draw(_keep_or(base.get(field, 1.0), *values))
    zeroed = draw(_rarely(None, draw(st.sampled_from(sorted(others)))))  # one field at most, so most draws convert
    if zeroed is not None:
        drawn[zeroed] = 0.0
    return drawn


@st.composite
def _hunyuan_v1_dense(draw, base, config_class):
    """Hunyuan dense: its one bias switch (q/k/v/o), `eod_token_id` (read by no module), and the rotation: Llama's
    kinds, or Hunyuan's "dynamic" with an `alpha` (a fixed NTK base; 0 reads as no alpha), as `rope_parameters` or
    as the released configs write it (legacy `rope_scaling` with "type" and YaRN-style keys no formula reads)."""
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",)))
    drawn["eod_token_id"] = draw(_keep_or(base.get("eod_token_id", 3), None, 0, base["vocab_size"] - 1))
    form = draw(st.sampled_from(("drawn", "alpha", "released")))
    if form == "drawn":
        return drawn
    for key in ("rope_scaling", "rope_theta"):
        drawn.pop(key, None)
    alpha = draw(st.sampled_from((1000.0, 1.0, 2.5, 0.0)))
    options = {"alpha": alpha, "factor": draw(st.sampled_from((1.0, 2.0)))}
    theta = draw(st.sampled_from((10000.0, 100.0, 1000000.0)))
    if form == "alpha":
        drawn["rope_parameters"] = {"rope_type": "dynamic", **options, "rope_theta": theta}
        return drawn
    unread = {"beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
    drawn |= {
        "rope_parameters": DEFAULT,
        "rope_scaling": {"type": "dynamic", **options, **unread},
        "rope_theta": theta,
    }
    return drawn


@st.composite
def _logit_scale(draw, current):
    """Cohere's logits factor: kept, Command R's 0.0625, 1.0 (none), another; now and then None (which transformers'
    forward multiplies by and fails on: refused by name)."""
    return draw(_rarely(draw(_keep_or(current, 0.0625, 1.0, 0.3)), None))


@st.composite
def _cohere_shared(draw, base, config_class):
    """What both Cohere generations' configs take: Llama's fields with the q/k/v/o bias switch, `head_dim` (a keyword
    each config keeps, no declared field, which its attention and RoPE read), the rotation (adjacent pairs) with
    every scaling, the norms' ε and the logits' factor."""
    drawn = draw(_decoder(base, config_class, switches=("attention_bias",), rope=False))
    head_dim = draw(_keep_or(base.get("head_dim", DEFAULT), DEFAULT, 8, 16, 32))
    drawn["head_dim"] = head_dim
    if not isinstance(head_dim, int):  # left to the class: hidden / heads
        head_dim = base["hidden_size"] // drawn["num_attention_heads"]
    drawn |= draw(_rope(base, head_dim))
    drawn["layer_norm_eps"] = draw(_keep_or(base.get("layer_norm_eps", 1e-5), 1e-6, 1e-3))
    drawn["logit_scale"] = draw(_logit_scale(base.get("logit_scale", 0.0625)))
    return drawn


@st.composite
def _cohere(draw, base, config_class):
    """Cohere: what both generations take (`_cohere_shared`), and the per-head q/k LayerNorms."""
    drawn = draw(_cohere_shared(base, config_class))
    drawn["use_qk_norm"] = draw(_keep_or(base.get("use_qk_norm", False), True, False))
    return drawn


@st.composite
def _cohere2(draw, base, config_class):
    """Cohere 2: what both generations take (`_cohere_shared`), the window (only the sliding layers rotate) and which
    layers slide, by pattern or list."""
    drawn = draw(_cohere_shared(base, config_class))
    drawn["sliding_window"] = draw(_keep_or(base.get("sliding_window"), None, 4, 30))
    layout = draw(st.sampled_from(("keep", "explicit", "pattern")))
    if layout == "explicit":
        drawn["layer_types"] = draw(_layer_types(drawn["num_hidden_layers"]))
    elif layout == "pattern":
        drawn["layer_types"] = DEFAULT
        drawn["sliding_window_pattern"] = draw(st.sampled_from((1, 2, 3, 4)))
    return drawn


_DRAWERS = {
    "gpt2": _gpt2,
    "llama": _llama,
    "bert": _bert,
    "bart": _bart,
    "marian": _marian,
    "t5": _t5,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "gemma3": _gemma3,
    "phi3": _phi3,
    "olmo2": _olmo2,
    "smollm3": _smollm3,
    "modernbert": _modernbert,
    "gemma2": _gemma2,
    "seed_oss": _seed_oss,
    "ministral": _ministral,
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "olmoe": _olmoe,
    "qwen3_5": _qwen3_5,
    "gpt_oss": _gpt_oss,
    "deepseek_v3": _deepseek_v3,
    "qwen3_next": _qwen3_next,
    "llama4": _llama4,
    "glm4": _glm4,
    "exaone4": _exaone4,
    "ernie4_5": _ernie4_5,
    "granite": _granite,
    "apertus": _apertus,
    "hunyuan_v1_dense": _hunyuan_v1_dense,
    "ministral3": _ministral3,
    "cohere": _cohere,
    "cohere2": _cohere2,
}


@st.composite
def drawn_references(
    draw, architecture: str, model_class: type[PreTrainedModel] | None = None, *, refusals: bool = True
) -> DrawnReference:
    """A reference of `architecture` (of `model_class`, or of any of its classes) with a config drawn around its
    tiny reference's, and the attention backend (sdpa where the class has it). Without `refusals`, the values the
    converters are known to refuse (activations they do not compute, ids outside the vocabulary, the options named
    in `_rarely`) are left out, so that most draws convert: for the properties of a converted model."""
    cases = {
        name: reference
        for name, reference in reference_cases(architecture).items()
        if model_class is None or reference.model_class is model_class
    }
    case = draw(st.sampled_from(sorted(cases)))
    model_class = cases[case].model_class
    config_class = _config_class(architecture, case)
    base = reference_fields(architecture, case)
    token = _REFUSALS.set(refusals)
    try:
        drawn = _changes(architecture, case, base, draw(_DRAWERS[architecture](base, config_class)))
    finally:
        _REFUSALS.reset(token)
    attn = draw(st.sampled_from(("eager", "sdpa"))) if model_class._supports_sdpa else "eager"
    return DrawnReference(
        architecture=architecture,
        case=case,
        model_class=model_class,
        config_class=config_class,
        fields=_apply(base, drawn),
        drawn=drawn,
        attn_implementation=attn,
        seed=zlib.crc32(case.encode()),
    )
