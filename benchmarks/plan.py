"""What a benchmark run measures: the `Plan` and its presets (`full`, `quick`, `tiny` for the CPU; `gpu` and its
CPU-sized twin `gpu-tiny`)."""

import dataclasses

# Qwen3 and Gemma 3 at the Llama row's width (d_model 256, 4 heads, ffn 1024), each with what sets its architecture
# apart at the shapes its checkpoints use. Qwen3: grouped key/value heads and a head_dim of its own, wider than
# d_model / heads (Qwen3-0.6B: 16 heads of 128 on a d_model of 1024), so the projections are not square and the
# per-head QK-norm runs on 128-wide heads. Gemma 3: six layers, so that its pattern of five sliding layers to one
# global shows once; one key/value head (Gemma 3 1B); a head_dim of its own again; a sliding window of 64, below
# the training length (128) and the decoded length (32 + 64), so that sliding masks and the window-bounded cache
# are exercised. `query_pre_attn_scalar` and `final_logit_softcapping` are set where the reference is built
# (`benchmarks.models`).
MODERN_SHAPES = {
    "qwen3": {"kv_heads": 2, "head_dim": 128},
    # Qwen3-MoE's shape at this width: 8 experts of a quarter of the dense width, 2 per token (128 and 8 in 30B-A3B)
    "qwen3_moe": {"kv_heads": 2, "head_dim": 128, "experts": 8, "experts_per_token": 2},
    "gemma3": {"layers": 6, "kv_heads": 1, "head_dim": 128, "sliding_window": 64},
    # The mixtures of experts of 2025, 8 experts of a quarter of the dense width, 2 per token, each with the rest of
    # its structure set where its reference is built (`benchmarks.models`). GPT-OSS: sliding and full layers
    # alternating with the window of 64 (gpt-oss: 128), 2 key/value heads, heads of 64. DeepSeek-V3: latent attention,
    # query/key heads of 96 of which 32 rotate (DeepSeek-V3: 192, 64), a key/value latent of 64 and a query latent of
    # 192, three times as wide (DeepSeek-V3: 512 and 1536). Qwen3-Next: three Gated DeltaNet layers to one gated
    # attention layer, whose heads are 128 wide with 2 key/value heads (Qwen3-Next: 256, 2).
    "gpt_oss": {"kv_heads": 2, "head_dim": 64, "sliding_window": 64, "experts": 8, "experts_per_token": 2},
    "deepseek_v3": {
        "head_dim": 96,
        "qk_rope_head_dim": 32,
        "q_lora_rank": 192,
        "kv_lora_rank": 64,
        "experts": 8,
        "experts_per_token": 2,
    },
    "qwen3_next": {"kv_heads": 2, "head_dim": 128, "experts": 8, "experts_per_token": 2},
}

SECTIONS = (
    "ceiling",
    "train",
    "forward",
    "generate",
    "generate_batch",
    "decode_profile",
    "length",
    "long_attention",
    "flex_train",
    "memory",
    "window_cache",
    "state_cache",
)


@dataclasses.dataclass
class Plan:
    """What to run. `full` is the reference run; `quick` and `tiny` (the tests) shrink it.

    Model dimensions (`vocab` … `ffn`, `kv_heads`: Llama's key/value heads, None = `heads`) and the training batch
    (`batch` × `seq`) are shared by every section, except where `family_shapes` gives a family its own dimensions
    (`for_family`); `head_dim` (None = `hidden` / `heads`), `sliding_window` (the window of Gemma 3's sliding layers,
    and of every layer of the window_cache section's Mistral), `experts` and the latent attention's ranks are read
    only by the architectures that have them, which is why they are None here and set in `family_shapes`. The other
    fields belong to the section named by their prefix. `gen_rounds`: see `benchmarks.generate` for why the full run
    takes 24.
    """

    name: str = "full"
    vocab: int = 8000
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    ffn: int = 1024
    kv_heads: int | None = None
    head_dim: int | None = None
    sliding_window: int | None = None
    experts: int | None = None  # a mixture of experts of this many (and `experts_per_token` per token), or none
    experts_per_token: int = 2
    q_lora_rank: int | None = None  # latent attention (DeepSeek-V3): the query latent's width, ...
    kv_lora_rank: int | None = None  # ... the key/value latent's, ...
    qk_rope_head_dim: int | None = None  # ... and the rotated part of each query/key head of `head_dim`
    family_shapes: dict = dataclasses.field(default_factory=lambda: {f: dict(s) for f, s in MODERN_SHAPES.items()})
    batch: int = 8
    seq: int = 128
    warmup: int = 2
    train_families: tuple = (
        "gpt2",
        "llama",
        "bert",
        "bart",
        "t5",
        "qwen3",
        "gemma3",
        "qwen3_moe",
        "gpt_oss",
        "deepseek_v3",
        "qwen3_next",
    )
    train_dtypes: tuple = ("fp32", "bf16")
    train_rounds: int = 24
    train_compiled: tuple = ()  # families whose training step is also timed through torch.compile (ours and HF's)
    train_liger: bool = False  # also HF with liger-kernel's Triton kernels (CUDA, where liger-kernel is installed)
    forward_batches: tuple = (1, 8)
    forward_rounds: int = 10
    gen_families: tuple = (
        "gpt2",
        "llama",
        "bart",
        "t5",
        "qwen3",
        "gemma3",
        "qwen3_moe",
        "gpt_oss",
        "deepseek_v3",
        "qwen3_next",
    )
    gen_batches: tuple = (1, 8)
    gen_modes: tuple = ("greedy", "beam4", "sample")
    gen_prompt: int = 32
    gen_new: int = 64
    gen_rounds: int = 24
    gen_uncached: bool = True
    gen_compiled: tuple = ("llama", "bart")  # our static-cache compiled path (tens of s to compile)
    gen_compiled_batches: tuple = (1,)
    gen_cuda_graphs: bool = False  # also our step replayed as a CUDA graph and HF's own compiled static cache
    batch_requests: int = 64  # generate_batch: this many requests of prompt lengths spread over batch_prompts
    batch_prompts: tuple = (8, 512)
    batch_new: int = 64
    batch_rounds: int = 3
    batch_scheduler: dict | None = None  # ContinuousBatchingConfig fields; None: transformers' defaults
    decode_rounds: int = 8
    length_seqs: tuple = (128, 512, 1024, 2048, 4096)
    length_tokens: int = 4096
    length_rounds: int = 2
    length_variants: tuple = ("sdpa", "eager", "sdpa+checkpointing")
    long_lengths: tuple = (4096, 8192, 16384)
    long_cases: tuple = ("causal", "documents", "alibi")
    long_documents: int = 16
    long_layers: int = 2
    long_rounds: int = 3
    long_memory: bool = True  # peak memory per figure (a fresh process each, which compiles FlexAttention again)
    flex_documents: int = 16  # flex_train: a training step on this many packed documents of flex_lengths tokens
    flex_lengths: tuple = (1024, 896, 1152)  # each a new total length: FlexAttention must not compile again
    flex_layers: int = 2
    flex_rounds: int = 5
    memory_families: tuple = ("gpt2", "llama", "qwen3", "gemma3")
    memory_vocabs: tuple = (8000, 32000, 128000)
    ceiling_size: int = 2048
    ceiling_rounds: int = 8
    window_size: int = 256  # window_cache: a Mistral-shaped decoder with this window on every layer ...
    window_prompt: int = 16  # ... prompted with this many tokens (batch 1) ...
    window_new: int = 4096  # ... decodes this many greedily, windowed and with the window removed
    state_prompt: int = 16  # state_cache: tiny latent-attention, Gated DeltaNet and Llama decoders, prompted with this
    state_new: int = 4096  # many tokens (batch 1), decode this many greedily, ours and HF's
    sections: tuple = tuple(s for s in SECTIONS if s not in ("generate_batch", "flex_train"))

    def for_family(self, family: str) -> "Plan":
        """This plan with `family`'s own dimensions (`family_shapes`), if it has any."""
        return dataclasses.replace(self, **self.family_shapes.get(family, {}))

    @property
    def max_positions(self) -> int:
        """Positions the models must hold: the training sequence and the longest generation (at least 512)."""
        served = max(self.batch_prompts) + self.batch_new if "generate_batch" in self.sections else 0
        return max(512, self.seq, self.gen_prompt + self.gen_new, served)


PRESETS = {
    "full": Plan(),
    "quick": Plan(
        name="quick",
        train_families=("gpt2", "bart"),
        train_rounds=3,
        warmup=1,
        forward_batches=(1,),
        forward_rounds=3,
        gen_families=("llama",),
        gen_batches=(1,),
        gen_rounds=4,
        gen_uncached=False,
        gen_compiled=(),
        decode_rounds=2,
        length_seqs=(128, 512, 1024),
        length_tokens=1024,
        length_rounds=2,
        length_variants=("sdpa", "eager"),
        long_lengths=(2048, 4096),
        long_rounds=2,
        memory_families=("llama",),
        memory_vocabs=(8000, 32000),
        ceiling_size=1024,
        ceiling_rounds=4,
        window_new=1024,
        state_new=1024,
    ),
    "tiny": Plan(
        name="tiny",
        vocab=99,
        hidden=32,
        layers=1,
        heads=4,
        ffn=64,
        batch=2,
        seq=16,
        warmup=1,
        train_families=("gpt2", "bert", "t5"),
        train_rounds=1,
        forward_batches=(1,),
        forward_rounds=1,
        gen_families=("gpt2", "llama", "bart", "t5"),
        gen_batches=(1, 2),
        gen_prompt=4,
        gen_new=3,
        gen_rounds=2,
        gen_compiled=(),
        decode_rounds=1,
        length_seqs=(16, 32),
        length_tokens=64,
        length_rounds=1,
        length_variants=("sdpa", "eager"),
        long_lengths=(64,),
        long_documents=4,
        long_layers=1,
        long_rounds=1,
        long_memory=False,
        memory_families=("llama",),
        memory_vocabs=(400,),
        ceiling_size=128,
        ceiling_rounds=1,
        # Qwen3 and Gemma 3 at this size, kept out of the sections above (the tests run them on their own); Gemma 3's
        # window of 4 is below the decoded length (4 + 3) as in the full run.
        # The mixtures of experts likewise, 4 experts of 16 (2 per token), with two layers where the layout has two
        # kinds (GPT-OSS's sliding and full; DeepSeek-V3's dense and routed) and four for Qwen3-Next's 3 to 1.
        family_shapes={
            "qwen3": {"kv_heads": 2, "head_dim": 12},
            "gemma3": {"layers": 6, "kv_heads": 1, "head_dim": 12, "sliding_window": 4},
            "qwen3_moe": {"kv_heads": 2, "head_dim": 12, "experts": 4, "experts_per_token": 2},
            "gpt_oss": {
                "layers": 2,
                "kv_heads": 2,
                "head_dim": 8,
                "sliding_window": 4,
                "experts": 4,
                "experts_per_token": 2,
            },
            "deepseek_v3": {
                "layers": 2,
                "head_dim": 12,
                "qk_rope_head_dim": 4,
                "q_lora_rank": 24,
                "kv_lora_rank": 8,
                "experts": 4,
                "experts_per_token": 2,
            },
            "qwen3_next": {"layers": 4, "kv_heads": 2, "head_dim": 16, "experts": 4, "experts_per_token": 2},
        },
        window_size=8,
        window_prompt=4,
        window_new=24,
        state_prompt=4,
        state_new=64,
    ),
    # GPT-2 124M and a Llama-shaped decoder of about 200M (grouped-query attention, 4 key/value heads) at 1024 tokens,
    # bf16 autocast: eager and compiled training steps (and HF with liger-kernel), decoding at batch 1 and 32 (dynamic
    # cache, compiled static cache, CUDA graphs), continuous batching, FlexAttention on packed documents. Sized for one
    # call of at most 10 minutes on one H100/H200: `python -m benchmarks.run --preset gpu --device cuda`.
    "gpu": Plan(
        name="gpu",
        vocab=32000,
        hidden=1024,
        layers=12,
        heads=16,
        kv_heads=4,
        ffn=2816,
        family_shapes={"gpt2": {"vocab": 50257, "hidden": 768, "heads": 12, "kv_heads": None, "ffn": 3072}},
        batch=16,
        seq=1024,
        warmup=3,
        train_families=("gpt2", "llama"),
        train_dtypes=("bf16",),
        train_rounds=10,
        train_compiled=("gpt2", "llama"),
        train_liger=True,
        gen_families=("llama",),
        gen_batches=(1, 32),
        gen_modes=("greedy",),
        gen_prompt=128,
        gen_new=128,
        gen_rounds=5,
        gen_uncached=False,
        gen_compiled=("llama",),
        gen_compiled_batches=(1, 32),
        gen_cuda_graphs=True,
        batch_requests=64,
        batch_prompts=(8, 512),
        batch_new=64,
        batch_rounds=3,
        flex_documents=16,
        flex_lengths=(16384, 15360, 14336),
        flex_layers=2,
        flex_rounds=5,
        ceiling_size=8192,
        ceiling_rounds=10,
        sections=("ceiling", "train", "generate", "generate_batch", "flex_train"),
    ),
}
# The gpu preset's sections and contenders at the tiny preset's size: the tests run it on the CPU, so that the code of
# every GPU figure stays alive between the runs on a GPU.
PRESETS["gpu-tiny"] = dataclasses.replace(
    PRESETS["gpu"],
    name="gpu-tiny",
    vocab=99,
    hidden=32,
    layers=1,
    heads=4,
    kv_heads=2,
    ffn=64,
    family_shapes={"gpt2": {"vocab": 101, "hidden": 48, "heads": 4, "kv_heads": None, "ffn": 96}},
    batch=2,
    seq=16,
    warmup=1,
    train_rounds=1,
    train_compiled=(),  # a minute of compiling on 2 CPU cores; tests/test_compile.py compiles the same models
    gen_batches=(1, 2),
    gen_prompt=4,
    gen_new=3,
    gen_rounds=1,
    gen_compiled_batches=(1,),
    batch_requests=4,
    batch_prompts=(2, 9),
    batch_new=3,
    batch_rounds=1,
    # transformers' default scheduler sizes its paged cache from the memory it finds: seconds per call on a CPU
    batch_scheduler={"num_blocks": 16, "page_size": 16, "max_batch_tokens": 32, "max_requests_per_batch": 4},
    flex_documents=2,
    flex_lengths=(32, 24),
    flex_layers=1,
    flex_rounds=1,
    ceiling_size=128,
    ceiling_rounds=1,
)
