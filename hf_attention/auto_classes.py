"""Which classes a checkpoint of each model type names in its `auto_map`, by class name.

Saving a model (pretrained.py) writes this map into config.json; `modeling_hf_attention.py`, the module the map
names, imports every family and turns the names into the classes it registers with the Auto classes. Keeping the
names here lets saving read them without importing the families, which import pretrained.py themselves.
"""

from .configuration_hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionRecurrentConfig,
    HFAttentionSeq2SeqConfig,
)

CONFIG_CLASSES = {
    config_class.model_type: config_class
    for config_class in (
        HFAttentionEncoderConfig,
        HFAttentionDecoderConfig,
        HFAttentionSeq2SeqConfig,
        HFAttentionRecurrentConfig,
    )
}

# model_type → {Auto class name: model class name}
AUTO_CLASS_NAMES = {
    HFAttentionEncoderConfig.model_type: {
        "AutoModel": "HFAttentionEncoderModel",
        "AutoModelForMaskedLM": "HFAttentionForMaskedLM",
        "AutoModelForSequenceClassification": "HFAttentionForSequenceClassification",
        "AutoModelForTokenClassification": "HFAttentionForTokenClassification",
    },
    HFAttentionDecoderConfig.model_type: {
        "AutoModel": "HFAttentionDecoderModel",
        "AutoModelForCausalLM": "HFAttentionForCausalLM",
        "AutoModelForSequenceClassification": "HFAttentionDecoderForSequenceClassification",
    },
    HFAttentionSeq2SeqConfig.model_type: {
        "AutoModel": "HFAttentionSeq2SeqModel",
        "AutoModelForSeq2SeqLM": "HFAttentionForSeq2SeqLM",
    },
    HFAttentionRecurrentConfig.model_type: {
        "AutoModel": "HFAttentionRecurrentModel",
        "AutoModelForSeq2SeqLM": "HFAttentionRecurrentForSeq2SeqLM",
    },
}


def auto_map_of(model_type: str, config_class: type | None = None) -> dict[str, str]:
    """The `auto_map` of a checkpoint of `model_type`: its config class and every Auto class of its family →
    "file.Class" (`config_class` defaults to the family's)."""
    config_class = config_class or CONFIG_CLASSES[model_type]
    auto_map = {"AutoConfig": f"configuration_hf_attention.{config_class.__name__}"}
    auto_map.update({auto: f"modeling_hf_attention.{name}" for auto, name in AUTO_CLASS_NAMES[model_type].items()})
    return auto_map
