"""Back-pointers and result pools shared by the beam searches.

Hypotheses are never copied while searching: each step records, for every beam slot, the
slot it extends and the token it appended; histories are read back once at the end.
"""

from __future__ import annotations

import heapq
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


def length_normalised(logprob: float, length: int, length_penalty: float) -> float:
    """``logprob / length ** length_penalty`` (length counts EOS; an empty output counts 1)."""
    return logprob / max(length, 1) ** length_penalty


def reachable_bound(cum_logprob: torch.Tensor, length: int, max_length: int, alpha: float) -> torch.Tensor:
    """Best score any extension of live hypotheses can reach, per item.

    Args: cum_logprob [B, W] (-inf for empty slots), length: tokens generated so far.
    Log-probabilities only decrease as tokens are added, and a completion has between
    ``length + 1`` and ``max_length`` tokens, so with ``c <= 0`` the best score is
    ``max(c / (length + 1)**alpha, c / max_length**alpha)``: exact for every sign of alpha."""
    nearest = cum_logprob / float(length + 1) ** alpha
    farthest = cum_logprob / float(max_length) ** alpha
    return torch.maximum(nearest, farthest).amax(dim=1)  # [B]


class Pool:
    """The completed candidates of each item; decides when an item is done."""

    def __init__(self, batch: int, n_best: int) -> None:
        self.n_best = n_best
        self.items: list[list[Candidate]] = [[] for _ in range(batch)]
        self.done = [False] * batch

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

    def update(self, cum_logprob: torch.Tensor, length: int, max_length: int, alpha: float) -> None:
        """Mark items done after a step; cum_logprob [B, W] of the live slots, ``length`` tokens."""
        if self.has_candidates(self.n_best):
            self.update_done(reachable_bound(cum_logprob, length, max_length, alpha).tolist())
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
