"""The exports of every decoder architecture `from_hf` imports, converted by llama.cpp's own converter and run there.

    python -m benchmarks.llama_cpp_architectures --llama-cpp LLAMA_CPP_DIR [--cases gpt_oss,qwen3_next]

`LLAMA_CPP_DIR` is llama.cpp's source folder (the `vendor/llama.cpp` of the llama-cpp-python source package, whose
`convert_hf_to_gguf.py` is llama.cpp's converter; the `llama_cpp` module must be installed from that package, see
docs/deploy.md). For each case, one causal-LM tiny reference of the architecture registry (the config the parity tests
build: 2 layers of width 64, windows of 8 tokens, every layer kind the architecture mixes) with random weights drawn
large (std 0.3, so that the logits are far from tied and greedy tokens say something) is imported with `from_hf`,
saved with a byte-level BPE tokenizer trained on the Python docs as `causal_lm_pydoc.yaml` trains its own (GPT-2's
pre-tokenizer, 400 tokens), and written back with `export_checkpoint(..., to=architecture)`. llama.cpp's converter
turns the export into an f32 GGUF (through `benchmarks.deploy.CONVERT`, which names the GPT-2 pre-tokenizer), gguf-py
reads it back (the architecture, the vocabulary, how many numbers it holds against the export's), and llama.cpp runs
it on `benchmarks.deploy.PROMPTS`: its tokenization, its greedy tokens (default f16 KV cache, then f32) against our
`generate()`, and its logits along the first prompt and our continuation against ours.

A converter or a llama.cpp load that fails is a row too, with the first line of its error. Results go to
benchmarks/results/deploy-llama_cpp_architectures.json and .md, with the CPU they ran on.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import torch

from benchmarks.deploy import CONVERT, PROMPTS, RESULTS, _until_eos
from benchmarks.machine import machine_info

# case → (architecture name `export --to` takes, tiny reference of that architecture): one causal LM per architecture
# the converter lists, two where an architecture has two shapes llama.cpp reads differently.
CASES = {
    "llama": ("llama", "llama3_default"),
    "gemma2": ("gemma2", "gemma2"),
    "seed_oss": ("seed_oss", "seed_oss"),
    "ministral": ("ministral", "ministral"),
    "mixtral": ("mixtral", "mixtral"),
    "qwen3_moe": ("qwen3_moe", "qwen3_moe"),
    "olmoe": ("olmoe", "olmoe"),
    "gpt_oss": ("gpt_oss", "gpt_oss"),
    "deepseek_v3": ("deepseek_v3", "deepseek_v3"),
    "deepseek_v3_plain_queries": ("deepseek_v3", "deepseek_v3_plain_queries"),
    "qwen3_next": ("qwen3_next", "qwen3_next"),
    "qwen3_5": ("qwen3_5", "qwen3_5"),
    "llama4": ("llama4", "llama4"),
    "llama4_moe": ("llama4", "llama4_moe"),
}
TOKENIZER_SIZE = 400
WEIGHT_STD = 0.3


def trained_tokenizer():
    """A byte-level BPE tokenizer with GPT-2's pre-tokenizer, trained on the Python docs (as causal_lm_pydoc.yaml)."""
    from training.data.corpora import python_docs_corpus
    from training.data.tokenizer import train_tokenizer

    texts = python_docs_corpus(max_topics=40)["text"]
    return train_tokenizer(texts, TOKENIZER_SIZE, kind="causal", keep_placeholders=False)


def reference_model(reference_name: str, tokenizer):
    """The registry's tiny reference `reference_name` at the tokenizer's vocabulary, weights drawn with std 0.3
    (vectors: their initial value plus 0.1·N(0, 1), saved float buffers included), float32, eval mode."""
    from hf_attention.architectures import REGISTRY

    references = {name: r for a in REGISTRY.values() for name, r in a.tiny_references.items()}
    reference = references[reference_name]
    config = reference.config()
    config.vocab_size = len(tokenizer)
    for field in ("pad_token_id", "bos_token_id", "eos_token_id"):
        setattr(config, field, getattr(tokenizer, field))
    generator = torch.Generator().manual_seed(zlib.crc32(reference_name.encode()))
    torch.manual_seed(0)
    model = reference.model_class._from_config(config, attn_implementation="eager").float().eval()
    saved = model.state_dict().keys()
    buffers = [t for name, t in model.named_buffers() if name in saved and t.is_floating_point()]
    with torch.no_grad():
        for tensor in [*model.parameters(), *buffers]:
            noise = torch.randn(tensor.shape, generator=generator)
            if tensor.dim() == 1:
                tensor.add_(0.1 * noise)
            else:
                tensor.copy_(WEIGHT_STD * noise)
    return model


def _numbers_in_export(folder: Path) -> int:
    from safetensors import safe_open

    total = 0
    for file in folder.glob("*.safetensors"):
        with safe_open(file, "pt") as weights:
            for name in weights.keys():  # noqa: SIM118 (safe_open's handle is not iterable)
                total += math.prod(weights.get_slice(name).get_shape())
    return total


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error" in line]
    return (errors or lines or ["(no message)"])[-1][:200]


def run_case(source: Path, case: str, tokenizer, new_tokens: int, scratch: Path) -> dict:
    """One architecture through export → llama.cpp's converter → gguf-py → llama.cpp, against our model."""
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM

    import hf_attention
    from hf_attention.conversion.to_hf import export_checkpoint

    architecture, reference_name = CASES[case]
    row = {"case": case, "architecture": architecture, "reference": reference_name}
    reference = reference_model(reference_name, tokenizer)
    row["hf_class"] = type(reference).__name__
    ours = hf_attention.from_hf(reference).eval()
    del reference
    saved, exported, gguf = scratch / f"{case}-ours", scratch / f"{case}-export", scratch / f"{case}-f32.gguf"
    ours.save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    export_checkpoint(str(saved), exported, to=architecture)
    row["export_class"] = json.loads((exported / "config.json").read_text())["architectures"][0]
    row["numbers_in_export"] = _numbers_in_export(exported)

    start = time.perf_counter()
    command = [sys.executable, "-c", CONVERT, str(source), str(exported), "--outtype", "f32", "--outfile", str(gguf)]
    done = subprocess.run(command, capture_output=True, text=True)
    row["convert_seconds"] = round(time.perf_counter() - start, 1)
    if done.returncode:
        row["converter_error"] = _first_line(done.stderr)
        return row

    sys.path[:0] = [str(source / "gguf-py")]
    from gguf import GGUFReader

    reader = GGUFReader(gguf)
    fields = reader.fields
    row["gguf_architecture"] = bytes(fields["general.architecture"].parts[-1]).decode()
    tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in fields["tokenizer.ggml.tokens"].data]
    row["vocabulary_identical"] = tokens == tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    row["numbers_in_gguf"] = int(sum(int(t.n_elements) for t in reader.tensors))
    row["tensors_in_gguf"] = len(reader.tensors)
    del reader

    reloaded = AutoModelForCausalLM.from_pretrained(saved).eval()  # ours, as a user loads it
    n_ctx = reloaded.config.max_position_embeddings

    def ours_greedy(ids: list[int]) -> list[int]:
        with torch.inference_mode():
            out = reloaded.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False)
        return _until_eos(out[0, len(ids) :].tolist(), tokenizer.eos_token_id)

    def theirs(engine, ids: list[int]) -> list[int]:
        out = []
        for token in engine.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
            out.append(token)
            if token == tokenizer.eos_token_id or len(out) == new_tokens:
                break
        return _until_eos(out, tokenizer.eos_token_id)

    engines = {}
    try:
        for cache, kv_type in (("f16", None), ("f32", 0)):  # 0 = GGML_TYPE_F32
            extra = {} if kv_type is None else {"type_k": kv_type, "type_v": kv_type}
            engines[cache] = Llama(
                model_path=str(gguf),
                n_ctx=n_ctx,
                n_threads=torch.get_num_threads(),
                logits_all=cache == "f32",
                verbose=False,
                **extra,
            )
    except Exception as error:  # llama.cpp refuses to load the file: the row says why
        row["load_error"] = _first_line(str(error)) or type(error).__name__
        return row
    prompts = []
    for prompt in PROMPTS:
        ids = tokenizer(prompt)["input_ids"]
        text_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        entry = {"prompt": prompt, "tokens": len(ids), "ours": ours_greedy(ids)}
        entry["same_tokenization"] = engines["f32"].tokenize(prompt.encode(), add_bos=False) == text_ids
        for cache, engine in engines.items():
            entry[cache] = theirs(engine, ids)
        prompts.append(entry)
    row["prompts"] = prompts
    # Logits along the first prompt and our continuation of it, f32 cache.
    ids = tokenizer(PROMPTS[0])["input_ids"] + prompts[0]["ours"]
    engine = engines["f32"]
    engine.reset()
    engine.eval(ids)
    theirs_logits = torch.from_numpy(engine.scores[: len(ids)].copy()).float()
    with torch.inference_mode():
        ours_logits = reloaded(torch.tensor([ids])).logits[0].float()
    row["logit_positions"] = len(ids)
    row["largest_logit"] = round(float(ours_logits.abs().max()), 2)
    row["largest_logit_difference"] = float((theirs_logits - ours_logits).abs().max())
    return row


def markdown(rows: list[dict], machine: str, new_tokens: int) -> str:
    lines = [
        f"llama.cpp on the exports of the registry's tiny causal LMs (weights std {WEIGHT_STD}; "
        f"{len(PROMPTS)} prompts, {new_tokens} greedy new tokens; {machine})",
        "",
        "| case (tiny reference) | export class | GGUF architecture | numbers in the f32 GGUF / in the export | "
        "prompts tokenized as ours | greedy continuations = generate(): f16 / f32 KV cache | "
        "largest logit difference (f32 cache) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        head = f"| `{row['case']}` | {row['export_class']} |"
        if "converter_error" in row:
            lines.append(f"{head} converter fails: `{row['converter_error']}` | – | – | – | – |")
            continue
        numbers = f"{row['numbers_in_gguf']:,} / {row['numbers_in_export']:,}"
        if "load_error" in row:
            lines.append(
                f"{head} {row['gguf_architecture']} | {numbers} | llama.cpp cannot load it: "
                f"`{row['load_error']}` | – | – |"
            )
            continue
        prompts, n = row["prompts"], len(row["prompts"])
        same = {c: sum(p[c] == p["ours"] for p in prompts) for c in ("f16", "f32")}
        tokenized = sum(p["same_tokenization"] for p in prompts)
        lines.append(
            f"{head} {row['gguf_architecture']} | {numbers} | {tokenized}/{n} | "
            f"{same['f16']}/{n} / {same['f32']}/{n} | "
            f"{row['largest_logit_difference']:.1e} (logits up to {row['largest_logit']}, "
            f"{row['logit_positions']} positions) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp's source folder")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--new-tokens", type=int, default=24)
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases.split(",") if c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {unknown}; the cases are {', '.join(CASES)}")
    info = machine_info("cpu")
    machine = f"{info.get('cpu_model', 'unknown CPU')}, {info['threads']} threads, torch {info['torch']}"
    tokenizer = trained_tokenizer()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for case in args.cases.split(","):
            print(f"{case} …", file=sys.stderr, flush=True)
            rows.append(run_case(args.llama_cpp, case, tokenizer, args.new_tokens, Path(scratch)))
    RESULTS.mkdir(exist_ok=True)
    result = {"machine": info, "new_tokens": args.new_tokens, "rows": rows}
    (RESULTS / "deploy-llama_cpp_architectures.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(rows, machine, args.new_tokens)
    (RESULTS / "deploy-llama_cpp_architectures.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
