"""transformers' own `ModelTesterMixin` (from the installed release, tests/transformers_release_tests.py) on every
family: the encoder, the decoder, the encoder-decoder and the recurrent encoder-decoder, each with all its classes.

A tester here is what a model added to transformers writes for its tests/models/<name>/test_modeling_<name>.py: a tiny
config and the inputs of the common checks. Our model types are added to transformers' name tables of the task
classes (as a model in the library is), so that the mixin prepares labels for our heads as for theirs.
"""

import unittest

import pytest
import torch
from transformers.models.auto import modeling_auto
from transformers.utils import logging as transformers_logging
from transformers_release_tests import GenerationTesterMixin, ModelTesterMixin, ids_tensor, random_attention_mask

import hf_attention
from hf_attention.modeling.auto_classes import AUTO_CLASS_PATHS

# transformers' tests check its deprecation warnings (FutureWarning), which the suite's settings hide elsewhere.
pytestmark = pytest.mark.filterwarnings("default::FutureWarning")

# Auto class name → transformers' table of the class names of that task (model_type → class name).
_TASK_TABLES = {
    "AutoModelForMaskedLM": modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    "AutoModelForSequenceClassification": modeling_auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    "AutoModelForTokenClassification": modeling_auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
    "AutoModelForCausalLM": modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    "AutoModelForSeq2SeqLM": modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    "AutoModel": modeling_auto.MODEL_MAPPING_NAMES,
}


@pytest.fixture(autouse=True, scope="module")
def _our_task_names():
    """Our classes in transformers' task tables while this module runs (a table maps one model type to one class
    name, so the decoder family's sequence classifier shares the key of its causal LM: keys are made unique)."""
    added = []
    for model_type, classes in AUTO_CLASS_PATHS.items():
        for auto_name, path in classes.items():
            table = _TASK_TABLES[auto_name]
            key = f"{model_type}:{auto_name}"
            table[key] = path.rsplit(".", 1)[1]
            added.append((table, key))
    yield
    for table, key in added:
        del table[key]


@pytest.fixture(autouse=True)
def _transformers_default_verbosity():
    """transformers' tests read its warnings (CaptureLogger), so they run at its default level, whatever a test
    before them on this worker set (benchmarks.run.main, run in-process by tests, silences transformers)."""
    level = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_warning()
    yield
    transformers_logging.set_verbosity(level)


class _Tester:
    """The sizes and inputs of the common checks (the sizes transformers' own testers use)."""

    batch_size = 13
    seq_length = 7
    is_training = True
    vocab_size = 99
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 4
    intermediate_size = 37

    def __init__(self, parent, family: str):
        self.parent = parent
        self.family = family
        if family == "recurrent":
            self.hidden_size = 16

    def get_config(self):
        fields = {
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
            "max_position_embeddings": 64,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
        }
        if self.family == "encoder":
            return hf_attention.HFAttentionEncoderConfig(num_hidden_layers=self.num_hidden_layers, **fields)
        if self.family == "decoder":
            return hf_attention.HFAttentionDecoderConfig(num_hidden_layers=self.num_hidden_layers, **fields)
        if self.family == "seq2seq":
            layers = self.num_hidden_layers
            return hf_attention.HFAttentionSeq2SeqConfig(
                encoder_layers=layers, decoder_layers=layers, decoder_start_token_id=1, **fields
            )
        return hf_attention.HFAttentionRecurrentConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            encoder_layers=2,
            decoder_layers=2,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        )

    def prepare_config_and_inputs_for_common(self):
        config = self.get_config()
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        if self.family == "recurrent":  # a recurrent encoder reads each row up to its last token: right padding
            lengths = ids_tensor([self.batch_size, 1], self.seq_length) + 1
            attention_mask = (torch.arange(self.seq_length) < lengths).long()
        else:
            attention_mask = random_attention_mask([self.batch_size, self.seq_length])
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.family in ("seq2seq", "recurrent"):
            decoder_input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
            inputs["decoder_input_ids"] = decoder_input_ids
            inputs["decoder_attention_mask"] = torch.ones_like(decoder_input_ids)
        return config, inputs


def _classes(model_type: str) -> tuple[type, ...]:
    names = AUTO_CLASS_PATHS[model_type].values()
    return tuple(getattr(hf_attention, path.rsplit(".", 1)[1]) for path in names)


class EncoderFamilyTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = _classes(hf_attention.HFAttentionEncoderConfig.model_type)

    def setUp(self):
        self.model_tester = _Tester(self, "encoder")


class DecoderFamilyTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = _classes(hf_attention.HFAttentionDecoderConfig.model_type)

    def setUp(self):
        self.model_tester = _Tester(self, "decoder")


class EncoderDecoderFamilyTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = _classes(hf_attention.HFAttentionSeq2SeqConfig.model_type)
    is_encoder_decoder = True

    def setUp(self):
        self.model_tester = _Tester(self, "seq2seq")


class RecurrentFamilyTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = _classes(hf_attention.HFAttentionRecurrentConfig.model_type)
    is_encoder_decoder = True
    # The mixin's attention checks read one self-attention map per layer of each stack; a recurrent model has none
    # (its one attention is the decoder's over the encoder, checked by tests/test_recurrent.py), so they do not apply.
    has_attentions = False
    # The encoder packs each row up to its length, read from the mask: data-dependent, so torch.export cannot trace it.
    test_torch_exportable = False

    def setUp(self):
        self.model_tester = _Tester(self, "recurrent")
        # A stacked recurrent encoder runs its layers in one call and reports two hidden states: its embeddings and
        # its output (transformers' hook for stacks that report another number than layers + 1).
        self.model_tester.expected_num_hidden_layers = 2
