"""The first-visit token level: masks from byte states discovered on first visit.

:class:`DerivedTokenAutomaton` reads any :class:`~decodekit.constraints.automata.protocol.ByteAutomaton`
(a regular expression's derivatives, :class:`~decodekit.constraints.automata.lazybytes.LazyBytes`;
a grammar's parser configurations, :class:`~decodekit.constraints.grammar.earley.GrammarBytes`).
It has the interface of
:class:`~decodekit.constraints.tokens.lazy.LazyTokenAutomaton` (a first-visit token level with
its own rows, over the byte states of a byte automaton): nothing is built before the first mask
but the byte automaton's start and the first row. It is used only where its masks
are exactly the whole automaton's (``build.exact_lazily``: no separator, every byte some token
contains is a token by itself), so that

* a token is allowed (no length limit) iff its bytes lead to a byte state that can still reach
  acceptance (``LazyBytes.distance >= 0``: trivially for an expression without intersection,
  complement or boundary, else a bounded search);
* with ``remaining`` tokens left, iff moreover the fewest tokens from that state to acceptance
  are at most ``remaining - 1`` (:class:`~.fewest.FewestTokens`: byte bounds first, a bounded
  search between them), so that a budget that is not tight explores no state the row itself
  does not reach.

Rows. The trie of the vocabulary is walked once per state, depth by depth (one gather per depth
from the byte table, the unknown (state, byte) pairs of a depth computed first, each once; an
eager byte DFA's, :class:`~decodekit.constraints.automata.eagerbytes.EagerBytes`, by the eager
lift's :func:`~.lift.walk_one`). The rows are kept by a :class:`~.rows.RowCache`.
Rows without the length check are cached by a key: for an expression without intersection,
complement or boundary, the part of it that the next L bytes can reach (:func:`_prefix_key`:
repetition counts past what L bytes can consume are capped, what lies beyond them cut), so that
``.{2000}`` or ``a{10000}`` walk one row, not one per position. The length check is skipped
for a row when ``remaining - 1`` is at least an upper bound on the bytes to acceptance of every
state the row's tokens reach (``Expr.reach``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.eagerbytes import EagerBytes
from decodekit.constraints.automata.graph import (
    spans,
)
from decodekit.constraints.automata.lazybytes import LazyBytes
from decodekit.constraints.automata.pattern import short_label
from decodekit.constraints.automata.protocol import ByteAutomaton
from decodekit.constraints.tokens import interface
from decodekit.constraints.tokens.fewest import FewestTokens
from decodekit.constraints.tokens.forced import forced_bytes
from decodekit.constraints.tokens.lift import byte_table, loop_bytes, walk_one
from decodekit.constraints.tokens.rows import MasksFromRows, Row, RowCache
from decodekit.constraints.tokens.trie import EncodedVocab, as_bytes
from decodekit.errors import ConstraintError
from decodekit.util.collector import while_paused

ROWS = 256  # static rows kept (LRU)
CUT_ROWS = 1024  # (state, budget) -> the row a length budget cuts, or None where it cuts nothing
TAKE_WHOLE = 512  # a depth's alive nodes from which subtrees a state keeps are taken whole
WALKS = 64  # per-state walks kept for the length check (LRU)


class DerivedTokenAutomaton(MasksFromRows):
    """Masks, steps and acceptance of a byte automaton (or a :class:`CharLevel` expression,
    read through :class:`LazyBytes`) over a vocabulary, on first visit (module docstring): a
    :class:`~decodekit.constraints.tokens.interface.TokenConstraint` and its
    :class:`~decodekit.constraints.tokens.interface.Transitions` refinement. States are
    byte-state ids (0: initial; -1: dead); :attr:`exact` is always True. Its rows are kept by a
    :class:`~.rows.RowCache` (per device), which answers ``allowed``, ``mask``, ``fill_bitmask``
    and ``step``."""

    def __init__(
        self,
        source: CharLevel | ByteAutomaton,
        enc: EncodedVocab,
        tokens: Sequence[str | bytes | None],
        eos_id: int | None,
        pattern: str,
        stats: dict | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        self.eos_id, self.pattern, self.separator, self.initial = eos_id, pattern, "", 0
        self.device = torch.device(device)
        self._enc, self._tokens = enc, tokens
        if isinstance(source, CharLevel):
            if source.initial < 0:  # the expression is ∅ over the vocabulary's characters
                raise ConstraintError(
                    f"no token sequence of this vocabulary ({enc.size} tokens) matches "
                    f"{short_label(pattern)!r}: no text of the bytes its tokens contain matches"
                )
            source = LazyBytes(source)
        self.bytes: ByteAutomaton = source
        self._usable = enc.usable(eos_id)
        self._longest = max(1, int(enc.lengths.max(initial=1)))
        self._rows: OrderedDict = OrderedDict()
        self._cut: OrderedDict = OrderedDict()  # (state, budget) -> a row the budget cuts (LRU)
        self._walks: OrderedDict = OrderedDict()
        self._keys: dict[int, object] = {}
        self._codes: dict[int, list[int]] = {}
        self._reach: dict[int, int] = {}
        self._dist_table = np.zeros(0, dtype=np.int64)  # per byte state: its distance, -2 unknown
        self._copies: dict = {}
        self._stats = dict(stats or {})
        self._cache = RowCache(enc.size, eos_id, self.device, self._row, self._holds_from, self._next)
        self.fill_bitmask = self._cache.fill_bitmask  # the hot call straight to the cache: a frame less
        args = (self._usable, self._longest, eos_id, pattern, self._walked)
        self._fewest = FewestTokens(source, enc, tokens, *args)  # the length check's answers
        if self.bytes.distance(0) < 0:
            raise ConstraintError(
                f"no token sequence of this vocabulary ({enc.size} tokens) matches {short_label(pattern)!r}: "
                "no text of the bytes its tokens contain matches"
            )

    @property
    def finite(self) -> bool:
        """Whether the states are finitely many (one beam per state can run); a grammar's are not."""
        return self.bytes.finite

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
        return {**self._stats, "candidate_states": self.bytes.size, **self.bytes.sizes()}

    @property
    def shortest(self) -> int:
        """The fewest tokens (EOS not counted) of an accepted sequence
        (:meth:`.fewest.FewestTokens.shortest`)."""
        return self._fewest.shortest()

    def fits(self, max_length: int) -> bool:
        """Whether a match ends within ``max_length`` tokens."""
        return self._fewest.within(0, max_length)

    def to(self, device: torch.device | str) -> DerivedTokenAutomaton:
        """A copy producing tensors on ``device`` (self if already there); the states are shared,
        the cached rows are per device."""
        device = torch.device(device)
        if device == self.device:
            return self
        if device not in self._copies:
            copy = object.__new__(DerivedTokenAutomaton)
            copy.__dict__.update(self.__dict__)
            copy.device, copy._rows, copy._cut = device, OrderedDict(), OrderedDict()  # rows: per device
            copy._cache = RowCache(
                self._enc.size, self.eos_id, device, copy._row, copy._holds_from, copy._next
            )
            copy.fill_bitmask = copy._cache.fill_bitmask
            self._copies[device] = copy
        return self._copies[device]

    @property
    def exact_rows(self) -> bool:
        """Whether one beam per state reached can run over :meth:`transitions`: its next states
        are the whole automaton's (one representative per class of equivalent states), which an
        eager byte DFA gives (:meth:`.eagerbytes.EagerBytes.representatives`); others' byte-state
        ids are never merged (two ids may have the same future)."""
        return isinstance(self.bytes, EagerBytes)

    def allowed(self, states: torch.Tensor, remaining: int | torch.Tensor | None = None) -> torch.Tensor:
        """[N] states (-1: dead) -> [N, V] bool: token t (not EOS) iff its bytes lead to a state
        that reaches acceptance within ``remaining - 1`` tokens (None: at all); EOS iff the state
        accepts."""
        return self._cache.allowed(states, remaining)

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[N] states, [N] tokens -> [N] next states (-1 if dead; -1 stays -1; EOS -> -1): the
        token's bytes read through the byte automaton."""
        return self._cache.step(states, tokens)

    def walk(self, tokens: Iterable[int], state: int | None = None) -> int:
        """The state after reading ``tokens`` from ``state`` (default: initial), or -1 if dead."""
        return interface.walk(self._next, tokens, self.initial if state is None else state, self.vocab_size)

    def accepts(self, tokens: Iterable[int]) -> bool:
        """Whether the token sequence is accepted; a trailing EOS is allowed."""
        return interface.accepts(self, self._accepts_state, tokens)

    def forced_text(self, state: int, limit: int = 64) -> bytes:
        """The bytes every match continuing from live ``state`` begins with (at most ``limit``):
        :func:`~.forced.forced_bytes` of the byte states (a speculative draft's text)."""
        return forced_bytes(self.bytes, state, limit)

    def is_accepting(self, states: torch.Tensor) -> torch.Tensor:
        """States of any shape -> bool of the same shape (dead states are not)."""
        out = [s >= 0 and self.bytes.accepting(s) for s in states.reshape(-1).tolist()]
        return torch.tensor(out, dtype=torch.bool, device=self.device).view(states.shape)

    def min_tokens(self, states: torch.Tensor) -> torch.Tensor:
        """States of any shape (the banked search passes [P, 2K]) -> long of the same shape, a
        lower bound on the tokens to acceptance (0 for dead): ``ceil(bytes / L)``."""
        longest, most = self._longest, 1 << 62  # a bound past int64 (minLength: 10**30) is capped
        out = [
            0 if s < 0 else min(-(-self.bytes.lower(s) // longest), most) for s in states.reshape(-1).tolist()
        ]
        return torch.tensor(out, dtype=torch.long, device=self.device).view(states.shape)

    def transitions(
        self, states: torch.Tensor, remaining: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``states [G]`` -> ``(owner [E], tokens [E], next [E])``: every token (EOS aside) the
        masks allow from ``states[owner]`` under ``remaining`` and its next state
        (:class:`~.interface.Transitions`), from the state's walk (kept in the walks' LRU). Over
        an eager byte DFA the next states are their class's representative (:attr:`exact_rows`);
        else byte-state ids, never merged: two ids may have the same future, so one beam per id
        is finer than one per state of the minimal automaton (never coarser)."""
        canon = None
        if isinstance(self.bytes, EagerBytes):
            canon = self.bytes.representatives(self._enc.available(b""))
        parts = []
        for g, c in enumerate(states.reshape(-1).tolist()):
            if c < 0:
                continue
            tok, ends, dist = self._walked(c)
            if remaining is not None:
                keep = self._fewest.fitting(ends, dist, remaining - 1)
                tok, ends = tok[keep], ends[keep]
            order = np.argsort(tok, kind="stable")
            ends = ends[order] if canon is None else canon[ends[order]]
            parts.append((np.full(len(tok), g, dtype=np.int64), tok[order], ends))
        if not parts:
            return (torch.zeros(0, dtype=torch.long, device=self.device),) * 3
        return tuple(torch.from_numpy(np.concatenate(x)).to(self.device, torch.long) for x in zip(*parts))

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

    def _walk(self, s: int, distances: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The usable tokens whose bytes lead from s to a live state, those states, and their
        fewest bytes to acceptance; the trie stepped depth by depth from the byte table. Without
        ``distances``, for a byte automaton whose every entered state is live
        (``entered_live``), the distances are None and not computed."""
        enc, lb = self._enc, self.bytes
        if isinstance(lb, EagerBytes):  # every step known: the eager lift's walk of one state
            tok, ends = self._eager_walk(s)
            dist = lb.distances[ends]
            keep = self._usable[tok] & (dist >= 0)
            return tok[keep], ends[keep], dist[keep]
        found_t, found_e = [], []
        empty = enc.by_depth[0][0]
        if len(empty):
            found_t.append(empty)
            found_e.append(np.full(len(empty), s, dtype=np.int64))
        alive, state = np.zeros(1, dtype=np.int64), np.array([s], dtype=np.int64)
        for d in range(1, len(enc.by_depth)):
            child, _, nxt = enc.step_children(d, alive, state, lb)
            if not len(child):
                break
            keep = (nxt >= 0).nonzero()[0]
            if not len(keep):
                break
            alive, state = child[keep], nxt[keep].astype(np.int64)
            if len(alive) >= TAKE_WHOLE:
                taken = self._take_whole(d, alive, state, found_t, found_e)
                if taken is not None:
                    alive, state = alive[~taken], state[~taken]
            tok, ends = enc.tokens_ending(d, alive, state)
            found_t.append(tok)
            found_e.append(ends)
        if not found_t:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        tok, ends = np.concatenate(found_t), np.concatenate(found_e)
        keep = self._usable[tok]
        tok, ends = tok[keep], ends[keep]
        if not distances and getattr(lb, "entered_live", False):
            return tok, ends, None
        dist = self._distances(ends)
        live = dist >= 0
        return tok[live], ends[live], dist[live]

    def _eager_walk(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """The tokens alive from state s of an eager byte DFA and their end states, by
        :func:`~.lift.walk_one` over its premultiplied table (made on first call, kept)."""
        steps = self.__dict__.get("_steps")
        if steps is None:
            steps = self._steps = byte_table(self.bytes.dfa, b"")
        start = int(steps.start[1 + s])
        tok, ends = walk_one(start, self._enc, steps.lut, steps.flat, steps.dead, self._eager_loops)
        return tok, (ends // steps.width).astype(np.int64)

    def _eager_loops(self) -> np.ndarray | None:
        """:func:`~.lift.loop_bytes` of the eager byte DFA's table (made when a walk asks, kept)."""
        if "_loops" not in self.__dict__:
            self._loops = loop_bytes(self._steps.succ, self._steps.lut)
        return self._loops

    def _take_whole(self, d: int, alive, state, found_t: list, found_e: list) -> np.ndarray | None:
        """Of the nodes ``alive`` of depth d (in byte states ``state``), those whose state every
        byte below them steps to itself (a string's body): their subtrees' tokens, all ending in
        that state, are appended to ``found_t`` / ``found_e`` at once (:attr:`EncodedVocab.subtrees`).
        Returns [len(alive)] bool, the nodes taken, or None when no state there loops."""
        taken = self._enc.kept_below(d, alive, state, self.bytes.table)
        if taken is None:
            return None
        sub = self._enc.subtrees
        if taken.any():
            lo, count = sub.lo[d - 1][alive[taken]], sub.count[d - 1][alive[taken]]
            found_t.append(sub.order[spans(lo, count, int(count.sum()))])
            found_e.append(np.repeat(state[taken], count))
        return taken

    def _distances(self, states: np.ndarray) -> np.ndarray:
        """int64, the shape of ``states`` (byte states): each one's fewest bytes to acceptance (-1:
        none), gathered from a table filled on first need (a row's tokens end in few states)."""
        known = self._dist_table
        if len(known) < self.bytes.size:
            grown = np.full(max(2 * len(known), self.bytes.size), -2, dtype=np.int64)
            grown[: len(known)] = known
            known = self._dist_table = grown
        out = known[states]
        unknown = out == -2
        if unknown.any():
            for e in np.flatnonzero(np.bincount(states[unknown])).tolist():
                known[e] = self.bytes.distance(e)
            out = known[states]
        return out

    def _walked(self, s: int, distances: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """:meth:`_walk` of s, kept (LRU, :data:`WALKS`); a walk kept without its distances (a
        static row needs none where every entered state is live) gains them when asked."""
        got = self._walks.get(s)
        if got is None:
            got = self._walks[s] = self._walk(s, distances)
            if len(self._walks) > WALKS:
                self._walks.popitem(last=False)
        else:
            self._walks.move_to_end(s)
            if distances and got[2] is None:
                got = self._walks[s] = (got[0], got[1], self._distances(got[1]))  # all live: none cut
        return got

    # ------------------------------------------------------------------ rows

    @while_paused  # a burst of small objects (util/collector.py)
    def _row(self, c: int, remaining: int | None) -> Row:
        """The :class:`~.rows.Row` of live state c under ``remaining``: the row a length budget
        cuts (kept per (state, budget)), else its static row (kept by :meth:`_key`)."""
        accept = self.bytes.accepting(c)
        if remaining is not None and remaining - 1 < self._reach_of(c):
            budget = remaining - 1
            entry = self._cut.get((c, budget), self._cut)  # the dict itself: not asked yet
            if entry is self._cut:
                tok, ends, dist = self._walked(c)
                ok = dist <= budget
                gap = np.flatnonzero(~ok & (-(-dist // self._longest) <= budget))
                if len(gap):
                    uniq = np.unique(ends[gap]).tolist()
                    yes = {e for e in uniq if self._fewest.within(e, budget)}
                    ok[gap] = np.isin(ends[gap], list(yes))
                # a row the budget cuts, kept per (state, budget); None: it cuts nothing here, the
                # static row is the answer (no row made per step)
                entry = self._cut[(c, budget)] = None if ok.all() else self._cache.entry(tok[ok], accept)
                if len(self._cut) > CUT_ROWS:
                    self._cut.popitem(last=False)
            else:
                self._cut.move_to_end((c, budget))
            if entry is not None:
                return entry
        key = self._key(c)
        entry = self._rows.get(key)
        if entry is None:
            walked = self._walks.get(c)
            if walked is None:
                walked = self._walked(c, False) if key[0] == "state" else self._walk(c, distances=False)
            entry = self._rows[key] = self._cache.entry(walked[0], accept)
            if len(self._rows) > ROWS:
                self._rows.popitem(last=False)
        else:
            self._rows.move_to_end(key)
        return entry

    def _key(self, c: int):
        """What the static row of c is cached under: the byte automaton's
        :meth:`~.protocol.ByteAutomaton.row_key` over the next L + 4 bytes, else the state.
        The initial state's row is kept under the state: it is the first row made, with no row to
        share yet, and a key can cost more than the walk (a grammar's key reads the vocabulary
        once per lexer state it meets, work the first mask would otherwise wait for)."""
        got = self._keys.get(c)
        if got is None:
            key = None if c == self.initial else self.bytes.row_key(c, self._longest + 4)
            got = self._keys[c] = ("state", c) if key is None else ("prefix", key)
        return got

    def _holds_from(self, c: int, remaining: int) -> int:
        """The budget from which :meth:`_row` gives c's static row: its reach."""
        return self._reach_of(c)

    def _reach_of(self, c: int) -> int:
        """An upper bound on the bytes to acceptance of every state the row of c reaches."""
        got = self._reach.get(c)
        if got is None:
            got = self.bytes.reach(c)
            if got is None:
                _, _, dist = self._walked(c)
                got = int(dist.max(initial=0))
            self._reach[c] = got
        return got
