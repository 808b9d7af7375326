"""Every member each protocol claims, called on every automaton class that ``provides`` it.

``provides(a, P)`` is what the searches branch on; a claim without a working member is a crash
waiting for the search that first calls it (``transitions`` of the derivative engine raised
AttributeError, its ``min_tokens`` flattened the banked search's [P, 2K] states). So for each
engine of :mod:`tests.support.engines` and each protocol it provides, every member the protocol
names is called here and its answer checked against the regex by brute force over a byte-level
vocabulary; a member without a check below fails the test, so a new member gets one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import regex
import torch

from decodekit.constraints import Bitmasks, StateTables, TokenConstraint, Transitions
from decodekit.constraints.tokens.interface import _members, provides
from tests.support.engines import BYTE_TOKENS, ENGINES, EOS, compile_on, text_of

PROTOCOLS = (TokenConstraint, Transitions, StateTables, Bitmasks)
CONTENT = [t for t, b in enumerate(BYTE_TOKENS) if b]
DEPTH = 5  # brute force over every sequence of up to DEPTH content tokens
PATTERNS = ["[ab]c*(?:ab)?", "(?:ab|c)+b", "a(?:bc)*|cc"]


class Oracle:
    """The regex over every token sequence of up to :data:`DEPTH` tokens."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.matches = {
            seq
            for n in range(DEPTH + 1)
            for seq in itertools.product(CONTENT, repeat=n)
            if regex.fullmatch(pattern, text_of(seq))
        }

    def fewest(self, prefix: tuple) -> int | None:
        """The fewest tokens after ``prefix`` to a match (None: none within DEPTH)."""
        n = len(prefix)
        got = [len(m) - n for m in self.matches if m[:n] == prefix]
        return min(got) if got else None

    def allowed(self, prefix: tuple, remaining: int | None) -> set[int]:
        """What the masks must allow after ``prefix`` (EOS iff it matches)."""
        out = {EOS} if prefix in self.matches else set()
        for t in CONTENT:
            need = self.fewest((*prefix, t))
            if need is not None and (remaining is None or need <= remaining - 1):
                out.add(t)
        return out


def prefixes(depth: int = 3):
    return [p for n in range(depth + 1) for p in itertools.product(CONTENT, repeat=n)]


def live_states(a, oracle: Oracle) -> tuple[list[tuple], torch.Tensor]:
    """The live prefixes of up to 3 tokens (a match within DEPTH ahead) and their states."""
    live = [p for p in prefixes() if oracle.fewest(p) is not None and len(p) + oracle.fewest(p) <= DEPTH]
    return live, torch.tensor([a.walk(p) for p in live], dtype=torch.long)


def row_set(row: torch.Tensor) -> set[int]:
    return set(row.nonzero()[:, 0].tolist())


# ---------------------------------------------------------------- one check per member


def check_attributes(a, oracle):
    assert isinstance(a.initial, int) and a.eos_id == EOS and isinstance(a.pattern, str)
    assert isinstance(dict(a.stats), dict) and a.vocab_size == len(BYTE_TOKENS)


def check_shortest(a, oracle):
    assert a.shortest == oracle.fewest(())


def check_exact(a, oracle):
    assert a.exact is True


def check_fits(a, oracle):
    s = oracle.fewest(())
    assert a.fits(s) and a.fits(s + 3) and not a.fits(s - 1)


def check_walk_step_accepts(a, oracle):
    for p in prefixes(DEPTH - 1):
        s = a.walk(p)
        assert (s >= 0) == any(m[: len(p)] == p for m in oracle.matches) or s >= 0
        assert a.accepts(p) == (p in oracle.matches) and a.accepts((*p, EOS)) == (p in oracle.matches)
        if p:
            before = torch.tensor([a.walk(p[:-1])])
            assert int(a.step(before, torch.tensor([p[-1]]))[0]) == s
    assert a.walk([], -1) == -1 and int(a.step(torch.tensor([-1]), torch.tensor([CONTENT[0]]))[0]) == -1


def check_allowed_and_mask(a, oracle):
    live, states = live_states(a, oracle)
    for remaining in (None, 1, 2, 3):
        rows = a.allowed(states, remaining)
        assert rows.shape == (len(live), a.vocab_size) and rows.dtype == torch.bool
        logprobs = torch.randn(len(live), a.vocab_size)
        before = logprobs.clone()
        masked = a.mask(logprobs, states, remaining)
        assert torch.equal(logprobs, before)  # not in place unless asked
        assert torch.equal(masked == float("-inf"), ~rows) and torch.equal(masked[rows], logprobs[rows])
        into = logprobs.clone()
        assert a.mask(into, states, remaining, inplace=True) is into and torch.equal(into, masked)
        for p, row in zip(live, rows):
            if remaining is None:  # the brute force sees DEPTH tokens: what it finds is allowed
                assert row_set(row) >= oracle.allowed(p, DEPTH - len(p)), p
            elif len(p) + remaining <= DEPTH:
                assert row_set(row) == oracle.allowed(p, remaining), (p, remaining)


def check_accepting_and_min_tokens(a, oracle):
    live, states = live_states(a, oracle)
    states = torch.cat([states, torch.tensor([-1])])
    square = states[: (len(states) // 2) * 2].view(2, -1)  # 2-D states keep their shape
    for shape in (states, square):
        acc, low = a.is_accepting(shape), a.min_tokens(shape)
        assert acc.shape == shape.shape and low.shape == shape.shape
        assert acc.dtype == torch.bool and low.dtype == torch.long
    acc, low = a.is_accepting(states).tolist(), a.min_tokens(states).tolist()
    assert acc[-1] is False and low[-1] == 0
    for p, yes, lower in zip(live, acc, low):
        assert yes == (p in oracle.matches) and 0 <= lower <= oracle.fewest(p)


def check_to(a, oracle):
    assert a.to("cpu") is a or a.to("cpu").walk([]) == a.walk([])


def check_transitions(a, oracle):
    live, states = live_states(a, oracle)
    unique = sorted(set(states.tolist()))
    groups = torch.tensor(unique, dtype=torch.long)
    for remaining in (None, 1, 2, 3):
        owner, tokens, nxt = a.transitions(groups, remaining)
        assert owner.dtype == tokens.dtype == nxt.dtype == torch.long
        assert bool((owner[1:] >= owner[:-1]).all())
        rows = a.allowed(groups, remaining)
        for g in range(len(unique)):
            mine = tokens[owner == g]
            assert bool((mine[1:] > mine[:-1]).all()), "tokens ascending within an owner"
            assert set(mine.tolist()) == row_set(rows[g]) - {EOS}
            stepped = a.step(groups[g].repeat(len(mine)), mine)
            given = nxt[owner == g]  # the same future as step's state (maybe another id for it)
            for r in (None, 1, 2, 3):
                assert torch.equal(a.allowed(given, r), a.allowed(stepped, r))
            assert torch.equal(a.is_accepting(given), a.is_accepting(stepped))


def check_bitmask(a, oracle):
    live, states = live_states(a, oracle)
    words = (a.vocab_size + 31) // 32
    for remaining in (None, 2):
        bits = torch.full((len(live), words), -1, dtype=torch.int32)
        assert a.fill_bitmask(bits, states, remaining) is bits
        unpacked = (bits.numpy().view(np.uint32)[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1
        unpacked = torch.from_numpy(unpacked.reshape(len(live), -1)[:, : a.vocab_size].astype(bool))
        assert torch.equal(unpacked, a.allowed(states, remaining))


def check_tables(a, oracle):
    s = a.num_states
    assert a.next_state.shape == (s, a.vocab_size)
    assert a.accepting.shape == a.min_tokens_to_accept.shape == (s,)
    every = torch.arange(s)
    assert torch.equal(a.accepting, a.is_accepting(every))
    assert torch.equal(a.min_tokens_to_accept, a.min_tokens(every))
    for t in CONTENT:
        assert torch.equal(a.next_state[:, t], a.step(every, torch.full((s,), t)))


CHECKS = {
    check_attributes: ("initial", "eos_id", "pattern", "stats", "vocab_size"),
    check_shortest: ("shortest",),
    check_exact: ("exact",),
    check_fits: ("fits",),
    check_walk_step_accepts: ("walk", "step", "accepts"),
    check_allowed_and_mask: ("allowed", "mask"),
    check_accepting_and_min_tokens: ("is_accepting", "min_tokens"),
    check_to: ("to",),
    check_transitions: ("transitions",),
    check_bitmask: ("fill_bitmask",),
    check_tables: ("next_state", "accepting", "min_tokens_to_accept", "num_states"),
}


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("engine", ENGINES)
def test_every_claimed_member_works(engine, pattern):
    a = compile_on(engine, pattern)
    oracle = Oracle(pattern)
    claimed = {name for p in PROTOCOLS if provides(a, p) for name in _members(p)}
    assert provides(a, Transitions) and provides(a, Bitmasks)  # every engine: the searches rely on it
    checked = {name for names in CHECKS.values() for name in names}
    assert claimed <= checked, f"members without a check: {sorted(claimed - checked)}"
    for check, names in CHECKS.items():
        if set(names) & claimed:
            check(a, oracle)
