"""Engines no one here wrote, run on what `hf-attention export` writes: CTranslate2 and llama.cpp.

    python -m benchmarks.deploy --translation RUN_DIR            # CTranslate2: float32 and int8 vs our generate()
    python -m benchmarks.deploy --llama-cpp LLAMA_CPP_DIR --decoder RUN_DIR   # llama.cpp: GGUF f32 and q8_0

`--translation` takes the folder of a finished translation run whose model exports as BART (for instance
`training/configs/translation_en_de_standard.yaml`, which writes RUN_DIR/final-bart): the run's test split is rebuilt
from its run_config.json, CTranslate2's own TransformersConverter converts final-bart to float32 and int8, and the
three engines translate the same sources greedily, interleaved round by round. Reported: agreement of the tokens
with generate(), BLEU/chrF of each, and sentences per second. A model trained with `protect_placeholders` (its
tokenizer holds the sentinels) gets protected sources in every engine, and each engine's translations are restored
and scored through `hf_attention.placeholders.translate_protected` (`ctranslate2_translate` is CTranslate2's
strings-to-strings function), with the translations whose sentinels went wrong counted.

`--llama-cpp` takes llama.cpp's source folder (the `vendor/llama.cpp` of the llama-cpp-python source package, whose
`convert_hf_to_gguf.py` is llama.cpp's converter; the `llama_cpp` module must be installed from that package) and
`--decoder` a finished causal-LM run that exported RUN_DIR/final-llama (training/configs/causal_lm_pydoc.yaml does),
with the project's byte-level BPE tokenizer. The export is converted to GGUF (f32 and q8_0) by that script; the f32
file is read back with llama.cpp's gguf-py (the vocabulary, the pre-tokenizer and every tensor must be ours); then
llama.cpp runs both files: its tokenization of the prompts and its greedy tokens are compared with ours, and the
three engines are timed interleaved.

llama.cpp names pre-tokenizers by the hash of a known model's token ids on a test string, so a tokenizer trained here
is never in its table: after checking that our pre-tokenizer is GPT-2's (byte-level, GPT-2's split pattern, no
prefix space), the converter is told it is "gpt-2" (GPT-2's own entry), as llama.cpp's docs ask a new model to do.

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
    from training.corpus import split_corpus
    from training.objectives import objective_for

    saved = json.loads((run_dir / "run_config.json").read_text())
    objective = objective_for(saved["model"]["objective"])
    data_args = DataArguments(**saved["data"])
    return split_corpus(objective, objective.data.load_corpus(data_args), data_args)["test"], saved


def translation(run_dir: Path, rows: int, rounds: int, batch_size: int) -> dict:
    import ctranslate2
    from ctranslate2.converters import TransformersConverter
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_attention  # noqa: F401  (registers our classes)
    from hf_attention.placeholders import protect_batch, tokenizer_protects
    from training.metrics import bleu_chrf

    split, saved = test_split(run_dir)
    split = split.select(range(min(rows, len(split))))
    sources, references = list(split["source"]), list(split["target"])
    standard = run_dir / "final-bart"
    if not standard.is_dir():
        raise SystemExit(f"{standard} is missing: train with --export_to bart (translation_en_de_standard.yaml).")
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "final")
    ours = AutoModelForSeq2SeqLM.from_pretrained(run_dir / "final").eval()
    max_source, max_new = saved["data"]["max_source_length"], saved["data"]["max_target_length"]
    protected = tokenizer_protects(tokenizer)
    inputs_read = protect_batch(sources)[0] if protected else sources  # what the model was trained to read
    converted = {}
    with tempfile.TemporaryDirectory() as folder:
        for precision in ("float32", "int8"):
            output = Path(folder) / precision
            TransformersConverter(str(standard)).convert(str(output), quantization=precision, force=True)
            converted[precision] = ctranslate2.Translator(
                str(output), device="cpu", compute_type=precision, intra_threads=torch.get_num_threads()
            )
        order = sorted(range(len(sources)), key=lambda i: -len(inputs_read[i]))
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        encoded = [
            tokenizer([inputs_read[i] for i in batch], truncation=True, max_length=max_source, padding=True)
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
        # The translations scored: the text each engine gives for the sources, as a user runs it (protected and
        # restored when the model was trained so); greedy, as the timed rounds.
        text_engines = {
            "hf-attention generate()": lambda texts: generate_translate(
                ours, tokenizer, texts, max_source_length=max_source, max_new_tokens=max_new, batch_size=batch_size
            ),
            **{
                f"CTranslate2 {p}": lambda texts, p=p: ctranslate2_translate(
                    converted[p], tokenizer, texts, max_source_length=max_source, max_new_tokens=max_new
                )
                for p in converted
            },
        }
        translations = {name: _translations(sources, text_engines[name], protected) for name in engines}
    reference_tokens = outputs["hf-attention generate()"]
    table = []
    for name in engines:
        hypotheses = [translation.text for translation in translations[name]]
        same = sum(outputs[name][i] == reference_tokens[i] for i in range(len(sources)))
        median = statistics.median(seconds[name])
        table.append(
            {
                "engine": name,
                "identical_to_generate": f"{same}/{len(sources)}",
                **bleu_chrf(hypotheses, references),
                "placeholder_problems": sum(bool(t.problems) for t in translations[name]) if protected else None,
                "sentences_per_second": round(len(sources) / median, 1),
                "median_seconds": round(median, 3),
                "speedup_vs_generate": round(statistics.median(seconds["hf-attention generate()"]) / median, 2),
            }
        )
    return {
        "run": str(run_dir),
        "rows": len(sources),
        "rounds": rounds,
        "batch_size": batch_size,
        "protected_placeholders": protected,
        "table": table,
    }


def generate_translate(
    model, tokenizer, texts: list[str], *, max_source_length: int, max_new_tokens: int, batch_size: int = 32
) -> list[str]:
    """Our generate()'s greedy translations of `texts`, strings in and strings out (batches padded on the right)."""
    results = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            inputs = tokenizer(
                texts[start : start + batch_size],
                truncation=True,
                max_length=max_source_length,
                padding=True,
                return_tensors="pt",
            )
            inputs.pop("token_type_ids", None)
            generated = model.generate(**inputs, max_new_tokens=max_new_tokens, num_beams=1, do_sample=False)
            results += tokenizer.batch_decode(generated, skip_special_tokens=True)
    return results


def ctranslate2_translate(
    translator, tokenizer, texts: list[str], *, max_source_length: int, max_new_tokens: int, beam_size: int = 1
) -> list[str]:
    """CTranslate2's translations of `texts`, strings in and strings out with the model's own tokenizer (the same
    token ids, sentinels included): what `translate_protected(texts, translate_fn)` calls."""
    tokens = [
        tokenizer.convert_ids_to_tokens(ids)
        for ids in tokenizer(texts, truncation=True, max_length=max_source_length)["input_ids"]
    ]
    results = translator.translate_batch(tokens, beam_size=beam_size, max_decoding_length=max_new_tokens)
    return [
        tokenizer.decode(tokenizer.convert_tokens_to_ids(result.hypotheses[0]), skip_special_tokens=True)
        for result in results
    ]


def _translations(sources: list[str], translate_fn, protected: bool) -> list:
    """`translate_fn`'s translations of `sources`: protected and restored (with their problems) when the model was
    trained on protected text, else as they come."""
    from hf_attention.placeholders import Restored, translate_protected

    if protected:
        return translate_protected(sources, translate_fn)
    return [Restored(text, []) for text in translate_fn(sources)]


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
            return "gpt-2"  # the name llama.cpp gives GPT-2's own pre-tokenizer
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


PROMPTS = [
    "The attention weights of one query sum to one, so",
    "def softmax(x):",
    "A decoder generates one token at a time and",
    "Keys, values and queries",
    "The with statement",
    "To open a file for reading,",
]


def llama_cpp(source: Path, run_dir: Path, new_tokens: int, rounds: int) -> dict:
    """Convert a causal-LM run's Llama export (RUN_DIR/final-llama) with llama.cpp's converter (f32 and q8_0), read
    the f32 GGUF back (vocabulary, pre-tokenizer, every tensor: ours, Q and K in llama.cpp's rotary layout), then run
    both files in llama.cpp: its tokenization, its greedy tokens and its speed against our generate()."""
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hf_attention  # noqa: F401  (registers our classes)

    sys.path[:0] = [str(source), str(source / "gguf-py")]
    from conversion.llama import LlamaModel
    from gguf import GGUFReader

    standard = run_dir / "final-llama"
    if not standard.is_dir():
        raise SystemExit(f"{standard} is missing: train with --export_to llama (causal_lm_pydoc.yaml does).")
    model = AutoModelForCausalLM.from_pretrained(run_dir / "final").eval()
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "final")
    result = {"run": str(run_dir), "parameters": model.num_parameters(), "new_tokens": new_tokens}
    with tempfile.TemporaryDirectory() as folder:
        ggufs = {}
        for outtype in ("f32", "q8_0"):
            ggufs[outtype] = Path(folder) / f"model-{outtype}.gguf"
            start = time.perf_counter()
            command = [sys.executable, "-c", CONVERT, str(source), str(standard), "--outtype", outtype]
            done = subprocess.run([*command, "--outfile", str(ggufs[outtype])], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"convert_hf_to_gguf.py failed ({outtype}):\n{done.stderr[-3000:]}")
            result[f"convert_seconds_{outtype}"] = round(time.perf_counter() - start, 1)
            result[f"gguf_mib_{outtype}"] = round(ggufs[outtype].stat().st_size / 2**20, 2)
        result.update(_read_back(GGUFReader(ggufs["f32"]), LlamaModel.permute, model, tokenizer))
        engines = {
            outtype: Llama(
                model_path=str(path),
                n_ctx=model.config.max_position_embeddings,
                n_threads=torch.get_num_threads(),
                verbose=False,
            )
            for outtype, path in ggufs.items()
        }

        def ours(ids: list[int]) -> list[int]:
            with torch.inference_mode():
                out = model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False)
            return _until_eos(out[0, len(ids) :].tolist(), tokenizer.eos_token_id)

        def theirs(engine, ids: list[int]) -> list[int]:
            out = []
            for token in engine.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
                out.append(token)
                if token == tokenizer.eos_token_id or len(out) == new_tokens:
                    break
            return _until_eos(out, tokenizer.eos_token_id)

        rows = []
        for prompt in PROMPTS:
            ids = tokenizer(prompt)["input_ids"]  # <s> + the text, as the causal tokenizer writes it
            text_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            row = {"prompt": prompt, "ours": ours(ids)}
            row["same_tokenization"] = engines["f32"].tokenize(prompt.encode(), add_bos=False) == text_ids
            for outtype, engine in engines.items():
                row[outtype] = theirs(engine, ids)
            rows.append(row)
        result["prompts"] = rows
        contenders = {
            "hf-attention generate()": ours,
            **{f"llama.cpp {o}": (lambda ids, e=e: theirs(e, ids)) for o, e in engines.items()},
        }
        ids = tokenizer(PROMPTS[0])["input_ids"]
        seconds = {name: [] for name in contenders}
        for run in contenders.values():  # warm-up
            run(ids)
        for _ in range(rounds):  # interleaved: A B C A B C …
            for name, run in contenders.items():
                start = time.perf_counter()
                produced = len(run(ids))
                seconds[name].append((time.perf_counter() - start) / max(produced, 1))
        base = statistics.median(seconds["hf-attention generate()"])
        result["timings"] = {
            name: {
                "ms_per_token": round(1000 * statistics.median(values), 2),
                "speedup_vs_generate": round(base / statistics.median(values), 2),
            }
            for name, values in seconds.items()
        }
    return result


def _until_eos(tokens: list[int], eos: int) -> list[int]:
    return tokens[: tokens.index(eos) + 1] if eos in tokens else tokens


def _read_back(reader, permute, model, tokenizer) -> dict:
    """What llama.cpp's converter wrote, compared with the model: vocabulary, pre-tokenizer, tensors."""
    fields, config = reader.fields, model.config
    tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in fields["tokenizer.ggml.tokens"].data]
    tensors = {t.name: torch.from_numpy(t.data.copy()) for t in reader.tensors}
    state, heads = model.state_dict(), config.num_attention_heads
    compared, different = 0, []
    for ours_name, gguf_name in GGUF_NAMES.items():
        for layer in range(config.num_hidden_layers) if "{}" in ours_name else [None]:
            name = gguf_name.format(layer)
            if name not in tensors:  # output.weight is absent when the head is tied to token_embd
                continue
            mine = state[ours_name.format(layer)]
            if ".q_proj." in ours_name or ".k_proj." in ours_name:  # llama.cpp's rotary layout (pairs adjacent)
                mine = permute(mine, heads, config.num_key_value_heads if ".k_proj." in ours_name else heads)
            compared += 1
            if not torch.equal(tensors[name].reshape(mine.shape), mine):
                different.append(name)
    return {
        "architecture": bytes(fields["general.architecture"].parts[-1]).decode(),
        "pre_tokenizer": bytes(fields["tokenizer.ggml.pre"].parts[-1]).decode(),
        "vocabulary_identical": tokens == tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))),
        "tensors_compared": compared,
        "tensors_in_gguf": len(tensors),
        "tensors_different": different,
    }


# ---------------------------------------------------------------------------------------------------- report


def _markdown_translation(result: dict, machine: str) -> str:
    lines = [
        f"CTranslate2 on the exported BART ({result['rows']} test rows, greedy, batch {result['batch_size']}, "
        f"median of {result['rounds']} interleaved rounds; {machine})",
        "",
        "| engine | tokens identical to generate() | BLEU | chrF | placeholder problems | sentences/s | speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["table"]:
        problems = row.get("placeholder_problems")
        lines.append(
            f"| {row['engine']} | {row['identical_to_generate']} | {row['bleu']:.2f} | {row['chrf']:.2f} | "
            f"{'–' if problems is None else problems} | {row['sentences_per_second']} | "
            f"{row['speedup_vs_generate']}x |"
        )
    return "\n".join(lines) + "\n"


def _markdown_llama(result: dict, machine: str) -> str:
    prompts, n = result["prompts"], len(result["prompts"])
    same = {o: sum(row[o] == row["ours"] for row in prompts) for o in ("f32", "q8_0")}
    lines = [
        f"llama.cpp on the Llama export of {result['run']} ({result['parameters']:,} parameters; {machine})",
        "",
        "| check | result |",
        "|---|---|",
        f"| GGUF architecture, pre-tokenizer | {result['architecture']}, {result['pre_tokenizer']} |",
        f"| vocabulary identical to our tokenizer's, in id order | {result['vocabulary_identical']} |",
        f"| f32 tensors bit-identical to ours | {result['tensors_compared'] - len(result['tensors_different'])}"
        f"/{result['tensors_compared']} (of {result['tensors_in_gguf']} in the file) |",
        f"| prompts llama.cpp tokenizes exactly as ours | {sum(r['same_tokenization'] for r in prompts)}/{n} |",
        f"| greedy continuations ({result['new_tokens']} tokens) identical to generate(): f32 / q8_0 | "
        f"{same['f32']}/{n} / {same['q8_0']}/{n} |",
        f"| conversion time f32 / q8_0 | {result['convert_seconds_f32']} s / {result['convert_seconds_q8_0']} s |",
        f"| GGUF size f32 / q8_0 | {result['gguf_mib_f32']} MiB / {result['gguf_mib_q8_0']} MiB |",
        "",
        "| engine (batch 1, greedy) | ms per token | speed-up |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {v['ms_per_token']} | {v['speedup_vs_generate']}x |" for k, v in result["timings"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--translation", type=Path, help="a finished translation run that exported final-bart")
    parser.add_argument("--llama-cpp", type=Path, help="llama.cpp's source folder (holds convert_hf_to_gguf.py)")
    parser.add_argument("--decoder", type=Path, help="with --llama-cpp: a causal-LM run that exported final-llama")
    parser.add_argument("--new-tokens", type=int, default=24)
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
        if not args.decoder:
            parser.error("--llama-cpp needs --decoder RUN_DIR (a run of causal_lm_pydoc.yaml, which exports as Llama)")
        result = llama_cpp(args.llama_cpp, args.decoder, args.new_tokens, args.rounds * 5)
        sections.append(("llama_cpp", result, _markdown_llama))
    for name, result, markdown in sections:
        result["machine"] = info
        (RESULTS / f"deploy-{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        text = markdown(result, machine)
        (RESULTS / f"deploy-{name}.md").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
