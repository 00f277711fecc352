"""hf-attention: from-scratch Transformer encoder, decoder and encoder-decoder models that behave like built-in
Hugging Face models. Importing the package registers the four families with the Auto classes.

The folders say what each part is: modeling/ (the model code every checkpoint carries), architectures/ (one module per
standard architecture), conversion/ (`from_hf`, `to_hf`), inspection/ (attention maps, heatmaps, the explorer),
commands/ (the `hf-attention` command and where it writes), runtime/ (compiled generation, what the CPU computes fast).
"""

import sys
import types

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .modeling.configuration_hf_attention import (
    HFAttentionConfigBase,
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionSeq2SeqConfig,
)
from .modeling.configuration_recurrent import HFAttentionRecurrentConfig
from .modeling.modeling_hf_attention import (
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
from .modeling.recurrent import HFAttentionRecurrentForSeq2SeqLM, HFAttentionRecurrentModel
from .moved_modules import install as _install_old_module_paths

_install_old_module_paths()

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
from .modeling.pipelines import register_pipelines  # noqa: E402

register_pipelines()

from .conversion.from_hf import from_hf  # noqa: E402
from .conversion.to_hf import to_hf  # noqa: E402


class _Package(types.ModuleType):
    """`hf_attention.from_hf` and `hf_attention.to_hf` stay the functions: importing the old module path
    `hf_attention.to_hf` (moved_modules.py) would otherwise bind that module to the package's attribute of the name."""

    def __setattr__(self, name, value):
        if name in ("from_hf", "to_hf") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
    "from_hf",
    "to_hf",
]
