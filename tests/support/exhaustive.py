"""Exhaustive oracles for the decoding tests: a tiny model with zero-probability tokens, every
output a search may return (with its log-probability), and masked greedy done by hand.

The semantics encoded here are those of docs/decoding.md ("Zero-probability tokens"):

* a search returns only outputs of non-zero probability: ``tokens + EOS`` (finished, at most
  ``max_length`` tokens with EOS), ``tokens`` of exactly ``max_length`` tokens (unfinished), and,
  without EOS under a constraint, ``tokens`` that match and **cannot go on**: no token that can
  still lead to a match within ``max_length`` has non-zero probability (unfinished, shorter);
* under a constraint every output fully matches the pattern.
"""

from __future__ import annotations

import functools

import pytest
import regex
import torch
from hypothesis import strategies as st

from decodekit.vocab import Vocab

NEG_INF = float("-inf")


class SparseLM:
    """The next-token distribution depends on the whole history (a rolling hash picks a row of a
    random table), and a random share ``zeros`` of each row has probability exactly 0 (-inf),
    EOS included; every row keeps at least one token. Vectorised, so wide beams stay cheap.
    State: the hash [N] (int64)."""

    def __init__(
        self,
        vocab_size: int,
        seed: int = 0,
        zeros: float = 0.3,
        bos_id: int | None = 0,
        eos_id: int | None = 0,
        vocab: Vocab | None = None,
        sharpness: float = 2.0,
        rows: int = 4099,
    ):
        self.vocab_size, self.bos_id, self.eos_id, self.vocab = vocab_size, bos_id, eos_id, vocab
        g = torch.Generator().manual_seed(seed)
        logits = sharpness * torch.randn(rows, vocab_size, generator=g, dtype=torch.float64)
        zero = torch.rand(rows, vocab_size, generator=g, dtype=torch.float64) < zeros
        keep = logits.argmax(-1, keepdim=True)  # the most probable token of a row is never zeroed
        zero.scatter_(1, keep, False)
        self.table = logits.masked_fill(zero, NEG_INF).log_softmax(-1).float()  # [rows, V]
        self.rows = rows
        self.calls = 0

    def initial_state(self, batch_size: int):
        return torch.zeros(batch_size, dtype=torch.long)

    def step(self, state, tokens):
        self.calls += 1
        h = (state * 31 + tokens + 1) % 1_000_003
        return self.table[h % self.rows], h


def vocab_of(tokens) -> Vocab:
    """A concatenating vocabulary ``<unk> <eos> *tokens`` (ids 0, 1, 2, ...)."""
    return Vocab(["<unk>", "<eos>", *tokens], separator="", eos="<eos>", unk="<unk>")


class Oracle:
    """Walks every prefix of non-zero probability (one row at a time) and lists the outputs.

    ``pattern`` None: unconstrained. Otherwise an output must fully match it (tokens without
    surface text never match), and a token is allowed after a prefix iff some continuation
    reaches a match within ``max_length`` tokens, whatever its probability: exactly the mask
    of ``TokenAutomaton.allowed``."""

    def __init__(self, model, prompt, max_length: int, pattern: str | None = None):
        self.model, self.max_length, self.pattern = model, max_length, pattern
        self.eos = model.eos_id
        self.content = [v for v in range(model.vocab_size) if v != self.eos]
        self.surfaces = model.vocab.surfaces() if pattern is not None else None
        self.outputs: dict[tuple[tuple[int, ...], bool], float] = {}
        self._viable = functools.lru_cache(maxsize=None)(self._viable_uncached)
        seq = ([model.bos_id] if model.bos_id is not None else []) + list(prompt)
        state = model.initial_state(1)
        for x in seq:
            logprobs, state = model.step(state, torch.tensor([x]))
        self._root = (logprobs[0].tolist(), state)
        self._walk((), *self._root, 0.0)

    def matches(self, seq) -> bool:
        if self.pattern is None:
            return True
        if any(self.surfaces[x] is None for x in seq):
            return False
        return regex.fullmatch(self.pattern, self.model.vocab.decode(seq)) is not None

    def _viable_uncached(self, seq) -> bool:
        """Whether ``seq`` can be continued (or left as is) to a match within max_length."""
        if self.matches(seq):
            return True
        return len(seq) < self.max_length and any(self._viable((*seq, v)) for v in self.content)

    def allowed(self, seq) -> list[int]:
        """The tokens a masked search may append to ``seq`` (EOS included)."""
        out = [v for v in self.content if len(seq) < self.max_length and self._viable((*seq, v))]
        if self.eos is not None and len(seq) < self.max_length and self.matches(seq):
            out.append(self.eos)
        return out

    def _walk(self, seq, logprobs, state, total) -> None:
        eos, max_length = self.eos, self.max_length
        if eos is not None and len(seq) < max_length and logprobs[eos] > NEG_INF and self.matches(seq):
            self.outputs[(seq, True)] = total + logprobs[eos]
        if len(seq) == max_length:
            if self.matches(seq):
                self.outputs[(seq, False)] = total
            return
        went_on = False
        for v in self.content:
            if logprobs[v] == NEG_INF or not self._viable((*seq, v)):
                continue
            went_on = True
            nxt, nstate = self.model.step(state, torch.tensor([v]))
            self._walk((*seq, v), nxt[0].tolist(), nstate, total + logprobs[v])
        if eos is None and self.pattern is not None and not went_on and self.matches(seq):
            self.outputs[(seq, False)] = total  # stuck in an accepting state: ends here

    def best(self, alpha: float, n: int) -> list[tuple[tuple[int, ...], bool, float, float]]:
        """The n best outputs as (tokens, finished, logprob, score), best first."""
        scored = [
            (toks, fin, lp, lp / max(len(toks) + fin, 1) ** alpha) for (toks, fin), lp in self.outputs.items()
        ]
        return sorted(scored, key=lambda c: -c[3])[:n]

    def greedy(self) -> tuple[tuple[int, ...], bool, float] | None:
        """Masked greedy by hand: (tokens, finished, logprob), or None when it ends unmatched."""
        seq, total, (logprobs, state) = (), 0.0, self._root
        while len(seq) < self.max_length:
            allowed = [v for v in self.allowed(seq) if logprobs[v] > NEG_INF]
            if not allowed:  # cannot go on: a match without EOS ends here, anything else fails
                return (seq, False, total) if self.eos is None and self.matches(seq) else None
            v = max(allowed, key=lambda v: logprobs[v])
            total += logprobs[v]
            if v == self.eos:
                return seq, True, total
            seq = (*seq, v)
            nxt, state = self.model.step(state, torch.tensor([v]))
            logprobs = nxt[0].tolist()
        return seq, False, total


def assert_n_best(hyps, oracle: Oracle, alpha: float, n_best: int) -> None:
    """``hyps`` are n-best outputs: distinct, each a possible output with the right logprob and
    score, best first, and their scores those of the true n best (ties may swap outputs)."""
    expected = oracle.best(alpha, n_best)
    assert len(hyps) == len(expected), (hyps, expected)
    assert len({(h.tokens, h.finished) for h in hyps}) == len(hyps), hyps
    for h, (_, _, _, want) in zip(hyps, expected):
        key = (h.tokens, h.finished)
        assert key in oracle.outputs, (h, expected)
        lp = oracle.outputs[key]
        assert h.logprob == approx(lp)
        assert h.score == approx(lp / max(len(h.tokens) + h.finished, 1) ** alpha)
        assert h.score == approx(want), (hyps, expected)


def regexes():
    """Small random patterns over the characters a, b."""
    atom = st.sampled_from(["a", "b", ".", "[ab]", "(ab)", "b?"])
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}|{t[1]})"),
            inner.map(lambda r: f"({r})*"),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(
                lambda t: f"({t[0]}){{{min(t[1], t[2])},{max(t[1], t[2])}}}"
            ),
        ),
        max_leaves=5,
    )


def approx(x):
    return pytest.approx(x, abs=1e-4, rel=1e-5)
