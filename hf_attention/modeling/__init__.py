"""The model code every checkpoint carries: the configurations, the four model families and what they compute,
and the translation pipeline. `save_pretrained` copies each file of this folder (this one excepted) beside the weights,
so that `trust_remote_code=True` loads a checkpoint where hf_attention is not installed. Flat, and each file imports
only the standard library, torch, transformers and its siblings (`from .module import Name`), as transformers' loader
needs."""
