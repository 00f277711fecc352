"""The bases of the model classes: `HFAttentionPreTrainedModel`, what every hf-attention model shares (the start of
the common weights, saving with the full `auto_map` and the package's code), `TransformerPreTrainedModel`, what the
three Transformer families add (backend checks, norms and positions, the vocabulary head; its loss step is in
losses.py, next to the loss), and the base model of one stack.

Notation: B batch, T length, E model dim, V vocabulary.
"""

import inspect
from pathlib import Path

from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers import initialization as init

from .activations import activation_options, gate_activation
from .auto_classes import auto_map_of
from .builders import build_norm
from .closure import copy_closure
from .configuration_hf_attention import HFAttentionConfigBase
from .decoding import DecodingState
from .gated_deltanet import GatedDeltaNet
from .layers import HeadTransform
from .linear_products import BlockedLinear, blockable
from .losses import VocabularyLoss, soft_cap
from .mixture_of_experts import EXPERT_MODULES, float32_weights
from .norms import NORMS
from .per_head_norm import PerHeadNorm
from .positional import PositionalEncoding
from .scores import ScoreModule
from .stack import TransformerStack


def store_forward_signature(model_class: type) -> None:
    """Store the signature of the `forward` that `model_class` defines on the function itself (an inherited one got
    it with the class that defines it).

    generate() asks at every step whether a remote-code model's forward takes `cache_position` (and registered Auto
    classes count as remote code), which `inspect.signature` answers by parsing the function each time: a signature
    stored on the function (`__signature__`, which inspect returns as is) makes that question a lookup. The base of
    every model class stores it when each class is made (`HFAttentionPreTrainedModel.__init_subclass__`), so a class
    loaded as remote code from its family's module alone gets it too.
    """
    forward = model_class.__dict__.get("forward")
    if forward is not None:
        forward.__signature__ = inspect.signature(forward)


class HFAttentionPreTrainedModel(PreTrainedModel):
    """The base of every hf-attention model, the recurrent family's included: the start of the weights all families
    have (linear layers, embeddings, attention scores), forward signatures stored once, and saving with the family's
    full `auto_map` and the package's code (what `hf-attention refresh-code` writes)."""

    base_model_prefix = "model"
    _skip_keys_device_placement = ["cache", "past_key_values"]  # the cache's name from transformers 5.24, and before

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        store_forward_signature(cls)

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, (ScoreModule, GatedDeltaNet, *EXPERT_MODULES)):  # they declare their own start
            module.init_weights(std)
        if isinstance(getattr(module, "sinks", None), nn.Parameter):  # attention sinks: normal(0, std), as GPT-OSS
            init.normal_(module.sinks, mean=0.0, std=std)

    def save_pretrained(self, save_directory, is_main_process: bool = True, *args, **kwargs):
        """Save weights (safetensors), config and this package's code, with an `auto_map` naming every Auto class
        of the family, so that `trust_remote_code=True` loads the folder where hf_attention is not installed.

        The code is the whole remote-code closure (closure.py), what `hf-attention refresh-code` writes: transformers
        itself copies only the module of the saved class and its imports. The family's `auto_map` entries replace
        those of an older checkpoint this model was loaded from (as refresh-code does); other entries are kept."""
        auto_map = auto_map_of(self.config.model_type, type(self.config))
        self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **auto_map}
        result = super().save_pretrained(save_directory, is_main_process, *args, **kwargs)
        if is_main_process and Path(save_directory).is_dir():  # transformers refuses a file and logs it
            copy_closure(save_directory)
        return result

    def _upload_modified_files(self, working_dir, *args, **kwargs):
        # save_pretrained(push_to_hub=True) uploads from inside transformers' save, before the closure is copied
        # above: copy it now, so that the upload carries it.
        copy_closure(working_dir)
        return super()._upload_modified_files(working_dir, *args, **kwargs)


class TransformerPreTrainedModel(VocabularyLoss, HFAttentionPreTrainedModel):
    """The base of the Transformer families (encoder, decoder, encoder-decoder): attention backends and their
    checks, gradient checkpointing, the start of norms and positional schemes, the vocabulary head (its loss step
    from `losses.VocabularyLoss`)."""

    config_class = HFAttentionConfigBase
    supports_gradient_checkpointing = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer", "ParallelDecoderLayer"]
    _supports_flex_attn = True
    _supports_sdpa = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True

    def _sdpa_can_dispatch(self, is_init_check: bool = False) -> bool:
        # The config's rule (dot-product scores only); HF falls back to eager when sdpa was not asked for explicitly.
        self.config.check_attention_implementation("sdpa")
        return super()._sdpa_can_dispatch(is_init_check)

    def _check_and_adjust_attn_implementation(self, attn_implementation, is_init_check=False, **kwargs):
        if isinstance(attn_implementation, str) and attn_implementation.startswith("flash_attention"):
            raise ValueError(
                f"attn_implementation={attn_implementation!r} is not supported by {type(self).__name__}: flash "
                "kernels "
                "take no additive position bias or custom score; use 'sdpa' or 'eager'."
            )
        if isinstance(attn_implementation, str):
            # Every backend but eager computes q·k itself (flex_attention too: its score_mod only changes a dot
            # product), so a score that is not one is refused when it is asked for, not at the first forward.
            self.config.check_attention_implementation(attn_implementation)
        return super()._check_and_adjust_attn_implementation(attn_implementation, is_init_check, **kwargs)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (*NORMS.values(), PerHeadNorm)):  # every norm starts as the identity scale
            init.constant_(module.weight, getattr(module, "initial_gain", 1.0))
            if getattr(module, "bias", None) is not None:
                init.zeros_(module.bias)
        elif isinstance(module, PositionalEncoding):  # the schemes declare their own start
            module.init_weights(self.config.initializer_range)
        else:
            super()._init_weights(module)

    def sequence_classification_loss(
        self, pooled_logits: Tensor, labels: Tensor, num_items_in_batch: Tensor | int | None
    ) -> Tensor:
        """The loss of (B, num_labels) logits by `config.problem_type`, as transformers' classifiers compute it.

        The Trainer passes `num_items_in_batch` (forward takes **kwargs) and then skips its own division by the
        accumulation steps, so the loss must then be a sum over the global count of labels, not a batch mean.
        """
        loss = self.loss_function(
            labels=labels, pooled_logits=pooled_logits, config=self.config, num_items_in_batch=num_items_in_batch
        )
        if num_items_in_batch is not None and self.config.problem_type != "single_label_classification":
            loss = loss * labels.numel() / num_items_in_batch  # MSE / BCE are means over labels.numel()
        return loss

    def _build_lm_head(self, config: HFAttentionConfigBase) -> None:
        """The vocabulary projection `lm_head` of a language-model head, with the optional bias and transform."""
        self.lm_head_transform = build_head_transform(config) if config.lm_head_transform else None
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=config.lm_head_bias)
        self._blocked_lm_head: DecodingState[BlockedLinear] = DecodingState()  # see block_vocabulary_projection
        self._freeze_lm_head_bias()

    def _freeze_lm_head_bias(self) -> None:
        lm_head = getattr(self, "lm_head", None)
        if getattr(self.config, "freeze_lm_head_bias", False) and lm_head is not None and lm_head.bias is not None:
            lm_head.bias.requires_grad_(False)  # BART's final_logits_bias: loaded and used, never trained

    def tie_weights(self, *args, **kwargs):
        """HF's weight tying, then a frozen `lm_head` bias frozen again: `from_pretrained` and
        `resize_token_embeddings` install new Parameters (requires_grad=True) and call this after doing so."""
        super().tie_weights(*args, **kwargs)
        self._freeze_lm_head_bias()

    def vocabulary_logits(self, hidden: Tensor) -> Tensor:
        """Last hidden states (B, T, E) → logits (B, T, V) through the configured output head (and cap)."""
        logits = self.vocabulary_projection(self._lm_head_input(hidden))
        return soft_cap(logits, getattr(self.config, "final_logit_softcapping", None))

    def vocabulary_projection(self, hidden: Tensor) -> Tensor:
        """`lm_head(hidden)`; while `block_vocabulary_projection` is on, a product of 4 to 11 rows is computed in
        blocks of output features (`linear_products.BlockedLinear`: the same bits)."""
        blocked = self._blocked_lm_head.value if self._blocked_lm_head.users else None  # (no call outside generate)
        return self.lm_head(hidden) if blocked is None else blocked(hidden)

    def block_vocabulary_projection(self) -> None:
        """Decoding state, switched on by generate() for its call: the vocabulary projection of a few rows (one per
        sequence or beam) computed in blocks of output features that fit a core's cache, so that the several passes
        a BLAS makes over a (V, E) matrix of several MiB for 4 to 11 rows read it from the cache rather than from
        memory. Only for a `lm_head` that is a plain, hook-free float32 nn.Linear on CPU of at least two blocks
        (`linear_products.blockable`); what it keeps (which row counts gave the plain product's bits) is the call's
        own and is dropped by the matching `unblock_vocabulary_projection` (decoding.py). It reads `lm_head`'s
        weights at every product, so an update is seen at once."""
        self._blocked_lm_head.enter(lambda: BlockedLinear(self.lm_head) if blockable(self.lm_head) else None)

    def unblock_vocabulary_projection(self) -> None:
        """The end of a `block_vocabulary_projection`: the call's blocked product is dropped."""
        self._blocked_lm_head.leave()


def build_head_transform(config: HFAttentionConfigBase) -> HeadTransform:
    """Dense → activation → norm, as BERT's and ModernBERT's heads put it before their last linear layer; the
    activation is the feed-forward network's (its gate's, when gated)."""
    return HeadTransform(
        hidden_size=config.hidden_size,
        activation=gate_activation(config.hidden_act),
        activation_options=activation_options(config),
        norm=build_norm(config),
        bias=getattr(config, "head_transform_bias", True),
    )


class SharedEmbeddingModel:
    """Mixin of the encoder-decoder base models (the Transformer's and the recurrent one), listed before the family's
    base: one embedding matrix `shared`, read by source and target (Vaswani 2017 §3.4), as in BART.

    Each side (`encoder`, `decoder`) has an embedding module of its own, `embed_tokens`, whose weight is tied to
    `shared` (`_tied_weights_keys`): transformers' loading then reports a missing `shared.weight` and initialises it,
    which it cannot do for one module object held under three names.
    """

    _tied_weights_keys = {
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.shared = self.encoder.embed_tokens = self.decoder.embed_tokens = value  # as BART does

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        # Source and target always read the one shared embedding, so their entries are aliases of `shared` whatever
        # `tie_word_embeddings` says; that flag only ties the output projection (in the LM head).
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels=True)
        return dict(self._tied_weights_keys)


class OneStackModel:
    """Mixin of the encoder and decoder base models: a token embedding of their own and one TransformerStack.

    The stack is stored as `self.<stack_name>` ("encoder": bidirectional, or "decoder": causal); that attribute is the
    prefix of its weights in checkpoints (`encoder.layers.0...`, or `model.encoder...` under a head).
    """

    stack_name: str

    def __init__(self, config: HFAttentionConfigBase):
        super().__init__(config)
        embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        stack = TransformerStack(
            config,
            num_layers=config.num_hidden_layers,
            is_decoder=self.stack_name == "decoder",
            embed_tokens=embed_tokens,
        )
        setattr(self, self.stack_name, stack)
        # read by from_pretrained (a head gathers it from this model in its post_init)
        self._keep_in_fp32_modules_strict = float32_weights(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return getattr(self, self.stack_name).embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        getattr(self, self.stack_name).embed_tokens = value
