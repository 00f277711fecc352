"""The recurrent encoder and decoder: the road to the Transformer, one token at a time.

An RNN reads the source one token at a time and another RNN writes the target one token at a time (Cho et al. 2014;
Sutskever et al. 2014). Without attention the decoder sees the source only through one fixed-size vector, the
encoder's final states: every source, however long, must fit into it. Bahdanau et al. (2015) let the decoder look
back at every source position instead: before writing token t it scores each encoder annotation h_j against its
previous state s_{t−1} (the additive score wᵀtanh(W_q s + W_k h), `scores.AdditiveScore`), and reads the weighted
average c_t = Σ_j α_tj h_j. That score runs through the library's eager attention function, the same code the
Transformer's layers call, so heatmaps and the explorer see these weights as they see a Transformer's.

Notation: B batch, S source length, T target length, H hidden size, E embedding size, L stacked layers.

Luong et al. (2015) moved the look to after the step (`attention_style="luong"`): the RNN first writes s_t, and s_t
is the query; the output is their attentional state h̃_t = tanh(W_c[s_t; c_t]). Without "input feeding" the RNN then
never sees a context, and can run over the whole target in one call; with it (`input_feeding=True`) h̃_{t−1} joins
the next step's input, so that the decoder knows where it looked before.

Bahdanau's decoder (and Luong's with input feeding) is sequential by construction: the query of step t depends on
what step t−1 produced, so the T steps of a target run one after another even in training (a Transformer decoder
runs them all at once).

These are plain nn.Modules that take tensors and return tensors: the model classes that make them an hf-attention
family (configs, saving and loading, labels, `generate()` and its `RecurrentState`) are in recurrent.py, so that the
maths above reads here without them.

This file is part of the remote-code closure: it imports only torch, transformers and its siblings.
"""

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers.modeling_outputs import BaseModelOutput

from .attention import eager_attention_forward
from .configuration_recurrent import check_attention_style
from .input_checks import check_attention_mask, check_mask_kind, check_token_inputs, embed_token_ids
from .scores import make_score

RECURRENT_LAYERS = {"gru": nn.GRU, "lstm": nn.LSTM}


def source_lengths(attention_mask: Tensor | None, batch: int, length: int, device) -> Tensor:
    """The number of real tokens of each source row; ValueError unless the mask is a (batch, length) padding mask
    that is right-padded (1…1 0…0).

    A recurrent encoder reads each row up to its last real token (a packed sequence), so padding must follow the
    tokens: left padding would put the pads first and make the final state that of a pad.
    """
    if attention_mask is None:
        return torch.full((batch,), length, dtype=torch.long, device=device)
    check_mask_kind(attention_mask, "attention_mask")
    check_attention_mask(attention_mask, batch, length, "attention_mask")  # the same errors as the Transformer's
    lengths = attention_mask.long().sum(dim=1)
    expected = torch.arange(length, device=attention_mask.device)[None, :] < lengths[:, None]
    if not torch.equal(attention_mask.bool(), expected):
        raise ValueError(
            "attention_mask must be right-padded for a recurrent encoder (ones for the tokens, then zeros): the "
            "encoder reads each row up to its last real token. Pad on the right (tokenizer.padding_side='right')."
        )
    if bool((lengths == 0).any()):
        raise ValueError(
            "A source row has no tokens (attention_mask all zeros): a recurrent encoder needs at least one."
        )
    return lengths


def check_target_mask(mask: Tensor, batch: int, length: int) -> None:
    """ValueError unless `mask` (a `decoder_attention_mask`) is a (batch, length) padding mask that is right-padded.

    The decoder reads each target left to right, so padding after a row's last real token changes none of the outputs
    at its real positions: such a mask is accepted and changes nothing. Padding before real tokens would be read as
    tokens, so it is refused rather than ignored.
    """
    check_mask_kind(mask, "decoder_attention_mask")
    check_attention_mask(mask, batch, length, "decoder_attention_mask")
    expected = torch.arange(length, device=mask.device)[None, :] < mask.long().sum(dim=1)[:, None]
    if not torch.equal(mask.bool(), expected):
        raise ValueError(
            "decoder_attention_mask must be right-padded for a recurrent decoder (ones for the target tokens, then "
            "zeros): the decoder reads each target left to right, and only padding after the last real token leaves "
            "the real positions' outputs as they are. Pad targets on the right, or leave decoder_attention_mask out."
        )


class RecurrentEncoder(nn.Module):
    """Embeddings and a (bidirectional) stacked RNN: the annotation h_j of each source position.

    With two directions, h_j = [h→_j ; h←_j] sees the whole source, the left part from the forward pass and the
    right part from the backward one (Bahdanau et al. 2015 §3.2).
    """

    def __init__(
        self,
        *,
        embed_tokens: nn.Embedding,
        hidden_size: int,
        num_layers: int,
        cell: str,
        bidirectional: bool,
        dropout: float,
    ):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.bidirectional = bidirectional
        self.dropout = nn.Dropout(dropout)
        self.rnn = RECURRENT_LAYERS[cell](
            embed_tokens.embedding_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output_size = hidden_size * (2 if bidirectional else 1)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = True,
        **kwargs,
    ) -> BaseModelOutput:
        """(B, S) token ids → annotations (B, S, H·directions); zeros at padding positions."""
        # The checks every family runs on its inputs (input_checks.py), then what only packing needs: a row.
        batch, length = check_token_inputs(
            input_ids,
            inputs_embeds,
            prefix="",
            embedding_size=self.embed_tokens.embedding_dim,
            width_name="word embedding size",
        )
        if batch == 0:
            given = "input_ids" if input_ids is not None else "inputs_embeds"
            raise ValueError(f"{given} is a batch of 0 rows; a recurrent encoder needs at least one source.")
        if inputs_embeds is None:
            inputs_embeds = embed_token_ids(self.embed_tokens, input_ids, "input_ids")
        embedded = inputs_embeds  # (B, S, E)
        lengths = source_lengths(attention_mask, batch, length, embedded.device)
        # Packing makes the RNN stop at each row's last real token: pads never enter a state.
        packed = pack_padded_sequence(self.dropout(embedded), lengths.cpu(), batch_first=True, enforce_sorted=False)
        annotations, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=length)
        hidden_states = (embedded, annotations) if output_hidden_states else None
        return BaseModelOutput(last_hidden_state=annotations, hidden_states=hidden_states)

    def summary(self, annotations: Tensor, lengths: Tensor) -> Tensor:
        """The fixed-size vector the plain encoder-decoder squeezes the source into: the forward RNN's state after the
        last real token, and (bidirectional) the backward RNN's state after reading back to the first. (B, H·dirs)"""
        rows = torch.arange(annotations.shape[0], device=annotations.device)
        last = annotations[rows, lengths.to(annotations.device) - 1]  # (B, H·dirs)
        if not self.bidirectional:
            return last
        half = annotations.shape[-1] // 2
        return torch.cat([last[:, :half], annotations[:, 0, half:]], dim=-1)


class SourceAttention(nn.Module):
    """The decoder's look back at the source: a score of its state against every annotation, a masked softmax, the
    weighted sum (Bahdanau et al. 2015, eq. 5–6). Scores come from `scores.SCORES` (additive by default) and run
    through the library's eager attention function, one head wide.
    """

    is_causal = False  # read by the eager attention function: every source position may be attended

    def __init__(self, *, score: str, hidden_size: int):
        super().__init__()
        self.score, self.scaling = make_score(score, num_heads=1, head_dim=hidden_size)

    def forward(self, query: Tensor, memory: Tensor, source_mask: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, T, H) (T steps' queries, each on its own), memory (B, S, H), source_mask (B, 1, 1, S) bool →
        contexts (B, T, H), weights (B, T, S)."""
        context, weights = eager_attention_forward(
            self, query[:, None], memory[:, None], memory[:, None], source_mask, scaling=self.scaling
        )
        return context[:, :, 0], weights[:, 0]


class RecurrentDecoder(nn.Module):
    """A stacked RNN that writes the target one token at a time. The output layer reads the RNN's state and a context
    vector: Luong et al. 2015's attentional state h̃_t = tanh(W_c[s_t; c_t]).

    `attention_style="bahdanau"`: the RNN is fed at every step with the previous token and the context, attention's
    c_t over the source queried with s_{t−1}, or the encoder's fixed summary when there is no attention (Cho et al.
    2014, whose decoder also sees its one c at every step). `"luong"`: the RNN steps on the previous token alone (and
    h̃_{t−1} with `input_feeding`), then its new state s_t queries the source.
    """

    def __init__(
        self,
        *,
        embed_tokens: nn.Embedding,
        hidden_size: int,
        num_layers: int,
        cell: str,
        encoder_size: int,
        attention_score: str | None,
        dropout: float,
        attention_style: str = "bahdanau",
        input_feeding: bool = False,
    ):
        super().__init__()
        check_attention_style(attention_style, input_feeding, has_attention=attention_score is not None)
        self.luong, self.input_feeding = attention_style == "luong", input_feeding
        self.embed_tokens = embed_tokens
        self.num_layers, self.hidden_size, self.cell = num_layers, hidden_size, cell
        self.dropout = nn.Dropout(dropout)
        # s_0 = tanh(W_init · summary) for every layer (Bahdanau et al. 2015, appendix A.2.2)
        self.init_state = nn.Linear(encoder_size, num_layers * hidden_size)
        # annotations → the H-wide keys and values the decoder's state is compared with (attention), or the fixed
        # context (no attention)
        self.memory = nn.Linear(encoder_size, hidden_size, bias=False)
        self.attention = SourceAttention(score=attention_score, hidden_size=hidden_size) if attention_score else None
        # What joins the token at the RNN's input: Bahdanau's context c_t (H), Luong's h̃_{t−1} (E) or nothing.
        fed = embed_tokens.embedding_dim if input_feeding else 0 if self.luong else hidden_size
        self.rnn = RECURRENT_LAYERS[cell](
            embed_tokens.embedding_dim + fed,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output = nn.Linear(2 * hidden_size, embed_tokens.embedding_dim)

    def initial_state(self, summary: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        """(B, encoder_size) → (L, B, H) first hidden state (an LSTM's cell starts at zero)."""
        hidden = torch.tanh(self.init_state(summary)).view(summary.shape[0], self.num_layers, self.hidden_size)
        hidden = hidden.transpose(0, 1).contiguous()
        return (hidden, torch.zeros_like(hidden)) if self.cell == "lstm" else hidden

    def embed(self, input_ids: Tensor, *, first_call: bool) -> Tensor:
        """Decoder inputs (B, T) → what the RNN reads: their embeddings after dropout (B, T, E)."""
        embedded = embed_token_ids(self.embed_tokens, input_ids, "decoder_input_ids", first_call=first_call)
        return self.dropout(embedded)

    def forward(
        self,
        embedded: Tensor,
        annotations: Tensor,
        summary: Tensor,
        source_mask: Tensor,
        state: Tensor | tuple | None,
        attentional: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | tuple, Tensor | None]:
        """Embedded decoder inputs (B, T, E) (`embed`) → attentional states (B, T, E), the state after the last step,
        and the attention weights (B, T, S) (None without attention). `state` None starts from the encoder's summary;
        `attentional` is the h̃ of the step before the first (input feeding; None: zeros, as before the first target
        token)."""
        state = self.initial_state(summary) if state is None else state
        if self.attention is None:
            # One context for every step: the whole target can run through the RNN in one call.
            context = self.memory(summary)[:, None].expand(-1, embedded.shape[1], -1)  # (B, T, H)
            outputs, state = self.rnn(torch.cat([embedded, context], dim=-1), state)
            return self._attentional(outputs, context), state, None
        memory = self.memory(annotations)  # (B, S, H), once for all steps
        if self.luong and not self.input_feeding:
            # The RNN never sees a context: it runs over the whole target in one call, then every s_t attends.
            outputs, state = self.rnn(embedded, state)  # (B, T, H)
            contexts, weights = self.attention(outputs, memory, source_mask)
            return self._attentional(outputs, contexts), state, weights
        if self.luong:  # input feeding: step on [token; h̃_{t−1}], then the new state s_t queries the source
            if attentional is None:  # before the first target token: h̃_0 = 0
                attentional = embedded.new_zeros(embedded.shape[0], embedded.shape[2])  # (B, E)
            outputs, weights = [], []
            for step in range(embedded.shape[1]):  # sequential: step t's input is what step t−1 wrote
                output, state = self.rnn(torch.cat([embedded[:, step], attentional], dim=-1)[:, None], state)
                context, step_weights = self.attention(output, memory, source_mask)
                attentional = self._attentional(output, context)[:, 0]  # h̃_t, (B, E)
                outputs.append(attentional[:, None])
                weights.append(step_weights)
            return torch.cat(outputs, dim=1), state, torch.cat(weights, dim=1)
        outputs, contexts, weights = [], [], []
        for step in range(embedded.shape[1]):  # sequential: step t's query is the state step t−1 wrote
            query = (state[0] if isinstance(state, tuple) else state)[-1]  # top layer's s_{t−1}, (B, H)
            context, step_weights = self.attention(query[:, None], memory, source_mask)
            context, step_weights = context[:, 0], step_weights[:, 0]
            output, state = self.rnn(torch.cat([embedded[:, step], context], dim=-1)[:, None], state)
            outputs.append(output)
            contexts.append(context[:, None])
            weights.append(step_weights[:, None])
        attentional = self._attentional(torch.cat(outputs, dim=1), torch.cat(contexts, dim=1))
        return attentional, state, torch.cat(weights, dim=1)

    def _attentional(self, outputs: Tensor, context: Tensor) -> Tensor:
        return torch.tanh(self.output(self.dropout(torch.cat([outputs, context], dim=-1))))
