"""Training losses: functions ``fn(model, hidden [N, T, D], targets [N, T]) -> [N, T]`` per-token
losses, which the trainer reduces, held in a :class:`Loss` that says whether ``fn`` is the exact
negative log-likelihood under the full softmax (then the trainer reports its perplexity).
Sampled objectives (NCE, sampled softmax, :mod:`.sampled`) use ``hidden`` and only the rows of
``model.head`` they need; they are modules, whose learned state (NCE's log Z) travels with the
resume state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def softmax_cross_entropy(
    model: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """-log softmax(head(h_t))[y_t] for every position: [N, T]."""
    logits = model.head(hidden)  # [N, T, V]
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none").view_as(targets)


@dataclass(frozen=True)
class Loss:
    """A training objective.

    Attributes:
        fn: ``(model, hidden [N, T, D], targets [N, T]) -> [N, T]`` per-token losses; an
            ``nn.Module`` when it has parameters or state of its own (NCE's log Z).
        nll: ``fn`` is the exact negative log-likelihood under the full softmax, so the mean
            training loss is a log-perplexity (reported as ``train_ppl``); False for sampled
            objectives and for callables the trainer knows nothing about.
    """

    fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
    nll: bool = False

    @classmethod
    def of(cls, fn: Loss | Callable) -> Loss:
        """``fn`` as a Loss: a Loss itself, else a plain objective (exact NLL only when it is
        :func:`softmax_cross_entropy` itself)."""
        return fn if isinstance(fn, Loss) else cls(fn, nll=fn is softmax_cross_entropy)

    def __call__(self, model: nn.Module, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.fn(model, hidden, targets)

    @property
    def module(self) -> nn.Module | None:
        """``fn`` if it is a module (its parameters train, its state is saved), else None."""
        return self.fn if isinstance(self.fn, nn.Module) else None

    def parameters(self) -> list[nn.Parameter]:
        return [] if self.module is None else list(self.module.parameters())

    def init_model(self, model: nn.Module) -> None:
        """Prepare a fresh model (e.g. NCE's output biases -log V); nothing for most losses."""
        init = getattr(self.fn, "init_model", None)
        if init is not None:
            init(model)

    def state_dict(self) -> dict[str, list | float]:
        """The learned state (NCE's learned log Z), JSON-ready, for the resume file."""
        if self.module is None:
            return {}
        return {k: v.tolist() for k, v in self.module.state_dict().items()}

    def load_state_dict(self, state: dict[str, list | float]) -> None:
        """Inverse of :meth:`state_dict` (in place)."""
        if self.module is not None:
            own = self.module.state_dict()
            self.module.load_state_dict({k: torch.tensor(v, dtype=own[k].dtype) for k, v in state.items()})


SOFTMAX = Loss(softmax_cross_entropy, nll=True)
