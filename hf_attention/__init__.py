"""hf-attention: from-scratch Transformer encoder, decoder and encoder-decoder models that behave like built-in
Hugging Face models. Importing the package registers the four families with the Auto classes."""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .configuration_hf_attention import (
    HFAttentionConfigBase,
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionRecurrentConfig,
    HFAttentionSeq2SeqConfig,
)
from .modeling_hf_attention import (
    AUTO_CLASSES,
    HFAttentionDecoderForSequenceClassification,
    HFAttentionDecoderModel,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
    HFAttentionPreTrainedModel,
    HFAttentionSeq2SeqModel,
)
from .recurrent import HFAttentionRecurrentForSeq2SeqLM, HFAttentionRecurrentModel

__version__ = "0.1.0"

_AUTO = {
    "AutoModel": AutoModel,
    "AutoModelForCausalLM": AutoModelForCausalLM,
    "AutoModelForMaskedLM": AutoModelForMaskedLM,
    "AutoModelForSeq2SeqLM": AutoModelForSeq2SeqLM,
    "AutoModelForSequenceClassification": AutoModelForSequenceClassification,
    "AutoModelForTokenClassification": AutoModelForTokenClassification,
}
for _config_class in (
    HFAttentionEncoderConfig,
    HFAttentionDecoderConfig,
    HFAttentionSeq2SeqConfig,
    HFAttentionRecurrentConfig,
):
    AutoConfig.register(_config_class.model_type, _config_class, exist_ok=True)
    for _auto_name, _model_class in AUTO_CLASSES[_config_class.model_type].items():
        _AUTO[_auto_name].register(_config_class, _model_class, exist_ok=True)

# The seq2seq text-to-text pipeline (task "hf-attention-text2text"); cheap, transformers.pipelines is already loaded.
from .pipelines import register_pipelines  # noqa: E402

register_pipelines()

__all__ = [
    "HFAttentionConfigBase",
    "HFAttentionDecoderConfig",
    "HFAttentionDecoderForSequenceClassification",
    "HFAttentionDecoderModel",
    "HFAttentionEncoderConfig",
    "HFAttentionEncoderModel",
    "HFAttentionForCausalLM",
    "HFAttentionForMaskedLM",
    "HFAttentionForSeq2SeqLM",
    "HFAttentionForSequenceClassification",
    "HFAttentionForTokenClassification",
    "HFAttentionPreTrainedModel",
    "HFAttentionRecurrentConfig",
    "HFAttentionRecurrentForSeq2SeqLM",
    "HFAttentionRecurrentModel",
    "HFAttentionSeq2SeqConfig",
    "HFAttentionSeq2SeqModel",
]
