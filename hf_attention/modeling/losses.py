"""Token cross-entropy, the vocabulary projection fused with it for training, and the last step of the language-model
heads that calls them (`VocabularyLoss`: last hidden states → logits and their loss).

Notation: N rows (batch × length, flattened), E hidden size, V vocabulary size, C rows per chunk.

The loss of a language model is −log softmax(h Wᵀ + b)[y] per labelled token. Its gradient w.r.t. the logits is known
in closed form, softmax − onehot(y), so the gradient of the projection can be formed while the logits are computed:
dh = (softmax − onehot) W and dW = (softmax − onehot)ᵀ h. `linear_cross_entropy` does exactly that, C rows at a time,
so that each chunk of logits is turned into its share of the loss and of the gradients while it is still in cache,
and no (N, V) buffer besides the returned logits is ever allocated (autograd through F.linear and F.cross_entropy
allocates three: log-probabilities, a zero-filled gradient and the gradient of the logits). The idea is that of
chunked / fused linear cross-entropy kernels (Liger Kernel; Wijmans et al. 2024, "Cut Your Losses"); here the logits
are still returned, as every Hugging Face model returns them.

Label smoothing ε (PyTorch's definition, `F.cross_entropy(label_smoothing=ε)`) mixes the one-hot target with the
uniform distribution over the V classes: the loss of a labelled token is (1 − ε)(−log p[y]) + ε · mean_v(−log p[v]),
and the gradient w.r.t. the logits becomes softmax − (1 − ε) onehot(y) − ε/V. With ε = 0 nothing of it is computed.
"""

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from .field_checks import id_outside_vocabulary
from .linear_products import plain_linear

# Rows per chunk: enough for dW += (softmax − onehot)ᵀ h, a product over the chunk's rows, to run at full matmul speed
# (smaller chunks measured clearly slower, larger ones no faster), while the chunk's fp32 softmax buffer stays small
# next to the logits.
CHUNK_ROWS = 512


def next_token_labels(labels: Tensor) -> Tensor:
    """Causal LM: the label of position t is token t+1 (labels moved one step left, -100 after the last token)."""
    return nn.functional.pad(labels, (0, 1), value=-100)[:, 1:]


def shift_tokens_right(labels: Tensor, pad_token_id: int, decoder_start_token_id: int) -> Tensor:
    """Teacher forcing: decoder inputs are the labels moved one step right behind the start token; -100 → pad."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


def logit_slice(logits_to_keep: int | Tensor) -> slice | Tensor:
    """Positions whose logits are computed: generation needs only the last one (`logits_to_keep=1`)."""
    return slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep


def label_shape(inputs: Tensor | None, rank: int, logits_to_keep: int | Tensor = 0) -> tuple[int, ...] | None:
    """The (batch, length) a head's labels must have: one per position of `inputs` whose logits are computed.

    None when `inputs` is missing or malformed (2-D ids or 3-D embeddings expected): the stack reports that itself.
    """
    if not isinstance(inputs, Tensor) or inputs.dim() != rank:
        return None
    batch, length = inputs.shape[:2]
    kept = logit_slice(logits_to_keep)
    if isinstance(kept, slice):
        return (batch, len(range(length)[kept]))
    return (batch, *kept.shape)


def check_labels(
    labels,
    shape: tuple[int, ...] | None,
    num_classes: int,
    bound: str,
    *,
    per: str,
    any_2d: bool = False,
    name: str = "labels",
) -> None:
    """Raise ValueError unless `labels` are integer class ids in [0, num_classes) or -100, of the given shape.

    Args:
        labels: What the caller passed as `labels` (or as the argument `name`).
        shape: The expected shape, or None when it is not known (malformed inputs, reported by the model itself).
        num_classes: The number of classes, named `bound` in the message ("vocab_size", "num_labels").
        per: What each label belongs to, for the message ("input token").
        any_2d: Accept any (batch, length) shape (the labels define the decoder inputs).
        name: The argument's name, for the messages.

    Kind and shape are free to check; the values cost one device sync, skipped under torch.compile (as the check of
    input ids against the vocabulary).
    """
    if not isinstance(labels, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(labels).__name__}.")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class ids (torch.long), got dtype {labels.dtype}.")
    if any_2d and labels.dim() != 2:
        raise ValueError(f"{name} has shape {tuple(labels.shape)}, expected 2-D (batch, length).")
    if shape is not None and tuple(labels.shape) != tuple(shape):
        raise ValueError(
            f"{name} has shape {tuple(labels.shape)}, expected {tuple(shape)}: one label per {per} whose logits are "
            "computed (-100 where there is none)."
        )
    if not torch.compiler.is_compiling() and labels.numel():
        ids = labels.masked_fill(labels == -100, 0)  # -100: no label
        low, high = (int(value) for value in torch.aminmax(ids))
        if low < 0 or high >= num_classes:  # (the range test here, the id to report from field_checks)
            raise ValueError(
                f"{name} contains {id_outside_vocabulary(ids, num_classes)}, outside [0, {bound}={num_classes}); use "
                "-100 for positions without a label."
            )


def _check_label_shape(labels: Tensor, rows_shape: torch.Size) -> None:
    if labels.shape != rows_shape:
        raise ValueError(
            f"labels has shape {tuple(labels.shape)}, expected {tuple(rows_shape)}: one label per row of logits."
        )


def soft_cap(logits: Tensor, cap: float | None) -> Tensor:
    """c·tanh(logits / c): logits squashed smoothly into (−c, c) (Gemma 2/3's final cap); unchanged for None."""
    return logits if cap is None else torch.tanh(logits / cap) * cap


def token_cross_entropy(
    logits: Tensor, labels: Tensor, num_items_in_batch: Tensor | int | None = None, label_smoothing: float = 0.0
) -> Tensor:
    """Cross-entropy summed over tokens whose label is not -100, divided by their count.

    Under gradient accumulation the Trainer (or our training loop) passes `num_items_in_batch`, the count over all
    micro-batches and processes, so every token weighs the same however the batch was split. The softmax runs in fp32
    whatever the logits' dtype. `label_smoothing` ε is PyTorch's (see the module docstring); 0 is the plain loss.
    """
    _check_label_shape(labels, logits.shape[:-1])
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).to(logits.device)
    loss = nn.functional.cross_entropy(
        flat_logits.float(), flat_labels, ignore_index=-100, reduction="sum", label_smoothing=float(label_smoothing)
    )
    return _normalise(loss, labels, num_items_in_batch)


# How far back the unlikelihood term looks: the previous token ("noch noch") and the one before it ("ist ein ist ein").
UNLIKELIHOOD_WINDOW = 2


def repeat_candidates(labels: Tensor, window: int = UNLIKELIHOOD_WINDOW) -> Tensor:
    """For labels (…, T), the tokens (…, T, window) the unlikelihood term pushes down at each position: the targets
    y_{t−1} … y_{t−window} of the same row that differ from y_t, each once (-100 where there is none, and on every
    unlabelled position)."""
    labelled = labels != -100
    columns: list[Tensor] = []
    for distance in range(1, window + 1):
        candidate = nn.functional.pad(labels, (distance, 0), value=-100)[..., : labels.shape[-1]]
        use = labelled & (candidate != -100) & (candidate != labels)
        for closer in columns:  # a token already pushed down at a smaller distance counts once
            use &= candidate != closer
        columns.append(candidate.masked_fill(~use, -100))
    return torch.stack(columns, dim=-1)


def _unlikelihood_terms(probabilities: Tensor, candidates: Tensor) -> tuple[Tensor, Tensor]:
    """−log(1 − p[c]) and p[c] / (1 − p[c]) (its derivative's factor) per candidate, 0 where there is none. 1 − p is
    floored, so that a certain repeat costs a large finite amount instead of inf."""
    use = candidates != -100
    probability = probabilities.gather(-1, candidates.clamp(min=0)).clamp(max=1.0 - 1e-6)
    penalty = torch.where(use, -torch.log1p(-probability), 0.0)
    factor = torch.where(use, probability / (1.0 - probability), 0.0)
    return penalty, factor


def repeat_unlikelihood(
    logits: Tensor, labels: Tensor, num_items_in_batch: Tensor | int | None = None, window: int = UNLIKELIHOOD_WINDOW
) -> Tensor:
    """Token-level unlikelihood of repeating (Welleck et al. 2020, "Neural text generation with unlikelihood
    training"), summed and divided as `token_cross_entropy`: Σ −log(1 − p[c]) over the `repeat_candidates` c of each
    labelled position, the previous targets that differ from the target.

    Cross-entropy raises p[y_t] and lowers every other token by its own probability; nothing in it says that the
    token just written is a bad next token. A small model whose attention has lost its place in the source gives that
    token high probability again ("noch noch noch"), and decoding feeds it back. This term lowers exactly those
    probabilities where the reference does not repeat; where it does (y_t = y_{t−1}), nothing is pushed down.
    """
    _check_label_shape(labels, logits.shape[:-1])
    labels = labels.to(logits.device)
    probabilities = torch.softmax(logits.float(), -1)
    penalty, _ = _unlikelihood_terms(probabilities, repeat_candidates(labels, window))
    return _normalise(penalty.sum(), labels, num_items_in_batch)


def _normalise(summed_loss: Tensor, labels: Tensor, num_items_in_batch: Tensor | int | None) -> Tensor:
    if num_items_in_batch is None:
        num_items_in_batch = (labels != -100).sum()
    if isinstance(num_items_in_batch, Tensor):
        num_items_in_batch = num_items_in_batch.to(summed_loss.device)
    return summed_loss / num_items_in_batch


def _summed_token_loss(logits: Tensor, probabilities: Tensor, targets: Tensor, labelled: Tensor) -> Tensor:
    """Σ over labelled rows of −log p[y], from fp32 logits (C, V) and their softmax.

    −log p[y] is exact while p[y] is a normal float; a target more than ~87 nats below the row's best logit
    underflows, so those (rare) rows take the log-sum-exp form, log Σ exp(x) − x[y], which cannot.
    """
    target_probability = probabilities.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    token_loss = -target_probability.log()
    underflow = (labelled & (target_probability < torch.finfo(torch.float32).tiny)).nonzero().squeeze(1)
    if underflow.numel():
        rows, row_targets = logits[underflow], targets[underflow].unsqueeze(-1)
        token_loss[underflow] = torch.logsumexp(rows, -1) - rows.gather(-1, row_targets).squeeze(-1)
    return torch.where(labelled, token_loss, 0.0).sum()


def _add_chunk_loss(
    loss: Tensor,
    chunk_logits: Tensor,
    targets: Tensor,
    keep: Tensor,
    label_smoothing: float,
    candidates: Tensor | None,
    unlikelihood_weight: float,
) -> Tensor:
    """Add a chunk's share of the summed loss to `loss` (in place); return d loss / d logits for its rows, (C, V) in
    fp32: softmax − onehot(y) (label-smoothed, with the unlikelihood term) on labelled rows, 0 on the others."""
    vocab = chunk_logits.shape[-1]
    target = targets.masked_fill(~keep, 0).unsqueeze(-1)  # (C, 1), gather-able on every row
    x = chunk_logits.float()
    # One fused kernel (row max, exponentials, their sum, the division) that keeps each row in cache: half the time of
    # the same steps as separate passes over the (C, V) chunk.
    probabilities = torch.softmax(x, -1)
    loss += _summed_token_loss(x, probabilities, target.squeeze(-1), keep)  # Σ −log softmax(x)[y]
    if label_smoothing:
        # mean_v −log p[v] = logsumexp(x) − mean_v x = −log p[y] + x[y] − mean_v x, so the smoothed loss
        # (1 − ε)(−log p[y]) + ε mean_v −log p[v] is −log p[y] + ε (x[y] − mean_v x): no log-sum-exp pass.
        margin = x.gather(-1, target).squeeze(-1) - x.mean(-1)
        loss += label_smoothing * torch.where(keep, margin, 0.0).sum()
    if candidates is not None:
        # d/dx of −log(1 − p[c]) is p[c]/(1 − p[c]) (onehot(c) − softmax): with w_c that factor times α, the term adds
        # Σ_c w_c onehot(c) − (Σ_c w_c) softmax to the gradient, made in place before the softmax becomes the
        # cross-entropy's gradient. Candidates exist only on labelled rows.
        penalty, factor = _unlikelihood_terms(probabilities, candidates)
        loss += unlikelihood_weight * penalty.sum()
        factor = unlikelihood_weight * factor
        probabilities.mul_(1.0 - factor.sum(-1, keepdim=True))
        probabilities.scatter_add_(-1, candidates.clamp(min=0), factor)  # 0 where there is none
    # d loss / d logits = softmax − onehot(y) on labelled rows, 0 on the others, made in the (C, V) buffer.
    unlabelled = (~keep).nonzero().squeeze(1)
    if unlabelled.numel():
        probabilities[unlabelled] = 0.0
    if not label_smoothing:
        probabilities.scatter_add_(-1, target, -keep.unsqueeze(-1).float())
    else:  # softmax − (1 − ε) onehot(y) − ε/V on labelled rows
        labelled_rows = keep.unsqueeze(-1).float()
        probabilities.scatter_add_(-1, target, -(1.0 - label_smoothing) * labelled_rows)
        probabilities.sub_(labelled_rows * (label_smoothing / vocab))
    return probabilities


class _GradientSums:
    """dh, dW and db of the summed loss, filled chunk by chunk: dh row by row in the compute dtype, dW and db summed
    in fp32. Only those autograd will ask for are made (a frozen head, as under LoRA, needs no dW)."""

    def __init__(self, hidden: Tensor, weight: Tensor, need_hidden: bool, need_weight: bool, need_bias: bool):
        self.weight = weight
        self.hidden = torch.empty_like(hidden) if need_hidden else None
        self.need_weight, self.need_bias = need_weight, need_bias
        self.weight_sum: Tensor | None = None
        self.bias_sum: Tensor | None = None

    def zero_rows(self, start: int, end: int) -> None:
        """dh of rows [start, end) is 0 except where `add` writes it (rows without a label have none)."""
        if self.hidden is not None:
            self.hidden[start:end].zero_()

    def add(self, grad_logits: Tensor, chunk_hidden: Tensor, start: int, end: int, index: Tensor | None) -> None:
        """Add a chunk's share, from its d loss / d logits (fp32) and hidden states; `index` lists the rows of
        [start, end) they belong to (None: all of them)."""
        grad_logits_fp32, grad_logits = grad_logits, grad_logits.to(chunk_hidden.dtype)
        if self.hidden is not None:
            if index is None:
                torch.mm(grad_logits, self.weight, out=self.hidden[start:end])
            else:
                self.hidden[start:end].index_copy_(0, index, torch.mm(grad_logits, self.weight))
        if self.need_weight:
            if self.weight_sum is None:
                self.weight_sum = torch.mm(grad_logits.t(), chunk_hidden).float()
            elif grad_logits.dtype == torch.float32:
                self.weight_sum.addmm_(grad_logits.t(), chunk_hidden)  # in place: no (V, E) temporary
            else:
                self.weight_sum += torch.mm(grad_logits.t(), chunk_hidden)  # 16-bit products, summed in fp32
        if self.need_bias:
            chunk_grad_bias = grad_logits_fp32.sum(0)
            self.bias_sum = chunk_grad_bias if self.bias_sum is None else self.bias_sum.add_(chunk_grad_bias)

    def totals(self) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """(dh, dW, db); zeros for dW and db when no row had a label."""
        weight = self.weight
        if self.need_weight and self.weight_sum is None:
            self.weight_sum = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        if self.need_bias and self.bias_sum is None:
            self.bias_sum = torch.zeros(weight.shape[0], dtype=torch.float32, device=weight.device)
        return self.hidden, self.weight_sum, self.bias_sum


class _LinearCrossEntropy(torch.autograd.Function):
    """(h, W, b, y, C, ε, c, α) → (logits = h Wᵀ + b, Σ over labelled rows of −log softmax(logits)[y], label-smoothed
    by ε, plus α Σ −log(1 − softmax(logits)[c]) over the unlikelihood candidates c when given).

    The forward also forms dh, dW and db of the summed loss (per unit of loss); the backward scales them by the
    incoming gradient, and adds the usual linear-layer gradients when the returned logits are used downstream too.
    """

    @staticmethod
    def forward(
        ctx,
        hidden: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        labels: Tensor,
        chunk_rows: int,
        label_smoothing: float = 0.0,
        candidates: Tensor | None = None,
        unlikelihood_weight: float = 0.0,
    ):
        """hidden (N, E), weight (V, E), bias (V,) or None, all in the compute dtype; labels (N,); ε in [0, 1);
        candidates (N, K) from `repeat_candidates` or None; α ≥ 0."""
        rows = hidden.shape[0]
        logits = hidden.new_empty(rows, weight.shape[0])
        grads = _GradientSums(hidden, weight, *ctx.needs_input_grad[:3])
        loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
        labelled = labels != -100
        for start in range(0, rows, chunk_rows):
            end = min(start + chunk_rows, rows)
            chunk_hidden, chunk_logits, chunk_labels = hidden[start:end], logits[start:end], labels[start:end]
            chunk_candidates = None if candidates is None else candidates[start:end]
            if bias is None:
                torch.mm(chunk_hidden, weight.t(), out=chunk_logits)
            else:
                torch.addmm(bias, chunk_hidden, weight.t(), out=chunk_logits)
            keep = labelled[start:end]
            count = int(keep.sum())
            index = None
            if count <= keep.numel() // 2:  # few labelled rows (MLM labels ~15%): loss and gradient on those alone
                grads.zero_rows(start, end)
                if count == 0:
                    continue
                index = keep.nonzero().squeeze(1)
                chunk_hidden, chunk_logits, chunk_labels, keep = (
                    t[index] for t in (chunk_hidden, chunk_logits, chunk_labels, keep)
                )
                chunk_candidates = None if chunk_candidates is None else chunk_candidates[index]
            grad_logits = _add_chunk_loss(
                loss, chunk_logits, chunk_labels, keep, label_smoothing, chunk_candidates, unlikelihood_weight
            )
            grads.add(grad_logits, chunk_hidden, start, end, index)
        ctx.save_for_backward(hidden, weight, *grads.totals())
        ctx.set_materialize_grads(False)
        return logits, loss

    @staticmethod
    @once_differentiable  # a second-order gradient raises instead of coming out silently wrong
    def backward(ctx, grad_logits: Tensor | None, grad_loss: Tensor | None):
        hidden, weight, grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        out_hidden = out_weight = out_bias = None
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        if grad_loss is not None:
            out_hidden = grad_hidden * grad_loss.to(grad_hidden.dtype) if need_hidden else None
            out_weight = grad_weight * grad_loss if need_weight else None
            out_bias = grad_bias * grad_loss if need_bias else None
        if grad_logits is not None:  # the logits feed another differentiable computation as well
            if need_hidden:
                extra_hidden = torch.mm(grad_logits, weight)
                out_hidden = extra_hidden if out_hidden is None else out_hidden + extra_hidden
            if need_weight:
                extra_weight = torch.mm(grad_logits.t(), hidden).float()
                out_weight = extra_weight if out_weight is None else out_weight + extra_weight
            if need_bias:
                extra_bias = grad_logits.sum(0).float()
                out_bias = extra_bias if out_bias is None else out_bias + extra_bias
        out_weight = None if out_weight is None else out_weight.to(weight.dtype)
        out_bias = None if out_bias is None else out_bias.to(weight.dtype)
        return out_hidden, out_weight, out_bias, None, None, None, None, None


def linear_cross_entropy(
    hidden: Tensor,
    projection: nn.Linear,
    labels: Tensor,
    num_items_in_batch: Tensor | int | None = None,
    label_smoothing: float = 0.0,
    unlikelihood_weight: float = 0.0,
    softcap: float | None = None,
    fused: bool = True,
) -> tuple[Tensor, Tensor]:
    """Logits `projection(hidden)` (…, V) and their token cross-entropy against `labels` (…), as `token_cross_entropy`
    (with the same `label_smoothing`), plus `unlikelihood_weight` × `repeat_unlikelihood` when that is not 0. With
    `softcap` c the logits are c·tanh(logits / c) (Gemma's final cap), computed unfused.

    With `fused` and a gradient to compute, the projection and the loss run fused, chunk by chunk (see the module
    docstring): the loss is computed beside the logits, from the same hidden states, so it is not a function of the
    returned logits in autograd's graph (`torch.autograd.grad(loss, logits)` finds no path; the logits still carry
    gradients to the weights). Otherwise — not `fused`, no gradient, under `torch.compile`, or when something
    intercepts the projection (hooks, adapters) — they run as `projection` followed by `token_cross_entropy`, and the
    loss is a function of the logits. Both give the same values. The models pass `fused=self.training`.
    """
    _check_label_shape(labels, hidden.shape[:-1])  # the fused path reads labels by flat row: a mismatch is silent
    needs_grad = fused and torch.is_grad_enabled() and (hidden.requires_grad or projection.weight.requires_grad)
    if not needs_grad or torch.compiler.is_compiling() or not plain_linear(projection) or softcap is not None:
        logits = soft_cap(projection(hidden), softcap)
        loss = token_cross_entropy(logits, labels, num_items_in_batch, label_smoothing)
        if unlikelihood_weight:
            loss = loss + unlikelihood_weight * repeat_unlikelihood(logits, labels, num_items_in_batch)
        return logits, loss
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    weight, bias = projection.weight, projection.bias
    # Under autocast the casts are explicit (and tracked by autograd), as autocast would make them for F.linear.
    flat_hidden = hidden.reshape(-1, hidden.shape[-1]).to(dtype)
    weight, bias = weight.to(dtype), None if bias is None else bias.to(dtype)
    labels = labels.to(hidden.device)
    candidates = None
    if unlikelihood_weight:  # made per row (the previous targets), then flattened as the labels
        candidates = repeat_candidates(labels).reshape(-1, UNLIKELIHOOD_WINDOW)
    with torch.autocast(device_type=device, enabled=False):
        logits, loss = _LinearCrossEntropy.apply(
            flat_hidden,
            weight,
            bias,
            labels.reshape(-1),
            CHUNK_ROWS,
            float(label_smoothing),
            candidates,
            float(unlikelihood_weight),
        )
    return logits.view(*hidden.shape[:-1], -1), _normalise(loss, labels, num_items_in_batch)


class VocabularyLoss:
    """Mixin of the Transformer models: the last step of a language-model head, from last hidden states to logits
    and, with labels, their loss. Reads `config`, the head's `lm_head` and `lm_head_transform` (None when not
    configured) and `vocabulary_logits`, the logits alone (the model's, which decoding may speed up)."""

    def vocabulary_logits_and_loss(
        self,
        hidden: Tensor,
        labels: Tensor | None,
        num_items_in_batch: Tensor | int | None = None,
        *,
        generative: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """`vocabulary_logits`, and with `labels` (B, T) their token cross-entropy (label-smoothed, plus the repeat
        unlikelihood term, as the config says). In training mode the vocabulary projection and the loss run fused
        (`linear_cross_entropy`: no (N, V) buffer is kept for the backward), and the loss is computed beside the
        returned logits rather than from them; in eval mode the loss is computed from the returned logits, so that
        it can be differentiated with respect to them (saliency, attacks, transformers' own model tests). The
        unlikelihood term is for heads that generate left to right (`generative`): a masked LM's labels are not a
        sequence the model writes, so it never gets the term."""
        if labels is None:
            return self.vocabulary_logits(hidden), None
        return linear_cross_entropy(
            self._lm_head_input(hidden),
            self.lm_head,
            labels,
            num_items_in_batch,
            self.config.label_smoothing,
            # A config saved before the option existed has no such field.
            getattr(self.config, "unlikelihood_weight", 0.0) if generative else 0.0,
            getattr(self.config, "final_logit_softcapping", None),
            fused=self.training,
        )

    def _lm_head_input(self, hidden: Tensor) -> Tensor:
        """What the vocabulary projection reads: the last hidden states, scaled and transformed as configured."""
        if self.config.scale_lm_head_input:
            # T5 scales embeddings by 1 on the way in, so a tied output matrix would see √E-sized logits otherwise.
            hidden = hidden * self.config.hidden_size**-0.5
        if self.lm_head_transform is not None:
            hidden = self.lm_head_transform(hidden)
        if self.config.logits_scaling != 1.0:
            # µP's output multiplier, logits / L (Yang et al. 2022; Granite), on the E inputs rather than the V logits
            hidden = hidden / self.config.logits_scaling
        if self.config.logit_multiplier != 1.0:
            # Cohere's logit_scale, logits · m, on the E inputs too (exact for its power-of-two 0.0625)
            hidden = hidden * self.config.logit_multiplier
        return hidden
