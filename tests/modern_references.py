"""Tiny Hugging Face reference models of today's decoder and encoder architectures (Llama 3's RoPE variants, Qwen2,
Qwen3, Mistral, Gemma 3, Phi-3, OLMo 2, SmolLM3, ModernBERT), built with random weights, never downloaded.

Each case is one HF class and one tiny config chosen so that every feature that sets the architecture apart is
exercised by a 24-token batch: sliding windows of 8 tokens, RoPE variants whose original length (16) is exceeded,
layers of both kinds where an architecture mixes them. Every parameter is moved away from its initialisation, so a
norm applied with the wrong formula (Gemma's `1 + w`), a swapped q/k norm or a forgotten bias changes the logits.

References are built once per process and shared: the models returned must not be mutated. The exception is a model
whose rotary embedding keeps state between calls (`rope_type="dynamic"` remembers the longest sequence it has seen):
each call returns a fresh copy of it, so that a test's outcome cannot depend on which tests ran before it.

Nothing here imports hf_attention (conftest.py does, so its padding helpers are not used): the references are
transformers' alone and build whatever state the library is in.
"""

import copy
import functools
from collections.abc import Callable

import torch
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    Gemma3TextForSequenceClassification,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    MistralForSequenceClassification,
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
    ModernBertModel,
    Olmo2Config,
    Olmo2ForCausalLM,
    Olmo2ForSequenceClassification,
    Phi3Config,
    Phi3ForCausalLM,
    Phi3ForSequenceClassification,
    PretrainedConfig,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2ForSequenceClassification,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3ForSequenceClassification,
    SmolLM3Config,
    SmolLM3ForCausalLM,
    SmolLM3ForSequenceClassification,
)

VOCAB = 128
PAD, BOS, EOS = 0, 1, 2  # real tokens are drawn from 3 … VOCAB-1, so no row holds a special token by chance
WINDOW = 8  # every sliding window: a 24-token batch crosses it
ORIGINAL_LENGTH = 16  # the trained length of the RoPE variants that depend on it: a 24-token batch exceeds it
LENGTH = 24  # the forward batch's width
NUM_LABELS = 3

SPECIAL = {"pad_token_id": PAD, "bos_token_id": BOS, "eos_token_id": EOS}
DECODER = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    **SPECIAL,
}
# Llama 3's RoPE variants: 2 heads of 32 dims (16 frequencies), so that each variant's piecewise formula has
# frequencies in each of its ranges (YaRN's ramp has a fractional step, llama3 has unscaled, blended and scaled ones).
LLAMA3 = {**DECODER, "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": False}
ROTARY_PAIRS = 16  # LLAMA3's head_dim / 2
THETA = 10000.0


def _longrope_factors(pairs: int) -> dict:
    """Distinct short and long factors per frequency (1.0 … 3.0), so a swapped or reversed list changes the output."""
    return {
        "short_factor": [1.0 + i / (pairs - 1) for i in range(pairs)],
        "long_factor": [1.0 + 2.0 * i / (pairs - 1) for i in range(pairs)][::-1],
    }


def _llama3(rope: dict, **overrides) -> Callable[[], PretrainedConfig]:
    return lambda: LlamaConfig(**{**LLAMA3, **overrides}, rope_parameters={"rope_theta": THETA, **rope})


def _qwen2(**extra) -> PretrainedConfig:
    # Qwen2 keeps the first max_window_layers layers full: layer 0 full, layer 1 sliding.
    return Qwen2Config(**DECODER, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1, **extra)


def _qwen3(**extra) -> PretrainedConfig:
    # head_dim 24 ≠ hidden / heads = 16: the projections are not square.
    return Qwen3Config(**DECODER, head_dim=24, **extra)


def _mistral(**extra) -> PretrainedConfig:
    return MistralConfig(**DECODER, sliding_window=WINDOW, **extra)


def _gemma3(**extra) -> PretrainedConfig:
    # Six layers: the default pattern makes layers 0-4 sliding and layer 5 global. query_pre_attn_scalar (20) is not
    # head_dim (16), so a 1/sqrt(head_dim) scaling shows. The legacy rope_scaling applies to the global layers only.
    return Gemma3TextConfig(
        **{**DECODER, "num_hidden_layers": 6, "head_dim": 16},
        sliding_window=WINDOW,
        query_pre_attn_scalar=20,
        final_logit_softcapping=30.0,
        rope_scaling={"rope_type": "linear", "factor": 2.0},
        **extra,
    )


def _phi3(**extra) -> PretrainedConfig:
    # Rotary on the first half of each head's 16 dims; the rest pass through.
    return Phi3Config(**DECODER, partial_rotary_factor=0.5, **extra)


def _phi3_longrope() -> PretrainedConfig:
    # Phi-3 reads original_max_position_embeddings from the config itself, over the one in rope_parameters.
    rope = {"rope_type": "longrope", "rope_theta": THETA, "partial_rotary_factor": 0.5, **_longrope_factors(4)}
    return Phi3Config(**DECODER, original_max_position_embeddings=ORIGINAL_LENGTH, rope_parameters=rope)


def _olmo2(**extra) -> PretrainedConfig:
    return Olmo2Config(**DECODER, **extra)


def _smollm3(**extra) -> PretrainedConfig:
    # Interval 2: layers 1 and 3 skip RoPE (NoPE), layers 0 and 2 use it.
    return SmolLM3Config(**{**DECODER, "num_hidden_layers": 4}, no_rope_layer_interval=2, **extra)


def _modernbert(**extra) -> PretrainedConfig:
    # Layer 0 global, layers 1-2 local; a local layer sees |i - j| <= local_attention // 2 = 4, exceeded by 24 tokens.
    return ModernBertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=64,
        local_attention=WINDOW,
        global_attn_every_n_layers=3,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        cls_token_id=BOS,
        sep_token_id=EOS,
        **extra,
    )


def _classifier(make: Callable[..., PretrainedConfig]) -> Callable[[], PretrainedConfig]:
    return lambda: make(num_labels=NUM_LABELS)


# name → (HF class, its config). The Llama cases differ only in config.rope_parameters.
CASES: dict[str, tuple[type[PreTrainedModel], Callable[[], PretrainedConfig]]] = {
    "llama3_default": (LlamaForCausalLM, _llama3({"rope_type": "default"})),
    "llama3_linear": (LlamaForCausalLM, _llama3({"rope_type": "linear", "factor": 2.0})),
    # dynamic NTK rescales once a call's positions pass max_position_embeddings, its original length.
    "llama3_dynamic": (
        LlamaForCausalLM,
        _llama3({"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=ORIGINAL_LENGTH),
    ),
    "llama3_yarn": (
        LlamaForCausalLM,
        _llama3({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL_LENGTH}),
    ),
    # Original length 32 (not 16): with 32-dim heads it puts one frequency in each of llama3's three ranges
    # (wavelength < 32/4 kept, 32/4 … 32/1 blended, > 32 divided by the factor). The formula ignores the input length.
    "llama3_llama3": (
        LlamaForCausalLM,
        _llama3(
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            }
        ),
    ),
    "llama3_longrope": (
        LlamaForCausalLM,
        _llama3(
            {
                "rope_type": "longrope",
                "original_max_position_embeddings": ORIGINAL_LENGTH,
                "factor": 4.0,  # max_position_embeddings / original: what transformers infers, said explicitly
                **_longrope_factors(ROTARY_PAIRS),
            }
        ),
    ),
    "qwen2": (Qwen2ForCausalLM, _qwen2),
    "qwen3": (Qwen3ForCausalLM, _qwen3),
    "mistral": (MistralForCausalLM, _mistral),
    "gemma3": (Gemma3ForCausalLM, _gemma3),
    "phi3": (Phi3ForCausalLM, _phi3),
    "phi3_longrope": (Phi3ForCausalLM, _phi3_longrope),
    "olmo2": (Olmo2ForCausalLM, _olmo2),
    "smollm3": (SmolLM3ForCausalLM, _smollm3),
    "modernbert": (ModernBertForMaskedLM, _modernbert),
    "modernbert_base": (ModernBertModel, _modernbert),
    "qwen2_classifier": (Qwen2ForSequenceClassification, _classifier(_qwen2)),
    "qwen3_classifier": (Qwen3ForSequenceClassification, _classifier(_qwen3)),
    "mistral_classifier": (MistralForSequenceClassification, _classifier(_mistral)),
    # Gemma3ForSequenceClassification takes the multimodal Gemma3Config; the text-only classifier is this one.
    "gemma3_classifier": (Gemma3TextForSequenceClassification, _classifier(_gemma3)),
    "phi3_classifier": (Phi3ForSequenceClassification, _classifier(_phi3)),
    "olmo2_classifier": (Olmo2ForSequenceClassification, _classifier(_olmo2)),
    "smollm3_classifier": (SmolLM3ForSequenceClassification, _classifier(_smollm3)),
    "modernbert_classifier": (ModernBertForSequenceClassification, _classifier(_modernbert)),
    # mean pooling (the classifier above reads the first token) and the per-token classifier
    "modernbert_mean_classifier": (
        ModernBertForSequenceClassification,
        lambda: _modernbert(num_labels=NUM_LABELS, classifier_pooling="mean"),
    ),
    "modernbert_token_classifier": (ModernBertForTokenClassification, _classifier(_modernbert)),
}

# The architecture name `to_hf` writes each case as.
ARCHITECTURE = {name: name.split("_")[0].replace("llama3", "llama") for name in CASES}
CAUSAL_LMS = [name for name, (cls, _) in CASES.items() if cls.__name__.endswith("ForCausalLM")]
ENCODERS = [name for name in CASES if name.startswith("modernbert")]
# Rotary embeddings whose frequencies depend on the longest sequence seen before (not only on the current call).
STATEFUL = {"llama3_dynamic"}


def perturb(model: PreTrainedModel, seed: int) -> PreTrainedModel:
    """Add noise to every parameter: 0.02·N(0, 1) to matrices, 0.1·N(0, 1) to vectors (norm weights that start at
    1 or, for Gemma, 0; biases that start at 0), so that each vector differs clearly from its initial value and from
    its neighbours (q_norm from k_norm, one layer's norm from the next)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.parameters():  # a tied matrix is listed (and moved) once
            scale = 0.1 if tensor.dim() == 1 else 0.02
            tensor.add_(scale * torch.randn(tensor.shape, generator=generator))
    return model


@functools.cache
def _built(name: str, attn: str) -> PreTrainedModel:
    if attn != "eager":  # the same weights behind another backend
        model = copy.deepcopy(_built(name, "eager"))
        model.set_attn_implementation(attn)
        return model
    model_class, make_config = CASES[name]
    seed = sorted(CASES).index(name)
    with torch.random.fork_rng():  # the same weights whichever test builds the case first
        torch.manual_seed(seed)
        model = model_class._from_config(make_config(), attn_implementation="eager")
    return perturb(model.float().eval(), seed)


def reference(name: str, attn: str = "eager") -> PreTrainedModel:
    """The tiny HF model of case `name` (float32, eval mode) with attention backend `attn` ("eager" or "sdpa").

    Built once per process and shared: do not mutate it (deep-copy it to train). Stateful cases (see STATEFUL) are
    copied on every call, so each caller starts from the freshly built state.
    """
    model = _built(name, attn)
    return copy.deepcopy(model) if name in STATEFUL else model


def padded_batch(name: str, length: int = LENGTH, seed: int = 0) -> dict[str, torch.Tensor]:
    """Three rows of `length` columns holding all, 3/4 and 1/2 of `length` real tokens (24: 24, 18, 12).

    Decoders are padded on the left, as `generate()` needs (their last column is real in every row, which is also
    where their sequence classifiers read). ModernBERT is padded on the right: its classifier reads the first
    column, and HF numbers its positions from the first column.
    """
    ids = torch.randint(3, VOCAB, (3, length), generator=torch.Generator().manual_seed(seed))
    real = torch.tensor([length, length * 3 // 4, length // 2])
    columns = torch.arange(length)[None]
    first_real = 0 if name in ENCODERS else length - real[:, None]  # right padding: real from column 0
    mask = ((columns >= first_real) & (columns < first_real + real[:, None])).long()
    return {"input_ids": ids.masked_fill(mask == 0, PAD), "attention_mask": mask}


def generate_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """The position_ids `generate()` gives a left-padded batch: counted from each row's first real token (padding
    gets 1, as in transformers' generation utilities)."""
    return (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)


def forward_inputs(name: str, length: int = LENGTH) -> dict[str, torch.Tensor]:
    """The forward comparison's inputs: `padded_batch`, with generate()'s position_ids for the decoders."""
    inputs = padded_batch(name, length)
    if name not in ENCODERS:
        inputs["position_ids"] = generate_positions(inputs["attention_mask"])
    return inputs


def real_positions(values: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """`values` (B, T, …) at the real tokens only, flattened to (N, …); (B, C) values (a classifier's logits) are
    returned whole. A padding position's output is not defined: HF's eager and sdpa backends already disagree there."""
    if values.dim() == 2:
        return values
    return values[attention_mask.bool()]


def max_difference_at_real(theirs: torch.Tensor, ours: torch.Tensor, attention_mask: torch.Tensor) -> float:
    """The largest |theirs - ours| over the real tokens (see `real_positions`); the shapes must agree."""
    assert theirs.shape == ours.shape, (theirs.shape, ours.shape)
    a, b = real_positions(theirs, attention_mask), real_positions(ours, attention_mask)
    return (a - b).abs().max().item()


def main_output(output) -> torch.Tensor:
    """The logits of a model with a head, the last hidden state of a base model."""
    return output.logits if "logits" in output else output.last_hidden_state
