"""What a benchmark run measures: the `Plan` and its presets (`full`, `quick`, `tiny`)."""

import dataclasses

SECTIONS = ("ceiling", "train", "forward", "generate", "decode_profile", "length", "long_attention", "memory")


@dataclasses.dataclass
class Plan:
    """What to run. `full` is the reference run; `quick` and `tiny` (the tests) shrink it.

    Model dimensions (`vocab` … `ffn`) and the training batch (`batch` × `seq`) are shared by every section; the
    other fields belong to the section named by their prefix. `gen_rounds`: see `benchmarks.generate` for why the
    full run takes 24.
    """

    name: str = "full"
    vocab: int = 8000
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    ffn: int = 1024
    batch: int = 8
    seq: int = 128
    warmup: int = 2
    train_families: tuple = ("gpt2", "llama", "bert", "bart", "t5")
    train_dtypes: tuple = ("fp32", "bf16")
    train_rounds: int = 24
    train_compiled: tuple = ()  # families whose training step is also timed through torch.compile (ours and HF's)
    forward_batches: tuple = (1, 8)
    forward_rounds: int = 10
    gen_families: tuple = ("gpt2", "llama", "bart", "t5")
    gen_batches: tuple = (1, 8)
    gen_modes: tuple = ("greedy", "beam4", "sample")
    gen_prompt: int = 32
    gen_new: int = 64
    gen_rounds: int = 24
    gen_uncached: bool = True
    gen_compiled: tuple = ("llama", "bart")  # our static-cache compiled path (tens of s to compile)
    gen_compiled_batches: tuple = (1,)
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
    memory_families: tuple = ("gpt2", "llama")
    memory_vocabs: tuple = (8000, 32000, 128000)
    ceiling_size: int = 2048
    ceiling_rounds: int = 8
    sections: tuple = SECTIONS


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
    ),
}
