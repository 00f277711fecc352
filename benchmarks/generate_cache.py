"""Cached vs uncached greedy decoding on CPU: what the KV cache buys.

    python benchmarks/generate_cache.py [--repeats 5] [--new-tokens 64]

A decoder with hidden 256, 4 layers, 4 heads (random weights: speed does not depend on them) decodes `--new-tokens`
tokens greedily at batch 1 from a 16-token prompt, with `use_cache=True` (each step feeds one token and reuses the
cached keys/values) and `use_cache=False` (each step re-encodes the whole sequence). Runs are interleaved A B A B so
that load from other processes hits both sides alike; the medians are reported.
"""

import os

# Must be set before torch starts its OpenMP pool: spinning threads avoid a sleep/wake per small matmul.
os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = HFAttentionDecoderConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                      intermediate_size=1024, max_position_embeddings=512, hidden_dropout_prob=0.0,
                                      norm_position="pre", position_encoding="rotary")
    model = HFAttentionForCausalLM(config).eval()
    prompt = torch.randint(3, config.vocab_size, (1, 16))
    options = {"max_new_tokens": args.new_tokens, "min_new_tokens": args.new_tokens, "do_sample": False}

    def run(use_cache: bool) -> tuple[float, torch.Tensor]:
        start = time.perf_counter()
        with torch.inference_mode():
            tokens = model.generate(prompt, use_cache=use_cache, **options)
        return time.perf_counter() - start, tokens

    _, reference = run(True)  # warm-up (allocator, first-call overheads), both sides
    _, uncached_tokens = run(False)
    assert torch.equal(reference, uncached_tokens), "cached and uncached decoding disagree"
    times = {True: [], False: []}
    for _ in range(args.repeats):
        for use_cache in (True, False):
            times[use_cache].append(run(use_cache)[0])
    cached, uncached = statistics.median(times[True]), statistics.median(times[False])
    policy = os.environ["OMP_WAIT_POLICY"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_WAIT_POLICY={policy}")
    print(f"greedy, batch 1, 16-token prompt + {args.new_tokens} new tokens, hidden 256, 4 layers, "
          f"median of {args.repeats} interleaved runs:")
    print(f"  cached   {cached * 1000:8.1f} ms  ({cached / args.new_tokens * 1000:.2f} ms/token)")
    print(f"  uncached {uncached * 1000:8.1f} ms  ({uncached / args.new_tokens * 1000:.2f} ms/token)")
    print(f"  speed-up {uncached / cached:.2f}x")


if __name__ == "__main__":
    main()
