"""Models with Gated DeltaNet layers (Qwen3.5 text, and Qwen3-Next when converted) on batches longer than the chunked
form's chunk (64 tokens): test_modern_parity.py's 24-token batch fits in one chunk, so the passing of the state from
chunk to chunk, and a decoding step after a prompt of several chunks, are compared here.

Linear-attention layers are compared at 1e-4 (their chunked form sums in another order than the recurrence and than
transformers' kernel), the rest at the usual 1e-5 through them.
"""

import pytest
import torch
from modern_references import forward_inputs, generate_positions, max_difference_at_real, padded_batch, reference

from hf_attention import from_hf

LONG = 80  # rows of 80, 60 and 40 real tokens: the first two cross the 64-token chunk
CASES = ["qwen3_5", "qwen3_next"]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("name", CASES)
def test_logits_across_chunks(name, attn):
    theirs = reference(name, attn)
    ours = from_hf(theirs)
    inputs = forward_inputs(name, length=LONG)
    with torch.no_grad():
        difference = max_difference_at_real(theirs(**inputs).logits, ours(**inputs).logits, inputs["attention_mask"])
    assert difference <= 1e-4


@pytest.mark.parametrize("name", CASES)
def test_cached_generation_after_a_long_prompt(name):
    """Greedy decoding from a left-padded prompt of more than one chunk: the tokens are the reference's, and our
    cached logits of every step equal our uncached logits of the whole sequence."""
    theirs = reference(name)
    ours = from_hf(theirs)
    prompt = padded_batch(name, length=70)
    settings = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": 0}
    expected = theirs.generate(**prompt, **settings)
    tokens = ours.generate(**prompt, **settings, output_logits=True, return_dict_in_generate=True)
    assert torch.equal(tokens.sequences, expected)
    mask = torch.cat([prompt["attention_mask"], torch.ones(3, 8, dtype=torch.long)], dim=1)
    with torch.no_grad():
        whole = ours(input_ids=tokens.sequences, attention_mask=mask, position_ids=generate_positions(mask)).logits
    for step, logits in enumerate(tokens.logits):
        assert (whole[:, 70 + step - 1] - logits).abs().max() <= 1e-4, step
