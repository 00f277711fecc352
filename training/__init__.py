"""Training code for hf-attention: data, tokenizers and the Accelerate training loop."""
