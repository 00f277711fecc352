"""Engines no one here wrote, run on what `hf-attention export` writes: CTranslate2 and llama.cpp.

    python -m benchmarks.deploy --translation RUN_DIR            # CTranslate2: float32 and int8 vs our generate()
    python -m benchmarks.deploy --llama-cpp LLAMA_CPP_DIR        # llama.cpp's converter: GGUF f32 and q8_0

`--translation` takes the folder of a finished translation run whose model exports as BART (for instance
`training/configs/translation_en_de_standard.yaml`, which writes RUN_DIR/final-bart): the run's test split is rebuilt
from its run_config.json, CTranslate2's own TransformersConverter converts final-bart to float32 and int8, and the
three engines translate the same sources greedily, interleaved round by round. Reported: agreement of the tokens
with generate(), BLEU/chrF of each, and sentences per second.

`--llama-cpp` takes llama.cpp's source folder (the `vendor/llama.cpp` of the llama-cpp-python source package, whose
`convert_hf_to_gguf.py` is llama.cpp's converter; it runs in Python, without building llama.cpp). A Llama-shaped
hf-attention decoder with the project's byte-level BPE tokenizer is exported with `to_hf`, converted to GGUF (f32 and
q8_0) by that script, and the f32 file is read back with llama.cpp's gguf-py: the vocabulary, the pre-tokenizer and
every tensor must be ours. Running the GGUF needs llama.cpp built (not done here; see docs/deploy.md).

llama.cpp names pre-tokenizers by the hash of a known model's token ids on a test string, so a tokenizer trained here
is never in its table: after checking that our pre-tokenizer is GPT-2's (byte-level, GPT-2's
split pattern, no prefix space), the converter is told it is "gpt2", as llama.cpp's docs ask a new model to do.

Results go to benchmarks/results/deploy-<section>.json and .md, with the CPU they ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE")  # before torch loads (docs/benchmarks.md)

import torch  # noqa: E402

from benchmarks.machine import machine_info  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CAUSAL_CONFIG = Path(__file__).resolve().parents[1] / "training" / "configs" / "causal_lm_pydoc.yaml"


# ---------------------------------------------------------------------------------------------------- CTranslate2


def test_split(run_dir: Path):
    """The test split of a finished training run, rebuilt from its run_config.json (hash splits are deterministic)."""
    from training.args import DataArguments
    from training.objectives import objective_for, split_corpus

    saved = json.loads((run_dir / "run_config.json").read_text())
    objective = objective_for(saved["model"]["objective"])
    data_args = DataArguments(**saved["data"])
    return split_corpus(objective, objective.load_corpus(data_args), data_args)["test"], saved


def translation(run_dir: Path, rows: int, rounds: int, batch_size: int) -> dict:
    import ctranslate2
    from ctranslate2.converters import TransformersConverter
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_attention  # noqa: F401  (registers our classes)
    from training.evaluate import bleu_chrf

    split, saved = test_split(run_dir)
    split = split.select(range(min(rows, len(split))))
    sources, references = list(split["source"]), list(split["target"])
    standard = run_dir / "final-bart"
    if not standard.is_dir():
        raise SystemExit(f"{standard} is missing: train with --export_to bart (translation_en_de_standard.yaml).")
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "final")
    ours = AutoModelForSeq2SeqLM.from_pretrained(run_dir / "final").eval()
    max_source, max_new = saved["data"]["max_source_length"], saved["data"]["max_target_length"]
    converted = {}
    with tempfile.TemporaryDirectory() as folder:
        for precision in ("float32", "int8"):
            output = Path(folder) / precision
            TransformersConverter(str(standard)).convert(str(output), quantization=precision, force=True)
            converted[precision] = ctranslate2.Translator(
                str(output), device="cpu", compute_type=precision, intra_threads=torch.get_num_threads()
            )
        order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        encoded = [
            tokenizer([sources[i] for i in batch], truncation=True, max_length=max_source, padding=True)
            for batch in batches
        ]

        def run_ours() -> dict[int, list[int]]:
            out = {}
            with torch.inference_mode():
                for batch, inputs in zip(batches, encoded, strict=True):
                    tensors = {k: torch.tensor(v) for k, v in inputs.items() if k in ("input_ids", "attention_mask")}
                    generated = ours.generate(**tensors, max_new_tokens=max_new, num_beams=1, do_sample=False)
                    for index, row in zip(batch, generated.tolist(), strict=True):
                        out[index] = _strip(row[1:], tokenizer)
            return out

        def run_ct2(precision: str) -> dict[int, list[int]]:
            out = {}
            for batch, inputs in zip(batches, encoded, strict=True):
                tokens = [
                    tokenizer.convert_ids_to_tokens([t for t, m in zip(ids, mask, strict=True) if m])
                    for ids, mask in zip(inputs["input_ids"], inputs["attention_mask"], strict=True)
                ]
                results = converted[precision].translate_batch(
                    tokens, beam_size=1, max_decoding_length=max_new, max_batch_size=batch_size
                )
                for index, result in zip(batch, results, strict=True):
                    out[index] = tokenizer.convert_tokens_to_ids(result.hypotheses[0])
            return out

        engines = {
            "hf-attention generate()": run_ours,
            **{f"CTranslate2 {p}": lambda p=p: run_ct2(p) for p in converted},
        }
        outputs, seconds = {}, {name: [] for name in engines}
        for name, engine in engines.items():  # warm-up, and the tokens compared below
            outputs[name] = engine()
        for _ in range(rounds):  # interleaved: A B C A B C …
            for name, engine in engines.items():
                start = time.perf_counter()
                engine()
                seconds[name].append(time.perf_counter() - start)
    reference_tokens = outputs["hf-attention generate()"]
    table = []
    for name in engines:
        hypotheses = [tokenizer.decode(outputs[name][i], skip_special_tokens=True) for i in range(len(sources))]
        same = sum(outputs[name][i] == reference_tokens[i] for i in range(len(sources)))
        median = statistics.median(seconds[name])
        table.append(
            {
                "engine": name,
                "identical_to_generate": f"{same}/{len(sources)}",
                **bleu_chrf(hypotheses, references),
                "sentences_per_second": round(len(sources) / median, 1),
                "median_seconds": round(median, 3),
                "speedup_vs_generate": round(statistics.median(seconds["hf-attention generate()"]) / median, 2),
            }
        )
    return {"run": str(run_dir), "rows": len(sources), "rounds": rounds, "batch_size": batch_size, "table": table}


def _strip(ids: list[int], tokenizer) -> list[int]:
    """generate()'s row without padding and from the end token on (CTranslate2 returns neither)."""
    out = []
    for token in ids:
        if token in (tokenizer.eos_token_id, tokenizer.pad_token_id):
            break
        out.append(token)
    return out


# ---------------------------------------------------------------------------------------------------- llama.cpp

CONVERT = textwrap.dedent("""
    # Run llama.cpp's convert_hf_to_gguf.py with our pre-tokenizer named (see benchmarks/deploy.py).
    import json, runpy, sys
    from pathlib import Path
    source = Path(sys.argv[1])
    sys.path[:0] = [str(source), str(source / "gguf-py")]
    import conversion.base as base
    found = base.TextModel.get_vocab_base_pre
    def named(self, tokenizer):
        try:
            return found(self, tokenizer)
        except NotImplementedError:
            pre = json.loads((Path(self.dir_model) / "tokenizer.json").read_text())["pre_tokenizer"]
            gpt2 = pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space")
            if not gpt2:
                raise
            return "gpt2"
    base.TextModel.get_vocab_base_pre = named
    sys.argv = [str(source / "convert_hf_to_gguf.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")
# hf-attention name → llama.cpp's GGUF name of the Llama-shaped decoder's tensors ({} = layer).
GGUF_NAMES = {
    "model.decoder.embed_tokens.weight": "token_embd.weight",
    "model.decoder.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "model.decoder.layers.{}.self_attn_norm.weight": "blk.{}.attn_norm.weight",
    "model.decoder.layers.{}.self_attn.q_proj.weight": "blk.{}.attn_q.weight",
    "model.decoder.layers.{}.self_attn.k_proj.weight": "blk.{}.attn_k.weight",
    "model.decoder.layers.{}.self_attn.v_proj.weight": "blk.{}.attn_v.weight",
    "model.decoder.layers.{}.self_attn.o_proj.weight": "blk.{}.attn_output.weight",
    "model.decoder.layers.{}.mlp_norm.weight": "blk.{}.ffn_norm.weight",
    "model.decoder.layers.{}.mlp.gate_proj.weight": "blk.{}.ffn_gate.weight",
    "model.decoder.layers.{}.mlp.up_proj.weight": "blk.{}.ffn_up.weight",
    "model.decoder.layers.{}.mlp.down_proj.weight": "blk.{}.ffn_down.weight",
}


def llama_cpp(source: Path) -> dict:
    """Export a Llama-shaped decoder, convert it with llama.cpp's converter (f32 and q8_0), and read the f32 GGUF
    back: its vocabulary, pre-tokenizer and every tensor must be ours (Q and K in llama.cpp's rotary layout)."""
    from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM
    from hf_attention.to_hf import export_checkpoint
    from training.args import parse_args
    from training.data import python_docs_corpus
    from training.tokenizer import train_tokenizer

    sys.path[:0] = [str(source), str(source / "gguf-py")]
    from conversion.llama import LlamaModel
    from gguf import GGUFReader

    tokenizer = train_tokenizer(python_docs_corpus()["text"], 8000, kind="causal")
    torch.manual_seed(0)
    # The shipped causal-LM configuration, a Llama (with an untied head, so that output.weight is checked too).
    _, _, _, shape = parse_args(["--config", str(CAUSAL_CONFIG)])
    config = HFAttentionDecoderConfig(vocab_size=len(tokenizer), tie_word_embeddings=False, **shape)
    model = HFAttentionForCausalLM(config).eval()
    result = {}
    with tempfile.TemporaryDirectory() as folder:
        ours, standard = Path(folder) / "ours", Path(folder) / "llama"
        model.save_pretrained(ours)
        tokenizer.save_pretrained(ours)
        export_checkpoint(str(ours), standard, to="llama")
        ggufs = {}
        for outtype in ("f32", "q8_0"):
            ggufs[outtype] = Path(folder) / f"model-{outtype}.gguf"
            start = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CONVERT,
                    str(source),
                    str(standard),
                    "--outtype",
                    outtype,
                    "--outfile",
                    str(ggufs[outtype]),
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise SystemExit(f"convert_hf_to_gguf.py failed ({outtype}):\n{done.stderr[-3000:]}")
            result[f"convert_seconds_{outtype}"] = round(time.perf_counter() - start, 1)
            result[f"gguf_mib_{outtype}"] = round(ggufs[outtype].stat().st_size / 2**20, 2)
        reader = GGUFReader(ggufs["f32"])
        fields = reader.fields
        pre = bytes(fields["tokenizer.ggml.pre"].parts[-1]).decode()
        tokens = [
            bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in fields["tokenizer.ggml.tokens"].data
        ]
        vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        tensors = {t.name: torch.from_numpy(t.data.copy()) for t in reader.tensors}
        state, heads = model.state_dict(), config.num_attention_heads
        compared, different = 0, []
        for ours_name, gguf_name in GGUF_NAMES.items():
            for layer in range(config.num_hidden_layers) if "{}" in ours_name else [None]:
                mine = state[ours_name.format(layer)]
                if ".q_proj." in ours_name or ".k_proj." in ours_name:  # llama.cpp's rotary layout (pairs adjacent)
                    kv = config.num_key_value_heads if ".k_proj." in ours_name else heads
                    mine = LlamaModel.permute(mine, heads, kv)
                theirs = tensors[gguf_name.format(layer)].reshape(mine.shape)
                compared += 1
                if not torch.equal(theirs, mine):
                    different.append(gguf_name.format(layer))
        result.update(
            architecture=bytes(fields["general.architecture"].parts[-1]).decode(),
            pre_tokenizer=pre,
            vocabulary_identical=tokens == vocabulary,
            tensors_compared=compared,
            tensors_in_gguf=len(tensors),
            tensors_different=different,
            parameters=model.num_parameters(),
        )
    return result


# ---------------------------------------------------------------------------------------------------- report


def _markdown_translation(result: dict, machine: str) -> str:
    lines = [
        f"CTranslate2 on the exported BART ({result['rows']} test rows, greedy, batch {result['batch_size']}, "
        f"median of {result['rounds']} interleaved rounds; {machine})",
        "",
        "| engine | tokens identical to generate() | BLEU | chrF | sentences/s | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["table"]:
        lines.append(
            f"| {row['engine']} | {row['identical_to_generate']} | {row['bleu']:.2f} | {row['chrf']:.2f} | "
            f"{row['sentences_per_second']} | {row['speedup_vs_generate']}x |"
        )
    return "\n".join(lines) + "\n"


def _markdown_llama(result: dict, machine: str) -> str:
    return (
        "\n".join(
            [
                f"llama.cpp's convert_hf_to_gguf.py on the exported Llama ({result['parameters']:,} parameters; "
                f"{machine})",
                "",
                "| check | result |",
                "|---|---|",
                f"| GGUF architecture | {result['architecture']} |",
                f"| pre-tokenizer written | {result['pre_tokenizer']} |",
                f"| vocabulary identical to our tokenizer's, in id order | {result['vocabulary_identical']} |",
                f"| f32 tensors equal to ours (of {result['tensors_in_gguf']}) | "
                f"{result['tensors_compared'] - len(result['tensors_different'])}/{result['tensors_compared']} |",
                f"| conversion time f32 / q8_0 | {result['convert_seconds_f32']} s / "
                f"{result['convert_seconds_q8_0']} s |",
                f"| GGUF size f32 / q8_0 | {result['gguf_mib_f32']} MiB / {result['gguf_mib_q8_0']} MiB |",
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--translation", type=Path, help="a finished translation run that exported final-bart")
    parser.add_argument("--llama-cpp", type=Path, help="llama.cpp's source folder (holds convert_hf_to_gguf.py)")
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    if not args.translation and not args.llama_cpp:
        parser.error("give --translation RUN_DIR, --llama-cpp LLAMA_CPP_DIR, or both")
    info = machine_info("cpu")
    machine = f"{info.get('cpu_model', 'unknown CPU')}, {info['threads']} threads, torch {info['torch']}"
    RESULTS.mkdir(exist_ok=True)
    sections = []
    if args.translation:
        sections.append(
            (
                "ctranslate2",
                translation(args.translation, args.rows, args.rounds, args.batch_size),
                _markdown_translation,
            )
        )
    if args.llama_cpp:
        sections.append(("llama_cpp", llama_cpp(args.llama_cpp), _markdown_llama))
    for name, result, markdown in sections:
        result["machine"] = info
        (RESULTS / f"deploy-{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        text = markdown(result, machine)
        (RESULTS / f"deploy-{name}.md").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
