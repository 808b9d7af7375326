"""Back-pointers, scores and the pool of completed hypotheses.

Hypotheses are never copied while searching: each step records, for every new row, the row
of the previous step it extends and the token it appended; histories are read back once at
the end. The pool collects the completed hypotheses of each item (a prompt for the beam
searches, one output row for greedy and sampling) and decides when an item is done.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field

import torch

from decodekit.outputs import Hypothesis, SearchTree


class Trace:
    """Per step ``parents [N_t]`` (rows of step t-1; None: row i extends row i), ``tokens [N_t]``,
    cumulative ``logprob [N_t]`` (per-token values are differences along the back-pointers),
    and, for :class:`~decodekit.outputs.SearchTree`, ``states [N_t]`` and ``items [N_t]``."""

    def __init__(self) -> None:
        self.steps: list[tuple] = []
        self._host: tuple[list, list, list, list] | None = None
        self.tops: list[tuple[torch.Tensor, torch.Tensor]] = []  # per step: (values, ids) [N_t-1, n]
        self._tops_host: tuple[list, list, list] | None = None

    def push(self, parents, tokens, logprob, states, items) -> None:
        self.steps.append((parents, tokens, logprob, states, items))

    def push_top(self, logprobs: torch.Tensor, n: int) -> None:
        """Step t's ``logprobs [N, V]`` (the rows that enter it: step t-1's), as their n most
        probable tokens ``(values [N, n], ids [N, n])``, most probable first."""
        self.tops.append(logprobs.topk(min(n, logprobs.shape[-1]), dim=-1))

    def top_logprobs(self, c: Candidate) -> tuple[tuple[tuple[int, float], ...], ...]:
        """Per position of candidate ``c`` (EOS included when finished), the ``(id, logprob)``
        pairs :meth:`push_top` kept of the distribution its token was chosen from (-inf ones
        left out); () when no step pushed them."""
        if not self.tops:
            return ()
        if self._tops_host is None:
            starts = [0, *itertools.accumulate(v.shape[0] for v, _ in self.tops)]
            values = torch.cat([v.double() for v, _ in self.tops]).tolist()
            self._tops_host = (values, torch.cat([i for _, i in self.tops]).tolist(), starts)
        values, ids, top_starts = self._tops_host
        parents = self.host()[0]
        # the row of step s - 1 each position's token was chosen from: its row's parent
        rows = [parents[k] for k in reversed(self._path(c))] + ([c.row] if c.finished else [])
        out = []
        for s, r in enumerate(rows):
            k = top_starts[s] + r
            out.append(tuple((i, v) for i, v in zip(ids[k], values[k]) if v > -math.inf))
        return tuple(out)

    def _path(self, c: Candidate) -> list[int]:
        """Where candidate ``c``'s tokens are in :meth:`host`'s lists, newest first: step s's row
        ``starts[s] + row``, each row the parent of the next along the back-pointers."""
        parents, _, _, starts = self.host()
        out, row = [], c.row
        for s in range(c.last_step, -1, -1):
            out.append(starts[s] + row)
            row = parents[out[-1]]
        return out

    def host(self) -> tuple[list, list, list, list]:
        """(parents, tokens, logprob, step starts), all steps in one list each: one device->host copy."""
        if self._host is None:
            same = [torch.arange(len(t), device=t.device) if p is None else p for p, t, *_ in self.steps]
            starts = [0, *itertools.accumulate(len(t) for _, t, *_ in self.steps)]
            columns = (same, [s[1] for s in self.steps], [s[2].double() for s in self.steps])
            self._host = (*(torch.cat(x).tolist() if x else [] for x in columns), starts)
        return self._host

    def history(self, c: Candidate) -> tuple[tuple[int, ...], float, float, bool, tuple[float, ...]]:
        """Candidate ``c`` as :class:`Hypothesis` fields: its tokens, oldest first, and each
        token's log-probability (EOS included when finished) from the differences of the rows'
        cumulative log-probabilities along the back-pointers."""
        _, tokens, logprob, _ = self.host()
        path = self._path(c)
        out, cum = [tokens[k] for k in path], [logprob[k] for k in reversed(path)]
        steps = [b - a for a, b in zip([0.0, *cum], cum)]
        if c.finished:
            steps.append(c.logprob - (cum[-1] if cum else 0.0))
        return tuple(reversed(out)), c.logprob, c.score, c.finished, tuple(steps)

    def draw(self, tree: SearchTree, pool: Pool, per_prompt: int) -> None:
        """Fill ``tree`` (items ``per_prompt`` to a prompt) with this search and ``pool``'s ends."""
        parents, tokens, logprob, starts = self.host()
        for t, (_, _, _, states, items) in enumerate(self.steps):
            span = slice(starts[t], starts[t + 1])
            tree.parents.append(parents[span]), tree.tokens.append(tokens[span])
            (
                tree.logprobs.append(logprob[span]),
                tree.states.append(None if states is None else states.tolist()),
            )
            tree.prompts.append([i // per_prompt for i in items.tolist()])
        for b in range(len(pool.items) // per_prompt):
            items = range(b * per_prompt, (b + 1) * per_prompt)
            ends = [c for i in items for c in pool.items[i]]
            tree.ended.append([(c.last_step, c.row, c.finished, c.logprob, c.score) for c in ends])
            where = {id(c): k for k, c in enumerate(ends)}
            tree.best.append([where[id(c)] for i in items for c in pool.best(i)])


@dataclass(order=True)
class Candidate:
    """A completed hypothesis, its tokens still held as (step, row) in the trace."""

    score: float
    logprob: float = field(compare=False)
    last_step: int = field(compare=False)  # step of its last non-EOS token (-1: none)
    row: int = field(compare=False)
    finished: bool = field(compare=False)
    sample_logprob: float | None = field(default=None, compare=False)


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
    """Best score any completion of the live hypotheses can reach, per item: ``[B]``.

    ``cum_logprob [B, W]``: the live rows (-inf: empty slot); ``shortest``: the fewest tokens (EOS
    included) a completion of each row can have, an int or [B, W] (without EOS a hypothesis may
    end unfinished at its *current* length); ``denominators [max_length + 1]`` float64,
    ``length_denominator(n, alpha)``. Log-probabilities only decrease, so a completion of a row
    with ``c <= 0`` has a log-probability ``<= c`` and between ``shortest`` and ``max_length``
    tokens; ``c / n**alpha`` is monotonic in ``n`` for every sign of alpha, so the bound is
    ``max(c / shortest**alpha, c / max_length**alpha)``, computed with the same float64
    denominators as :func:`length_normalised`: never below the score the row later gets."""
    c = cum_logprob.double()
    near = denominators[torch.as_tensor(shortest, device=c.device).clamp(1, max_length)]
    scaled = torch.maximum(c / near, c / denominators[max_length])
    scaled = torch.where((c < 0) & torch.isfinite(c), scaled, c)  # 0 stays 0, -inf stays -inf
    return scaled.amax(dim=1)  # [B]


class Pool:
    """The completed candidates of each of ``items`` items, ranked by
    ``logprob / len ** length_penalty``; decides when an item is done."""

    def __init__(self, items: int, n_best: int, length_penalty: float) -> None:
        self.n_best, self.alpha = n_best, length_penalty
        self.items: list[list[Candidate]] = [[] for _ in range(items)]
        self.done = [False] * items
        self._denominators: torch.Tensor | None = None  # [max_length + 1], built on first use

    def add_many(
        self, items, rows, logprobs, step: int, finished: bool, keys=None, sample_logprobs=None
    ) -> None:
        """Hypotheses that end at ``step``: ``rows [M]`` of step ``step - 1`` (their tokens),
        in ``items [M]``, with total ``logprobs [M]``; with EOS (``finished``: ``step + 1``
        tokens, EOS counted) or not (``step`` tokens). Rows with a -inf log-probability (or
        key) are empty slots and skipped, as are items already done. ``keys [M]``: what they
        rank by, length-normalised (None: ``logprobs``); ``sample_logprobs [M]``: carried."""
        if rows.numel() == 0:
            return
        length = step + finished
        ranks = (logprobs if keys is None else keys).tolist()
        carried = [None] * len(ranks) if sample_logprobs is None else sample_logprobs.tolist()
        for b, r, v, k, s in zip(items.tolist(), rows.tolist(), logprobs.tolist(), ranks, carried):
            if v > -math.inf and k > -math.inf and not self.done[b]:
                score = length_normalised(k, length, self.alpha)
                self.items[b].append(Candidate(score, v, step - 1, r, finished, s))

    def update(self, cum_logprob: torch.Tensor, shortest: int | torch.Tensor, max_length: int) -> None:
        """Mark items done after a step. ``cum_logprob`` [B, W]: the live rows; ``shortest``: the
        fewest tokens (EOS included) a completion of each row can have (see
        :func:`reachable_bound`)."""
        if self.has_candidates(self.n_best):
            if self._denominators is None:  # [max_length + 1] float64
                lengths = range(max_length + 1)
                self._denominators = cum_logprob.new_tensor(
                    [length_denominator(n, self.alpha) for n in lengths], dtype=torch.float64
                )
            bound = reachable_bound(cum_logprob, shortest, max_length, self._denominators).tolist()
        else:  # only an item with no live hypothesis left can be done
            bound = [0.0 if alive else -math.inf for alive in torch.isfinite(cum_logprob).any(1).tolist()]
        for b, cands in enumerate(self.items):
            if not self.done[b]:
                enough = len(cands) >= self.n_best
                self.done[b] = bound[b] == -math.inf or (enough and self.best(b)[-1].score >= bound[b])

    def has_candidates(self, n: int) -> bool:
        """Whether some item not yet done holds at least ``n`` candidates."""
        return any(not d and len(c) >= n for d, c in zip(self.done, self.items))

    def best(self, item: int) -> list[Candidate]:
        """The n-best candidates of ``item``, best first (ties: in the order they ended)."""
        return heapq.nlargest(self.n_best, self.items[item])

    def results(self, trace: Trace) -> list[list[Hypothesis]]:
        """The n-best hypotheses of each item, best first."""
        return [
            [
                Hypothesis(
                    *trace.history(c), top_logprobs=trace.top_logprobs(c), sample_logprob=c.sample_logprob
                )
                for c in self.best(b)
            ]
            for b in range(len(self.items))
        ]
