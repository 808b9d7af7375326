"""A context-free grammar's byte states, built on first visit: :class:`GrammarBytes`.

The language is :class:`~decodekit.constraints.grammar.cfg.CFG`'s (scannerless: every split of
the text into lexemes counts, ignored terminals between any two). The machine is an Earley
parser whose scanner reads one byte at a time, each terminal a regular expression stepped by its
derivatives (one :class:`~decodekit.constraints.automata.lazybytes.LazyBytes` for all terminals).

A state is an interned Earley set, the text read so far summarised as:

* ``rules``: items ``(r, d, o)``, rule r with its dot before symbol ``rhs[r][d]`` (never at the
  end: completed items are consumed as they are made), begun at set o (``SELF``: this one);
* ``lex``: lexemes under way, ``(t, q, o)``: terminal t begun after set o (the set whose items
  wait on t), its derivative byte state q after the bytes read of it;
* ``expect``: ``(t, o)``, terminal t may begin here, the items waiting on it in set o (``SELF``
  for a terminal predicted here; an earlier set after an ignored lexeme: Lark's ``%ignore``
  makes the text after it behave as the text before it);
* ``accepting``: the start rule is complete (the augmented rule waits on its end marker).

A set refers to earlier sets by id, so sets are hash-consed into a DAG: two prefixes whose
parses agree are one state. Stepping a byte advances every lexeme (``lex`` and ``expect``); a
lexeme whose byte state accepts completes its terminal at its origin (Earley's completer, run
iteratively); prediction and nullable symbols follow Aycock and Horspool (2002): the dot also
moves over a nullable symbol when it is predicted, so no item completes in the set it began in.

Fewest bytes to acceptance. ``C(X, y)``, the fewest bytes after a symbol y awaited in set X
completes until the sentence can end, is ``min`` over the items of X waiting on y of the fewest
bytes of the rest of the rule plus ``C(o, lhs)`` at the item's origin: within X a shortest-path
problem (Dijkstra: an item begun in X refers to X itself), across sets a value fixed when the
earlier set was solved. The distance of a state is the least, over its lexemes, of the
terminal's bytes still needed plus ``C`` at its origin (0 when it accepts). Grammars reach this
reduced (every symbol productive), so a state is live iff it has a live lexeme or accepts.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.graph import HASH_MIX, first_and_inverse, runs, sorted_distinct
from decodekit.constraints.automata.lazybytes import LazyBytes
from decodekit.constraints.automata.pattern import Pattern, union
from decodekit.constraints.automata.protocol import UNKNOWN
from decodekit.constraints.grammar.cfg import CFG
from decodekit.constraints.grammar.distances import INF, SELF, GrammarDistances
from decodekit.constraints.grammar.follow import follow_sets
from decodekit.errors import ConstraintError, ConstraintTooLarge

MAX_STATES = 1_000_000  # grammar states (their byte rows take 1 KiB each)
_GROUP_MIX = np.uint64(0x9E3779B97F4A7C15)  # a pair's group in its outcome's hash (odd)
START = "$start"  # the augmented start symbol: START -> start END


class _Tables:
    """The grammar's numbering and the values that do not depend on the text: symbols as ints
    (nonterminal n >= 0, terminal t as ``-1 - t``, the end marker ``END``), rules, nullable
    symbols, each symbol's fewest bytes and one shortest text, and the closure of predicting
    each nonterminal."""

    def __init__(self, cfg: CFG, lexer: LazyBytes, starts: list[int]) -> None:
        names = [START, *cfg.nonterminals]
        self.nt = {n: i for i, n in enumerate(names)}
        self.names = names
        self.term_names = list(cfg.terminals)
        self.t_index = {n: i for i, n in enumerate(self.term_names)}
        self.end = -1 - len(self.term_names)  # the end marker, a terminal no byte reads
        self.ignore = {self.t_index[n] for n in cfg.ignore}
        self.lexer, self.starts = lexer, starts  # terminal t begins at byte state starts[t]
        rules = [(0, (self.nt[cfg.start], self.end))]
        for r in cfg.rules:
            rules.append(
                (self.nt[r.lhs], tuple(self.nt[x] if x in self.nt else -1 - self.t_index[x] for x in r.rhs))
            )
        self.lhs = [a for a, _ in rules]
        self.rhs = [b for _, b in rules]
        self.rules_of: list[list[int]] = [[] for _ in names]
        for i, a in enumerate(self.lhs):
            self.rules_of[a].append(i)
        # -1: the vocabulary cannot spell it (its start is -1 when it cannot even begin)
        self.t_min = [lexer.distance(s) if s >= 0 else -1 for s in starts]
        self.t_nullable = [s >= 0 and lexer.accepting(s) for s in starts]
        self.minlen, self.short_rule = self._fewest(self.sym_min)
        self.nullable = self._nullable()
        # suffix[r][d]: the fewest bytes of rhs[r][d:] (INF when a symbol of it has none);
        # lexeme_suffix[r][d]: its fewest non-empty lexemes
        self.suffix = self._suffixes(self.sym_min)
        least, _ = self._fewest(self._lexemes)
        self.lexeme_suffix = self._suffixes(lambda y: least[y] if y >= 0 else self._lexemes(y))
        self._closures: dict[int, tuple] = {}
        self._texts: dict[int, bytes] = {}

    def sym_min(self, y: int) -> int:
        """The fewest bytes of a text of symbol y (INF: none)."""
        if y >= 0:
            return self.minlen[y]
        if y == self.end:
            return 0
        m = self.t_min[-1 - y]
        return INF if m < 0 else m

    def sym_nullable(self, y: int) -> bool:
        if y >= 0:
            return self.nullable[y]
        return y != self.end and self.t_nullable[-1 - y]

    def _fewest(self, weight) -> tuple[list[int], list[int]]:
        """Each nonterminal's least total ``weight`` over the terminals of a text of it (bytes:
        :meth:`sym_min`; lexemes) and a rule that attains it (Knuth's generalisation of
        Dijkstra's algorithm: a rule's value is known once its nonterminals' are)."""
        n = len(self.names)
        best, rule_of = [INF] * n, [-1] * n
        waiting: list[list[int]] = [[] for _ in range(n)]
        left = []
        heap: list[tuple[int, int, int]] = []
        for r, body in enumerate(self.rhs):
            if r == 0:
                left.append(-1)  # the augmented rule has no value of its own
                continue
            kids = [y for y in body if y >= 0]
            left.append(len(kids))
            for y in kids:
                waiting[y].append(r)
            if not kids:
                heapq.heappush(heap, (self._rule_value(r, best, weight), r, self.lhs[r]))
        done = [False] * n
        while heap:
            v, r, a = heapq.heappop(heap)
            if done[a] or v >= INF:
                continue
            done[a], best[a], rule_of[a] = True, v, r
            for r2 in waiting[a]:
                left[r2] -= 1
                if left[r2] == 0:
                    heapq.heappush(heap, (self._rule_value(r2, best, weight), r2, self.lhs[r2]))
        return best, rule_of

    def _rule_value(self, r: int, best: list[int], weight) -> int:
        total = 0
        for y in self.rhs[r]:
            total += best[y] if y >= 0 else weight(y)
            if total >= INF:
                return INF
        return total

    def _lexemes(self, y: int) -> int:
        """The fewest non-empty lexemes of a text of terminal y (0, 1; INF: none)."""
        if y == self.end:
            return 0
        m = self.t_min[-1 - y]
        return INF if m < 0 else int(m > 0)

    def _suffixes(self, value) -> list[list[int]]:
        """Per rule r and dot d, the least total ``value`` of the symbols ``rhs[r][d:]``."""
        out = []
        for body in self.rhs:
            row, acc = [0] * (len(body) + 1), 0
            for d in range(len(body) - 1, -1, -1):
                acc = min(INF, acc + value(body[d]))
                row[d] = acc
            out.append(row)
        return out

    def _nullable(self) -> list[bool]:
        return [m == 0 for m in self.minlen]  # nothing but an empty text has no bytes

    def closure(self, a: int) -> tuple[frozenset, frozenset]:
        """Predicting nonterminal a: the items ``(r, d)`` begun here (dots moved over nullable
        symbols) and the terminals that may begin here, each once per grammar."""
        got = self._closures.get(a)
        if got is None:
            items, terms, seen, todo = set(), set(), {a}, [a]
            while todo:
                b = todo.pop()
                for r in self.rules_of[b]:
                    body, d = self.rhs[r], 0
                    while d < len(body):
                        items.add((r, d))
                        y = body[d]
                        if y >= 0:
                            if y not in seen:
                                seen.add(y)
                                todo.append(y)
                        elif y != self.end:
                            terms.add(-1 - y)
                        if not self.sym_nullable(y):
                            break
                        d += 1
            got = self._closures[a] = (frozenset(items), frozenset(terms))
        return got

    def text(self, y: int) -> bytes:
        """One shortest text of symbol y (iterative over the nesting, memoised)."""
        if y < 0:
            return b"" if y == self.end else self.lexer.witness(self.starts[-1 - y]) or b""
        memo, stack = self._texts, [y]
        while stack:
            x = stack[-1]
            if x in memo:
                stack.pop()
                continue
            body = self.rhs[self.short_rule[x]]
            missing = [z for z in body if z >= 0 and z not in memo]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            memo[x] = b"".join(memo[z] if z >= 0 else self.text(z) for z in body)
        return memo[y]

    def seq_text(self, body: Iterable[int]) -> bytes:
        return b"".join(self.text(y) for y in body)


class _Set:
    """One interned Earley set (module docstring); ``waiting[y]``: its items whose dot is
    before symbol y."""

    __slots__ = ("rules", "lex", "expect", "accepting", "waiting", "_origins")

    def __init__(
        self, rules: frozenset, lex: frozenset, expect: frozenset, accepting: bool, waiting: dict
    ) -> None:
        self.rules, self.lex, self.expect, self.accepting = rules, lex, expect, accepting
        self.waiting = waiting  # shared by the sets with these items (read only)
        self._origins = None

    @property
    def origins(self) -> set[int]:
        """The earlier sets this one refers to (made when the distances first ask)."""
        if self._origins is None:
            got = {o for _, _, o in self.rules if o != SELF} | {o for _, _, o in self.lex if o != SELF}
            self._origins = got | {o for _, o in self.expect if o != SELF}
        return self._origins


def _waiting_index(rules: frozenset, rhs) -> dict[int, list]:
    """:attr:`_Set.waiting` of the items ``rules``: per symbol, the items whose dot is before it."""
    waiting: dict[int, list] = {}
    for item in rules:
        waiting.setdefault(rhs[item[0]][item[1]], []).append(item)
    return waiting


class _Outcomes(NamedTuple):
    """What is known of lexemes in the lexer states ``qs``, as one byte moves them all: the
    distinct outcomes (their next lexer states, -1 dead), each one's index, and [256] each byte's
    outcome index (-1: not learnt yet)."""

    columns: list[tuple[int, ...]]
    index: dict[tuple[int, ...], int]
    of_byte: np.ndarray
    qs: tuple[int, ...]


def _learn_outcomes(lexer, live, qs: list[tuple[int, ...]], which: np.ndarray, byte: np.ndarray) -> tuple:
    """Lexemes in lexer states ``qs[k]`` (tuples), stepped over the bytes of pairs (``which`` [P]
    the tuple, ``byte`` [P] the byte; each pair once) by one gather of ``lexer.table`` (its
    unknown entries filled first, in one call), dead -1 (``live``: None when every lexer state
    that exists is live, else the liveness of an array of them). Returns ``(first, outcome,
    nxt, lo)``: ``nxt`` the next lexer states, pair p's ``len(qs[which[p]])`` from ``lo[p]``; the
    distinct outcomes (a tuple and its lexemes' next states) by the first pair of each, in order,
    and each pair's outcome index ``outcome`` [P]."""
    m = np.array([len(t) for t in qs], dtype=np.int64)
    flat = np.array([q for t in qs for q in t], dtype=np.int64)
    counts = m[which]  # [P] lexemes per pair
    total = int(counts.sum())
    lo = np.cumsum(counts) - counts  # [P] where each pair's lexemes start
    at = np.arange(total) - np.repeat(lo, counts)  # each lexeme's place among its pair's
    q = flat[np.repeat((np.cumsum(m) - m)[which], counts) + at]
    b = np.repeat(byte, counts)
    nxt = lexer.table[q, b]
    unknown = (nxt == UNKNOWN).nonzero()[0]
    if len(unknown):
        lexer.fill(q[unknown], b[unknown])
        nxt[unknown] = lexer.table[q[unknown], b[unknown]]
    if live is not None:
        nxt = np.where(live(nxt), nxt, -1)
    # a pair's outcome, hashed: its tuple and each lexeme's next state at its place (checked below)
    key = which.astype(np.uint64) * _GROUP_MIX
    if total:  # each pair's sum over its lexemes (the empty tuple: its number alone)
        mixed = (nxt.astype(np.int64) + 2).astype(np.uint64) * HASH_MIX[at % len(HASH_MIX)]
        some = counts > 0
        key[some] += np.add.reduceat(mixed, lo[some])
    first, outcome = first_and_inverse(key)
    rep = first[outcome]  # [P] the pair standing for each pair's outcome
    if (which[rep] == which).all() and np.array_equal(nxt, nxt[np.repeat(lo[rep], counts) + at]):
        order = np.argsort(first)  # outcomes in the order of their first pairs
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return first[order], rank[outcome], nxt, lo
    exact: dict[tuple, int] = {}  # a hash collision: outcomes as tuples
    pairs = zip(which.tolist(), lo.tolist(), counts.tolist())
    outcome = np.array([exact.setdefault((k, *nxt[a : a + c].tolist()), len(exact)) for k, a, c in pairs])
    return np.unique(outcome, return_index=True)[1], outcome, nxt, lo


def _learn(
    lexer, live, known: list[_Outcomes], group: np.ndarray, byte: np.ndarray, outcome: np.ndarray
) -> None:
    """The outcomes of the pairs (``group`` [P] the state's index in ``known``, ``byte`` [P])
    whose ``outcome`` is -1, learnt into their ``known`` entries and into ``outcome`` (``lexer``
    and ``live`` as :func:`_learn_outcomes`)."""
    miss = (outcome < 0).nonzero()[0]
    learnt: list[_Outcomes] = []  # the entries learnt now (states may share one)
    place: dict[tuple[int, ...], int] = {}  # an entry's lexer states -> its index among them
    tid = np.empty(len(known), dtype=np.int64)
    for k in dict.fromkeys(group[miss].tolist()):
        if known[k].qs not in place:
            place[known[k].qs] = len(learnt)
            learnt.append(known[k])
        tid[k] = place[known[k].qs]
    asked = tid[group[miss]] * 256 + byte[miss]
    pairs = sorted_distinct(asked)  # a tuple that several states share: each byte once
    which, b = pairs >> 8, pairs & 255
    first, found, nxt, lo = _learn_outcomes(lexer, live, [e.qs for e in learnt], which, b)
    ids = np.empty(len(first), dtype=np.int64)
    for j, p in enumerate(first.tolist()):
        entry = learnt[which[p]]
        column = tuple(nxt[lo[p] : lo[p] + len(entry.qs)].tolist())
        ids[j] = entry.index.setdefault(column, len(entry.columns))
        if ids[j] == len(entry.columns):
            entry.columns.append(column)
    got = ids[found]
    cuts = runs(which)
    for entry, a, z in zip(learnt, cuts[:-1], cuts[1:]):  # pairs come sorted by tuple
        entry.of_byte[b[a:z]] = got[a:z]
    outcome[miss] = got[np.searchsorted(pairs, asked)]


class GrammarBytes:
    """The byte states of a :class:`CFG` over the ``available`` [256] bytes (a vocabulary's),
    built on first visit; a :class:`~decodekit.constraints.automata.protocol.ByteAutomaton`.
    State 0 is the initial one. Given :attr:`horizons` (a vocabulary's
    :class:`~decodekit.constraints.tokens.horizons.LexemeHorizons`), its :meth:`row_key` consults
    each lexeme's origin only as deep as they bound. ConstraintError
    when no text of the available bytes is in the language (naming the terminals the bytes
    cannot spell)."""

    finite = False

    def __init__(self, cfg: CFG, available: np.ndarray | None = None) -> None:
        patterns = [t.pattern if t.expression is None else t.expression for t in cfg.terminals.values()]
        if not patterns:
            raise ConstraintError(f"{cfg.source}: the grammar has no terminals")
        distinct = list(dict.fromkeys(patterns))
        char = CharLevel(union(*[Pattern(p) for p in distinct]), available)
        self.lexer = LazyBytes(char)
        # a terminal is a regex text, or a Pattern (a JSON Schema's regular part: its intersections)
        starts = [
            self.lexer.state(
                char.state(char.converted[p] if isinstance(p, str) else char.expression(p), False), 0, 0
            )
            for p in patterns
        ]
        self.g = g = _Tables(cfg, self.lexer, starts)
        if g.minlen[g.nt[cfg.start]] >= INF:
            unspellable = [n for n, m in zip(g.term_names, g.t_min) if m < 0]
            why = (
                f"terminals {', '.join(unspellable[:6])} need bytes no token contains"
                if unspellable
                else "no sentence of the grammar is spelled with the available bytes"
            )
            raise ConstraintError(
                f"{cfg.source}: no text of this vocabulary is in the grammar's language: {why}"
            )
        self.cfg = cfg
        # every state entered (step >= 0) reaches acceptance: a live lexeme completes its terminal
        # and every item its rule, unless a symbol has no text of the available bytes
        self.entered_live = all(m >= 0 for m in g.t_min) and all(m < INF for m in g.minlen[1:])  # 0: START
        self.sets: list[_Set] = []
        self.index: dict[tuple, int] = {}
        self._waiting: dict[frozenset, dict[int, list]] = {}  # items -> _Set.waiting
        self.table = np.full((64, 256), UNKNOWN, dtype=np.int32)
        self._moves: dict[int, list] = {}
        self._completed: dict[tuple[int, int], tuple] = {}  # (symbol, origin set) -> _complete's
        self._outcomes: dict[tuple[int, ...], _Outcomes] = {}  # lexer states -> what is known
        self.distances = GrammarDistances(self)
        self._row_keys: dict[tuple[int, int], int] = {}  # (state, horizon) -> row key id
        self._consulted_keys: dict[tuple[int, int], int] = {}  # (set, bytes left) -> key id
        self._key_ids: dict[tuple, int] = {}
        # per lexer state: 1 live, 0 dead, -1 unknown; the last entry 0, read for -1 (dead)
        self._lexer_live = np.zeros(1, dtype=np.int8)
        # no intersection, complement or boundary in any terminal: a lexer state that exists is live
        # (CharLevel cuts the classes to the available bytes; LazyBytes numbers no dead byte state)
        self._exists_is_live = char.root.simple
        self.follows = follow_sets(g)  # per terminal, the terminals that may begin right after it
        # the vocabulary's bounds on what a lexeme's completion reads (a LexemeHorizons: after(q, t),
        # reads(q, t)), set by the token level; None: the bytes of the longest token bound them
        self.horizons = None
        closure_items, closure_terms = g.closure(0)
        rules = frozenset((r, d, SELF) for r, d in closure_items)
        expect = frozenset((t, SELF) for t in closure_terms)
        accepting = any(g.rhs[r][d] == g.end for r, d in closure_items)
        if expect or accepting:
            expect |= {(t, SELF) for t in g.ignore}
        self._intern(rules, frozenset(), expect, accepting)

    # ------------------------------------------------------------------ the ByteAutomaton interface

    @property
    def size(self) -> int:
        return len(self.sets)

    def sizes(self) -> dict[str, int]:
        return {"grammar_states": len(self.sets), "terminal_states": self.lexer.size}

    def accepting(self, s: int) -> bool:
        return self.sets[s].accepting

    def row_key(self, s: int, horizon: int) -> int:
        """A key equal for states that read the next ``horizon`` bytes alike: the state's
        acceptance and its moving lexemes, each with what of its origin the lexeme's completion
        can read (:meth:`_consulted`; :meth:`_after_ignored` for an ignored terminal) while at most
        K more lexemes begin in the token: ``horizon - 1`` (each takes a byte), fewer by the token
        level's :attr:`horizons` when it set one. So two positions whose parses agree that far
        share one row (the strings of a JSON document, whatever lies around them)."""
        got = self._row_keys.get((s, horizon))
        if got is None:
            got = self._row_keys[(s, horizon)] = self.key_of(s, horizon)
        return got

    def key_of(self, s: int, horizon: int, note=None, memo: dict | None = None) -> int:
        """:meth:`row_key`'s key, uncached; with ``note(set, symbol) -> hashable``, what is noted of
        the origin at every item read and of every lexeme's own origin, each lexeme by its exact
        lexer state (``memo``: the noted consults, kept by the caller). A grammar & pattern pair
        notes which DFA states can still end a sentence from there (its liveness reads them)."""
        after, most, ignore = self.horizons, horizon - 1, self.g.ignore
        parts = []
        for t, q, o in self._moving(s):
            k = most if after is None else min(most, after.after(q, t))
            reads = q if after is None or note is not None else after.reads(q, t)
            if t in ignore:
                part = (t, reads, self._after_ignored(o, k, note, memo))
            else:
                part = (t, reads, self._consulted(o, -1 - t, k, note, memo))
            parts.append(part if note is None else (*part, note(o, None if t in ignore else -1 - t)))
        return self._key_ids.setdefault(("top", self.sets[s].accepting, frozenset(parts)), len(self._key_ids))

    def _after_ignored(self, o: int, left: int, note=None, memo: dict | None = None) -> int:
        """What an ignored lexeme begun at set o reads of o when it completes with at most ``left``
        more lexemes to begin: o's acceptance and expected terminals (they may follow it), each
        with :meth:`_consulted` of its origin at one lexeme less."""
        if left <= 0:
            return -1
        here, ignore = self.sets[o], self.g.ignore
        expect = frozenset(
            (u, self._consulted(o if o2 == SELF else o2, -1 - u, left - 1, note, memo))
            + (() if note is None else (note(o if o2 == SELF else o2, None if u in ignore else -1 - u),))
            for u, o2 in here.expect
        )
        return self._key_ids.setdefault(("ignored", here.accepting, expect), len(self._key_ids))

    def _consulted(self, x: int, y: int, left: int, note=None, memo: dict | None = None) -> int:
        """What of set x a parse reads when symbol y, awaited in x, completes with at most ``left``
        more lexemes to begin in the token: nothing when none can (the state is live whatever x
        holds: it keeps the lexeme that completed); else x's items waiting on y, and on each
        nonterminal that their rules complete within ``left`` lexemes (:attr:`_Tables.lexeme_suffix`
        of the rest, :meth:`_within`), each begun earlier with this of its origin at the lexemes
        left once the rule completes; with ``note``, each item with ``note(origin, lhs)``.
        Memoised and interned as ints; iterative over origins."""
        ids, g = self._key_ids, self.g
        if memo is None:
            memo = self._consulted_keys
        if left <= 0:
            return -1
        stack, reached = [(x, y, left)], {}
        while stack:
            top = stack[-1]
            if top in memo:
                stack.pop()
                continue
            here = self.sets[top[0]]
            if top not in reached:
                reached[top] = self._within(here, top[1], top[2])
            items = [
                (r, d, o, j - g.lexeme_suffix[r][d + 1])
                for z, j in reached[top].items()
                for r, d, o in here.waiting.get(z, ())
            ]
            missing = [
                (o, g.lhs[r], j)
                for r, d, o, j in items
                if o != SELF and j > 0 and (o, g.lhs[r], j) not in memo
            ]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            entries = frozenset(
                (r, d, SELF if o == SELF else memo[(o, g.lhs[r], j)] if j > 0 else -1)
                + (() if note is None else (note(top[0] if o == SELF else o, g.lhs[r]),))
                for r, d, o, j in items
            )
            memo[top] = ids.setdefault(("consulted", entries), len(ids))
            del reached[top]
        return memo[(x, y, left)]

    def _within(self, here: _Set, y: int, left: int) -> dict[int, int]:
        """The symbols whose completion in ``here`` follows from y's with at most ``left`` lexemes
        to begin (y, and the left-hand side of each rule begun here whose rest after one of them
        completes within the lexemes left), each with the most lexemes left then."""
        g, best, todo = self.g, {y: left}, [y]
        while todo:
            z = todo.pop()
            for r, d, o in here.waiting.get(z, ()):
                j = best[z] - g.lexeme_suffix[r][d + 1]
                if o == SELF and j > 0 and best.get(g.lhs[r], 0) < j:
                    best[g.lhs[r]] = j
                    todo.append(g.lhs[r])
        return best

    def reach(self, s: int) -> None:
        return None

    def lower(self, s: int) -> int:
        return self.distance(s)

    def fill(self, states: np.ndarray, codes: np.ndarray) -> None:
        """The unknown ``table[states[i], codes[i]]``: one new set per distinct state and outcome
        of its moving lexemes' lexer states over the byte. Outcomes are kept per tuple of lexer
        states (every position with lexemes in those states splits the bytes alike, whatever
        their origins) and learnt for the bytes asked, all tuples at once (:func:`_learn`)."""
        if (states == states[0]).all():  # one state (a walk's first depth): repeated bytes do no harm
            here, src, byte = [int(states[0])], int(states[0]), codes.astype(np.int64)
            group = np.zeros(len(byte), dtype=np.int64)
        else:
            pairs = sorted_distinct(states.astype(np.int64) * 256 + codes)
            src, byte = pairs >> 8, pairs & 255
            cuts = runs(src)
            here = src[cuts[:-1]].tolist()
            group = np.repeat(np.arange(len(here)), np.diff(cuts))  # [P] each pair's state, by index
        moving = [self._moving(u) for u in here]
        known = [self._outcomes_of(tuple(q for _, q, _ in x)) for x in moving]
        of_byte = known[0].of_byte[None] if len(known) == 1 else np.stack([k.of_byte for k in known])
        outcome = of_byte[group, byte]
        if (outcome < 0).any():
            _learn(
                self.lexer, None if self._exists_is_live else self.live_lexemes, known, group, byte, outcome
            )
        key = group * 256 + outcome  # a state's index and outcome
        present = np.zeros(256 * len(here), dtype=bool)
        present[key] = True
        made = np.empty(256 * len(here), dtype=np.int32)  # read only where present
        for v in present.nonzero()[0].tolist():  # one set per state and outcome
            k, o = divmod(v, 256)
            made[v] = self._advance(here[k], moving[k], known[k].columns[o]) if moving[k] else -1
        self.table[src, byte] = made[key]

    def _outcomes_of(self, qs: tuple[int, ...]) -> _Outcomes:
        """What is known of lexemes in lexer states ``qs``, kept."""
        got = self._outcomes.get(qs)
        if got is None:
            got = self._outcomes[qs] = _Outcomes([], {}, np.full(256, -1, dtype=np.int64), qs)
        return got

    def live_lexemes(self, qs: np.ndarray) -> np.ndarray:
        """bool, the shape of ``qs`` (lexer states, < 0 dead): which can still complete their terminal."""
        if self._exists_is_live:
            return qs >= 0
        known = self._lexer_live
        if len(known) <= self.lexer.size:  # grown, its last entry (read for -1) kept 0
            known = self._lexer_live = np.concatenate(
                [known[:-1], np.full(self.lexer.size + 65 - len(known), -1, np.int8), [0]]
            ).astype(np.int8)
        got = known[np.maximum(qs, -1)]
        if (got < 0).any():
            for q in set(qs[got < 0].tolist()):
                known[q] = self.lexer.distance(q) >= 0
            got = known[np.maximum(qs, -1)]
        return got == 1

    def step(self, s: int, b: int) -> int:
        """The state after byte b from state s (module docstring), computed on first need."""
        got = int(self.table[s, b])
        if got != UNKNOWN:
            return got
        lexer = self.lexer
        nexts = []
        for _, q, _ in self._moving(s):
            q2 = lexer.step(q, b)
            nexts.append(q2 if q2 >= 0 and lexer.distance(q2) >= 0 else -1)
        out = self._advance(s, self._moving(s), nexts)
        self.table[s, b] = out
        return out

    def _moving(self, s: int) -> list[tuple[int, int, int]]:
        """The lexemes of state s that a byte advances: those under way and those that may begin
        (at the terminal's first byte state), origins resolved (``SELF`` -> s)."""
        got = self._moves.get(s)
        if got is None:
            here, starts = self.sets[s], self.g.starts
            got = [(t, q, s if o == SELF else o) for t, q, o in here.lex]
            # a terminal whose first byte no token holds never begins (start -1)
            got += [(t, starts[t], s if o == SELF else o) for t, o in here.expect if starts[t] >= 0]
            self._moves[s] = got
        return got

    def _advance(self, s: int, moving: list, nexts: list[int]) -> int:
        """The set after a byte that takes each lexeme of ``moving`` to ``nexts`` (-1: it dies)."""
        g, lexer = self.g, self.lexer
        lex, done = set(), []
        for (t, _, o), q2 in zip(moving, nexts):
            if q2 < 0:
                continue
            lex.add((t, q2, o))
            if lexer.accepting(q2):
                done.append((t, o))
        if not lex:
            return -1
        accepting, expect, completions = False, set(), []
        for t, o in done:
            if t in g.ignore:  # what may follow the set before the ignored lexeme may follow here
                before = self.sets[o]
                expect.update((u, o if o2 == SELF else o2) for u, o2 in before.expect)
                accepting = accepting or before.accepting
            else:
                completions.append((-1 - t, o))
        completed = self._completed
        parts = [completed.get(y_o) or self._complete(*y_o) for y_o in completions]
        if len(parts) == 1 and not expect:  # the common case: one terminal completes, kept as made
            rules, expect, accepting = parts[0][0], parts[0][1], accepting or parts[0][2]
        else:
            rules = frozenset().union(*(part[0] for part in parts))
            expect = expect.union(*(part[1] for part in parts))
            accepting = accepting or any(part[2] for part in parts)
        if (expect or accepting) and g.ignore:
            expect = expect | {(t, SELF) for t in g.ignore}
        return self._intern(frozenset(rules), frozenset(lex), frozenset(expect), accepting)

    def _complete(self, y: int, o: int) -> tuple[frozenset, frozenset, bool]:
        """What completing symbol y begun at set o adds to the set being made: ``(items, expected
        terminals, accepting)``, the items of o waiting on y with their dots moved past y and the
        nullable symbols after it, the closures of the nonterminals they predict (begun here:
        ``SELF``), and so on for each rule that completes in turn at its origin (iteratively).
        Kept per ``(y, o)``: sets never change, and a row's walk completes the same terminals at
        the same origins from many trie nodes."""
        g = self.g
        rhs, lhs = g.rhs, g.lhs
        rules, expect, predicted = set(), set(), set()
        accepting = False
        completions, seen_done = [(y, o)], set()
        while completions:
            y_o = completions.pop()
            if y_o in seen_done:
                continue
            seen_done.add(y_o)
            y2, o2 = y_o
            for r, d, o3 in self.sets[o2].waiting.get(y2, ()):
                origin = o2 if o3 == SELF else o3
                d += 1
                body = rhs[r]
                while True:
                    if d == len(body):
                        completions.append((lhs[r], origin))
                        break
                    item = (r, d, origin)
                    if item in rules:
                        break
                    rules.add(item)
                    z = body[d]
                    if z >= 0:
                        if z not in predicted:
                            predicted.add(z)
                            items, terms = g.closure(z)
                            rules.update((r2, d2, SELF) for r2, d2 in items)
                            expect.update((t2, SELF) for t2 in terms)
                            if any(rhs[r2][d2] == g.end for r2, d2 in items):
                                accepting = True
                    elif z == g.end:
                        accepting = True
                    else:
                        expect.add((-1 - z, SELF))
                    if not g.sym_nullable(z):
                        break
                    d += 1
        got = self._completed[(y, o)] = (frozenset(rules), frozenset(expect), accepting)
        return got

    def _intern(self, rules: frozenset, lex: frozenset, expect: frozenset, accepting: bool) -> int:
        key = (rules, lex, expect, accepting)
        got = self.index.get(key)
        if got is not None:
            return got
        got = self.index[key] = len(self.sets)
        if got >= MAX_STATES:
            raise ConstraintTooLarge(
                f"constraint too large: the grammar's parse visited more than {MAX_STATES:,} states",
                bound="states",
                limit=MAX_STATES,
            )
        waiting = self._waiting.get(rules)
        if waiting is None:  # sets that differ only in their lexemes share their items' index
            waiting = self._waiting[rules] = _waiting_index(rules, self.g.rhs)
        self.sets.append(_Set(rules, lex, expect, accepting, waiting))
        if got >= len(self.table):
            grown = np.full((2 * len(self.table), 256), UNKNOWN, dtype=np.int32)
            grown[: len(self.table)] = self.table
            self.table = grown
        return got

    def distance(self, s: int) -> int:
        """The fewest bytes leading state s to acceptance; -1 if none (:attr:`distances`)."""
        return self.distances.distance(s)

    def witness(self, s: int) -> bytes | None:
        """One shortest text leading s to acceptance (:meth:`distance` bytes)."""
        return self.distances.witness(s)
