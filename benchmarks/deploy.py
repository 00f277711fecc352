"""Engines no one here wrote, run on what `hf-attention export` writes: CTranslate2 and llama.cpp.

    python -m benchmarks.deploy --translation RUN_DIR            # CTranslate2: float32 and int8 vs our generate()
    python -m benchmarks.deploy --llama-cpp LLAMA_CPP_DIR --decoder RUN_DIR   # llama.cpp: GGUF f32 and q8_0

`--translation` takes the folder of a finished translation run whose model exports as BART (for instance the main job,
`training/configs/translation_en_de.yaml`, which writes RUN_DIR/final-bart): the run's test split (all of it unless
--rows) is rebuilt from its run_config.json, CTranslate2's own TransformersConverter converts final-bart to float32 and
int8, and the three engines translate the same sources greedily and with the run's beams (its generation config's
num_beams and length_penalty), interleaved round by round. Reported per mode: how many translations have token ids
identical to generate()'s, BLEU/chrF and the share of placeholders kept of the text a user gets, and sentences per
second. A model trained with `protect_placeholders` (its tokenizer holds the sentinels) reads protected sources in
every engine, and each engine's translations are restored (`hf_attention.modeling.placeholders`), with the translations
whose sentinels went wrong counted; `ctranslate2_translate` is CTranslate2's strings-to-strings function for
`translate_protected`.

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
import functools
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
    from training.data.splits import split_corpus
    from training.objectives import objective_for

    saved = json.loads((run_dir / "run_config.json").read_text())
    objective = objective_for(saved["model"]["objective"])
    data_args = DataArguments(**saved["data"])
    return split_corpus(objective, objective.data.load_corpus(data_args), data_args)["test"], saved


def translation(run_dir: Path, rows: int | None, rounds: int, batch_size: int) -> dict:
    """Our generate() against CTranslate2 float32 and int8 on the run's test split, greedy and with the run's beams:
    the token ids of each translation compared with generate()'s, the scores of the text a user gets (protected and
    restored when the model was trained so), and sentences per second, interleaved round by round."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_attention  # noqa: F401  (registers our classes)
    from hf_attention.modeling.placeholders import tokenizer_protects
    from training.finish.metrics import bleu_chrf, placeholder_accuracy

    split, saved = test_split(run_dir)
    split = split.select(range(min(rows or len(split), len(split))))
    sources, references = list(split["source"]), list(split["target"])
    standard = run_dir / "final-bart"
    if not standard.is_dir():
        raise SystemExit(f"{standard} is missing: train with --export_to bart (translation_en_de.yaml does).")
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "final")
    ours = AutoModelForSeq2SeqLM.from_pretrained(run_dir / "final").eval()
    max_source, max_new = saved["data"]["max_source_length"], saved["data"]["max_target_length"]
    beams = ours.generation_config.num_beams or 1
    length_penalty = ours.generation_config.length_penalty if beams > 1 else 1.0
    protected = tokenizer_protects(tokenizer)
    modes = {"greedy": 1, **({f"beam {beams}": beams} if beams > 1 else {})}
    table = []
    with tempfile.TemporaryDirectory() as folder:
        converted = {}
        for precision in ("float32", "int8"):
            output = Path(folder) / precision
            TransformersConverter(str(standard)).convert(str(output), quantization=precision, force=True)
            converted[precision] = ctranslate2.Translator(
                str(output), device="cpu", compute_type=precision, intra_threads=torch.get_num_threads()
            )
        for mode, beam_size in modes.items():
            settings = {"max_source_length": max_source, "max_new_tokens": max_new, "num_beams": beam_size}
            settings |= {"length_penalty": length_penalty, "batch_size": batch_size}
            engines = {"hf-attention generate()": functools.partial(generate_ids, ours, tokenizer, **settings)}
            for precision, translator in converted.items():
                engines[f"CTranslate2 {precision}"] = functools.partial(
                    ctranslate2_ids, translator, tokenizer, **settings
                )
            table += _compare_engines(
                engines, sources, references, tokenizer, protected, rounds, mode, bleu_chrf, placeholder_accuracy
            )
    return {
        "run": str(run_dir),
        "rows": len(sources),
        "rounds": rounds,
        "batch_size": batch_size,
        "num_beams": beams,
        "length_penalty": length_penalty,
        "protected_placeholders": protected,
        "table": table,
    }


def _compare_engines(engines, sources, references, tokenizer, protected, rounds, mode, bleu_chrf, accuracy):
    """One decoding mode: each engine's token ids (compared with generate()'s), the restored text's scores, and its
    median time over `rounds` interleaved rounds (A B C A B C …) after a warm-up that gives the ids compared."""
    from hf_attention.modeling.placeholders import protect_batch, restore_batch

    read, originals = protect_batch(sources) if protected else (sources, None)
    ids, seconds = {}, {name: [] for name in engines}
    for name, engine in engines.items():
        ids[name] = engine(read)
    for _ in range(rounds):
        for name, engine in engines.items():
            start = time.perf_counter()
            engine(read)
            seconds[name].append(time.perf_counter() - start)
    reference_ids, reference_seconds = (
        ids["hf-attention generate()"],
        statistics.median(seconds["hf-attention generate()"]),
    )
    rows = []
    for name in engines:
        texts = [tokenizer.decode(row, skip_special_tokens=True) for row in ids[name]]
        restored = restore_batch(texts, originals) if protected else None
        hypotheses = [r.text for r in restored] if protected else texts
        median = statistics.median(seconds[name])
        same = sum(a == b for a, b in zip(ids[name], reference_ids, strict=True))
        rows.append(
            {
                "mode": mode,
                "engine": name,
                "identical_to_generate": f"{same}/{len(sources)}",
                **bleu_chrf(hypotheses, references),
                "placeholders": accuracy(sources, hypotheses),
                "placeholder_problems": sum(bool(r.problems) for r in restored) if protected else None,
                "sentences_per_second": round(len(sources) / median, 1),
                "median_seconds": round(median, 3),
                "speedup_vs_generate": round(reference_seconds / median, 2),
            }
        )
    return rows


def generate_ids(
    model, tokenizer, texts: list[str], *, max_source_length: int, max_new_tokens: int, num_beams: int = 1,
    length_penalty: float = 1.0, batch_size: int = 32,
) -> list[list[int]]:  # fmt: skip
    """Our generate()'s output ids for `texts` (no start, end or padding tokens), in batches sorted by length."""
    results: list[list[int]] = [[] for _ in texts]
    with torch.inference_mode():
        for batch in _length_batches(tokenizer, texts, max_source_length, batch_size):
            inputs = tokenizer(
                [texts[i] for i in batch], truncation=True, max_length=max_source_length, padding=True,
                return_tensors="pt",
            )  # fmt: skip
            inputs.pop("token_type_ids", None)
            # num_beams always given: the model's generation config may ask for beams (the main job's does)
            beam = {"num_beams": num_beams, **({"length_penalty": length_penalty} if num_beams > 1 else {})}
            generated = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, **beam)
            for index, row in zip(batch, generated.tolist(), strict=True):
                results[index] = _strip(row[1:], tokenizer)
    return results


def ctranslate2_ids(
    translator, tokenizer, texts: list[str], *, max_source_length: int, max_new_tokens: int, num_beams: int = 1,
    length_penalty: float = 1.0, batch_size: int = 32,
) -> list[list[int]]:  # fmt: skip
    """CTranslate2's output ids for `texts` with the model's own tokenizer (the same ids, sentinels included), in the
    same batches as `generate_ids`."""
    results: list[list[int]] = [[] for _ in texts]
    for batch in _length_batches(tokenizer, texts, max_source_length, batch_size):
        tokens = [
            tokenizer.convert_ids_to_tokens(ids)
            for ids in tokenizer([texts[i] for i in batch], truncation=True, max_length=max_source_length)["input_ids"]
        ]
        outputs = translator.translate_batch(
            tokens, beam_size=num_beams, length_penalty=length_penalty, max_decoding_length=max_new_tokens,
            max_batch_size=batch_size,
        )  # fmt: skip
        for index, output in zip(batch, outputs, strict=True):
            results[index] = tokenizer.convert_tokens_to_ids(output.hypotheses[0])
    return results


def _length_batches(tokenizer, texts: list[str], max_source_length: int, batch_size: int) -> list[list[int]]:
    """Indices of `texts` in batches of similar token length, longest first (as a server batches requests)."""
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_source_length)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def ctranslate2_translate(
    translator, tokenizer, texts: list[str], *, max_source_length: int, max_new_tokens: int, beam_size: int = 1
) -> list[str]:
    """CTranslate2's translations of `texts`, strings in and strings out with the model's own tokenizer (the same
    token ids, sentinels included): what `translate_protected(texts, translate_fn)` calls."""
    ids = ctranslate2_ids(
        translator, tokenizer, texts, max_source_length=max_source_length, max_new_tokens=max_new_tokens,
        num_beams=beam_size,
    )  # fmt: skip
    return [tokenizer.decode(row, skip_special_tokens=True) for row in ids]


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
            return llama_cpp_greedy(engine, ids, new_tokens, tokenizer.eos_token_id)

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


def llama_cpp_greedy(engine, ids: list[int], new_tokens: int, eos: int) -> list[int]:
    """llama.cpp's greedy continuation of `ids` (top-1, no penalty, from an empty context), up to `new_tokens`
    tokens or the end of sequence."""
    out = []
    for token in engine.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        out.append(token)
        if token == eos or len(out) == new_tokens:
            break
    return _until_eos(out, eos)


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
        f"CTranslate2 on the exported BART ({result['rows']} test rows, batch {result['batch_size']}, median of "
        f"{result['rounds']} interleaved rounds; {machine})",
        "",
        "| decoding | engine | token ids identical to generate() | BLEU | chrF | placeholders kept | "
        "placeholder problems | sentences/s | speed-up |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["table"]:
        problems = row.get("placeholder_problems")
        kept = row.get("placeholders")
        lines.append(
            f"| {row['mode']} | {row['engine']} | {row['identical_to_generate']} | {row['bleu']:.2f} | "
            f"{row['chrf']:.2f} | {'–' if kept is None else f'{kept}%'} | {'–' if problems is None else problems} | "
            f"{row['sentences_per_second']} | {row['speedup_vs_generate']}x |"
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
    parser.add_argument("--rows", type=int, default=None, help="test rows (default: the whole split)")
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
