"""Make docs/attention_map.png: a small decoder trained briefly on Python's documentation, then its attention drawn.

    python docs/make_attention_map.py        # about two minutes on 2 CPU cores

The model (hidden 64, 2 layers, 4 heads, rotary positions) is trained for 300 steps of causal LM on the
`pydoc_data.topics` paragraphs with a byte-level BPE tokenizer of 1,000 tokens. It is far from a good language model;
the point is that even a little training moves attention away from the uniform rows of a random model.
"""

import random
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for training/ when run from a checkout

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM  # noqa: E402
from hf_attention.inspection.heatmaps import plot_attention  # noqa: E402
from training.data.tokenizer import train_tokenizer  # noqa: E402

TEXT = "Return the value of the named attribute of object."


def paragraphs() -> list[str]:
    from pydoc_data.topics import topics

    return [" ".join(p.split()) for t in topics.values() for p in t.split("\n\n") if len(p.split()) > 5]


def train(steps: int = 300, length: int = 64, batch: int = 16) -> tuple[HFAttentionForCausalLM, object]:
    random.seed(0)
    torch.manual_seed(0)
    texts = paragraphs()
    tokenizer = train_tokenizer(texts, 1000, kind="causal")
    stream = [i for t in texts for i in tokenizer(t)["input_ids"] + [tokenizer.eos_token_id]]
    config = HFAttentionDecoderConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        norm_position="pre",
        position_encoding="rotary",
        hidden_dropout_prob=0.0,
        max_position_embeddings=length,
    )
    model = HFAttentionForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    for step in range(steps):
        starts = [random.randrange(len(stream) - length) for _ in range(batch)]
        ids = torch.tensor([stream[s : s + length] for s in starts])
        loss = model(ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.item():.3f}")
    return model.eval(), tokenizer


if __name__ == "__main__":
    model, tokenizer = train()
    result = plot_attention(model, tokenizer, TEXT, layer=0, path=ROOT / "docs" / "attention_map.png")
    print(f"wrote {result.path}")
