"""Conversion both ways: a standard checkpoint into hf-attention's code (`from_hf`, `hf-attention convert`) and back
(`to_hf`, `hf-attention export`), reading the architectures of hf_attention/architectures/."""
