"""The mixture-of-experts feed-forward network (hf_attention/modeling/mixture_of_experts.py) against its definition and
against transformers' MoE models (Mixtral, Qwen3-MoE, OLMoE at tiny random sizes, tests/modern_references.py).

test_modern_parity.py compares the converted models' logits, generation, save/load and export; here: the two ways the
experts run (grouped by expert) against the sum written out token by token, the routers,
the load-balancing loss and the router scores of `output_router_logits`, one training step's loss and gradients, the
export's weights as transformers writes them, and the config checks.
"""

import copy
import json

import pytest
import torch
from modern_references import forward_inputs, max_difference_at_real, reference
from transformers import AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM, OlmoeConfig, OlmoeForCausalLM
from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

from hf_attention import from_hf, to_hf
from hf_attention.architectures.tiny import DECODER
from hf_attention.modeling.cache_argument import cache_of
from hf_attention.modeling.configuration_hf_attention import HFAttentionDecoderConfig
from hf_attention.modeling.mixture_of_experts import (
    Experts,
    Routing,
    SoftmaxTopKRouter,
    SparseMoEFeedForward,
    build_mixture_of_experts,
    load_balancing_loss,
    recording_router_logits,
)
from hf_attention.modeling.modeling_hf_attention import HFAttentionForCausalLM

MOE_CASES = ["mixtral", "qwen3_moe", "olmoe", "gpt_oss", "qwen3_next", "deepseek_v3"]


def _experts(num_experts: int = 5, hidden: int = 12, width: int = 7, seed: int = 0) -> Experts:
    torch.manual_seed(seed)
    experts = Experts(num_experts=num_experts, hidden_size=hidden, intermediate_size=width, activation="silu")
    experts.init_weights(0.5)
    return experts


def _routing(tokens: int, num_experts: int, top_k: int, seed: int = 1) -> Routing:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(tokens, num_experts, generator=generator)
    weights, chosen = torch.softmax(logits, -1).topk(top_k, dim=-1)
    return Routing(logits, chosen, weights)


def _token_by_token(experts: Experts, x: torch.Tensor, routing: Routing) -> torch.Tensor:
    """y_t = Σ_j w_tj · D_e (act(G_e x_t) ⊙ U_e x_t), e = the j-th expert of token t: the definition, one token at a
    time (the test's plain reading, not the library's)."""
    rows = []
    for t in range(x.shape[0]):
        total = torch.zeros(x.shape[1])
        for e, w in sorted(zip(routing.experts[t].tolist(), routing.weights[t], strict=True)):
            gate, up = (experts.gate_up_proj[e] @ x[t]).chunk(2)
            total = total + w * (experts.down_proj[e] @ (torch.nn.functional.silu(gate) * up))
        rows.append(total)
    return torch.stack(rows)


@pytest.mark.parametrize("tokens", [1, 2, 40])
def test_the_experts_compute_the_definition(tokens):
    """A decoding step (1 or 2 tokens: 2 or 4 of 5 experts reached) and a batch (40 tokens: every expert)."""
    experts = _experts()
    x = torch.randn(tokens, 12, generator=torch.Generator().manual_seed(2))
    routing = _routing(tokens, 5, 2)
    with torch.no_grad():
        assert (experts(x, routing) - _token_by_token(experts, x, routing)).abs().max() < 1e-5


def test_experts_no_token_routed_to_an_expert_and_gradients():
    """An expert that no token chose contributes nothing and gets a zero gradient; the others get the definition's."""
    experts = _experts(num_experts=4)
    x = torch.randn(6, 12, generator=torch.Generator().manual_seed(3), requires_grad=True)
    chosen = torch.tensor([[0, 1], [1, 0], [0, 2], [2, 1], [1, 2], [0, 1]])  # expert 3 unused
    routing = Routing(torch.zeros(6, 4), chosen, torch.full((6, 2), 0.5))
    experts(x, routing).square().sum().backward()
    grouped_grads = [experts.gate_up_proj.grad.clone(), experts.down_proj.grad.clone(), x.grad.clone()]
    assert experts.gate_up_proj.grad[3].abs().max() == 0
    for tensor in (experts.gate_up_proj, experts.down_proj, x):
        tensor.grad = None
    _token_by_token(experts, x, routing).square().sum().backward()
    for ours, expected in zip(grouped_grads, (experts.gate_up_proj.grad, experts.down_proj.grad, x.grad), strict=True):
        assert (ours - expected).abs().max() <= 1e-6 * expected.abs().max()  # float32 rounding of sums ~30


@pytest.mark.parametrize("normalize", [True, False])
def test_softmax_top_k_router_is_transformers(normalize):
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

    config = type("C", (), {"num_experts_per_tok": 2, "num_experts": 6, "norm_topk_prob": normalize, "hidden_size": 8})
    theirs = Qwen3MoeTopKRouter(config)
    ours = SoftmaxTopKRouter(hidden_size=8, num_experts=6, top_k=2, normalize=normalize)
    torch.nn.init.normal_(theirs.weight)
    ours.weight.data.copy_(theirs.weight)
    x = torch.randn(10, 8, generator=torch.Generator().manual_seed(4))
    logits, weights, chosen = theirs(x)
    routing = ours(x)
    assert torch.equal(routing.logits, logits)
    assert torch.equal(routing.experts, chosen)
    assert torch.allclose(routing.weights, weights, atol=1e-7)
    assert torch.allclose(routing.weights.sum(-1), torch.ones(10)) == normalize


def test_load_balancing_loss_is_transformers():
    generator = torch.Generator().manual_seed(5)
    logits = tuple(torch.randn(12, 4, generator=generator) for _ in range(3))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    for attention_mask in (None, mask):
        theirs = load_balancing_loss_func(logits, 4, 2, attention_mask)
        ours = load_balancing_loss(logits, 4, 2, attention_mask)
        assert abs(ours.item() - theirs.item()) < 1e-6
    # uniform loads and probabilities give the minimum, k
    uniform = (torch.zeros(8, 4),)
    assert abs(load_balancing_loss(uniform, 4, 2, None).item() - 2.0) < 1e-6


def _labels(inputs: dict) -> torch.Tensor:
    """Labels of the real tokens that follow a real token: the logits at padding positions are undefined (HF's eager
    and sdpa already differ there), and a left-padded row's first real token is predicted at a padding position."""
    mask = inputs["attention_mask"]
    follows_padding = torch.cat([torch.ones_like(mask[:, :1]), mask[:, :-1]], dim=1) == 0
    return inputs["input_ids"].masked_fill((mask == 0) | follows_padding, -100)


def _with_router_outputs(name: str):
    """The tiny reference of `name` asked for its router scores (and so its auxiliary loss), with ours from it."""
    theirs = copy.deepcopy(reference(name))
    theirs.config.output_router_logits = True
    theirs.config.router_aux_loss_coef = 0.1  # large enough that the auxiliary loss moves the gradients visibly
    theirs.router_aux_loss_coef = 0.1  # transformers' heads read it from the config once, when built
    ours = from_hf(theirs)
    # transformers' DeepSeek-V3 returns the scores but adds no balancing loss: converted with a coefficient of 0
    coefficient = 0.0 if name in WITHOUT_AUX_LOSS else 0.1
    assert ours.config.output_router_logits and ours.config.router_aux_loss_coef == coefficient
    return theirs, ours


WITHOUT_AUX_LOSS = {"deepseek_v3"}


@pytest.mark.parametrize("name", MOE_CASES)
def test_router_logits_aux_loss_and_loss_are_transformers(name):
    theirs, ours = _with_router_outputs(name)
    inputs = forward_inputs(name)
    labels = _labels(inputs)
    expected = theirs(**inputs, labels=labels)
    got = ours(**inputs, labels=labels)
    if name in WITHOUT_AUX_LOSS:  # ours reports the balancing loss of these scores, and leaves it out of the loss
        assert expected.aux_loss is None and got.aux_loss is not None
    else:
        assert abs(got.aux_loss.item() - expected.aux_loss.item()) < 1e-6
    assert abs(got.loss.item() - expected.loss.item()) < 1e-5
    assert (
        len(got.router_logits)
        == len(expected.router_logits)
        == ours.config.feed_forward_types().count("mixture_of_experts")
    )
    for a, b in zip(got.router_logits, expected.router_logits, strict=True):
        assert (
            max_difference_at_real(b.view(3, -1, b.shape[-1]), a.view(3, -1, a.shape[-1]), inputs["attention_mask"])
            < 1e-5
        )
    # asked per call instead of by the config, and not asked: no scores, no auxiliary loss, the plain loss
    plain = ours(**inputs, labels=labels, output_router_logits=False)
    assert plain.aux_loss is None and plain.router_logits is None
    without = expected.loss if name in WITHOUT_AUX_LOSS else expected.loss - 0.1 * expected.aux_loss
    assert abs(plain.loss.item() - without.item()) < 1e-5


# Our parameter → theirs, for the gradients compared below (attention, router, experts, norms, embeddings).
# Per case: a layer with experts, one of its attention weights, transformers' name of its router, and whether its
# experts are held transposed (GPT-OSS).
GRADIENT_LAYERS = {
    "mixtral": (1, "q_proj", "gate", False),
    "qwen3_moe": (1, "q_proj", "gate", False),
    "olmoe": (1, "q_proj", "gate", False),
    "gpt_oss": (1, "q_proj", "router", True),
    "qwen3_next": (3, "q_proj", "gate", False),
    "deepseek_v3": (1, "q_a_proj", "gate", False),
}


def gradient_names(name: str) -> dict[str, tuple[str, bool]]:
    """Our parameter → (theirs, held transposed) for the gradients compared: attention, router, experts, norms,
    embeddings."""
    layer, attention, router, transposed = GRADIENT_LAYERS[name]
    ours, theirs = f"model.decoder.layers.{layer}", f"model.layers.{layer}"
    return {
        "model.decoder.embed_tokens.weight": ("model.embed_tokens.weight", False),
        f"{ours}.self_attn.{attention}.weight": (f"{theirs}.self_attn.{attention}.weight", False),
        f"{ours}.self_attn_norm.weight": (f"{theirs}.input_layernorm.weight", False),
        f"{ours}.mlp.router.weight": (f"{theirs}.mlp.{router}.weight", False),
        f"{ours}.mlp.experts.gate_up_proj": (f"{theirs}.mlp.experts.gate_up_proj", transposed),
        f"{ours}.mlp.experts.down_proj": (f"{theirs}.mlp.experts.down_proj", transposed),
        "model.decoder.norm.weight": ("model.norm.weight", False),
        "lm_head.weight": ("lm_head.weight", False),
    }


@pytest.mark.parametrize("name", MOE_CASES)
def test_one_training_step_has_transformers_gradients(name):
    """Loss (the auxiliary loss included) and gradients of one training step equal the reference's, and after an
    SGD step both give the same logits."""
    theirs, ours = _with_router_outputs(name)
    theirs.train()
    ours.train()
    inputs = forward_inputs(name)
    labels = _labels(inputs)
    expected = theirs(**inputs, labels=labels)
    got = ours(**inputs, labels=labels)
    assert abs(got.loss.item() - expected.loss.item()) < 1e-5
    expected.loss.backward()
    got.loss.backward()
    ours_params, their_params = dict(ours.named_parameters()), dict(theirs.named_parameters())
    names = gradient_names(name)
    for mine, (other, transposed) in names.items():
        a, b = ours_params[mine].grad, their_params[other].grad
        b = b.transpose(1, 2) if transposed else b
        assert a is not None and b is not None, mine
        assert (a - b).abs().max() <= 1e-5 * max(1.0, b.abs().max().item()), mine
    router = next(mine for mine in names if mine.endswith("mlp.router.weight"))
    assert ours_params[router].grad.abs().max() > 0
    with torch.no_grad():
        for model in (ours, theirs):
            for parameter in model.parameters():
                if parameter.grad is not None:
                    parameter -= 0.1 * parameter.grad
    ours.eval()
    theirs.eval()
    inputs = forward_inputs(name)
    with torch.no_grad():
        difference = max_difference_at_real(theirs(**inputs).logits, ours(**inputs).logits, inputs["attention_mask"])
    assert difference < 1e-4


def test_generation_with_router_outputs_in_the_config_gives_the_references_tokens():
    """With output_router_logits set in the config, every decoding step scores its new tokens' routing (the mask
    also covers the cached tokens: transformers' own generate() fails on a padded batch there); the tokens are the
    reference's."""
    theirs, ours = _with_router_outputs("mixtral")
    prompt = forward_inputs("mixtral", length=10)
    prompt.pop("position_ids")
    settings = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": 0}
    with pytest.raises(RuntimeError):  # the reference's failure this handles; when it is fixed, compare directly
        theirs.generate(**prompt, **settings)
    expected = reference("mixtral").generate(**prompt, **settings)
    assert torch.equal(ours.generate(**prompt, **settings), expected)
    step = ours(**prompt, use_cache=True)
    mask = torch.cat([prompt["attention_mask"], torch.ones(3, 1, dtype=torch.long)], dim=1)
    last = ours(input_ids=expected[:, 10:11], attention_mask=mask, cache=cache_of(step))
    assert last.aux_loss is not None and len(last.router_logits) == 2 and last.router_logits[0].shape == (3, 4)


def test_export_writes_the_references_own_weight_files(tmp_path):
    """An export is the reference class's own save_pretrained: one tensor per expert on disk, as transformers'
    Mixtral checkpoints hold them, and AutoModelForCausalLM reads it back with the same logits."""
    from safetensors import safe_open

    ours = from_hf(reference("mixtral"))
    exported = to_hf(ours, "mixtral")
    assert type(exported) is MixtralForCausalLM
    exported.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as saved:
        keys = set(saved.keys())
    assert {f"model.layers.1.block_sparse_moe.experts.3.{name}.weight" for name in ("w1", "w2", "w3")} <= keys
    assert not any(key.endswith("experts.gate_up_proj") for key in keys)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    inputs = forward_inputs("mixtral")
    with torch.no_grad():
        mask = inputs["attention_mask"]
        assert max_difference_at_real(exported(**inputs).logits, reloaded(**inputs).logits, mask) < 1e-6
        difference = max_difference_at_real(ours(**inputs).logits, reloaded(**inputs).logits, inputs["attention_mask"])
    assert difference < 1e-5


def _moe(**overrides) -> HFAttentionDecoderConfig:
    fields = {
        "vocab_size": 64,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 40,
        "hidden_act": "swiglu",
        "num_experts": 4,
        "num_experts_per_tok": 2,
    }
    return HFAttentionDecoderConfig(**{**fields, **overrides})


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"num_experts_per_tok": 5}, "num_experts_per_tok=5"),
        ({"num_experts": 0}, "num_experts=0"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ({"mlp_only_layers": [2]}, "mlp_only_layers=[2]"),
        ({"mlp_only_layers": [0, 0]}, "mlp_only_layers"),
        ({"num_experts": None, "mlp_only_layers": [0]}, "num_experts=None"),
        ({"router": "sigmoid"}, "router='sigmoid'"),
        ({"norm_topk_prob": "yes"}, "norm_topk_prob"),
        ({"router_aux_loss_coef": -1.0}, "router_aux_loss_coef=-1.0"),
        # the new routers' knobs: each set only with a router that reads it, the groups' numbers consistent
        ({"n_group": 2}, r"n_group=2 is read by the router 'sigmoid_group_top_k' only, and router='softmax_top_k'"),
        ({"router": "top_k_softmax", "norm_topk_prob": False}, "norm_topk_prob=False is read by the routers"),
        ({"router": "sigmoid_group_top_k", "n_group": 3}, "n_group=3 must divide num_experts=4"),
        ({"router": "sigmoid_group_top_k", "n_group": 2, "topk_group": 3}, "topk_group=3 keeps more groups"),
        ({"router": "sigmoid_group_top_k", "n_group": 4, "topk_group": 2}, "n_group=4 makes groups of 1 expert"),
        ({"router": "sigmoid_group_top_k", "num_experts_per_tok": 3, "n_group": 2}, "num_experts_per_tok=3 chooses"),
        ({"routed_scaling_factor": 0.0}, "routed_scaling_factor=0.0"),
        ({"swiglu_limit": -1.0}, "swiglu_limit=-1.0"),
        ({"hidden_act": "geglu", "swiglu_alpha": 1.702}, "swiglu_alpha=1.702 makes GPT-OSS's SwiGLU experts"),
        ({"shared_expert_gate": True}, "shared_expert_gate=True gates the shared expert"),
        ({"shared_expert_intermediate_size": 0}, "shared_expert_intermediate_size=0"),
        ({"router": "top_k_sigmoid"}, "router='top_k_sigmoid'"),
    ],
)
def test_bad_experts_knobs_are_refused_by_name(overrides, named):
    with pytest.raises((ValueError, TypeError), match=named.replace("[", r"\[").replace("]", r"\]")):
        _moe(**overrides)


def test_a_model_with_experts_trains_from_scratch_and_reloads_exactly(tmp_path):
    config = _moe(mlp_only_layers=[0], moe_intermediate_size=24, output_router_logits=True)
    assert config.feed_forward_types() == ["dense", "mixture_of_experts"]
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.randint(3, 64, (4, 16), generator=torch.Generator().manual_seed(0))
    losses = []
    for _ in range(60):
        output = model(input_ids=ids, labels=ids)
        output.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(output.loss.item())
    assert losses[-1] < 0.75 * losses[0]
    assert output.aux_loss is not None and output.aux_loss.item() >= 2.0 - 1e-4  # ≥ k, its minimum
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    model.eval()
    with torch.no_grad():
        assert torch.equal(reloaded(input_ids=ids).logits, model(input_ids=ids).logits)


def test_olmoe_clip_qkv_and_mixtral_jitter_are_refused_by_name():
    clipped = OlmoeForCausalLM(OlmoeConfig(**DECODER, num_experts=4, num_experts_per_tok=2, clip_qkv=3.0))
    with pytest.raises(ValueError, match=r"OlmoeConfig.clip_qkv=3.0"):
        from_hf(clipped)
    jittery = MixtralForCausalLM(MixtralConfig(**DECODER, num_local_experts=4, router_jitter_noise=0.1))
    with pytest.raises(ValueError, match=r"MixtralConfig.router_jitter_noise=0.1.*set config.router_jitter_noise=0"):
        from_hf(jittery)


def test_a_dense_model_is_not_exported_as_a_mixture_of_experts():
    mixture = from_hf(reference("mixtral"))
    dense = HFAttentionForCausalLM(HFAttentionDecoderConfig(**{**mixture.config.to_dict(), "num_experts": None}))
    with pytest.raises(ValueError, match="num_experts=None"):
        to_hf(dense, "mixtral")
    assert type(to_hf(dense, "auto")).__name__ == "MistralForCausalLM"
    unnormalized = HFAttentionForCausalLM(
        HFAttentionDecoderConfig(**{**mixture.config.to_dict(), "norm_topk_prob": False})
    )
    with pytest.raises(ValueError, match=r"mixtral: norm_topk_prob=False \(mixtral needs True\)"):
        to_hf(unnormalized, "auto")  # Qwen3-MoE and OLMoE would hold it, with their QK-norms
    unnormalized.config.qk_norm = "head"
    unnormalized = HFAttentionForCausalLM(unnormalized.config)
    assert type(to_hf(unnormalized, "auto")).__name__ == "Qwen3MoeForCausalLM"


# ---------------------------------------------------------------------------------------------------------------------
# The routers, experts and shared experts of 2025's models (GPT-OSS, DeepSeek-V3 / GLM-4.5, Qwen2-MoE / Qwen3-Next,
# Llama 4): our mixture of experts, built from the config, against transformers' own MoE block at tiny random sizes,
# every parameter and buffer drawn at random, on a batch (2, 9) and a decoding step (1, 1).

HIDDEN = 16


def _ours(**knobs) -> SparseMoEFeedForward:
    config = _moe(hidden_size=HIDDEN, num_attention_heads=2, intermediate_size=24, **knobs)
    return build_mixture_of_experts(config, 0)


def _randomized(module: torch.nn.Module, seed: int = 0, std: float = 0.5) -> torch.nn.Module:
    """Every parameter and buffer of `module` drawn from N(0, std²) (biases, the correction bias included)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in (*module.parameters(), *module.buffers()):
            tensor.copy_(std * torch.randn(tensor.shape, generator=generator))
    return module.eval()


def _eager(config):
    config._experts_implementation = "eager"  # transformers' own loop over the experts
    return config


def _copy_into(ours: torch.nn.Module, theirs: torch.nn.Module, names: dict[str, tuple[str, bool]]) -> None:
    """Our tensor → (theirs, transposed (1, 2)): the mapping a converter writes. Every tensor of both is mapped, and a
    transposed one is a view of theirs (the export writes through it)."""
    their_tensors = theirs.state_dict()
    assert {name for name, _ in names.values()} == set(their_tensors)
    mapped = {}
    for mine, (other, transposed) in names.items():
        tensor = their_tensors[other].transpose(1, 2) if transposed else their_tensors[other]
        assert tensor.data_ptr() == their_tensors[other].data_ptr()
        mapped[mine] = tensor
    ours.load_state_dict(mapped, strict=True)


def _assert_block_is_transformers(ours, theirs, their_logits, unpack=lambda output: output) -> float:
    """Our block's output and recorded router scores against theirs, for a batch and a decoding step; returns the
    largest difference."""
    worst = 0.0
    for shape in ((2, 9), (1, 1)):
        x = torch.randn(*shape, HIDDEN, generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            expected = unpack(theirs(x)).reshape(x.shape)
            with recording_router_logits(ours) as recorded:
                got = ours(x)
            worst = max(worst, (got - expected).abs().max().item())
            assert len(recorded) == 1 and torch.equal(recorded[0], their_logits(x.reshape(-1, HIDDEN)))
    assert worst <= 1e-5, worst
    return worst


# GPT-OSS: a router with a bias, the k best scores then a softmax over them; experts with biases and the clamped SwiGLU
# (up + 1) · gate · σ(1.702 · gate), gate and up interleaved; L = 0.5 so that the clamps act.
def _gpt_oss_pair():
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP

    config = GptOssConfig(
        hidden_size=HIDDEN, intermediate_size=12, num_local_experts=6, num_experts_per_tok=2, swiglu_limit=0.5
    )
    theirs = _randomized(GptOssMLP(_eager(config)))
    ours = _ours(
        num_experts=6,
        moe_intermediate_size=12,
        router="top_k_softmax",
        router_bias=True,
        expert_bias=True,
        swiglu_limit=0.5,
        swiglu_alpha=config.swiglu_alpha,
    )
    _copy_into(
        ours,
        theirs,
        {
            "router.weight": ("router.weight", False),
            "router.bias": ("router.bias", False),
            "experts.gate_up_proj": ("experts.gate_up_proj", True),
            "experts.gate_up_proj_bias": ("experts.gate_up_proj_bias", False),
            "experts.down_proj": ("experts.down_proj", True),
            "experts.down_proj_bias": ("experts.down_proj_bias", False),
        },
    )
    return ours.eval(), theirs


def test_gpt_oss_mlp_is_transformers():
    ours, theirs = _gpt_oss_pair()
    _assert_block_is_transformers(ours, theirs, lambda x: theirs.router(x)[0], unpack=lambda output: output[0])
    x = torch.randn(18, HIDDEN, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        _, scores, chosen = theirs.router(x)
        routing = ours.router(x)
        assert torch.equal(routing.experts, chosen) and torch.allclose(routing.weights, scores, atol=1e-7)
        # the clamps act: some gates above L, some ups outside [-L, L] (gate and up interleaved in theirs)
        gate_up = x @ theirs.experts.gate_up_proj[0] + theirs.experts.gate_up_proj_bias[0]
        assert (gate_up[:, ::2] > 0.5).any() and (gate_up[:, 1::2].abs() > 0.5).any()


def test_gpt_oss_experts_start_as_transformers_starts_them():
    """Biases of the experts start at zero, the router's bias from N(0, std²), as GPT-OSS's `_init_weights`."""
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(
        _moe(router="top_k_softmax", router_bias=True, expert_bias=True, swiglu_limit=7.0, swiglu_alpha=1.702)
    )
    moe = model.model.decoder.layers[0].mlp
    assert moe.experts.gate_up_proj_bias.abs().max() == 0 and moe.experts.down_proj_bias.abs().max() == 0
    assert 0 < moe.router.bias.std() < 0.1 and 0 < moe.experts.gate_up_proj.std() < 0.1


# DeepSeek-V3 and GLM-4.5: σ scores in float32, a correction bias (a buffer) in the choice, the topk_group best of
# n_group groups, weights normalised and scaled; a plain shared expert of n_shared_experts × moe_intermediate_size.
def _deepseek_pair(name: str):
    from transformers import DeepseekV3Config, Glm4MoeConfig
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeMoE

    config_class, block = {"deepseek_v3": (DeepseekV3Config, DeepseekV3MoE), "glm4_moe": (Glm4MoeConfig, Glm4MoeMoE)}[
        name
    ]
    config = config_class(
        hidden_size=HIDDEN,
        moe_intermediate_size=12,
        n_routed_experts=8,
        num_experts_per_tok=3,
        n_group=4,
        topk_group=2,
        n_shared_experts=2,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
    )
    theirs = _randomized(block(_eager(config)), std=0.3)
    ours = _ours(
        num_experts=8,
        num_experts_per_tok=3,
        moe_intermediate_size=12,
        router="sigmoid_group_top_k",
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.5,
        shared_expert_intermediate_size=2 * 12,
    )
    shared = {
        f"shared_expert.{p}_proj.weight": (f"shared_experts.{p}_proj.weight", False) for p in ("gate", "up", "down")
    }
    _copy_into(
        ours,
        theirs,
        {
            "router.weight": ("gate.weight", False),
            "router.e_score_correction_bias": ("gate.e_score_correction_bias", False),
            "experts.gate_up_proj": ("experts.gate_up_proj", False),
            "experts.down_proj": ("experts.down_proj", False),
            **shared,
        },
    )
    return ours.eval(), theirs


@pytest.mark.parametrize("name", ["deepseek_v3", "glm4_moe"])
def test_deepseek_v3_moe_is_transformers(name):
    ours, theirs = _deepseek_pair(name)
    _assert_block_is_transformers(ours, theirs, lambda x: theirs.gate(x)[0])
    x = torch.randn(18, HIDDEN, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        _, weights, chosen = theirs.gate(x)
        routing = ours.router(x)
        assert torch.equal(routing.experts.sort(-1).values, chosen.sort(-1).values)
        assert torch.allclose(routing.weights.sum(-1), torch.full((18,), 2.5))  # normalised, then scaled
        # the correction bias and the group limit both change the choice of these tokens
        bias = ours.router.e_score_correction_bias.clone()
        ours.router.e_score_correction_bias.zero_()
        unbiased = ours.router(x).experts.sort(-1).values
        ours.router.e_score_correction_bias.copy_(bias)
        ours.router.topk_group = 4
        ungrouped = ours.router(x).experts.sort(-1).values
        ours.router.topk_group = 2
    assert not torch.equal(unbiased, chosen.sort(-1).values) and not torch.equal(ungrouped, chosen.sort(-1).values)
    # the bias is a buffer saved with the weights (transformers' too), and the loss does not train it
    assert (
        "router.e_score_correction_bias" in ours.state_dict() and "gate.e_score_correction_bias" in theirs.state_dict()
    )
    assert "router.e_score_correction_bias" not in dict(ours.named_parameters())


def test_a_deepseek_v3_loaded_in_bf16_keeps_its_router_in_float32_as_transformers_does(tmp_path):
    """transformers keeps DeepSeek-V3's router weight and balancing bias float32 when the checkpoint loads in bf16
    (near-tied sigmoid scores choose the experts); ours keeps the same ones, and only those."""
    theirs = reference("deepseek_v3")
    theirs.save_pretrained(tmp_path / "theirs")
    from_hf(theirs).save_pretrained(tmp_path / "ours")
    kept = {}
    for side in ("theirs", "ours"):
        model = AutoModelForCausalLM.from_pretrained(tmp_path / side, dtype=torch.bfloat16)
        kept[side] = {name for name, t in model.state_dict().items() if t.dtype == torch.float32}
    # what the installed release keeps (5.23: the balancing bias; 5.25: the router's weight too), ours by our names
    assert {n.split(".mlp.")[-1] for n in kept["theirs"]} >= {"gate.e_score_correction_bias"}
    assert {
        n.replace(".mlp.gate.", ".mlp.router.").replace("model.layers.", "model.decoder.layers.")
        for n in kept["theirs"]
    } == kept["ours"]
    # a softmax router (Mixtral) follows the checkpoint's dtype, in transformers as in ours
    from_hf(reference("mixtral")).save_pretrained(tmp_path / "mixtral")
    mixtral = AutoModelForCausalLM.from_pretrained(tmp_path / "mixtral", dtype=torch.bfloat16)
    assert all(t.dtype == torch.bfloat16 for t in mixtral.state_dict().values())


# Qwen2-MoE and Qwen3-Next: softmax top-k routing and a shared expert whose output is gated by σ(x · w), w: E → 1.
@pytest.mark.parametrize("name", ["qwen2_moe", "qwen3_next"])
def test_sigmoid_gated_shared_expert_is_transformers(name):
    from transformers import Qwen2MoeConfig, Qwen3NextConfig
    from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextSparseMoeBlock

    config_class, block = {
        "qwen2_moe": (Qwen2MoeConfig, Qwen2MoeSparseMoeBlock),
        "qwen3_next": (Qwen3NextConfig, Qwen3NextSparseMoeBlock),
    }[name]
    config = config_class(
        hidden_size=HIDDEN,
        moe_intermediate_size=12,
        shared_expert_intermediate_size=20,
        num_experts=6,
        num_experts_per_tok=2,
        norm_topk_prob=name == "qwen3_next",
    )
    theirs = _randomized(block(_eager(config)))
    ours = _ours(
        num_experts=6,
        moe_intermediate_size=12,
        norm_topk_prob=config.norm_topk_prob,
        shared_expert_intermediate_size=20,
        shared_expert_gate=True,
    )
    shared = {
        f"shared_expert.{p}_proj.weight": (f"shared_expert.{p}_proj.weight", False) for p in ("gate", "up", "down")
    }
    _copy_into(
        ours,
        theirs,
        {
            "router.weight": ("gate.weight", False),
            "experts.gate_up_proj": ("experts.gate_up_proj", False),
            "experts.down_proj": ("experts.down_proj", False),
            "shared_expert_gate.weight": ("shared_expert_gate.weight", False),
            **shared,
        },
    )
    _assert_block_is_transformers(ours.eval(), theirs, lambda x: theirs.gate(x)[0])


# Llama 4: the k best scores (k = 1 in the released models), σ(score) scaling the chosen expert's input, experts held
# (X, E, 2F) with [gate | up] halves, and a plain shared expert.
@pytest.mark.parametrize("top_k", [1, 2])
def test_llama4_text_moe_is_transformers(top_k):
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextMoe

    config = Llama4TextConfig(hidden_size=HIDDEN, intermediate_size=12, num_local_experts=5, num_experts_per_tok=top_k)
    theirs = _randomized(Llama4TextMoe(config))
    ours = _ours(
        num_experts=5,
        num_experts_per_tok=top_k,
        moe_intermediate_size=12,
        router="top_k_sigmoid_input",
        shared_expert_intermediate_size=12,
    )
    shared = {
        f"shared_expert.{p}_proj.weight": (f"shared_expert.{p}_proj.weight", False) for p in ("gate", "up", "down")
    }
    _copy_into(
        ours,
        theirs,
        {
            "router.weight": ("router.weight", False),
            "experts.gate_up_proj": ("experts.gate_up_proj", True),
            "experts.down_proj": ("experts.down_proj", True),
            **shared,
        },
    )
    _assert_block_is_transformers(ours.eval(), theirs, lambda x: theirs.router(x)[1], unpack=lambda output: output[0])


def test_clamped_swiglu_experts_are_deepseek_v4s():
    """swiglu_limit without GPT-OSS's unit: silu(min(gate, L)) · clamp(up, −L, L) of [gate | up] halves (DeepSeek-V4,
    GLM-5), against DeepSeek-V4's experts with the same routing."""
    from transformers import DeepseekV4Config
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4Experts

    theirs = _randomized(
        DeepseekV4Experts(_eager(DeepseekV4Config(hidden_size=HIDDEN, intermediate_size=12, num_local_experts=5)))
    )
    theirs.limit = 0.5  # the config's default (10) would not act at these sizes
    ours = Experts(num_experts=5, hidden_size=HIDDEN, intermediate_size=12, activation="silu", swiglu_limit=0.5)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(18, HIDDEN, generator=torch.Generator().manual_seed(7))
    routing = _routing(18, 5, 2)
    with torch.no_grad():
        expected = theirs(x, routing.experts, routing.weights)
        assert (expected - _unclamped(ours)(x, routing)).abs().max() > 1e-3  # the clamp acts
        assert (ours(x, routing) - expected).abs().max() <= 1e-5


def _unclamped(experts: Experts) -> Experts:
    copied = copy.deepcopy(experts)
    copied.swiglu_limit = None
    return copied


# Each router trained from scratch in a model of ours: the loss falls in 20 steps, the scores of every sparse layer
# come back with the load-balancing loss (transformers' function on them), and the saved model reloads exactly.
NEW_ROUTERS = {
    "gpt_oss": {
        "router": "top_k_softmax",
        "router_bias": True,
        "expert_bias": True,
        "swiglu_limit": 7.0,
        "swiglu_alpha": 1.702,
    },
    "deepseek_v3": {
        "num_experts": 8,
        "router": "sigmoid_group_top_k",
        "n_group": 4,
        "topk_group": 2,
        "routed_scaling_factor": 2.5,
        "shared_expert_intermediate_size": 16,
        "mlp_only_layers": [0],
    },
    "qwen3_next": {"shared_expert_intermediate_size": 16, "shared_expert_gate": True},
    "llama4": {"router": "top_k_sigmoid_input", "num_experts_per_tok": 1, "shared_expert_intermediate_size": 24},
}


@pytest.mark.parametrize("name", list(NEW_ROUTERS))
def test_a_model_with_each_new_router_trains_and_reloads_exactly(name, tmp_path):
    config = _moe(moe_intermediate_size=24, output_router_logits=True, **NEW_ROUTERS[name])
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.randint(3, 64, (4, 16), generator=torch.Generator().manual_seed(0))
    losses = []
    for _ in range(20):
        output = model(input_ids=ids, labels=ids)
        output.loss.backward()
        if not losses:
            for router in (layer.mlp.router for layer in model.model.decoder.layers if hasattr(layer.mlp, "router")):
                assert router.weight.grad.abs().max() > 0
        optimizer.step()
        optimizer.zero_grad()
        losses.append(output.loss.item())
    assert losses[-1] < 0.8 * losses[0], losses
    sparse = config.feed_forward_types().count("mixture_of_experts")
    assert len(output.router_logits) == sparse and output.router_logits[0].shape == (64, config.num_experts)
    expected = load_balancing_loss_func(output.router_logits, config.num_experts, config.num_experts_per_tok, None)
    assert abs(output.aux_loss.item() - expected.item()) < 1e-6
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    model.eval()
    with torch.no_grad():
        assert torch.equal(reloaded(input_ids=ids).logits, model(input_ids=ids).logits)
    if name == "deepseek_v3":  # the correction bias is saved, and no gradient moves it
        bias = "model.decoder.layers.1.mlp.router.e_score_correction_bias"
        assert bias in reloaded.state_dict() and reloaded.state_dict()[bias].abs().max() == 0


def test_a_new_router_is_not_exported_as_mixtral():
    """A knob of the new routers that Mixtral lacks stands in the way of the export, by name."""
    mixture = from_hf(reference("mixtral"))
    fields = {**mixture.config.to_dict(), "router": "top_k_softmax"}
    with pytest.raises(ValueError, match=r"router='top_k_softmax' \(mixtral needs 'softmax_top_k'\)"):
        to_hf(HFAttentionForCausalLM(HFAttentionDecoderConfig(**fields)), "mixtral")


def test_exports_state_their_routers_and_expert_layers_as_the_released_configs_do(tmp_path):
    """Fields transformers' classes do not read but the released configs carry and llama.cpp's converter reads:
    DeepSeek-V3's router (without them llama.cpp routes by softmax), Llama 4's step of expert layers (llama.cpp reads
    only the step)."""
    from hf_attention.architectures.llama4 import moe_step

    exported = to_hf(from_hf(reference("deepseek_v3")), "deepseek_v3")
    exported.save_pretrained(tmp_path / "deepseek")
    written = json.loads((tmp_path / "deepseek" / "config.json").read_text())
    assert (written["scoring_func"], written["topk_method"]) == ("sigmoid", "noaux_tc")
    exported = to_hf(from_hf(reference("llama4_moe")), "llama4")  # experts in layers 1 and 3 of 4: Maverick's
    assert exported.config.moe_layers == [1, 3] and exported.config.interleave_moe_layer_step == 2
    assert moe_step([0, 1, 2, 3], 4) == 1 and moe_step([2, 5], 6) == 3
    assert moe_step([0, 2], 4) == 1  # no step gives it: the list alone says it (transformers reads the list)
