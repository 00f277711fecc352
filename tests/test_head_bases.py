"""A new head is one small class on its family's head base: the base runs the stack, handles the cache argument and
the output switches, and the head only turns the stack's output into its own (shown with a toy decoder head)."""

import torch
from conftest import tiny_config
from torch import nn
from transformers.modeling_outputs import CausalLMOutputWithPast

from hf_attention import HFAttentionForCausalLM
from hf_attention.modeling.cache_argument import cache_of, with_cache
from hf_attention.modeling.losses import logit_slice
from hf_attention.modeling.modeling_hf_attention import DecoderHead


class AdaptedCausalLM(DecoderHead):
    """A causal LM whose last hidden state goes through a small extra projection before the vocabulary."""

    def __init__(self, config):
        super().__init__(config)
        self.adapter = nn.Linear(config.hidden_size, config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _head_output(self, outputs, *, labels, input_ids, logits_to_keep, num_items_in_batch):
        hidden = outputs.last_hidden_state[:, logit_slice(logits_to_keep)]
        logits = self.lm_head(torch.tanh(self.adapter(hidden)))  # (B, T, V)
        loss = None
        if labels is not None:
            targets = nn.functional.pad(labels, (0, 1), value=-100)[:, 1:]  # position t predicts token t+1
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        return with_cache(
            CausalLMOutputWithPast,
            cache_of(outputs),
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


def test_a_toy_decoder_head_runs_trains_and_round_trips(tmp_path):
    config = tiny_config("decoder", position_encoding="rotary")
    torch.manual_seed(0)
    model = AdaptedCausalLM(config).eval()
    ids = torch.randint(3, 99, (2, 6))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0

    output = model(ids, attention_mask=mask, labels=ids)
    assert output.logits.shape == (2, 6, 99) and output.loss.isfinite()
    output.loss.backward()
    assert (
        model.adapter.weight.grad is not None
        and model.model.decoder.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    )

    with torch.no_grad():
        last = model(ids, attention_mask=mask, logits_to_keep=1, use_cache=True)
        assert last.logits.shape == (2, 1, 99) and cache_of(last) is not None
        torch.testing.assert_close(last.logits, model(ids, attention_mask=mask).logits[:, -1:])
        assert isinstance(model(ids, return_dict=False), tuple)

    # the stack under the toy head is the causal LM's: same weights, same hidden states
    reference = HFAttentionForCausalLM(config).eval()
    reference.model.load_state_dict(model.model.state_dict())
    with torch.no_grad():
        hidden = model(ids, output_hidden_states=True).hidden_states
        torch.testing.assert_close(hidden, reference(ids, output_hidden_states=True).hidden_states, rtol=0, atol=0)

    model.save_pretrained(tmp_path)
    loaded = AdaptedCausalLM.from_pretrained(tmp_path).eval()
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, labels=ids).loss, model(ids, labels=ids).loss, rtol=0, atol=0)
