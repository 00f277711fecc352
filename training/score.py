"""Score a trained model on its run's test (and extra) splits, with any decoding settings, as its objective scores
the outputs it generates.

    python -m training.score outputs/translation_en_de/final --config training/configs/translation_en_de.yaml \\
        --num_beams 4 --length_penalty 1.0 [--split validation] [--weights checkpoints/step_00720/model.safetensors]

The config's objective says how (`EvaluationSpec.score_outputs`); one scored by its loss only is refused. The
splits are rebuilt from the config exactly as the run built them (same corpus, same hash split), so the figures are
comparable with the run's own, and printed as one JSON line: for translation, BLEU / chrF, placeholder accuracy, the
share of stuttering outputs and the copy-the-source baseline of the test and out-of-domain splits. `--weights`
scores other weights of the same model (e.g. a checkpoint's, before checkpoint averaging). Choosing decoding
settings: compare them on `--split validation`. A model trained with placeholder protection decodes constrained to
place each source sentinel exactly once, as the run and the pipeline do; `--unconstrained` shows what the model does
alone (as CTranslate2 decodes).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from accelerate import Accelerator
from safetensors.torch import load_model
from transformers import AutoTokenizer

import hf_attention  # noqa: F401  (registers our model types with the Auto classes)
from hf_attention.modeling.placeholders import tokenizer_protects
from training.args import parse_args
from training.data.splits import SPLITS, split_corpus
from training.finish.evaluate import GenerationSettings
from training.objective import Objective
from training.objectives import OBJECTIVES, objective_for
from training.train import resolve_mixed_precision


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="An exported model folder (config, weights, tokenizer).")
    parser.add_argument("--config", required=True, help="The run's YAML config: its data fields rebuild the splits.")
    parser.add_argument("--num_beams", type=int, default=None, help="Default: the config's generation_num_beams.")
    parser.add_argument("--length_penalty", type=float, default=None)
    parser.add_argument(
        "--split", default=None, help="test, validation or an extra split such as ood (default: test and the extras)."
    )
    parser.add_argument("--limit", type=int, default=None, help="Score the first N rows (default: the config's).")
    parser.add_argument(
        "--unconstrained",
        action="store_true",
        help="A model with placeholder protection: decode without the sentinel constraint (as CTranslate2 does), "
        "to see what the model does alone; by default each output places exactly its source's sentinels.",
    )
    parser.add_argument("--weights", default=None, help="A safetensors file of other weights for the same model.")
    return parser


def scoring_objective(name: str) -> Objective:
    """The objective `name` when it scores generated outputs, else a ValueError naming it and those that do."""
    objective = objective_for(name)
    if objective.evaluation.score_outputs is None:
        scored = [other for other, spec in OBJECTIVES.items() if spec.evaluation.score_outputs is not None]
        raise ValueError(
            f"training.score cannot score objective {name!r}: it is scored by its loss only, which the run reports. "
            f"Objectives training.score scores: {', '.join(map(repr, scored)) or 'none'}."
        )
    return objective


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    model_args, data_args, train_args, _ = parse_args(["--config", options.config])
    objective = scoring_objective(model_args.objective)
    splits = split_corpus(objective, objective.data.load_corpus(data_args), data_args)
    model = objective.model.auto_class.from_pretrained(options.model)
    if options.weights:
        load_model(model, options.weights)
    tokenizer = AutoTokenizer.from_pretrained(options.model)
    settings = GenerationSettings.from_args(data_args, train_args)
    if options.num_beams is not None:
        settings = replace(settings, num_beams=options.num_beams)
    if options.length_penalty is not None:
        settings = replace(settings, length_penalty=options.length_penalty)
    if options.unconstrained:
        settings = replace(settings, constrain_placeholders=False)
    # The run's precision (mixed_precision: auto → bf16 autocast where the CPU multiplies bf16 natively).
    accelerator = Accelerator(cpu=True, mixed_precision=resolve_mixed_precision(train_args.mixed_precision, False))
    extra = [name for name in splits if name not in SPLITS]  # the objective's own test splits (out-of-domain)
    names = [options.split] if options.split else [n for n in ("test", *extra) if n in splits]
    results = {"num_beams": settings.num_beams, "length_penalty": settings.length_penalty}
    if tokenizer_protects(tokenizer):
        results["constrain_placeholders"] = settings.constrain_placeholders
    for name in names:
        if name not in splits:
            raise ValueError(f"--split {name!r}: the config gives the splits {sorted(splits)}.")
        limit = options.limit or (train_args.bleu_samples if name == "test" else None)
        scores, _ = objective.evaluation.score_outputs(
            accelerator, model, tokenizer, splits[name], settings, limit=limit
        )
        results.update({f"{name}_{key}": value for key, value in scores.items()})
        results[f"{name}_rows"] = min(limit or len(splits[name]), len(splits[name]))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
