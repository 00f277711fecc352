"""The hf-attention model families as Hugging Face `PreTrainedModel`s: every public class in one place, and the
table of the Auto classes that `import hf_attention` registers.

Each class is defined in the module of its job, and checkpoints name it there (config.json's `auto_map`:
"decoder_family.HFAttentionForCausalLM", from auto_classes.py), so that tools that read source find it. This module
imports every family, which makes it, with the configurations and the pipeline, an entry of the shipped code
(closure.py). Where each module sits and what it holds: the README's code map.
"""

import importlib

from .auto_classes import AUTO_CLASS_PATHS, auto_map_of
from .builders import build_attention, build_norm, build_positional
from .configuration_hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionSeq2SeqConfig,
)
from .configuration_recurrent import HFAttentionRecurrentConfig
from .decoder_family import (
    DecoderHead,
    HFAttentionDecoderForSequenceClassification,
    HFAttentionDecoderModel,
    HFAttentionDecoderPreTrainedModel,
    HFAttentionForCausalLM,
)
from .encoder_decoder_family import (
    HFAttentionForSeq2SeqLM,
    HFAttentionSeq2SeqModel,
    HFAttentionSeq2SeqPreTrainedModel,
    Seq2SeqHead,
)
from .encoder_family import (
    EncoderClassifier,
    EncoderHead,
    HFAttentionEncoderModel,
    HFAttentionEncoderPreTrainedModel,
    HFAttentionForMaskedLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
)
from .layer_plan import build_layer
from .losses import shift_tokens_right
from .pretrained import HFAttentionPreTrainedModel, OneStackModel, TransformerPreTrainedModel
from .recurrent import (
    HFAttentionRecurrentForSeq2SeqLM,
    HFAttentionRecurrentModel,
    HFAttentionRecurrentPreTrainedModel,
)
from .stack import TransformerStack

__all__ = [
    "AUTO_CLASSES",
    "DecoderHead",
    "EncoderClassifier",
    "EncoderHead",
    "HFAttentionDecoderForSequenceClassification",
    "HFAttentionDecoderModel",
    "HFAttentionDecoderPreTrainedModel",
    "HFAttentionEncoderModel",
    "HFAttentionEncoderPreTrainedModel",
    "HFAttentionForCausalLM",
    "HFAttentionForMaskedLM",
    "HFAttentionForSeq2SeqLM",
    "HFAttentionForSequenceClassification",
    "HFAttentionForTokenClassification",
    "HFAttentionPreTrainedModel",
    "HFAttentionRecurrentForSeq2SeqLM",
    "HFAttentionRecurrentModel",
    "HFAttentionRecurrentPreTrainedModel",
    "HFAttentionSeq2SeqModel",
    "HFAttentionSeq2SeqPreTrainedModel",
    "OneStackModel",
    "Seq2SeqHead",
    "TransformerPreTrainedModel",
    "TransformerStack",
    "auto_map_of",
    "build_attention",
    "build_layer",
    "build_norm",
    "build_positional",
    "shift_tokens_right",
]


def _model_class(path: str) -> type:
    """The class an `auto_map` entry "module.Class" names, from that sibling module. An entry naming another module
    than the one that defines the class fails here, at import, rather than in a checkpoint loaded as remote code."""
    module_name, name = path.rsplit(".", 1)
    module = importlib.import_module(f".{module_name}", __package__)
    model_class = getattr(module, name, None)
    if model_class is None or model_class.__module__ != module.__name__:
        raise ImportError(f"auto_map entry {path!r}: {module_name}.py does not define {name}.")
    return model_class


# model_type → {Auto class name: model class}: what `import hf_attention` registers and what `auto_map` lists.
AUTO_CLASSES = {
    model_type: {auto: _model_class(path) for auto, path in paths.items()}
    for model_type, paths in AUTO_CLASS_PATHS.items()
}


# Saving any of these classes writes its auto_map entry and copies its code next to the weights (remote code).
for _family in AUTO_CLASSES.values():
    for _auto_name, _class in _family.items():
        _class.register_for_auto_class(_auto_name)
for _config_class in (
    HFAttentionEncoderConfig,
    HFAttentionDecoderConfig,
    HFAttentionSeq2SeqConfig,
    HFAttentionRecurrentConfig,
):
    _config_class.register_for_auto_class()
