"""Reading a reference model's tensors under our names, so that none is forgotten: what every converter writes with.

A converter (one per architecture, in this folder) reads the reference's tensors through `Weights` and records which
of our parameter names each becomes. `from_hf` then checks that every reference tensor was used, repeats a used one
or was dropped with a reason; `to_hf` reads the same record backwards, as the places its tensors go.
"""

from collections.abc import Callable

import torch
from torch import Tensor
from transformers import PreTrainedModel


def unsupported(what: str, instead: str | None = None) -> ValueError:
    """The error of an option the code cannot express: the model would not be converted exactly. `instead`: what the
    user can do (by default: keep transformers' class for this model)."""
    instead = instead or "run this model with its transformers class, which computes it"
    return ValueError(
        f"from_hf: {what} is not supported by hf_attention; the model cannot be converted exactly ({instead})."
    )


class Weights:
    """Reads reference tensors by name and remembers which were used, so that none is forgotten."""

    def __init__(self, model: PreTrainedModel):
        self.tensors = model.state_dict()
        self.config = model.config
        self.used: set[str] = set()
        self.out: dict[str, Tensor] = {}
        # Reference tensor → the reference tensor whose values it repeats (see `repeat`).
        self.repeats: dict[str, str] = {}
        # Our tensors computed from reference tensors by more than a view (see `rearrange`).
        self.rearranged: list[tuple[tuple[str, ...], tuple[str, ...], Callable]] = []

    def __contains__(self, key: str) -> bool:
        return key in self.tensors

    def get(self, key: str) -> Tensor:
        self.used.add(key)
        return self.tensors[key]

    def copy(self, ours: str, theirs: str, names: tuple[str, ...] = ("weight", "bias")) -> None:
        """Copy `theirs.<name>` to `ours.<name>` for each name present (a module without bias has none)."""
        for name in names:
            if f"{theirs}.{name}" in self.tensors:
                self.out[f"{ours}.{name}"] = self.get(f"{theirs}.{name}")

    def rearrange(
        self, ours: dict[str, Tensor], theirs: tuple[str, ...], back: Callable[[dict[str, Tensor]], dict[str, Tensor]]
    ) -> None:
        """Our tensors `ours` (name → values) made from the reference tensors `theirs` by more than a view (rows
        regrouped from a packed layout, say); `back` makes the reference tensors again from ours (name → values),
        which is how `to_hf` writes them."""
        for key in theirs:
            self.get(key)
        self.out.update(ours)
        self.rearranged.append((tuple(ours), tuple(theirs), back))

    def repeat(self, key: str, source: str) -> None:
        """Reference tensor `key` must hold the values of reference tensor `source`, which is mapped to one of ours.

        A reference that ties them holds one tensor under both names; untied (`tie_word_embeddings=False`),
        transformers gives each name a tensor of its own (BART's encoder and decoder embeddings beside `shared`). The
        import accepts the copies when they are equal, and the export writes `source`'s values into them."""
        if key in self.tensors:
            self.repeats[key] = source

    def repeats_its_source(self, key: str) -> bool:
        source = self.repeats.get(key)
        return source is not None and torch.equal(self.tensors[key], self.tensors[source])

    def check_all_used(self, dropped: dict[str, str]) -> list[tuple[str, str]]:
        """Raise unless every reference tensor was copied, aliases a copied one, repeats one (`repeat`), or is in
        `dropped` (prefix → why); returns the dropped tensors, each with its reason, for the caller to report."""
        used_storage = {(self.tensors[k].data_ptr(), self.tensors[k].shape) for k in self.used}
        left, dropping = [], []
        for key, tensor in self.tensors.items():
            if key in self.used or (tensor.data_ptr(), tensor.shape) in used_storage or self.repeats_its_source(key):
                continue  # tied weights appear under several names
            reason = next((why for prefix, why in dropped.items() if key.startswith(prefix)), None)
            if reason is not None:
                dropping.append((key, reason))
            elif key in self.repeats:
                untied = getattr(self.config, "tie_word_embeddings", None) is False
                raise unsupported(
                    f"a model whose {key} differs from {self.repeats[key]} (hf_attention holds them as one tensor"
                    + (f"; {type(self.config).__name__}.tie_word_embeddings=False unties them" if untied else "")
                    + ")",
                    "tie them, e.g. set tie_word_embeddings=True before loading the weights, if they are equal"
                    if untied
                    else None,
                )
            else:
                left.append(key)
        if left:
            raise unsupported(f"a model with weights that have no counterpart ({', '.join(left[:8])})")
        return dropping


def tied(weights: Weights, head: str, embedding: str, flag: bool) -> bool:
    """Whether the reference really shares its output matrix with the input embedding."""
    if head not in weights:
        return True
    a, b = weights.tensors[head], weights.tensors[embedding]
    return bool(flag) and (a.data_ptr() == b.data_ptr() or torch.equal(a, b))
