"""What the generative heads (causal LM, seq2seq LM, the recurrent seq2seq LM) change in transformers'
`GenerationMixin`: the checks every family shares, those of the encoder-decoders, and the Transformer's speed-ups.

This module is inside the remote-code closure: it imports only torch, transformers and its siblings.
"""

import contextlib
import inspect
from collections.abc import Iterator

import torch
from torch import Tensor
from transformers import GenerationMixin

from .attention import MultiHeadAttention
from .cache_argument import CACHE_FIELD, check_one_cache
from .field_checks import id_outside_vocabulary
from .kv_cache import generation_cache


class GenerationChecks:
    """Mixin for every generative head, the recurrent family's included, listed before `GenerationMixin`: inputs of
    `generate()` that transformers would let fail obscurely are refused with an error that names them.

    - An empty batch (its stopping checks take the max() of an empty tensor).
    """

    def _prepare_model_inputs(self, inputs=None, bos_token_id=None, model_kwargs=None):
        inputs, input_name, model_kwargs = super()._prepare_model_inputs(inputs, bos_token_id, model_kwargs)
        if isinstance(inputs, Tensor) and inputs.dim() and inputs.shape[0] == 0:
            raise ValueError(
                f"generate() got {input_name} with shape {tuple(inputs.shape)}: a batch of 0 rows; pass at least one "
                "prompt."
            )
        return inputs, input_name, model_kwargs


class EncoderDecoderGeneration(GenerationChecks):
    """Mixin for the encoder-decoder heads of both families (the Transformer's and the recurrent one), listed before
    the model's base: what `generate()` and its relatives refuse for a model with an encoder.

    - A `decoder_start_token_id` outside the vocabulary (it would surface as an error about decoder_input_ids).
    - Continuous batching (`generate_batch`, `init_continuous_batching` and its context manager, `transformers
      serve`): its scheduler keeps the requests' decoder-only self-attention in a paged cache, which has no place for
      an encoder's output. It is refused before transformers sets it up, which would fail on a config field that
      only decoder-only models have.
    """

    def _prepare_decoder_input_ids_for_generation(
        self, batch_size, model_input_name, model_kwargs, decoder_start_token_id, device=None
    ):
        if decoder_start_token_id is not None and not torch.compiler.is_compiling():
            bad = id_outside_vocabulary(decoder_start_token_id, self.config.vocab_size)
            if bad is not None:
                raise ValueError(
                    f"decoder_start_token_id={bad} is outside the vocabulary [0, {self.config.vocab_size}); set it "
                    "(generate() argument, model.generation_config or config) to a token id the model knows."
                )
        return super()._prepare_decoder_input_ids_for_generation(
            batch_size, model_input_name, model_kwargs, decoder_start_token_id, device
        )

    def init_continuous_batching(self, *args, **kwargs):
        """Refused: the entry point of every form of continuous batching (see the class)."""
        raise ValueError(
            "Continuous batching (generate_batch, init_continuous_batching, transformers serve) runs decoder-only "
            "models: its paged cache holds each request's self-attention keys and values and has no place for an "
            f"encoder's output. {type(self).__name__} is an encoder-decoder model (model_type "
            f"{self.config.model_type!r}); generate with generate(), which takes a padded batch of sources."
        )


class GenerationOverrides(GenerationChecks):
    """Mixin for the generative heads of the Transformer families, listed before `GenerationMixin`: what
    `generate()` does differently for them, besides the checks of `GenerationChecks`.

    - It hands the 2D padding mask to the model unchanged, also with static caches: `generate()` otherwise turns it
      into a 4D mask for compilable caches, and the stack needs the 2D mask to count real tokens (positions under
      left padding, ALiBi and relative-bucket distances) and builds its masks itself.
    - While it runs, the decoding states of its modules are on (identical results): q/k/v of causal
      self-attention from one stacked product (`MultiHeadAttention.stack_projections`) and the vocabulary projection
      of a few rows in blocks (`block_vocabulary_projection`).
    - On CPU, the cache it makes has the layers of kv_cache.py that copy less (identical values).
    """

    def create_masks_for_generate(self, *, attention_mask: Tensor | None = None, **kwargs) -> Tensor | None:
        return attention_mask

    def prepare_inputs_for_generation(self, input_ids: Tensor, *args, **kwargs):
        """transformers' preparation, with Phi-3's LongRoPE rule (`longrope_recompute_cache`): the step at which the
        sequence first grows past the original length runs without the cache, so that every key is rotated again
        with the long factors (the cached ones were rotated with the short ones), as Phi-3's generate() does."""
        config = self.config
        if getattr(config, "longrope_recompute_cache", False):
            original = config.rope_scaling_options["original_max_position_embeddings"]
            name = "cache" if kwargs.get("cache") is not None else "past_key_values"
            cache = kwargs.get(name)
            if cache is not None and input_ids.shape[1] > original and cache.get_seq_length() <= original:
                kwargs[name] = None
                if "next_sequence_length" in kwargs:
                    kwargs["next_sequence_length"] = None
        return super().prepare_inputs_for_generation(input_ids, *args, **kwargs)

    # transformers checks generate()'s arguments against this method's parameters (a cache passed as
    # `past_key_values` among them): the override declares those of the method it extends.
    prepare_inputs_for_generation.__signature__ = inspect.signature(GenerationMixin.prepare_inputs_for_generation)

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate`, with the decoding states of the model's modules on for the call (see the
        class)."""
        # transformers' generate() would keep `cache` and drop `past_key_values` with a warning; forward() refuses
        # two caches, and so does generate(), before any work.
        check_one_cache(kwargs.get("cache"), kwargs.get("past_key_values"))
        if CACHE_FIELD != "cache" and kwargs.get("cache") is not None:
            # Before transformers 5.24, generate() knows the cache as `past_key_values` only: it would pass a
            # `cache=` on as a model input, to the encoder of an encoder-decoder model too, which refuses it.
            kwargs["past_key_values"] = kwargs.pop("cache")
        with self.decoding_states():
            return super().generate(*args, **kwargs)

    generate.__signature__ = inspect.signature(GenerationMixin.generate)  # for tools that read generate()'s options

    @contextlib.contextmanager
    def decoding_states(self) -> Iterator[None]:
        """Within the block, every causal self-attention module stacks its q/k/v weights, every attention module
        looks its backend up once, and the vocabulary projection runs in blocks where that pays (each module decides
        what it is eligible for); leaving it switches them off again. Each block has states of its own, read only
        in its thread and only until it ends (decoding.py): a block that starts while another is open (in another
        thread, or nested) makes them from the weights and backend of that moment."""
        with contextlib.ExitStack() as states:
            for module in self.modules():
                if isinstance(module, MultiHeadAttention):
                    module.stack_projections()
                    states.callback(module.unstack_projections)
                    module.pin_backend()
                    states.callback(module.unpin_backend)
            self.block_vocabulary_projection()
            states.callback(self.unblock_vocabulary_projection)
            yield

    def _prepare_cache_for_generation(
        self, generation_config, model_kwargs, generation_mode, batch_size: int, max_cache_length: int
    ):
        """The cache of `kv_cache.generation_cache` where its layers pay; otherwise transformers' own (a cache the
        caller passed is left as it is)."""
        cache = None
        if model_kwargs.get(CACHE_FIELD) is None:
            cache = generation_cache(
                self.config,
                generation_config,
                batch_size=batch_size,
                max_cache_length=max_cache_length,
                dtype=self.dtype,
                device=self.device,
            )
        if cache is None:
            return super()._prepare_cache_for_generation(
                generation_config, model_kwargs, generation_mode, batch_size, max_cache_length
            )
        model_kwargs[CACHE_FIELD] = cache
        return None
