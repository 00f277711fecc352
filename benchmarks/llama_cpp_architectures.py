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
import contextlib
import json
import math
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import torch

from benchmarks.deploy import CONVERT, PROMPTS, RESULTS, _until_eos, llama_cpp_greedy
from benchmarks.machine import machine_info

# case → (architecture name `export --to` takes, tiny reference of that architecture, config fields changed): one
# causal LM per architecture the converter lists, as the parity tests build it (windows of 8 tokens, every layer kind
# the architecture mixes, sizes chosen to exercise each option), then changed where llama.cpp reads less than the
# config says, to the values of the released models, so that what it does compute is seen apart.
CASES = {
    "llama": ("llama", "llama3_default", {}),
    "gemma2": ("gemma2", "gemma2", {}),
    "seed_oss": ("seed_oss", "seed_oss", {}),
    "ministral": ("ministral", "ministral", {}),
    "mixtral": ("mixtral", "mixtral", {}),
    "mixtral: no window": ("mixtral", "mixtral", {"sliding_window": None}),
    "qwen3_moe": ("qwen3_moe", "qwen3_moe", {}),
    "qwen3_moe: as released": (
        "qwen3_moe",
        "qwen3_moe",
        {"mlp_only_layers": [], "use_sliding_window": False, "sliding_window": None, "norm_topk_prob": True},
    ),
    "olmoe": ("olmoe", "olmoe", {}),
    "olmoe: no grouped heads": ("olmoe", "olmoe", {"num_key_value_heads": 4}),
    "gpt_oss": ("gpt_oss", "gpt_oss", {}),
    "gpt_oss: swiglu_limit 7": ("gpt_oss", "gpt_oss", {"swiglu_limit": 7.0}),
    "deepseek_v3": ("deepseek_v3", "deepseek_v3", {}),
    "deepseek_v3: plain queries": ("deepseek_v3", "deepseek_v3_plain_queries", {}),
    "deepseek_v3: plain queries and 27 layers": (
        "deepseek_v3",
        "deepseek_v3_plain_queries",
        {"num_hidden_layers": 27},
    ),
    "qwen3_next": ("qwen3_next", "qwen3_next", {}),
    "qwen3_next: experts in every layer": ("qwen3_next", "qwen3_next", {"mlp_only_layers": []}),
    "qwen3_5": ("qwen3_5", "qwen3_5", {}),
    "qwen3_5: head_dim 256": ("qwen3_5", "qwen3_5", {"head_dim": 256}),
    "llama4": ("llama4", "llama4", {}),
    "llama4_moe": ("llama4", "llama4_moe", {}),
    "llama4_moe: chunks and temperature as released": (
        "llama4",
        "llama4_moe",
        {"attention_chunk_size": 8192, "floor_scale": 8192, "attn_scale": 0.1},
    ),
    "glm4": ("glm4", "glm4", {}),
    "exaone4": ("exaone4", "exaone4", {}),
    "exaone4: head_dim = hidden / heads": ("exaone4", "exaone4", {"head_dim": 16}),
    "exaone4: no window": ("exaone4", "exaone4_global", {}),
    "ernie4_5": ("ernie4_5", "ernie4_5", {}),
    "hunyuan_v1_dense": ("hunyuan_v1_dense", "hunyuan_v1_dense", {}),
    "hunyuan_v1_dense: 32k positions as released": (
        "hunyuan_v1_dense",
        "hunyuan_v1_dense",
        {"max_position_embeddings": 32768},
    ),
    "apertus": ("apertus", "apertus", {}),
    "granite": ("granite", "granite", {}),
    "granite: head_dim = hidden / heads": ("granite", "granite", {"head_dim": 16}),
    "ministral3": ("ministral3", "ministral3", {}),
    "ministral3: YaRN and query scale as released": (
        "ministral3",
        "ministral3",
        {
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 1000000.0,
                "factor": 16.0,
                "original_max_position_embeddings": 16384,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "llama_4_scaling_beta": 0.1,
            }
        },
    ),
    "cohere": ("cohere", "cohere", {}),
    "cohere2": ("cohere2", "cohere2", {}),
}
# The converter's options by architecture: transformers' checkpoints of Qwen3-Next and Qwen3.5 hold no multi-token
# prediction layers (their classes drop them), which the converter otherwise expects.
CONVERTER_OPTIONS = {"qwen3_next": ["--no-mtp"], "qwen3_5": ["--no-mtp"]}
TOKENIZER_SIZE = 400
WEIGHT_STD = 0.3


def trained_tokenizer():
    """A byte-level BPE tokenizer with GPT-2's pre-tokenizer, trained on the Python docs (as causal_lm_pydoc.yaml)."""
    from training.data.corpora import python_docs_corpus
    from training.data.tokenizer import train_tokenizer

    texts = python_docs_corpus(max_topics=40)["text"]
    return train_tokenizer(texts, TOKENIZER_SIZE, kind="causal", keep_placeholders=False)


def reference_model(reference_name: str, tokenizer, changes: dict):
    """The registry's tiny reference `reference_name` with `changes`, at the tokenizer's vocabulary, weights drawn
    with std 0.3 (vectors: their initial value plus 0.1·N(0, 1), saved float buffers included), float32, eval mode."""
    from hf_attention.architectures import REGISTRY

    references = {name: r for a in REGISTRY.values() for name, r in a.tiny_references.items()}
    reference = references[reference_name]
    config = reference.config()
    for field, value in changes.items():
        setattr(config, field, value)
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


def run_case(source: Path, case: str, tokenizer, new_tokens: int, scratch: Path, progress: Path | None = None) -> dict:
    """One architecture through export → llama.cpp's converter → gguf-py → llama.cpp, against our model. The row
    so far is written to `progress` before llama.cpp loads the file (which may abort the process)."""
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM

    import hf_attention
    from hf_attention.conversion.to_hf import export_checkpoint

    architecture, reference_name, changes = CASES[case]
    row = {"case": case, "architecture": architecture, "reference": reference_name, "changes": changes}
    reference = reference_model(reference_name, tokenizer, changes)
    row["hf_class"] = type(reference).__name__
    ours = hf_attention.from_hf(reference).eval()
    del reference
    saved, exported, gguf = scratch / "ours", scratch / "export", scratch / "model-f32.gguf"
    ours.save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    export_checkpoint(str(saved), exported, to=architecture)
    row["export_class"] = json.loads((exported / "config.json").read_text())["architectures"][0]
    row["numbers_in_export"] = _numbers_in_export(exported)

    start = time.perf_counter()
    command = [sys.executable, "-c", CONVERT, str(source), str(exported), "--outtype", "f32", "--outfile", str(gguf)]
    command += CONVERTER_OPTIONS.get(architecture, [])
    done = subprocess.run(command, capture_output=True, text=True)
    row["convert_seconds"] = round(time.perf_counter() - start, 1)
    if done.returncode:
        row["converter_error"] = _first_line(done.stderr).replace(str(exported), "EXPORT")
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
        return llama_cpp_greedy(engine, ids, new_tokens, tokenizer.eos_token_id)

    if progress is not None:
        progress.write_text(json.dumps(row))
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
    except Exception as error:  # llama.cpp refuses to load the file: the row says why (its log, on stderr)
        row["load_error"] = str(error)
        with contextlib.suppress(Exception):
            Llama(model_path=str(gguf), n_ctx=n_ctx, verbose=True)
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
        "| case: the registry's tiny reference, and what was changed | export class | GGUF architecture | "
        "numbers in the f32 GGUF / in the export | "
        "prompts tokenized as ours | greedy continuations = generate(): f16 / f32 KV cache | "
        "largest logit difference (f32 cache) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        head = f"| {row['case']} | {row['export_class']} |"
        if "converter_error" in row:
            lines.append(f"{head} converter fails: `{row['converter_error']}` | – | – | – | – |")
            continue
        numbers = f"{row['numbers_in_gguf']:,} / {row['numbers_in_export']:,}"
        if "crash" in row:
            lines.append(
                f"{head} {row['gguf_architecture']} | {numbers} | llama.cpp aborts: `{row['crash']}` | – | – |"
            )
            continue
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


def _case_in_a_process(source: Path, case: str, new_tokens: int) -> dict:
    """One case in a process of its own: llama.cpp aborts the process on some files (a failed GGML_ASSERT)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "row.json"
        command = [sys.executable, "-m", "benchmarks.llama_cpp_architectures", "--llama-cpp", str(source)]
        command += ["--one", case, "--new-tokens", str(new_tokens), "--row-out", str(out)]
        done = subprocess.run(command, capture_output=True, text=True)
        row = json.loads(out.read_text()) if out.is_file() else None
    if row is None:  # failed before the conversion's end: an error of ours, not llama.cpp's
        raise SystemExit(f"{case} failed:\n{done.stderr[-3000:]}")
    if done.returncode:  # llama.cpp aborted the process while loading or running the file
        asserts = [line for line in done.stderr.splitlines() if "GGML_ASSERT" in line]
        row["crash"] = asserts[-1].split(": ", 1)[-1] if asserts else _first_line(done.stderr)
    elif "load_error" in row:  # llama.cpp's own reason, from its log
        reasons = [line for line in done.stderr.splitlines() if "error loading model:" in line]
        row["load_error"] = reasons[-1].split("error loading model:", 1)[1].strip() if reasons else row["load_error"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp's source folder")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # one case, in this process (what each child runs)
    parser.add_argument("--row-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        with tempfile.TemporaryDirectory() as scratch:
            row = run_case(args.llama_cpp, args.one, trained_tokenizer(), args.new_tokens, Path(scratch), args.row_out)
        args.row_out.write_text(json.dumps(row))
        return 0
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {unknown}; the cases are {', '.join(CASES)}")
    info = machine_info("cpu")
    from llama_cpp import __version__ as llama_cpp_version

    machine = f"{info.get('cpu_model', 'unknown CPU')}, {info['threads']} threads, torch {info['torch']}"
    machine += f", llama-cpp-python {llama_cpp_version}"
    rows = []
    for case in cases:
        print(f"{case} …", file=sys.stderr, flush=True)
        rows.append(_case_in_a_process(args.llama_cpp, case, args.new_tokens))
    RESULTS.mkdir(exist_ok=True)
    result = {"machine": info, "new_tokens": args.new_tokens, "rows": rows}
    (RESULTS / "deploy-llama_cpp_architectures.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(rows, machine, args.new_tokens)
    (RESULTS / "deploy-llama_cpp_architectures.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
