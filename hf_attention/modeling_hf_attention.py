"""The hf-attention model families as Hugging Face `PreTrainedModel`s: the module `auto_map` names.

Notation: B batch, T (target) length, S source length, E model dim, V vocabulary.

Checkpoints name their classes as `modeling_hf_attention.<Class>` (config.json's `auto_map`), so this module gathers
the public classes of the remote-code closure, registers them with the Auto classes and is what `save_pretrained`
copies (with every sibling it imports) beside the weights. The code lives in modules by job:
- builders.py: config → leaf modules (positional scheme, attention, layers, norms);
- stack.py: `TransformerStack`, embeddings → positions → masks → layers, with its input checks in input_checks.py;
- pretrained.py: `HFAttentionPreTrainedModel` (initialisation, backend checks, vocabulary head, saving) and the base
  model of one stack; heads.py: what every head shares;
- encoder_family.py (BERT-like), decoder_family.py (GPT-like), encoder_decoder_family.py (Vaswani 2017): each
  family's base model, its head base (`EncoderHead`, `DecoderHead`, `Seq2SeqHead`: a new head is one small class on
  it) and its heads;
- signatures.py: forward signatures computed once (generate() asks for them at every step).
Masks and positional signals are computed once per stack and passed to every layer; caches are HF Cache objects.
"""

from .auto_classes import AUTO_CLASS_NAMES, auto_map_of
from .builders import build_attention, build_layer, build_norm, build_positional
from .configuration_hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionRecurrentConfig,
    HFAttentionSeq2SeqConfig,
)
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
from .losses import shift_tokens_right
from .pretrained import HFAttentionPreTrainedModel, OneStackModel
from .recurrent import HFAttentionRecurrentForSeq2SeqLM, HFAttentionRecurrentModel
from .signatures import store_forward_signatures
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
    "HFAttentionSeq2SeqModel",
    "HFAttentionSeq2SeqPreTrainedModel",
    "OneStackModel",
    "Seq2SeqHead",
    "TransformerStack",
    "auto_map_of",
    "build_attention",
    "build_layer",
    "build_norm",
    "build_positional",
    "shift_tokens_right",
]

# The classes defined in this file before it was split by job live here for transformers: `save_pretrained` copies
# the file of a class's `__module__` (and its relative imports) and writes "<that module>.<Class>" into auto_map, and
# transformers reads that file's source to decide whether the attention implementation can be switched. Pickles
# name the same module as before too.
_MOVED_CLASSES = (
    HFAttentionPreTrainedModel,
    TransformerStack,
    HFAttentionEncoderPreTrainedModel,
    HFAttentionEncoderModel,
    HFAttentionForMaskedLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
    HFAttentionDecoderPreTrainedModel,
    HFAttentionDecoderModel,
    HFAttentionForCausalLM,
    HFAttentionDecoderForSequenceClassification,
    HFAttentionSeq2SeqPreTrainedModel,
    HFAttentionSeq2SeqModel,
    HFAttentionForSeq2SeqLM,
)
for _class in _MOVED_CLASSES:
    _class.__module__ = __name__

# model_type → {Auto class name: model class}: what `import hf_attention` registers and what `auto_map` lists.
_PUBLIC_CLASSES = {
    cls.__name__: cls for cls in (*_MOVED_CLASSES, HFAttentionRecurrentModel, HFAttentionRecurrentForSeq2SeqLM)
}
AUTO_CLASSES = {
    model_type: {auto: _PUBLIC_CLASSES[name] for auto, name in names.items()}
    for model_type, names in AUTO_CLASS_NAMES.items()
}


# Saving any of these classes copies this package's closure next to the weights (remote code).
for _family in AUTO_CLASSES.values():
    for _auto_name, _model_class in _family.items():
        _model_class.register_for_auto_class(_auto_name)
for _config_class in (
    HFAttentionEncoderConfig,
    HFAttentionDecoderConfig,
    HFAttentionSeq2SeqConfig,
    HFAttentionRecurrentConfig,
):
    _config_class.register_for_auto_class()


store_forward_signatures(model_class for family in AUTO_CLASSES.values() for model_class in family.values())
