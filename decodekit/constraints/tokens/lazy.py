"""A token automaton built on first visit, for masked search over patterns too large to build whole.

:func:`~decodekit.constraints.compile.compile_regex` returns a :class:`LazyTokenAutomaton`
instead of a dense :class:`~decodekit.constraints.tokens.automaton.TokenAutomaton` when the lift would
step too many byte-DFA states through the vocabulary (``(a|b)*a(a|b){15}``, ``.{2000}``,
``a{10000}``: docs/constraints.md, "Huge patterns"). The UTF-8 byte DFA is built whole (it is
small: a state per character position); what is lazy is the token level.

States. Token-level state ``c`` is the byte-DFA candidate of :func:`~decodekit.constraints.tokens.lift.lift`:
0 = nothing emitted yet, ``1 + q`` = byte state q after at least one token (the separator is
read before the next token); -1 = dead. They are never merged, so two ids may behave alike.

Masks. A token is allowed from c iff its bytes lead the byte DFA from c's start to some q' and
``bound[1 + q'] <= remaining - 1``, where ``bound`` is an *upper* bound on the tokens still
needed: the fewest tokens of a match spelled with **single-byte tokens** (a breadth-first search
over the byte DFA restricted to the bytes that are tokens by themselves; exact as a byte count).
``bound = -1`` (no such spelling) is never entered. EOS iff c accepts. So every allowed token
keeps a match within the budget (induction: a row with ``bound[c] <= remaining`` accepts or has
a single-byte token one step closer); tokens whose only continuations need multi-byte tokens
are masked, and near the length limit a merge that a shorter exact completion would allow may
be masked too: conservative, never wrong. Without single-byte tokens for the pattern's bytes
the constraint is refused (byte-level BPE vocabularies have all 256).

Exact masks (``exact``, what ``compile_regex(..., lazy=Laziness.MASKED)`` builds where every
byte the tokens contain is a token by itself): then ``bound >= 0`` iff a match can still be reached with
tokens at all, so the static rows are the whole automaton's; for the length check the whole
automaton is built once, on first need (a callable given by the compiler), and its fewest
tokens to acceptance replace ``bound``: the masks equal the whole automaton's.

Rows. The static row of c (the length check aside) depends only on what happens within L
bytes of its start (L: the longest token). The first :data:`GROUP_AFTER` rows are walked per
byte state (:func:`~decodekit.constraints.tokens.lift.walk_one`); after that, byte states are grouped
by L rounds of Moore refinement (the same bytes defined, the same ``bound >= 0``) and one row is
walked per group, kept in an LRU of :data:`STATIC_ROWS`. The length check runs only when
``remaining - 1`` is below ``reach[c]``, the largest ``bound`` within L bytes; then c's exact
row (its tokens' next states) is walked and kept in an LRU of :data:`EXACT_ROWS`. ``step``
reads a token's bytes through the byte DFA.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import torch

from decodekit.constraints.automata.graph import distances_to_accept, reverse_distances, unique_rows
from decodekit.constraints.automata.utf8 import ByteDFA
from decodekit.constraints.tokens import interface
from decodekit.constraints.tokens.lift import Lifted, byte_table, loop_bytes, walk_one
from decodekit.constraints.tokens.rows import MasksFromRows, Row, RowCache
from decodekit.constraints.tokens.trie import EncodedVocab, as_bytes
from decodekit.errors import ConstraintError
from decodekit.util.collector import while_paused

_UNSET = object()  # a cached value not computed yet (None is a value)
STATIC_ROWS = 256  # static rows kept (bool + float32 [V] each: 250 KB at V = 50k)
EXACT_ROWS = 64  # exact rows kept (allowed token ids and their bounds), and rows per (state, budget)
MAX_ROUNDS = 64  # Moore rounds for sharing rows; a longer longest token: one row per byte state
GROUP_AFTER = 16  # static rows walked per byte state before byte states with equal rows are grouped


class _Shared:
    """What the device copies of one lazy automaton share: the tables built at compile time (read
    only) and the parts computed on first need (see the module docstring): ``need`` from
    ``build`` (the whole automaton's fewest tokens, once a length budget bites and the masks are
    :attr:`~LazyTokenAutomaton.exact`), ``reach``, the byte-state ``group`` (after ``walks``
    static rows), each token's byte ``codes``, and the ``copies`` by device."""

    def __init__(
        self,
        dfa: ByteDFA,
        enc: EncodedVocab,
        tokens: Sequence[str | bytes | None],
        separator: str,
        eos_id: int | None,
        pattern: str,
        exact: Callable[[], Lifted | None] | None,
    ) -> None:
        self.enc, self.tokens = enc, tokens
        num_byte, width = dfa.table.shape
        steps = byte_table(dfa, separator.encode("utf-8"))  # premultiplied, as lift's
        flat, lut, start = steps.flat, steps.lut, steps.start
        accepting = np.concatenate([[dfa.accepting[dfa.initial]], dfa.accepting])  # [1 + Q]
        usable, single, every_byte_single = _singles(enc, eos_id)
        # the trie holds exactly the valid tokens: of the unusable ones only EOS can be walked
        self.eos_walked = eos_id is not None and bool(enc.valid[eos_id])
        has_single = np.zeros(width, dtype=bool)  # the byte classes of the single-byte tokens
        has_single[lut[single]] = True
        byte_dist = (
            dfa.distances if dfa.distances is not None else distances_to_accept(dfa.table, dfa.accepting)
        )
        byte_dist = np.concatenate([[byte_dist[dfa.initial]], byte_dist])  # [1 + Q], as the candidates
        if not separator and has_single[(dfa.table >= 0).any(axis=0)].all():  # every byte a token:
            bound = byte_dist  # tokens needed = bytes
        else:  # the candidate graph of single-byte tokens: c -> 1 + q' (upper bound on tokens needed)
            kinds = np.flatnonzero(has_single)
            src = np.repeat(np.arange(num_byte + 1), len(kinds))
            dst = flat[(start[:, None] + kinds[None, :]).reshape(-1)] // width
            keep = dst < num_byte
            bound = reverse_distances(src[keep], 1 + dst[keep], accepting, num_byte + 1)
        # every byte a token contains is a token by itself (no separator): bound >= 0 iff a match can
        # still follow with tokens at all, so the static rows are the whole automaton's
        self.bytewise = not separator and every_byte_single
        if bound[0] < 0:
            raise ConstraintError(
                f"the constraint {pattern!r} is too large to build whole, and built lazily it needs every "
                "byte of a matching text to be a token by itself (byte-level BPE vocabularies have all 256); "
                "this vocabulary cannot spell a match one byte per token"
            )
        # a lower bound for min_tokens: bytes to acceptance over the longest token (+ separator)
        step_bytes = max(1, int(enc.lengths.max(initial=1))) + len(separator.encode("utf-8"))
        self.lower = np.where(accepting, 0, -(-np.maximum(byte_dist, 1) // step_bytes))
        self.width, self.dead, self.flat, self.lut, self.succ = width, steps.dead, flat, lut, steps.succ
        self.start, self.accepting, self.usable, self.bound = start, accepting, usable, bound
        self.depth, self.most = len(enc.by_depth) - 1, int(bound.max())
        self.candidates = num_byte + 1
        self.build, self.need = exact, None  # the whole automaton: how to build it, then its need
        self.reach: np.ndarray | None = None  # computed when a budget first bites
        self.group: np.ndarray | None = None
        self.canon: np.ndarray | None = None  # [1 + Q] each candidate's class representative
        self.walks = 0
        self._loops: np.ndarray | None | object = _UNSET
        self.codes: dict[int, list[int]] = {}
        self.copies: dict[torch.device, LazyTokenAutomaton] = {}

    def loops(self) -> np.ndarray | None:
        """:func:`~.lift.loop_bytes` of the byte states (made when a walk first asks, kept)."""
        if self._loops is _UNSET:
            self._loops = loop_bytes(self.succ, self.lut)
        return self._loops

    def exact_need(self) -> np.ndarray | None:
        """[1 + Q] the fewest tokens to acceptance from each candidate (-1: none), from the whole
        automaton built on first call; None when there is no build or it refused."""
        if self.need is None and self.build is not None:
            build, self.build = self.build, None
            lifted = build()
            if lifted is not None:
                has = lifted.state_of >= 0
                self.need = np.where(has, lifted.min_tokens[np.maximum(lifted.state_of, 0)], -1)
        return self.need


class LazyTokenAutomaton(MasksFromRows):
    """A :class:`~decodekit.constraints.tokens.interface.TokenConstraint` (``allowed``, ``mask``,
    ``step``, ``is_accepting``, ``min_tokens``, ``shortest``, ``walk``, ``accepts``, ``fits``,
    ``to``), built on first visit (see the module docstring), and its
    :class:`~decodekit.constraints.tokens.interface.Transitions` refinement (Anderson-style search
    over the states as they are reached); not :class:`~decodekit.constraints.tokens.interface.StateTables`.

    ``shortest``: the fewest tokens the masks guarantee: exact when :attr:`exact`, else a match
    spelled one byte per token (at least the true fewest). ``min_tokens``: a *lower* bound
    (bytes to acceptance over the longest token's bytes), as the searches' score bounds need.
    Device copies (:meth:`to`) share one :class:`_Shared`; each keeps its own cached rows (its
    :class:`~.rows.RowCache`, which answers ``allowed``, ``mask``, ``fill_bitmask`` and ``step``).
    """

    def __init__(
        self,
        dfa: ByteDFA | None,
        enc: EncodedVocab | None,
        tokens: Sequence[str | bytes | None],
        separator: str,
        eos_id: int | None,
        pattern: str,
        stats: Mapping[str, int],
        device: torch.device | str = "cpu",
        exact: Callable[[], Lifted | None] | None = None,
        *,
        shared: _Shared | None = None,
    ) -> None:
        self.eos_id, self.pattern, self.separator, self.initial = eos_id, pattern, separator, 0
        self.device = torch.device(device)
        self._static: OrderedDict = OrderedDict()
        self._exact: OrderedDict = OrderedDict()
        self._budgeted: OrderedDict = OrderedDict()  # (state, remaining) -> its length-checked Row
        # state -> (tokens, next states, their representatives), int32 (half the bytes): transitions
        self._edges: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if shared is None:
            shared = _Shared(dfa, enc, tokens, separator, eos_id, pattern, exact)
            stats = {**stats, "candidate_states": shared.candidates}
            shared.copies[self.device] = self
        self._shared, self.stats = shared, stats
        self._cache = RowCache(shared.enc.size, eos_id, self.device, self._row, self._holds_from, self._next)
        self.fill_bitmask = self._cache.fill_bitmask  # the hot call straight to the cache: a frame less

    # ------------------------------------------------------------------ the public interface

    @property
    def vocab_size(self) -> int:
        return self._shared.enc.size

    @property
    def exact(self) -> bool:
        """Whether the masks equal the whole automaton's: the static rows do when every byte the
        tokens contain is a token by itself (no separator), and near the length limit the whole
        automaton, built once on first need, gives the fewest tokens to acceptance."""
        return self._shared.build is not None or self._shared.need is not None

    @property
    def exact_rows(self) -> bool:
        """Whether the masks equal the whole automaton's wherever the length budget leaves every
        state's fewest tokens to acceptance in reach (no separator, every byte a token contains
        a token by itself: then a token is allowed iff a match can still follow); near the limit
        they may mask more unless :attr:`exact`. What Anderson-style search over the states it
        reaches needs of a lazy automaton."""
        return self._shared.bytewise

    @property
    def shortest(self) -> int:
        """The fewest tokens of a match the masks guarantee: exact when :attr:`exact` (the whole
        automaton is built if the one-byte-per-token bound exceeds it), else a match spelled one
        byte per token."""
        sh = self._shared
        need = sh.exact_need() if sh.bound[self.initial] > sh.lower[self.initial] else None
        return int(sh.bound[self.initial] if need is None else need[self.initial])

    def fits(self, max_length: int) -> bool:
        """Whether the masks let a match end within ``max_length`` tokens (builds the whole
        automaton only when the one-byte-per-token bound says no and :attr:`exact`)."""
        if self._shared.bound[self.initial] <= max_length:
            return True
        need = self._shared.exact_need()
        return need is not None and 0 <= need[self.initial] <= max_length

    def to(self, device: torch.device | str) -> LazyTokenAutomaton:
        """A copy producing tensors on ``device`` (self if already there; one per device, the
        original's included); the tables are shared, the cached rows are per device."""
        device = torch.device(device)
        if device == self.device:
            return self
        copies = self._shared.copies
        if device not in copies:
            args = (self.separator, self.eos_id, self.pattern, self.stats, device)
            copies[device] = LazyTokenAutomaton(None, None, (), *args, shared=self._shared)
        return copies[device]

    def allowed(self, states: torch.Tensor, remaining: int | torch.Tensor | None = None) -> torch.Tensor:
        """[N] long states (-1: dead) -> [N, V] bool: token t (not EOS) iff its next state ``c'``
        has ``0 <= bound[c'] <= remaining - 1`` (``remaining``: int, [N] or None = no limit);
        EOS iff the state accepts."""
        return self._cache.allowed(states, remaining)

    def transitions(
        self, states: torch.Tensor, remaining: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``states [G]`` -> ``(owner [E], tokens [E], next [E])``: what :meth:`allowed` allows
        (EOS aside) and where it leads (:class:`~.interface.Transitions`), each state's row walked
        once (:meth:`_walk`) and kept while this copy lives: Anderson-style search revisits the
        states it reached. Under a budget the next states need ``bound`` (or, when :attr:`exact`,
        the whole automaton's fewest tokens) ``<= remaining - 1``, as the masks. Next states are
        given as their class's representative (:meth:`_canonical`), so that one beam per state is
        one beam per state of the whole (minimal) automaton."""
        sh, parts = self._shared, []
        need = None
        if remaining is not None and remaining - 1 < sh.most:
            need = sh.exact_need()
            need = sh.bound if need is None else need
        for g, c in enumerate(states.tolist()):
            edges = self._edges.get(c)
            if edges is None:  # by token; the next states as walked (for the budget) and canonical
                tok, nxt = self._walk(c) if c >= 0 else (np.zeros(0, np.int64),) * 2
                order = np.argsort(tok, kind="stable")
                tok, nxt = tok[order], nxt[order]
                edges = self._edges[c] = tuple(x.astype(np.int32) for x in (tok, nxt, self._canonical(nxt)))
            tok, nxt, canon = edges
            if need is not None:
                keep = (need[nxt] >= 0) & (need[nxt] <= remaining - 1)
                tok, canon = tok[keep], canon[keep]
            parts.append((np.full(len(tok), g, dtype=np.int32), tok, canon))
        if not parts:
            return (torch.zeros(0, dtype=torch.long, device=self.device),) * 3
        return tuple(torch.from_numpy(np.concatenate(x)).to(self.device, torch.long) for x in zip(*parts))

    def is_accepting(self, states: torch.Tensor) -> torch.Tensor:
        """[N] states -> [N] bool (dead states are not)."""
        s = states.detach().cpu().long().numpy()
        return torch.from_numpy((s >= 0) & self._shared.accepting[np.maximum(s, 0)]).to(self.device)

    def min_tokens(self, states: torch.Tensor) -> torch.Tensor:
        """[N] states -> [N] long, a lower bound on the tokens to acceptance (0 for dead)."""
        s = states.detach().cpu().long().numpy()
        return torch.from_numpy(np.where(s >= 0, self._shared.lower[np.maximum(s, 0)], 0)).to(self.device)

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[N] states, [N] tokens -> [N] next states (-1 if dead; -1 stays -1; EOS -> -1): the
        token's bytes read through the byte DFA (no pruning: :meth:`accepts` is the regex's)."""
        return self._cache.step(states, tokens)

    def walk(self, tokens: Iterable[int], state: int | None = None) -> int:
        """The state after reading ``tokens`` from ``state`` (default: initial), or -1 if dead."""
        start = self.initial if state is None else state
        return interface.walk(self._next, tokens, start, self.vocab_size)

    def accepts(self, tokens: Iterable[int]) -> bool:
        """Whether the token sequence is accepted (the regex's language); a trailing EOS is allowed."""
        return interface.accepts(self, self._accepts_state, tokens)

    def _accepts_state(self, c: int) -> bool:
        """Whether live state c accepts (what :meth:`accepts` asks after the walk)."""
        return bool(self._shared.accepting[c])

    def __repr__(self) -> str:
        states = self.stats["candidate_states"]
        return (
            f"LazyTokenAutomaton(pattern={self.pattern!r}, candidate_states={states}, "
            f"vocab_size={self.vocab_size}, shortest<={int(self._shared.bound[self.initial])}, "
            f"eos_id={self.eos_id})"
        )

    # ------------------------------------------------------------------ rows

    def _next(self, c: int, t: int) -> int:
        sh = self._shared
        if c < 0 or not sh.usable[t]:
            return -1
        codes = sh.codes.get(t)
        if codes is None:
            codes = sh.codes[t] = sh.lut[np.frombuffer(as_bytes(sh.tokens[t]), dtype=np.uint8)].tolist()
        s, flat, dead = int(sh.start[c]), sh.flat, sh.dead
        if s == dead:
            return -1
        for k in codes:
            s = int(flat[s + k])
            if s == dead:
                return -1
        return 1 + s // sh.width

    def _walk(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The usable tokens alive from c whose next state has ``bound >= 0``, and those states."""
        sh = self._shared
        s = int(sh.start[c])
        if s == sh.dead:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        tok, ends = walk_one(s, sh.enc, sh.lut, sh.flat, sh.dead, sh.loops)  # ends: alive only
        nxt = ends // sh.width
        nxt += 1
        keep = sh.bound[nxt] >= 0
        if sh.eos_walked:  # EOS has text (it is in the trie) but never a transition
            keep &= tok != self.eos_id
        if keep.all():
            return tok, nxt
        return tok[keep], nxt[keep]

    def _canonical(self, states: np.ndarray) -> np.ndarray:
        """Candidate states -> the smallest candidate with the same token-level future: the same
        acceptance and, after the separator, a byte state of the same class (:func:`_byte_classes`;
        never merging states that differ)."""
        sh = self._shared
        if sh.canon is None:
            classes = _byte_classes(sh.succ, sh.accepting[1:], _columns(sh, self.separator))
            key = classes[sh.start // sh.width] * 2 + sh.accepting  # [1 + Q]
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            sh.canon = first[inverse.reshape(-1)]
        return sh.canon[states]

    @while_paused  # a burst of small objects (util/collector.py)
    def _row(self, c: int, remaining: int | None) -> Row:
        """The :class:`~.rows.Row` of live state c under ``remaining``: its static row (kept per
        byte state or group in the LRU ``_static``; per state, the row cache keeps it warm) where
        the budget cannot bite (:meth:`_holds_from`), else its length-checked row (kept per
        (state, remaining))."""
        sh = self._shared
        accept = bool(sh.accepting[c])
        if remaining is None or remaining - 1 >= sh.most or remaining - 1 >= self._reach_of(c):
            key = (self._row_key(int(sh.start[c] // sh.width)), accept)
            entry = self._static.get(key)
            if entry is None:
                sh.walks += 1
                tok, _ = self._walk(c)
                entry = self._static[key] = self._cache.entry(tok, accept)
                if len(self._static) > STATIC_ROWS:
                    self._static.popitem(last=False)
            else:
                self._static.move_to_end(key)
            return entry
        got = self._budgeted.get((c, remaining))
        if got is not None:
            self._budgeted.move_to_end((c, remaining))
            return got
        got = self._budgeted[(c, remaining)] = self._exact_row(c, remaining, accept)
        if len(self._budgeted) > EXACT_ROWS:
            self._budgeted.popitem(last=False)
        return got

    def _holds_from(self, c: int, remaining: int) -> int:
        """The budget from which :meth:`_row` gives c's static row (``remaining - 1`` at least
        it): the largest bound anywhere when that is below ``remaining - 1``, else c's reach."""
        most = self._shared.most
        return most if remaining - 1 >= most else self._reach_of(c)

    def _exact_row(self, c: int, remaining: int, accept: bool) -> Row:
        """The length-checked row of c: its tokens whose next state's fewest tokens to
        acceptance (``bound``, or the whole automaton's where :attr:`exact`) fit in
        ``remaining - 1``."""
        sh = self._shared
        exact = self._exact.get(c)
        if exact is None:
            exact = self._exact[c] = self._walk(c)
            if len(self._exact) > EXACT_ROWS:
                self._exact.popitem(last=False)
        else:
            self._exact.move_to_end(c)
        tok, nxt = exact
        need = sh.exact_need()
        need = (sh.bound if need is None else need)[nxt]
        return self._cache.entry(tok[(need >= 0) & (need <= remaining - 1)], accept)

    def _reach_of(self, c: int) -> int:
        """The largest ``bound`` of a token end within L bytes of candidate c (:func:`_reach`,
        computed on first use: a budget above every bound never needs it)."""
        sh = self._shared
        if sh.reach is None:
            sh.reach = _reach(sh.succ, sh.bound, sh.depth)
        return int(sh.reach[sh.start[c] // sh.width])

    def _row_key(self, q: int) -> tuple[str, int]:
        """What static rows are cached under: byte state q itself for the first
        :data:`GROUP_AFTER` rows walked (compiling stays cheap), then its group of byte states
        with the same static row (:func:`_groups`, computed once then: a long pattern such as
        ``a{10000}`` walks a row per group, not per state)."""
        sh = self._shared
        if sh.group is None:
            if sh.walks < GROUP_AFTER:
                return ("state", q)
            sh.group = _groups(sh.succ, sh.bound, sh.depth)
            self.stats["row_groups"] = int(sh.group.max()) + 1
        return ("group", int(sh.group[q]))


def _singles(enc: EncodedVocab, eos_id: int | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """Per vocabulary and EOS, kept with the trie (``enc.memo``): ``usable`` [V] bool
    (:meth:`~.trie.EncodedVocab.usable`), the bytes that are usable tokens by themselves, and
    whether every byte the trie's nodes hold is one of them."""
    key = ("singles", eos_id)
    got = enc.memo.get(key)
    if got is None:
        usable = enc.usable(eos_id)
        if len(enc.by_depth) > 1:
            ids, nodes = enc.by_depth[1]
            single = enc.byte[0][nodes[usable[ids]]]
        else:
            single = np.zeros(0, dtype=np.int64)
        seen = np.flatnonzero(enc.present)  # the bytes of the trie's nodes (a unique over them: 2 ms)
        got = enc.memo[key] = (usable, single, bool(np.isin(seen, single).all()))
    return got


def _groups(succ: np.ndarray, bound: np.ndarray, depth: int) -> np.ndarray:
    """Over byte states 0..Q (Q: the dead sink), [Q + 1] group ids such that states of a group
    have the same static row: ``depth`` rounds of Moore refinement from "dead / bound >= 0 /
    bound < 0" (one group per state when ``depth`` > :data:`MAX_ROUNDS`)."""
    n = succ.shape[0]
    if depth > MAX_ROUNDS:
        return np.arange(n)
    ok = np.append(bound[1:] >= 0, False)  # byte state q -> candidate 1 + q
    label = np.where(np.arange(n) == n - 1, 2, ok.astype(np.int64))
    count = len(np.unique(label))
    for _ in range(depth):
        _, label = unique_rows(np.concatenate([label[:, None], label[succ]], axis=1))
        if int(label.max()) + 1 == count:
            break
        count = int(label.max()) + 1
    return label


def _columns(sh: _Shared, separator: str) -> np.ndarray:
    """The byte classes a token or the separator can read (the others never matter)."""
    seen = [np.asarray(b, dtype=np.uint8) for b in sh.enc.byte] + [
        np.frombuffer(separator.encode(), np.uint8)
    ]
    return np.unique(sh.lut[np.unique(np.concatenate(seen))])


def _byte_classes(succ: np.ndarray, accepting: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Over byte states 0..Q (Q: the dead sink), [Q + 1] class ids: states of a class accept the
    same byte strings over ``columns`` (Moore refinement from acceptance, over those columns);
    a refinement still splitting after :data:`MAX_ROUNDS` rounds gives every state its own class
    (sound: only the token-level states' beams are then not shared)."""
    n = succ.shape[0]
    label = np.append(accepting.astype(np.int64), 2)
    count = len(np.unique(label))
    for _ in range(MAX_ROUNDS):
        _, label = unique_rows(np.concatenate([label[:, None], label[succ[:, columns]]], axis=1))
        if int(label.max()) + 1 == count:
            return label
        count = int(label.max()) + 1
    return np.arange(n)


def _reach(succ: np.ndarray, bound: np.ndarray, depth: int) -> np.ndarray:
    """Over byte states 0..Q (Q: the dead sink), [Q + 1] the largest ``bound`` of a token end
    within ``depth`` bytes (-1: none): at most ``depth`` rounds of a max over successors."""
    own = np.where(np.append(bound[1:] >= 0, False), np.append(bound[1:], -1), -1)
    if depth > MAX_ROUNDS:
        return np.full(succ.shape[0], int(bound.max()))
    reach = own
    for _ in range(depth):
        more = np.maximum(own, reach[succ].max(axis=1))
        if np.array_equal(more, reach):
            break
        reach = more
    return reach
