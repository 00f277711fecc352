"""Translation: an encoder-decoder learns English → `target_lang` UI strings of the gettext catalogs (or the user's
pairs) by teacher forcing; it is scored by BLEU / chrF of its generated translations.

Trained by both entry points: training.train (the Accelerate loop, the main recipe) and training.finetune
(Seq2SeqTrainer, e.g. from a trained checkpoint).

With `protect_placeholders`, the model learns from protected pairs (hf_attention/placeholders.py): the tokenizer is
trained on them and holds the sentinels, and the features of every split are the protected pairs, as they are
whenever the tokenizer holds the sentinels (a protected checkpoint fine-tuned by training.finetune too). The markup
augmentation runs before, on the raw pairs, so its tags and placeholders become sentinels as well.
"""

from __future__ import annotations

from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq

from hf_attention.placeholders import protect_pair, tokenizer_protects
from training import data as data_lib
from training.corpus import parallel_corpus
from training.markup_augmentation import augment_with_markup
from training.metrics import translation_metrics
from training.objective import FINETUNE, TRAIN, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective


def featurize(split, tokenizer, data_args):
    return data_lib.translation_features(
        split,
        tokenizer,
        max_source_length=data_args.max_source_length,
        max_target_length=data_args.max_target_length,
        protect_placeholders=tokenizer_protects(tokenizer),
    )


def tokenizer_texts(train, data_args):
    """Sources and targets, protected with `protect_placeholders` (the tokenizer learns the text around sentinels)."""
    if not data_args.protect_placeholders:
        return [*train["source"], *train["target"]]
    pairs = [protect_pair(source, target) for source, target in zip(train["source"], train["target"], strict=True)]
    return [masked_source for masked_source, _, _ in pairs] + [masked_target for _, masked_target, _ in pairs]


def augment_train(train, held_out_sources, data_args):
    return augment_with_markup(
        train,
        fraction=data_args.markup_augmentation,
        max_chars=data_args.max_chars,
        held_out_sources=held_out_sources,
    )


def make_collator(tokenizer, model, data_args):
    # with the model: decoder_input_ids are the labels shifted right
    return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, padding=True)


def set_generation_defaults(config, model, tokenizer, generation) -> None:
    config.decoder_start_token_id = model.config.decoder_start_token_id
    config.num_beams = generation.num_beams
    if generation.num_beams > 1:  # a beam-search setting (a greedy config that holds one fails validation)
        config.length_penalty = generation.length_penalty
    config.max_new_tokens = generation.max_new_tokens
    config.max_length = None


OBJECTIVE = Objective(
    name="translation",
    entry_points=(TRAIN, FINETUNE),
    model=ModelSpec(
        our_model_type="hf_attention_seq2seq",
        auto_class=AutoModelForSeq2SeqLM,
        architecture="an encoder-decoder",
        example_model_types=("bart", "marian"),
        encoder_decoder=True,
        peft_task_type="SEQ_2_SEQ_LM",
    ),
    data=DataSpec(
        load_corpus=parallel_corpus,
        text_columns=("source", "target"),
        tokenizer_kind="seq2seq",
        tokenizer_max_length=lambda data_args: max(data_args.max_source_length, data_args.max_target_length),
        featurize=featurize,
        make_collator=make_collator,
        augment_train=augment_train,
        tokenizer_texts=tokenizer_texts,
        placeholder_sentinels=lambda data_args: data_args.protect_placeholders,
    ),
    evaluation=EvaluationSpec(
        predicts_next_token=False,
        scores_translations=True,
        set_generation_defaults=set_generation_defaults,
        trainer_metrics=translation_metrics,
    ),
    card=CardSpec(
        default_dataset="gettext-catalogs",
        default_corpus_description=(
            "English → `{target_lang}` user-interface strings from gettext catalogs (the kind of data in the OPUS "
            "GNOME/KDE/Ubuntu corpora): single-line, not format-only, translated, de-duplicated pairs of at most "
            "{max_chars} characters"
        ),
        pipeline_task="translation",
        task_name="Translation",
        custom_pipeline=True,
        example="Open the file",
        intended_use="Translating short English user-interface strings (menu items, buttons, messages) into "
        "the target language; a small research / teaching model for comparing attention designs.",
        limitations='UI strings are short and often lack context, so ambiguous words ("Open", "Close") '
        "are translated by frequency; long sentences are outside the training distribution.",
    ),
    options=(
        "source_column",
        "target_column",
        "target_lang",
        "max_chars",
        "max_catalogs",
        "system_catalogs",
        "catalog_packages",
        "heldout_catalog_packages",
        "max_ood_samples",
        "markup_augmentation",
        "protect_placeholders",
        "max_source_length",
        "max_target_length",
        "generation_num_beams",
        "generation_length_penalty",
        "generation_max_new_tokens",
        "bleu_samples",
        "eval_bleu_during_training",
    ),
)
