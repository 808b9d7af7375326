"""Back-pointers and result pools shared by the beam searches.

Hypotheses are never copied while searching: each step records, for every beam slot, the
slot it extends and the token it appended; histories are read back once at the end.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import torch

from decodekit.outputs import Hypothesis


class Trace:
    """Per-step ``parents [B, W]`` (slot index in the previous step) and ``tokens [B, W]``."""

    def __init__(self) -> None:
        self._parents: list[torch.Tensor] = []
        self._tokens: list[torch.Tensor] = []
        self._host: tuple[list, list] | None = None

    def push(self, parents: torch.Tensor, tokens: torch.Tensor) -> None:
        self._parents.append(parents)
        self._tokens.append(tokens)

    def history(self, b: int, t: int, slot: int) -> tuple[int, ...]:
        """Tokens of slot ``slot`` of item ``b`` after step ``t`` (steps 0..t), oldest first."""
        if self._host is None:  # one device->host copy for the whole search
            parents = torch.stack(self._parents).cpu().tolist() if self._parents else []
            tokens = torch.stack(self._tokens).cpu().tolist() if self._tokens else []
            self._host = (parents, tokens)
        parents, tokens = self._host
        out = []
        for step in range(t, -1, -1):
            out.append(tokens[step][b][slot])
            slot = parents[step][b][slot]
        return tuple(reversed(out))


@dataclass(order=True)
class Candidate:
    """A completed hypothesis, its tokens still held as (step, slot) in the trace."""

    score: float
    logprob: float = field(compare=False)
    last_step: int = field(compare=False)  # step of its last non-EOS token (-1: none)
    slot: int = field(compare=False)
    finished: bool = field(compare=False)


def length_denominator(length: int, length_penalty: float) -> float:
    """``max(length, 1) ** length_penalty``; inf when it overflows (|alpha| in the hundreds)."""
    try:
        return float(max(length, 1)) ** length_penalty
    except OverflowError:
        return math.inf


def length_normalised(logprob: float, length: int, length_penalty: float) -> float:
    """``logprob / length ** length_penalty`` (length counts EOS; an empty output counts 1).

    Never NaN and never an exception for a finite alpha: a log-probability of 0 stays 0, and a
    denominator that underflows to 0 gives -inf."""
    if not logprob < 0:  # 0 (or -inf, which is never a candidate): the same at every length
        return logprob
    denominator = length_denominator(length, length_penalty)
    return logprob / denominator if denominator > 0 else -math.inf


def reachable_bound(
    cum_logprob: torch.Tensor, shortest: int | torch.Tensor, max_length: int, denominators: torch.Tensor
) -> torch.Tensor:
    """Best score any completion of the live hypotheses can reach, per item.

    Args:
        cum_logprob: [B, W] cumulative log-probabilities of the live slots (-inf: empty slot).
        shortest: the fewest tokens (EOS included) a completion of each slot can have: an int,
            or a long tensor broadcastable to [B, W]. Without EOS a hypothesis may end unfinished
            at its *current* length (masked or Anderson search, in an accepting state that cannot
            go on), so ``shortest`` is then the current length, not the next one.
        max_length: the most tokens a completion can have.
        denominators: float64 [max_length + 1], ``length_denominator(n, alpha)`` for each n.

    Log-probabilities only decrease as tokens are added, and a completion of a slot with
    cumulative log-probability ``c <= 0`` has between ``shortest`` and ``max_length`` tokens;
    ``c / n**alpha`` is monotonic in ``n`` for every sign of alpha, so the best reachable score
    is ``max(c / shortest**alpha, c / max_length**alpha)``. Computed in float64 with the same
    denominators (and division) as :func:`length_normalised`, so a bound is never below the
    score the slot later gets."""
    c = cum_logprob.double()
    if isinstance(shortest, torch.Tensor):
        near = denominators[shortest.clamp(1, max_length)]
    else:
        near = denominators[min(max(shortest, 1), max_length)]
    far = denominators[max_length]
    scaled = torch.maximum(c / near, c / far)
    scaled = torch.where((c < 0) & torch.isfinite(c), scaled, c)  # 0 stays 0, -inf stays -inf
    return scaled.amax(dim=1)  # [B]


class Pool:
    """The completed candidates of each item; decides when an item is done."""

    def __init__(self, batch: int, n_best: int) -> None:
        self.n_best = n_best
        self.items: list[list[Candidate]] = [[] for _ in range(batch)]
        self.done = [False] * batch
        self._denominators: torch.Tensor | None = None  # [max_length + 1], built on first use

    def add(self, b: int, candidate: Candidate) -> None:
        if not self.done[b]:
            self.items[b].append(candidate)

    def add_unfinished(self, cum_logprob: torch.Tensor, steps: int, alpha: float) -> None:
        """Slots with finite ``cum_logprob`` [B, W] end here unfinished, ``steps`` tokens long."""
        finite = torch.isfinite(cum_logprob)
        if not bool(finite.any()):
            return
        values = cum_logprob.tolist()
        for b, slot in finite.nonzero().tolist():
            v = values[b][slot]
            self.add(b, Candidate(length_normalised(v, steps, alpha), v, steps - 1, slot, False))

    def update(
        self, cum_logprob: torch.Tensor, shortest: int | torch.Tensor, max_length: int, alpha: float
    ) -> None:
        """Mark items done after a step. ``cum_logprob`` [B, W]: the live slots; ``shortest``: the
        fewest tokens (EOS included) a completion of each slot can have (see
        :func:`reachable_bound`)."""
        if self.has_candidates(self.n_best):
            if self._denominators is None or self._denominators.device != cum_logprob.device:
                self._denominators = torch.tensor(
                    [length_denominator(n, alpha) for n in range(max_length + 1)],
                    dtype=torch.float64,
                    device=cum_logprob.device,
                )
            bound = reachable_bound(cum_logprob, shortest, max_length, self._denominators)
            self.update_done(bound.tolist())
        else:  # only an item with no live hypothesis left can be done
            for b, alive in enumerate(torch.isfinite(cum_logprob).any(1).tolist()):
                self.done[b] = self.done[b] or not alive

    def has_candidates(self, n: int) -> bool:
        """Whether some item not yet done holds at least ``n`` candidates."""
        return any(not d and len(c) >= n for d, c in zip(self.done, self.items))

    def update_done(self, bound: list[float]) -> None:
        """Item b is done when no live hypothesis is left (``bound[b]`` = -inf), or when it has
        n_best candidates none of which a live hypothesis can still beat (``bound[b]``)."""
        for b, cands in enumerate(self.items):
            if self.done[b]:
                continue
            if bound[b] == float("-inf"):
                self.done[b] = True
            elif len(cands) >= self.n_best:
                self.done[b] = heapq.nlargest(self.n_best, cands)[-1].score >= bound[b]

    def results(self, trace: Trace) -> list[list[Hypothesis]]:
        out = []
        for b, cands in enumerate(self.items):
            best = heapq.nlargest(self.n_best, cands)
            out.append(
                [
                    Hypothesis(trace.history(b, c.last_step, c.slot), c.logprob, c.score, c.finished)
                    if c.last_step >= 0
                    else Hypothesis((), c.logprob, c.score, c.finished)
                    for c in best
                ]
            )
        return out
