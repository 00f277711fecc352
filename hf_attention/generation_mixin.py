"""What the generative heads (causal LM, seq2seq LM) change in transformers' `GenerationMixin`.

This module is inside the remote-code closure: it imports only torch, transformers and its siblings.
"""

import inspect

from torch import Tensor
from transformers import GenerationMixin

from .cache_argument import CACHE_FIELD, check_one_cache
from .decoding import faster_decoding
from .kv_cache import use_generation_layers


class GenerationOverrides:
    """Mixin for generative heads, listed before `GenerationMixin`: what `generate()` does differently for them.

    - It hands the 2D padding mask to the model unchanged, also with static caches: `generate()` otherwise turns it
      into a 4D mask for compilable caches, and the stack needs the 2D mask to count real tokens (positions under
      left padding, ALiBi and relative-bucket distances) and builds its masks itself.
    - It refuses an empty batch with a clear error.
    - While it runs, the decoding speed-ups of hf_attention.decoding are installed (identical results).
    - On CPU, the cache it makes gets the layers of hf_attention.kv_cache that copy less (identical values).
    """

    def create_masks_for_generate(self, *, attention_mask: Tensor | None = None, **kwargs) -> Tensor | None:
        return attention_mask

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate`, with q/k/v projected by one stacked product per layer and the vocabulary
        projection of a few rows computed in blocks (identical results; see hf_attention.decoding)."""
        # transformers' generate() would keep `cache` and drop `past_key_values` with a warning; forward() refuses
        # two caches, and so does generate(), before any work.
        check_one_cache(kwargs.get("cache"), kwargs.get("past_key_values"))
        with faster_decoding(self):
            return super().generate(*args, **kwargs)

    generate.__signature__ = inspect.signature(GenerationMixin.generate)  # for tools that read generate()'s options

    def _prepare_cache_for_generation(
        self, generation_config, model_kwargs, generation_mode, batch_size: int, max_cache_length: int
    ):
        """transformers' cache for this call, then `use_generation_layers` on it (a cache the caller passed is left as
        it is)."""
        result = super()._prepare_cache_for_generation(
            generation_config, model_kwargs, generation_mode, batch_size, max_cache_length
        )
        use_generation_layers(
            model_kwargs.get(CACHE_FIELD),
            generation_config,
            batch_size=batch_size,
            max_cache_length=max_cache_length,
            kv_heads=self.config.num_key_value_heads,
            head_dim=self.config.head_dim,
            dtype=self.dtype,
            device=self.device,
        )
        return result

    def _prepare_model_inputs(self, inputs=None, bos_token_id=None, model_kwargs=None):
        inputs, input_name, model_kwargs = super()._prepare_model_inputs(inputs, bos_token_id, model_kwargs)
        # An empty batch would otherwise fail inside generate()'s stopping checks (max() of an empty tensor).
        if isinstance(inputs, Tensor) and inputs.dim() and inputs.shape[0] == 0:
            raise ValueError(
                f"generate() got {input_name} with shape {tuple(inputs.shape)}: a batch of 0 rows; pass at least one "
                "prompt."
            )
        return inputs, input_name, model_kwargs
