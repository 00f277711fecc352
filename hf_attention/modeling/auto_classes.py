"""Which classes a checkpoint of each model type names in its `auto_map`: "module.Class", the module that defines the
class.

Saving a model (pretrained.py) writes this map into config.json, and `trust_remote_code=True` imports the module
each entry names from the code shipped beside the weights; `modeling_hf_attention.py` turns the entries into the
classes it registers with the Auto classes (an entry naming the wrong module fails there, at import). Keeping the
entries here as text lets saving read them without importing the families, which import pretrained.py themselves.
"""

from .configuration_hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionSeq2SeqConfig,
)
from .configuration_recurrent import HFAttentionRecurrentConfig

CONFIG_CLASSES = {
    config_class.model_type: config_class
    for config_class in (
        HFAttentionEncoderConfig,
        HFAttentionDecoderConfig,
        HFAttentionSeq2SeqConfig,
        HFAttentionRecurrentConfig,
    )
}

# model_type → {Auto class name: "module.Class" of the model class}
AUTO_CLASS_PATHS = {
    HFAttentionEncoderConfig.model_type: {
        "AutoModel": "encoder_family.HFAttentionEncoderModel",
        "AutoModelForMaskedLM": "encoder_family.HFAttentionForMaskedLM",
        "AutoModelForSequenceClassification": "encoder_family.HFAttentionForSequenceClassification",
        "AutoModelForTokenClassification": "encoder_family.HFAttentionForTokenClassification",
    },
    HFAttentionDecoderConfig.model_type: {
        "AutoModel": "decoder_family.HFAttentionDecoderModel",
        "AutoModelForCausalLM": "decoder_family.HFAttentionForCausalLM",
        "AutoModelForSequenceClassification": "decoder_family.HFAttentionDecoderForSequenceClassification",
    },
    HFAttentionSeq2SeqConfig.model_type: {
        "AutoModel": "encoder_decoder_family.HFAttentionSeq2SeqModel",
        "AutoModelForSeq2SeqLM": "encoder_decoder_family.HFAttentionForSeq2SeqLM",
    },
    HFAttentionRecurrentConfig.model_type: {
        "AutoModel": "recurrent.HFAttentionRecurrentModel",
        "AutoModelForSeq2SeqLM": "recurrent.HFAttentionRecurrentForSeq2SeqLM",
    },
}


def auto_map_of(model_type: str, config_class: type | None = None) -> dict[str, str]:
    """The `auto_map` of a checkpoint of `model_type`: its config class and every Auto class of its family →
    "module.Class" (`config_class` defaults to the family's)."""
    config_class = config_class or CONFIG_CLASSES[model_type]
    module = config_class.__module__.rsplit(".", 1)[-1]  # the file that defines it, as for the model classes
    return {"AutoConfig": f"{module}.{config_class.__name__}", **AUTO_CLASS_PATHS[model_type]}
