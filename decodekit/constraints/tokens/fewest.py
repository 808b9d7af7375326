"""The fewest tokens leading a byte state to acceptance: the first-visit token level's length check.

With ``d`` the fewest bytes from a byte state to acceptance and L the longest token, the fewest
tokens lie in ``[ceil(d / L), u]``, where ``u <= d`` is the fewest tokens spelling one shortest
accepted text (:meth:`FewestTokens.upper_bound`: the text read off the byte automaton,
``witness``, segmented over the trie; every byte is a token); only between the two does a
bounded search over tokens decide (:meth:`FewestTokens.search`), and past
:data:`NEED_WALKS` walks the whole automaton's fewest tokens (built once, where the states are
finitely many). :class:`~decodekit.constraints.tokens.derived.DerivedTokenAutomaton` asks it
where a length budget may cut a row.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import numpy as np

from decodekit.constraints.automata.algebra import AND, CAT, NOT, OR, REP, SET, Expr
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.eagerbytes import EagerBytes
from decodekit.constraints.automata.graph import distances_to_accept, distinct_columns, minimize_with_blocks
from decodekit.constraints.automata.pattern import short_label
from decodekit.constraints.automata.protocol import ByteAutomaton
from decodekit.constraints.automata.utf8 import ByteDFA
from decodekit.constraints.tokens.lift import lift
from decodekit.constraints.tokens.trie import EncodedVocab, as_bytes
from decodekit.errors import ConstraintTooLarge

NEED_WALKS = 1024  # walks the fewest-tokens search takes before the whole automaton decides
WITNESS_BYTES = 4096  # longest shortest-text spelled into tokens for a successor's upper bound
LONG_WITNESS = 1 << 20  # and for the state a question is about (one spelling per question)
WHOLE_STATES = 200_000  # byte states the exact fallback of the fewest-tokens search may build


class FewestTokens:
    """The fewest tokens leading the states of ``source`` to acceptance over a vocabulary (module
    docstring), answers kept per state.

    Args:
        source: the byte automaton. enc, tokens: the vocabulary's trie and token texts.
        usable: [V] bool, the tokens a sequence may use (EOS not). longest: L, the longest
            token's bytes. eos_id, pattern: for the lifted automaton and the messages.
        walked: ``state -> (tokens [n], next states [n], their fewest bytes [n])``, the token
            level's kept walk of a state's row.
    """

    def __init__(
        self,
        source: ByteAutomaton,
        enc: EncodedVocab,
        tokens: Sequence[str | bytes | None],
        usable: np.ndarray,
        longest: int,
        eos_id: int | None,
        pattern: str,
        walked: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray]],
    ) -> None:
        self.bytes, self._enc, self._tokens = source, enc, tokens
        self._usable, self._longest = usable, longest
        self.eos_id, self.pattern, self._walked = eos_id, pattern, walked
        self._within_known: dict[
            int, tuple[int, int]
        ] = {}  # state -> (largest R known no, least R known yes)
        self._upper: dict[int, int] = {}  # state -> tokens of one accepted continuation

    @property
    def _char(self) -> CharLevel | None:
        """The character level under the byte states, where they are a regular expression's."""
        return getattr(self.bytes, "char", None)

    def shortest(self) -> int:
        """The fewest tokens (EOS not counted) of an accepted sequence: an A* search over the
        states by tokens (:meth:`search`), stopped by the spelled shortest text's tokens."""
        d = self.bytes.distance(0)
        if d > LONG_WITNESS:  # neither spelled into tokens nor searched: say so, never a made-up count
            raise ConstraintTooLarge(
                f"constraint too expensive: the fewest tokens matching {short_label(self.pattern)!r} are not "
                f"computed: a match needs {d:,} bytes (over {LONG_WITNESS:,})",
                bound="bytes",
                limit=LONG_WITNESS,
                size=d,
            )
        upper = min(d, self.upper_bound(0, LONG_WITNESS))
        if self._estimate(0) >= upper:
            return upper
        found = self.search(0, upper - 1)
        return upper if found is None else found

    def fitting(self, ends: np.ndarray, dist: np.ndarray, budget: int) -> np.ndarray:
        """[E] bool: which of the next states ``ends`` (fewest bytes to acceptance ``dist``)
        reach acceptance within ``budget`` tokens: the byte bounds, else :meth:`within`."""
        ok = dist <= budget
        gap = np.flatnonzero(~ok & (-(-dist // self._longest) <= budget))
        if len(gap):
            yes = [e for e in np.unique(ends[gap]).tolist() if self.within(e, budget)]
            ok[gap] = np.isin(ends[gap], yes)
        return ok

    def within(self, s: int, budget: int) -> bool:
        """Whether some token sequence of at most ``budget`` tokens leads s to acceptance: the
        bounds first (:meth:`_bounds`), then the exact search (:meth:`search`). Answers are kept
        per state, monotone in the budget."""
        quick = self._bounds(s, budget, LONG_WITNESS)
        if quick is not None:
            return quick
        found = self.search(s, budget, count=False) is not None
        self._known(s, budget, found)
        return found

    def search(self, s: int, budget: int, count: bool = True) -> int | None:
        """The fewest tokens leading s to acceptance if at most ``budget``, else None (``count``
        False: some number of tokens within ``budget``, the first found). An A* search over
        states by tokens, estimate :meth:`_estimate` (consistent: each state walked once, at its
        fewest tokens from s; ties taken deepest first, so that a chain of equally good states is
        walked once down, not across), successors the bounds rule out not entered; a "no" kept
        for every state walked (at the budget left there). Past :data:`NEED_WALKS` walks, the
        whole automaton's fewest tokens decide (:meth:`_exact_need`): exact, never a refusal
        halfway unless the whole automaton is too large to build."""
        best, heap, walked = {s: 0}, [(self._estimate(s), 0, s)], []
        while heap:
            f, negative, x = heapq.heappop(heap)
            g = -negative
            if g > best[x]:
                continue
            if f > budget:
                break
            if self.bytes.accepting(x):
                return g
            walked.append((x, g))
            if len(walked) > NEED_WALKS:
                need = self._exact_need(s)
                return need if 0 <= need <= budget else None
            _, ends, dist = self._walked(x)
            left = budget - g - 1  # tokens after the next one
            if not count and (dist <= left).any():  # one byte a token from there: within the budget
                return budget
            for e in np.unique(ends).tolist():
                e = int(e)
                if g + 1 >= best.get(e, 1 << 62):
                    continue
                quick = self._bounds(e, left)
                if quick is False:
                    continue
                if quick and not count:
                    return budget
                best[e] = g + 1
                heapq.heappush(heap, (g + 1 + self._estimate(e), -(g + 1), e))
        for x, g in walked:  # none of them reaches acceptance within what is left of the budget there
            self._known(x, budget - g, False)
        return None

    def _exact_need(self, s: int) -> int:
        """The fewest tokens leading byte state s to acceptance (-1: none), read off the whole
        token automaton, built once on first need (:meth:`_whole_need`): what the bounded search
        falls back to instead of refusing halfway through a generation."""
        need = self.__dict__.get("_need")
        if need is None:
            if not self.bytes.finite:  # a grammar: no whole automaton to read it off
                raise ConstraintTooLarge(
                    f"constraint too expensive: deciding whether {short_label(self.pattern)!r} can still be "
                    f"completed within the length limit took over {NEED_WALKS:,} walks of the vocabulary "
                    "(a grammar has no whole automaton to fall back on); raise max_length",
                    bound="steps",
                    limit=NEED_WALKS,
                )
            if self.bytes.distance(s) > WHOLE_STATES:  # a shortest text's bytes are distinct states
                raise ConstraintTooLarge(
                    f"constraint too expensive: deciding whether {short_label(self.pattern)!r} can still be "
                    f"matched within the length limit needs the fewest tokens of more than {WHOLE_STATES:,} "
                    "byte states; raise max_length or simplify the pattern",
                    bound="bytes",
                    limit=WHOLE_STATES,
                    size=self.bytes.distance(s),
                )
            need = self._need = self._whole_need()
        return int(need[s]) if s < len(need) else -1

    def _whole_need(self) -> np.ndarray:
        """[byte states] the fewest tokens to acceptance of every byte state reachable over the
        vocabulary's bytes (-1: none): the byte states explored whole (at most
        :data:`WHOLE_STATES`, else ConstraintError), minimised, lifted over the vocabulary
        (:func:`~.lift.lift`), each byte state read as "after a token" (the states a token sequence
        reaches; the initial one as "before any"). An eager byte DFA is lifted as it is."""
        lb, enc = self.bytes, self._enc
        if isinstance(lb, EagerBytes):  # built whole already: its states are the DFA's
            return self._lifted_need(lb.dfa, np.arange(lb.size))
        table = lb.explore(
            enc.available(b""),
            WHOLE_STATES,
            lambda size: ConstraintTooLarge(
                f"constraint too expensive: deciding whether {short_label(self.pattern)!r} can still be "
                f"matched within the length limit needs the fewest tokens of more than {WHOLE_STATES:,} "
                "byte states; raise max_length or simplify the pattern",
                bound="states",
                limit=WHOLE_STATES,
                size=size,
            ),
        )
        n = len(table)
        accepting = np.array([lb.accepting(y) for y in range(n)], dtype=bool)
        dist = distances_to_accept(table, accepting)
        live = dist >= 0
        need = np.full(n, -1, dtype=np.int64)
        if not live[0]:
            return need
        remap = np.append(np.where(live, np.cumsum(live) - 1, -1), -1)
        out, new_of = minimize_with_blocks(remap[table[live]], accepting[live], 0, hint=dist[live])
        boundary = np.array([k[1] == 0 for k in lb.keys], dtype=bool)[np.flatnonzero(live)[out.reps]]
        columns, which = distinct_columns(out.table)
        dfa = ByteDFA(columns.astype(np.int32), out.accepting, 0, which.astype(np.int64), boundary)
        need[live] = self._lifted_need(dfa, new_of)
        return need

    def _lifted_need(self, dfa: ByteDFA, new_of: np.ndarray) -> np.ndarray:
        """[len(new_of)] the fewest tokens to acceptance after a token in the states ``new_of``
        of ``dfa`` (initial 0; the first of ``new_of`` the initial state, read as before any: no
        separator, the same future), -1 where none: ``dfa`` lifted over the vocabulary."""
        lifted = lift(dfa, self._enc, b"", self.eos_id, 1 << 62)
        if lifted is None:
            return np.full(len(new_of), -1, dtype=np.int64)
        state = lifted.state_of[1 + new_of]  # [live byte states] the token-level state after a token
        state[0] = lifted.state_of[0]  # the initial state: before any (no separator: the same future)
        return np.where(state >= 0, lifted.min_tokens[np.maximum(state, 0)], -1)

    def _estimate(self, s: int) -> int:
        """A consistent lower bound on the tokens leading s to acceptance: its fewest bytes over
        the longest token the texts from s may use (:meth:`_longest_from`)."""
        return -(-self.bytes.distance(s) // self._longest_from(s))

    def _longest_from(self, s: int) -> int:
        """The longest usable token whose bytes the texts from s may contain: none with an ASCII
        byte or a lead byte of characters outside the alphabet of s's expression (:func:`_alphabet`;
        every state after s has a part of it, so the bound stays consistent along the way)."""
        if self._char is None:  # no expression to read an alphabet off (a grammar): every token
            return self._longest
        memo = self.__dict__.setdefault("_alphabets", {})
        q = self.bytes.keys[s][0]
        mask = memo.get(("q", q))
        if mask is None:
            every = (1 << self._char.num_classes) - 1
            mask = memo[("q", q)] = _alphabet(self._char.states[q][0], every, memo)
        got = memo.get(("longest", mask))
        if got is None:
            got = memo[("longest", mask)] = self._longest_of(mask)
        return got

    def _longest_of(self, mask: int) -> int:
        """The longest usable token none of whose bytes is ruled out by the class ``mask``."""
        u, enc = self._char.utf8, self._enc
        bad = np.zeros(256, dtype=bool)
        for b in range(128):
            bad[b] = not (mask >> u["ascii"][b]) & 1
        any_lead = False
        for b in range(0xC0, 256):
            level, node = u["lead"][b]
            bad[b] = level < 0 or not (u["masks"][level][node] & mask)
            any_lead |= not bad[b]
        bad[0x80:0xC0] = not any_lead
        key = ("token_bytes", self.eos_id)
        flat = enc.memo.get(key)
        if flat is None:
            usable = [t for t in range(enc.size) if self._usable[t] and enc.lengths[t] > 0]
            data = b"".join(as_bytes(self._tokens[t]) for t in usable)
            flat = enc.memo[key] = (np.frombuffer(data, dtype=np.uint8), np.array(usable, dtype=np.int64))
        data, usable = flat
        if not len(usable):
            return 1
        lengths = enc.lengths[usable]
        starts = np.cumsum(lengths) - lengths
        ruled_out = np.maximum.reduceat(bad[data], starts)
        return max(1, int(lengths[~ruled_out].max(initial=1)))

    def _bounds(self, s: int, budget: int, witness: int = WITNESS_BYTES) -> bool | None:
        """Whether s reaches acceptance within ``budget`` tokens when the byte bounds or an
        earlier answer decide it, else None."""
        d = self.bytes.distance(s)
        if d < 0 or budget < 0:
            return False
        if d <= budget:
            return True
        if -(-d // self._longest_from(s)) > budget:
            return False
        no, yes = self._within_known.get(s, (-1, 1 << 62))
        if budget <= no:
            return False
        if budget >= yes or self.upper_bound(s, witness) <= budget:
            return True
        return None

    def upper_bound(self, s: int, witness: int = WITNESS_BYTES) -> int:
        """An upper bound on the fewest tokens leading s to acceptance: the fewest tokens that
        spell one shortest accepted text (:meth:`LazyBytes.witness`; any way to spell an
        accepted text is a token sequence to acceptance, the automaton reading bytes); a large
        number when that text is over :data:`WITNESS_BYTES` or not spellable."""
        got = self._upper.get(s)
        if got is None or (got == 1 << 62 and witness > WITNESS_BYTES):
            got = 1 << 62
            if 0 <= self.bytes.distance(s) <= witness:
                text = self.bytes.witness(s)
                if text is not None:
                    got = self.fewest_tokens(text)
            self._upper[s] = got
        return got

    def fewest_tokens(self, text: bytes) -> int:
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


def _alphabet(e: Expr, every: int, memo: dict) -> int:
    """The character classes (bitmask) the texts of ``e`` and of all its derivatives may contain:
    the sets below it (an intersection: those of its parts in common; a complement: all of
    ``every``), iterative over the nesting, kept in ``memo`` by node."""
    stack = [e]
    while stack:
        x = stack[-1]
        if ("e", x.id) in memo:
            stack.pop()
            continue
        kids = (
            (x.a, x.b) if x.op == CAT else tuple(x.a) if x.op in (OR, AND) else (x.a,) if x.op == REP else ()
        )
        missing = [y for y in kids if ("e", y.id) not in memo]
        if missing and x.op != NOT:
            stack.extend(missing)
            continue
        stack.pop()
        if x.op == SET:
            got = x.mask
        elif x.op == NOT:
            got = every
        elif x.op == AND:
            got = every
            for y in kids:
                got &= memo[("e", y.id)]
        else:
            got = 0
            for y in kids:
                got |= memo[("e", y.id)]
        memo[("e", x.id)] = got
    return memo[("e", e.id)]
