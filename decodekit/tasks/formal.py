"""The context-free language-modelling tasks of DuSell & Chiang (2020, 2022) as PCFGs, sampled
conditioned on length, with the exact lower bound on per-symbol cross-entropy.

A "mean m" parameter becomes a continue probability m / (m + 1). Tasks (terminal ids in order):

* ``marked-reversal`` w # w^R, w in {0,1}*:  S -> a S a (60/61 / 2), S -> # (1/61)
* ``unmarked-reversal`` w w^R:               S -> a S a (60/61 / 2), S -> eps (1/61)
* ``padded-reversal`` w a^p w^R:   S -> a S a (60/61 / 2), S -> T_a (1/61 / 2), T_a -> a T_a (30/31) | eps
* ``dyck`` (2 bracket pairs):                S -> S T (1/2) | T (1/2), T -> l S r (39/40 / 2) | l r (1/40 / 2)
* ``hardest-cfl`` (Greibach 1973), symbols ( ) [ ] , ; $ with DuSell & Chiang's rules and
  parameters c = u = 1/3, v = 1/2, q = 1/4, s = 3/5, t = 3/4; W -> each filler symbol with 1/5.

Lower bound (nats/symbol, EOS counted): for strings w with lengths l_w,
``-sum_w log(p(l_w) p_G(w) / I[S][l_w]) / sum_w (l_w + 1)``, p_G(w) summed over all parses,
I[S][l] the total probability of length l, p(l) = 1 / #valid lengths (or 1 when the length is known).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from decodekit.errors import DecodekitError
from decodekit.tasks.pcfg import PCFG, LengthSampler, string_probabilities
from decodekit.vocab import CharVocab


def continue_prob(mean: float) -> float:
    """A geometric count with mean m continues with probability m / (m + 1)."""
    return mean / (mean + 1)


def _reversal(marked: bool) -> PCFG:
    p = continue_prob(60)
    rules = [("S", (a, "S", a), p / 2) for a in (0, 1)]
    rules.append(("S", (2,) if marked else (), 1 - p))
    return PCFG("S", tuple(rules), 3 if marked else 2)


def _padded() -> PCFG:
    p, pad = continue_prob(60), continue_prob(30)
    rules = []
    for a in (0, 1):
        rules += [("S", (a, "S", a), p / 2), ("S", (f"T{a}",), (1 - p) / 2)]
        rules += [(f"T{a}", (a, f"T{a}"), pad), (f"T{a}", (), 1 - pad)]
    return PCFG("S", tuple(rules), 2)


def _dyck() -> PCFG:
    split, nest = continue_prob(1), continue_prob(40 - 1)
    rules = [("S", ("S", "T"), split), ("S", ("T",), 1 - split)]
    for left, right in ((0, 1), (2, 3)):
        rules += [("T", (left, "S", right), nest / 2), ("T", (left, right), (1 - nest) / 2)]
    return PCFG("S", tuple(rules), 4)


def _hardest() -> PCFG:
    lpar, rpar, lsq, rsq, comma, semi, dollar = range(7)
    c, u, v, q = continue_prob(0.5), continue_prob(0.5), continue_prob(2 - 1), 0.25
    s, t = continue_prob(1.5), continue_prob(3)
    rules = [
        ("S'", ("R", dollar, "Q", "S", "L", semi), 1.0),
        ("L", ("L'", comma, "U"), 1.0),
        ("L'", (comma, "V", "L'"), c),
        ("L'", (), 1 - c),
        ("R", ("U", comma, "R'"), 1.0),
        ("R'", ("R'", "V", comma), c),
        ("R'", (), 1 - c),
        ("U", ("W", "U"), u),
        ("U", (), 1 - u),
        ("V", ("W", "V"), v),
        ("V", ("W",), 1 - v),
        ("Q", ("L", semi, "R"), q),
        ("Q", (), 1 - q),
        ("S", ("S", "Q", "T"), s),
        ("S", ("T",), 1 - s),
    ]
    rules += [("W", (a,), 1 / 5) for a in (lpar, rpar, lsq, rsq, dollar)]
    for left, right in ((lpar, rpar), (lsq, rsq)):
        rules += [("T", (left, "Q", "S", "Q", right), t / 2), ("T", (left, "Q", right), (1 - t) / 2)]
    return PCFG("S'", tuple(rules), 7)


_TASKS = {
    "marked-reversal": (lambda: _reversal(True), "01#"),
    "unmarked-reversal": (lambda: _reversal(False), "01"),
    "padded-reversal": (_padded, "01"),
    "dyck": (_dyck, "()[]"),
    "hardest-cfl": (_hardest, "()[],;$"),
}
TASK_NAMES = tuple(_TASKS)


@dataclass
class FormalTask:
    """A named PCFG task. Token id of terminal a in :attr:`vocab` is a + 1 (0 is <eos>)."""

    name: str
    grammar: PCFG
    symbols: str
    max_length: int = 100
    _cache: dict = field(default_factory=dict, repr=False)

    @cached_property
    def sampler(self) -> LengthSampler:
        return LengthSampler(self.grammar, self.max_length)

    @cached_property
    def vocab(self) -> CharVocab:
        return CharVocab(["<eos>", *self.symbols], unk=None)

    def valid_lengths(self, lo: int, hi: int) -> list[int]:
        return self.sampler.valid_lengths(lo, hi)

    def sample_batches(
        self, num_strings: int, batch_size: int, lo: int, hi: int, rng: np.random.Generator
    ) -> list[np.ndarray]:
        """DuSell & Chiang's scheme: each batch has one length drawn uniformly from the valid lengths in
        [lo, hi]; its strings are sampled given that length. Returns arrays [batch, l] of terminal ids."""
        lengths = self.valid_lengths(lo, hi)
        batches = []
        for start in range(0, num_strings, batch_size):
            n = lengths[int(rng.integers(len(lengths)))]
            rows = min(batch_size, num_strings - start)
            batches.append(
                np.array([self.sampler.sample(n, rng) for _ in range(rows)], dtype=np.int64).reshape(rows, n)
            )
        return batches

    def log_prob_given_length(self, strings: list[list[int]]) -> np.ndarray:
        """log P(w | |w|) = log p_G(w) - log I[S][|w|] for each string (nats)."""
        p = string_probabilities(self.grammar, strings)
        if np.any(p <= 0):
            bad = [list(s) for s, v in zip(strings, p) if v <= 0][:3]
            raise DecodekitError(f"strings not in the {self.name} language: {bad}")
        total = self.sampler.inside[self.grammar.start]
        return np.log(p) - np.log(np.array([total[len(s)] for s in strings]))

    def lower_bound(self, strings: list[list[int]], num_lengths: int | None) -> float:
        """Per-symbol cross-entropy lower bound in nats (EOS counted). ``num_lengths``: size of the
        uniform length prior (None: lengths known, p(l) = 1)."""
        nll = -self.log_prob_given_length(strings).sum()
        if num_lengths is not None:
            nll += len(strings) * np.log(num_lengths)
        return float(nll / sum(len(s) + 1 for s in strings))


def make_task(name: str, max_length: int = 100) -> FormalTask:
    """One of :data:`TASK_NAMES`, able to sample strings up to ``max_length`` symbols."""
    if name not in _TASKS:
        raise DecodekitError(f"unknown task {name!r}; choose one of {', '.join(TASK_NAMES)}")
    build, symbols = _TASKS[name]
    return FormalTask(name, build(), symbols, max_length)
