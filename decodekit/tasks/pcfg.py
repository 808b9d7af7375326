"""Probabilistic context-free grammars: inside probabilities by length, exact parsing (inside
probability of a string, summed over all derivations) and sampling conditioned on length.

A rule is ``(lhs, rhs, prob)``: ``lhs`` a nonterminal name (str), ``rhs`` a tuple of nonterminal
names and terminal ids (int), possibly empty. Grammars may have epsilon rules and left or right
recursion but no cycle that derives nothing (A =>+ A while every other symbol derives epsilon).

Charts are stored diagonal-major: ``D[X][o, i]`` = P(X =>* w[i:i+o]) (o = span width, i = start),
and a dotted rule prefix X_1..X_d gets the same layout. For width w, vectorised over starts i::

    D[prefix_d][w, i] = sum_{o=0}^{w} D[prefix_{d-1}][o, i] * D[X_d][w - o, i + o]
    D[A][w, i]        = sum_{rules A -> X_1..X_k} p(rule) D[prefix_k][w, i]

iterated to the fixed point within each width (same-width dependencies come from epsilon
parts and are acyclic, so this is exact). With every terminal matching every position the
same chart gives I[X][l] = sum over strings of length l of P(X =>* string).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from decodekit.errors import DecodekitError

Rule = tuple[str, tuple, float]


@dataclass(frozen=True)
class PCFG:
    """``start`` nonterminal, ``rules``, ``num_terminals`` (terminal ids are 0..num_terminals-1)."""

    start: str
    rules: tuple[Rule, ...]
    num_terminals: int

    @property
    def nonterminals(self) -> list[str]:
        return sorted({lhs for lhs, _, _ in self.rules})


def _chart(grammar: PCFG, match: np.ndarray) -> dict:
    """Fill the chart. Args: match [B, n, num_terminals] (1.0 where terminal a may be at position i).
    Returns {symbol: D [B, n+1, n+1]} for nonterminals (keys str) and terminals (keys int)."""
    b, n = match.shape[0], match.shape[1]
    d: dict = {}
    for a in range(grammar.num_terminals):
        d[a] = np.zeros((b, n + 1, n + 1))
        if n:
            d[a][:, 1, :n] = match[:, :, a]
    for nt in grammar.nonterminals:
        d[nt] = np.zeros((b, n + 1, n + 1))
    eps = np.zeros((b, n + 1, n + 1))
    eps[:, 0, :] = 1.0
    prefixes = [[eps] + [np.zeros((b, n + 1, n + 1)) for _ in rhs] for _, rhs, _ in grammar.rules]
    for w in range(n + 1):
        o = np.arange(w + 1)[:, None]
        i = np.arange(n + 1 - w)[None, :]
        for _ in range(4 * len(grammar.rules) + 4):
            changed = False
            for (_, rhs, _), pre in zip(grammar.rules, prefixes):
                for k, sym in enumerate(rhs):
                    new = (pre[k][:, : w + 1, : n + 1 - w] * d[sym][:, w - o, i + o]).sum(1)
                    pre[k + 1][:, w, : n + 1 - w] = new
            for nt in grammar.nonterminals:
                total = sum(
                    p * pre[-1][:, w] for (lhs, _, p), pre in zip(grammar.rules, prefixes) if lhs == nt
                )
                if not np.array_equal(total, d[nt][:, w]):
                    changed = True
                    d[nt][:, w] = total
            if not changed:
                break
        else:
            raise DecodekitError("grammar has a cycle that derives the empty string; not supported")
    return d


def inside_by_length(grammar: PCFG, max_length: int) -> dict:
    """I[X][l] for l = 0..max_length: total probability of X deriving a string of length l.
    Returns {symbol: array [max_length + 1]} (terminals: 1 at l = 1)."""
    match = np.ones((1, max_length, grammar.num_terminals))
    return {k: v[0, :, 0] for k, v in _chart(grammar, match).items()}


def string_probabilities(grammar: PCFG, strings: Sequence[Sequence[int]], batch: int = 32) -> np.ndarray:
    """p_G(w) = P(start =>* w), summed over all derivations, for each string. Returns [len(strings)]."""
    out = np.zeros(len(strings))
    by_length: dict[int, list[int]] = {}
    for j, s in enumerate(strings):
        by_length.setdefault(len(s), []).append(j)
    for length, idx in by_length.items():
        for lo in range(0, len(idx), batch):
            rows = idx[lo : lo + batch]
            match = np.zeros((len(rows), length, grammar.num_terminals))
            for r, j in enumerate(rows):
                if any(not 0 <= a < grammar.num_terminals for a in strings[j]):
                    raise DecodekitError(
                        f"string {list(strings[j])} has a terminal outside 0..{grammar.num_terminals - 1}"
                    )
                match[r, np.arange(length), list(strings[j])] = 1.0
            out[rows] = _chart(grammar, match)[grammar.start][:, length, 0]
    return out


class LengthSampler:
    """Samples strings from a PCFG conditioned on their length (exactly: P(w | |w| = l))."""

    def __init__(self, grammar: PCFG, max_length: int) -> None:
        self.grammar, self.max_length = grammar, max_length
        self.inside = inside_by_length(grammar, max_length)
        self.rules: dict[str, list] = {}
        for lhs, rhs, p in grammar.rules:
            suffix = [np.eye(1, max_length + 1)[0]]  # G_{k+1} = delta_0
            for sym in reversed(rhs):
                suffix.append(np.convolve(self.inside[sym], suffix[-1])[: max_length + 1])
            self.rules.setdefault(lhs, []).append((rhs, p, suffix[::-1]))

    def valid_lengths(self, lo: int, hi: int) -> list[int]:
        """Lengths l in [lo, hi] with nonzero probability."""
        if hi > self.max_length:
            raise DecodekitError(f"length {hi} exceeds the sampler's max_length {self.max_length}")
        return [n for n in range(lo, hi + 1) if self.inside[self.grammar.start][n] > 0]

    def sample(self, length: int, rng: np.random.Generator) -> list[int]:
        """One string of exactly ``length`` terminals, drawn from P(w | |w| = length)."""
        if not 0 <= length <= self.max_length or self.inside[self.grammar.start][length] <= 0:
            raise DecodekitError(
                f"no string of length {length} in this grammar (max_length {self.max_length})"
            )
        out: list[int] = []
        self._expand(self.grammar.start, length, rng, out)
        return out

    def _expand(self, symbol, length: int, rng: np.random.Generator, out: list[int]) -> None:
        if isinstance(symbol, int):
            out.append(symbol)
            return
        options = self.rules[symbol]
        weights = np.array([p * suffix[0][length] for _, p, suffix in options])
        rhs, _, suffix = options[_choose(weights, rng)]
        for k, sym in enumerate(rhs):
            split = self.inside[sym][: length + 1] * suffix[k + 1][length::-1]
            m = _choose(split, rng)
            self._expand(sym, m, rng, out)
            length -= m


def _choose(weights: np.ndarray, rng: np.random.Generator) -> int:
    cum = np.cumsum(weights)
    return int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
