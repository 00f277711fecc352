"""Language identification: which language a UI string of the machine's gettext catalogs is in, learnt by an
encoder with a classification head (`AutoModelForSequenceClassification`, our
`HFAttentionForSequenceClassification`). The saved folder loads with `pipeline("text-classification", model=DIR)`
and answers with language codes (id2label / label2id come from the corpus's `ClassLabel` names).

Fine-tuned with 🤗 Trainer (training.finetune, the default task); scored by accuracy and macro-F1.
"""

from __future__ import annotations

from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from training import data as data_lib
from training.metrics import classification_metrics
from training.objective import FINETUNE, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective


def load_corpus(data_args):
    """A `text` column and its `label` (a ClassLabel of the language codes, in the order of `languages`)."""
    return data_lib.language_id_corpus(
        [lang.strip() for lang in data_args.languages.split(",") if lang.strip()],
        min_chars=data_args.min_chars,
        max_chars=data_args.max_chars,
        max_per_language=data_args.max_per_language,
        max_catalogs=data_args.max_catalogs,
    )


def featurize(split, tokenizer, data_args):
    return split.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=data_args.max_length),
        batched=True,
        remove_columns=["text"],
    )


def make_collator(tokenizer, model, data_args):
    return DataCollatorWithPadding(tokenizer)


def label_fields(splits) -> dict:
    """The classifier's labels, named by their language codes."""
    labels = splits["train"].features["label"].names
    return {
        "num_labels": len(labels),
        "id2label": dict(enumerate(labels)),
        "label2id": {name: i for i, name in enumerate(labels)},
    }


OBJECTIVE = Objective(
    name="language_id",
    entry_points=(FINETUNE,),
    model=ModelSpec(
        our_model_type="hf_attention_encoder",
        auto_class=AutoModelForSequenceClassification,
        architecture="an encoder",
        example_model_types=("bert", "roberta"),
        encoder_decoder=False,
        config_from_data=label_fields,
        peft_task_type="SEQ_CLS",
        modules_to_save=("classifier",),  # the new head learns in full beside the adapter
    ),
    data=DataSpec(
        load_corpus=load_corpus,
        text_columns=("text",),
        tokenizer_kind="masked",
        tokenizer_max_length=lambda data_args: data_args.max_length,
        featurize=featurize,
        make_collator=make_collator,
    ),
    evaluation=EvaluationSpec(
        predicts_next_token=False,
        scores_translations=False,
        trainer_metrics=lambda tokenizer: classification_metrics,
    ),
    card=CardSpec(
        default_dataset="gettext-catalogs",
        default_corpus_description="UI strings of the gettext catalogs installed on the training machine in the "
        "languages {languages}, labelled by language",
        pipeline_task="text-classification",
        task_name="Text classification",
        custom_pipeline=False,
        example="Datei konnte nicht geöffnet werden",
        intended_use="Telling which language a short user-interface string is in; research / teaching.",
    ),
    options=("languages", "max_per_language", "max_catalogs", "max_chars", "max_length"),
)
