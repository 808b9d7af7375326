"""The token level of the derivative engine: masks from states discovered on first visit.

:class:`DerivedTokenAutomaton` has the interface of
:class:`~decodekit.constraints.tokens.lazy.LazyTokenAutomaton` (it is one, for the searches), over
the byte states of :class:`~decodekit.constraints.automata.lazybytes.LazyBytes`: nothing is
built before the first mask but the parse and the first row. It is used only where its masks
are exactly the whole automaton's (``build.exact_lazily``: no separator, every byte some token
contains is a token by itself), so that

* a token is allowed (no length limit) iff its bytes lead to a byte state that can still reach
  acceptance (``LazyBytes.distance >= 0``: trivially for an expression without intersection,
  complement or boundary, else a bounded search);
* with ``remaining`` tokens left, iff moreover the fewest tokens from that state to acceptance
  are at most ``remaining - 1``. With ``d`` the fewest bytes to acceptance and L the longest
  token, those fewest tokens lie in ``[ceil(d / L), u]``, where ``u <= d`` is the fewest tokens
  spelling one shortest accepted text (:meth:`_upper_bound`: the text read off the expression,
  ``LazyBytes.witness``, segmented over the trie; every byte is a token); only between the two
  does a bounded depth-first search over tokens decide (:meth:`_within`), so a budget that is
  not tight explores no state the row itself does not reach.

Rows. The trie of the vocabulary is walked once per state, depth by depth (one gather per depth
from the byte table, the unknown (state, byte) pairs of a depth computed first, each once).
Rows without the length check are cached by a key: for an expression without intersection,
complement or boundary, the part of it that the next L bytes can reach (:func:`_prefix_key`:
repetition counts past what L bytes can consume are capped, what lies beyond them cut), so that
``.{2000}`` or ``a{10000}`` walk one row, not one per position. The length check is skipped
for a row when ``remaining - 1`` is at least an upper bound on the bytes to acceptance of every
state the row's tokens reach (``Expr.reach``).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch

from decodekit.constraints.automata.derivatives import CAT, OR, REP, SET, CharLevel, Expr, short_label
from decodekit.constraints.automata.graph import spans
from decodekit.constraints.automata.lazybytes import UNKNOWN, LazyBytes
from decodekit.constraints.tokens.lazy import LazyTokenAutomaton
from decodekit.constraints.tokens.trie import EncodedVocab, as_bytes
from decodekit.errors import ConstraintError

ROWS = 256  # static rows kept (LRU)
WALKS = 64  # per-state walks kept for the length check (LRU)
NEED_WALKS = 4096  # walks the fewest-tokens search may take for one question
WITNESS_BYTES = 4096  # longest shortest-text spelled into tokens for an upper bound


class DerivedTokenAutomaton(LazyTokenAutomaton):
    """Masks, steps and acceptance of a :class:`CharLevel` expression over a vocabulary, on
    first visit (module docstring). States are byte-state ids (0: initial; -1: dead);
    :attr:`exact` is always True."""

    def __init__(
        self,
        char: CharLevel,
        enc: EncodedVocab,
        tokens: Sequence[str | bytes | None],
        eos_id: int | None,
        pattern: str,
        stats: dict | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        self.eos_id, self.pattern, self.separator, self.initial = eos_id, pattern, "", 0
        self.device = torch.device(device)
        self._enc, self._tokens, self._char = enc, tokens, char
        if char.initial < 0:  # the expression is ∅ over the vocabulary's characters
            raise ConstraintError(
                f"no token sequence of this vocabulary ({enc.size} tokens) matches {short_label(pattern)!r}: "
                "no text of the bytes its tokens contain matches"
            )
        self.bytes = LazyBytes(char)
        self._usable = enc.usable(eos_id)
        self._longest = max(1, int(enc.lengths.max(initial=1)))
        self._rows: OrderedDict = OrderedDict()
        self._walks: OrderedDict = OrderedDict()
        self._keys: dict[int, object] = {}
        self._codes: dict[int, list[int]] = {}
        self._within_known: dict[
            int, tuple[int, int]
        ] = {}  # state -> (largest R known no, least R known yes)
        self._reach: dict[int, int] = {}
        self._upper: dict[int, int] = {}  # state -> tokens of one accepted continuation
        self._copies: dict = {}
        self._stats = dict(stats or {})
        if self.bytes.distance(0) < 0:
            raise ConstraintError(
                f"no token sequence of this vocabulary ({enc.size} tokens) matches {short_label(pattern)!r}: "
                "no text of the bytes its tokens contain matches"
            )

    # ------------------------------------------------------------------ the public interface

    @property
    def vocab_size(self) -> int:
        return self._enc.size

    @property
    def exact(self) -> bool:
        return True

    @property
    def stats(self) -> dict:
        """Sizes so far: ``candidate_states`` (byte states discovered), ``char_states``."""
        return {**self._stats, "candidate_states": self.bytes.size, "char_states": len(self._char.states)}

    @property
    def shortest(self) -> int:
        """The fewest tokens (EOS not counted) of an accepted sequence: an A* search over the
        states by tokens, ``ceil(bytes to acceptance / L)`` the (consistent) estimate, each
        state walked once, stopped by the spelled shortest text's tokens (ConstraintError past
        :data:`NEED_WALKS` walks)."""
        lb, longest = self.bytes, self._longest
        upper = min(lb.distance(0), self._upper_bound(0))
        best, heap, walks = {0: 0}, [(-(-lb.distance(0) // longest), 0, 0)], 0
        while heap:
            f, g, s = heapq.heappop(heap)
            if f >= upper:
                break
            if g > best[s]:
                continue
            if lb.accepting(s):
                return g
            walks += 1
            if walks > NEED_WALKS:
                raise ConstraintError(
                    f"constraint too expensive: finding the fewest tokens matching {self.pattern!r} took "
                    f"more than {NEED_WALKS} walks of the vocabulary; simplify the pattern"
                )
            _, ends, dist = self._walked(s)
            for e, d in zip(*np.unique(ends, return_index=True)):
                e, h = int(e), -(-int(dist[d]) // longest)
                if g + 1 < best.get(e, 1 << 62):
                    best[e] = g + 1
                    heapq.heappush(heap, (g + 1 + h, g + 1, e))
        return upper

    def fits(self, max_length: int) -> bool:
        """Whether a match ends within ``max_length`` tokens."""
        return self._within(0, max_length)

    def to(self, device: torch.device | str) -> DerivedTokenAutomaton:
        """A copy producing tensors on ``device`` (self if already there); the states are shared,
        the cached rows are per device."""
        device = torch.device(device)
        if device == self.device:
            return self
        if device not in self._copies:
            copy = object.__new__(DerivedTokenAutomaton)
            copy.__dict__.update(self.__dict__)
            copy.device, copy._rows = device, OrderedDict()
            self._copies[device] = copy
        return self._copies[device]

    def is_accepting(self, states: torch.Tensor) -> torch.Tensor:
        """States of any shape -> bool of the same shape (dead states are not)."""
        out = [s >= 0 and self.bytes.accepting(s) for s in states.reshape(-1).tolist()]
        return torch.tensor(out, dtype=torch.bool, device=self.device).view(states.shape)

    def min_tokens(self, states: torch.Tensor) -> torch.Tensor:
        """States of any shape (the banked search passes [P, 2K]) -> long of the same shape, a
        lower bound on the tokens to acceptance (0 for dead): ``ceil(bytes / L)``."""
        out = [0 if s < 0 else -(-self.bytes.lower(s) // self._longest) for s in states.reshape(-1).tolist()]
        return torch.tensor(out, dtype=torch.long, device=self.device).view(states.shape)

    def transitions(
        self, states: torch.Tensor, remaining: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``states [G]`` -> ``(owner [E], tokens [E], next [E])``: every token (EOS aside) the
        masks allow from ``states[owner]`` under ``remaining`` and its next state
        (:class:`~.interface.Transitions`), from the state's walk (kept in the walks' LRU). The
        next states are byte-state ids, never merged: two ids may have the same future, so one
        beam per id is finer than one per state of the minimal automaton (never coarser)."""
        parts = []
        for g, c in enumerate(states.reshape(-1).tolist()):
            if c < 0:
                continue
            tok, ends, dist = self._walked(c)
            if remaining is not None:
                keep = self._fitting(ends, dist, remaining - 1)
                tok, ends = tok[keep], ends[keep]
            order = np.argsort(tok, kind="stable")
            parts.append((np.full(len(tok), g, dtype=np.int64), tok[order], ends[order]))
        if not parts:
            return (torch.zeros(0, dtype=torch.long, device=self.device),) * 3
        return tuple(torch.from_numpy(np.concatenate(x)).to(self.device, torch.long) for x in zip(*parts))

    def _fitting(self, ends: np.ndarray, dist: np.ndarray, budget: int) -> np.ndarray:
        """[E] bool: which of the next states ``ends`` (fewest bytes to acceptance ``dist``)
        reach acceptance within ``budget`` tokens: the byte bounds, else :meth:`_within`."""
        ok = dist <= budget
        gap = np.flatnonzero(~ok & (-(-dist // self._longest) <= budget))
        if len(gap):
            yes = [e for e in np.unique(ends[gap]).tolist() if self._within(e, budget)]
            ok[gap] = np.isin(ends[gap], yes)
        return ok

    def _accepts_state(self, s: int) -> bool:
        return self.bytes.accepting(s)

    def __repr__(self) -> str:
        return (
            f"DerivedTokenAutomaton(pattern={self.pattern!r}, byte_states={self.bytes.size}, "
            f"vocab_size={self.vocab_size}, eos_id={self.eos_id})"
        )

    # ------------------------------------------------------------------ stepping

    def _next(self, c: int, t: int) -> int:
        if c < 0 or not self._usable[t]:
            return -1
        codes = self._codes.get(t)
        if codes is None:
            codes = self._codes[t] = list(as_bytes(self._tokens[t]))
        step = self.bytes.step
        for b in codes:
            c = step(c, b)
            if c < 0:
                return -1
        return c

    def _walk(self, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The usable tokens whose bytes lead from s to a live state, those states, and their
        fewest bytes to acceptance; the trie stepped depth by depth from the byte table."""
        enc, lb = self._enc, self.bytes
        found_t, found_e = [], []
        empty = enc.by_depth[0][0]
        if len(empty):
            found_t.append(empty)
            found_e.append(np.full(len(empty), s, dtype=np.int64))
        alive, state = np.zeros(1, dtype=np.int64), np.array([s], dtype=np.int64)
        for d in range(1, len(enc.by_depth)):
            first = enc.first_child[d - 1]
            lo = first[alive]
            counts = first[alive + 1] - lo
            total = int(counts.sum())
            if not total:
                break
            child = spans(lo, counts, total)
            src = np.repeat(state, counts)
            codes = enc.byte[d - 1][child]
            nxt = lb.table[src, codes]
            unknown = np.flatnonzero(nxt == UNKNOWN)
            if len(unknown):
                lb.fill(src[unknown], codes[unknown])
                nxt[unknown] = lb.table[src[unknown], codes[unknown]]
            keep = np.flatnonzero(nxt >= 0)
            if not len(keep):
                break
            alive, state = child[keep], nxt[keep].astype(np.int64)
            ids, nodes = enc.by_depth[d]
            if len(ids):
                every = np.full(len(enc.byte[d - 1]), -1, dtype=np.int64)
                every[alive] = state
                ends = every[nodes]
                hit = ends >= 0
                found_t.append(ids[hit])
                found_e.append(ends[hit])
        if not found_t:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        tok, ends = np.concatenate(found_t), np.concatenate(found_e)
        keep = self._usable[tok]
        tok, ends = tok[keep], ends[keep]
        uniq, inverse = np.unique(ends, return_inverse=True)
        dist = np.array([lb.distance(e) for e in uniq.tolist()], dtype=np.int64)[inverse.reshape(-1)]
        live = dist >= 0
        return tok[live], ends[live], dist[live]

    def _walked(self, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = self._walks.get(s)
        if got is None:
            got = self._walks[s] = self._walk(s)
            if len(self._walks) > WALKS:
                self._walks.popitem(last=False)
        else:
            self._walks.move_to_end(s)
        return got

    # ------------------------------------------------------------------ rows

    def _row(self, c: int, remaining: int | None) -> tuple:
        """(bool [V] row, cache entry for biases, sparse ids) of state c under ``remaining``."""
        if c < 0:
            return self._empty()
        accept = self.bytes.accepting(c)
        if remaining is not None and remaining - 1 < self._reach_of(c):
            tok, ends, dist = self._walked(c)
            budget = remaining - 1
            ok = dist <= budget
            gap = np.flatnonzero(~ok & (-(-dist // self._longest) <= budget))
            if len(gap):
                uniq = np.unique(ends[gap]).tolist()
                yes = {e for e in uniq if self._within(e, budget)}
                ok[gap] = np.isin(ends[gap], list(yes))
            return self._entry(tok[ok], accept)
        key = self._key(c)
        entry = self._rows.get(key)
        if entry is None:
            tok, _, _ = self._walked(c) if key[0] == "state" else self._walk(c)
            entry = self._rows[key] = self._entry(tok, accept)
            if len(self._rows) > ROWS:
                self._rows.popitem(last=False)
        else:
            self._rows.move_to_end(key)
        return entry

    def _key(self, c: int):
        """What the static row of c is cached under (module docstring)."""
        got = self._keys.get(c)
        if got is None:
            q, level, node = self.bytes.keys[c]
            e, p = self._char.states[q]
            accept = self.bytes.accepting(c)
            if e.simple:
                got = ("prefix", _prefix_key(e, self._longest + 4, {}), level, node, accept)
            else:
                got = ("state", c)
            self._keys[c] = got
        return got

    def _reach_of(self, c: int) -> int:
        """An upper bound on the bytes to acceptance of every state the row of c reaches."""
        got = self._reach.get(c)
        if got is None:
            e, _ = self._char.states[self.bytes.keys[c][0]]
            if e.simple:
                got = e.reach + 3  # a token may end inside a character: 3 bytes more
            else:
                _, _, dist = self._walked(c)
                got = int(dist.max(initial=0))
            self._reach[c] = got
        return got

    def _within(self, s: int, budget: int) -> bool:
        """Whether some token sequence of at most ``budget`` tokens leads s to acceptance: the
        bounds first (:meth:`_bounds`), then an A* search over states by tokens (estimate
        ``ceil(bytes / L)``, consistent: each state walked once, at its fewest tokens from s),
        successors the bounds decide not entered. Answers are kept per state, monotone in the
        budget: a "no" for every state walked (at the budget left there). ConstraintError past
        :data:`NEED_WALKS` walks."""
        quick = self._bounds(s, budget)
        if quick is not None:
            return quick
        lb, longest = self.bytes, self._longest
        best, heap, walked = {s: 0}, [(-(-lb.distance(s) // longest), 0, s)], []
        while heap:
            _, g, x = heapq.heappop(heap)
            if g > best[x]:
                continue
            walked.append((x, g))
            if len(walked) > NEED_WALKS:
                raise ConstraintError(
                    f"constraint too expensive: deciding whether {self.pattern!r} can still be matched "
                    f"within {budget} tokens took more than {NEED_WALKS} walks of the vocabulary; "
                    "raise max_length"
                )
            _, ends, dist = self._walked(x)
            left = budget - g - 1  # tokens after the next one
            if (dist <= left).any():
                self._known(s, budget, True)
                return True
            fine = -(-dist // longest) <= left
            ends, dist = ends[fine], dist[fine]
            for e, i in zip(*np.unique(ends, return_index=True)):
                e = int(e)
                if g + 1 >= best.get(e, 1 << 62):
                    continue
                quick = self._bounds(e, left)
                if quick:
                    self._known(s, budget, True)
                    return True
                if quick is None:
                    best[e] = g + 1
                    heapq.heappush(heap, (g + 1 + -(-int(dist[i]) // longest), g + 1, e))
        for x, g in walked:  # none of them reaches acceptance within what is left of the budget there
            self._known(x, budget - g, False)
        return False

    def _bounds(self, s: int, budget: int) -> bool | None:
        """Whether s reaches acceptance within ``budget`` tokens when the byte bounds or an
        earlier answer decide it, else None."""
        d = self.bytes.distance(s)
        if d < 0 or budget < 0:
            return False
        if d <= budget:
            return True
        if -(-d // self._longest) > budget:
            return False
        no, yes = self._within_known.get(s, (-1, 1 << 62))
        if budget <= no:
            return False
        if budget >= yes or self._upper_bound(s) <= budget:
            return True
        return None

    def _upper_bound(self, s: int) -> int:
        """An upper bound on the fewest tokens leading s to acceptance: the fewest tokens that
        spell one shortest accepted text (:meth:`LazyBytes.witness`; any way to spell an
        accepted text is a token sequence to acceptance, the automaton reading bytes); a large
        number when that text is over :data:`WITNESS_BYTES` or not spellable."""
        got = self._upper.get(s)
        if got is None:
            got = 1 << 62
            if 0 <= self.bytes.distance(s) <= WITNESS_BYTES:
                text = self.bytes.witness(s)
                if text is not None:
                    got = self._fewest_tokens(text)
            self._upper[s] = got
        return got

    def _fewest_tokens(self, text: bytes) -> int:
        """The fewest usable tokens whose bytes joined are ``text`` (a large number if none):
        every (start, length) that is a token found depth by depth down the trie, all starts at
        once, then a shortest path over the positions."""
        enc, n = self._enc, len(text)
        data = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
        start, node = np.arange(n), np.zeros(n, dtype=np.int64)
        steps: list[list[int]] = [[] for _ in range(n)]
        for d in range(1, len(enc.by_depth)):
            start = start[start + d <= n]
            if not len(start):
                break
            keys, ends = self._depth(d)
            key = node[: len(start)] * 256 + data[start + d - 1]
            at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
            hit = keys[at] == key
            start, node = start[hit], at[hit]
            for i in start[ends[node]].tolist():
                steps[i].append(d)
        best = [0] + [1 << 62] * n
        for i in range(n):
            here = best[i] + 1
            for d in steps[i]:
                if here < best[i + d]:
                    best[i + d] = here
        return best[n]

    def _depth(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Depth d of the trie for lookups: [n_d] sorted keys ``parent * 256 + byte`` of its nodes
        (sorted as the trie orders them) and [n_d] bool, the node ends a usable token; the
        vocabulary's alone, so kept with its trie (``EncodedVocab.memo``) for every pattern."""
        enc = self._enc
        key = ("trie_keys", self.eos_id, d)
        got = enc.memo.get(key)
        if got is None:
            keys = enc.parent[d - 1] * 256 + enc.byte[d - 1]
            ends = np.zeros(len(keys), dtype=bool)
            ids, nodes = enc.by_depth[d]
            ends[nodes[self._usable[ids]]] = True
            keys.flags.writeable = ends.flags.writeable = False
            got = enc.memo[key] = (keys, ends)
        return got

    def _known(self, s: int, budget: int, answer: bool) -> None:
        no, yes = self._within_known.get(s, (-1, 1 << 62))
        self._within_known[s] = (no, min(yes, budget)) if answer else (max(no, budget), yes)


def _prefix_key(e: Expr, budget: int, memo: dict):
    """A hashable key equal for two ``simple`` expressions whose texts agree on every prefix of
    at most ``budget`` bytes (and so have the same static row): counts of repetitions that
    ``budget`` bytes cannot exhaust are capped, and what lies past ``budget`` bytes is cut
    (iterative over the nesting: a long chain of optional parts is deep)."""
    stack = [(e, budget)]
    while stack:
        x, b = stack[-1]
        k = (x.id, b)
        if k in memo:
            stack.pop()
            continue
        op = x.op
        if b < 0:
            kids = ()
        elif op == CAT:
            kids = ((x.a, b), (x.b, b - x.a.minb))
        elif op == OR:
            kids = tuple((y, b) for y in x.a)
        elif op == REP:
            kids = ((x.a, b),)
        else:
            kids = ()
        missing = [(y, c) for y, c in kids if (y.id, c) not in memo]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if b < 0:
            got = "..."
        elif op == SET:
            got = (SET, x.mask)
        elif op == CAT:
            got = (CAT, memo[(x.a.id, b)], memo[(x.b.id, b - x.a.minb)])
        elif op == OR:
            got = (OR, frozenset(memo[(y.id, b)] for y in x.a))
        elif op == REP and x.a.minb >= 1:
            cap = b // x.a.minb + 1
            lo, hi = min(x.lo, cap), cap if x.hi is None else min(x.hi, cap)
            got = (REP, memo[(x.a.id, b)], lo, hi, x.hi is None and x.lo < cap)
        elif op == REP:
            got = (REP, memo[(x.a.id, b)], x.lo, x.hi)
        else:
            got = (op,)
        memo[k] = got
    return memo[(e.id, budget)]
