"""Lift a character DFA to a token-level automaton for one vocabulary, vectorised over tokens.

The vocabulary is prepared once as a trie of its surfaces (:class:`EncodedVocab`: per depth,
each node's parent and character). A pattern maps characters to its classes with one lookup
table. A breadth-first search over token-level states steps *all* frontier states through *all*
trie nodes of a depth at once: ``state[f, n] = T[state[f, parent[n]], class[char[n]]]``, with a
dead sink; subtrees dead from every frontier state are cut as soon as they die (most of the
vocabulary, for restrictive patterns). A token's end state is that of its node. Sharing
prefixes makes this ~3x less work than stepping each token's characters (50k BPE-like strings:
84k nodes, 290k characters).

Separator: the text is ``sep.join(surfaces)``. Token-level state 0 is "nothing emitted yet"
(the DFA's start, no separator before the first token); every other token-level state is a
DFA state q reached after at least one token, and a token read from it first steps through the
separator's characters. With ``sep == ""`` both coincide and state 0 is simply the DFA start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decodekit.constraints.chardfa import CharDFA, char_bits
from decodekit.constraints.graph import distinct_columns, minimize, reverse_distances
from decodekit.errors import ConstraintError

MAX_TABLE_ENTRIES = 2**28  # next_state [S, V] int64: at most 2 GiB


@dataclass(frozen=True)
class EncodedVocab:
    """The token surfaces as a trie, prepared once per vocabulary.

    Attributes:
        parent: per depth d = 1 .. L, [n_d] int64 index of each node's parent among the nodes
            of depth d-1 (depth 0: the root, the empty prefix).
        char: per depth, [n_d] int64 index into ``chars`` of each node's last character.
        by_depth: per depth d = 0 .. L, (token ids [m_d] of length d, their node [m_d]).
        valid: [V] bool (surface is not None).
        chars: the distinct characters; bits: [K] their predicate bits (``chardfa.char_bits``).
    """

    parent: tuple[np.ndarray, ...]
    char: tuple[np.ndarray, ...]
    by_depth: tuple[tuple[np.ndarray, np.ndarray], ...]
    valid: np.ndarray
    chars: tuple[str, ...]
    bits: np.ndarray

    @property
    def size(self) -> int:
        return len(self.valid)


def encode_vocab(token_strings) -> EncodedVocab:
    """Build the trie: one numpy conversion to code points, then one ``np.unique`` per depth."""
    valid = np.array([t is not None for t in token_strings], dtype=bool)
    if not all(t is None or isinstance(t, str) for t in token_strings):
        bad = next(t for t in token_strings if t is not None and not isinstance(t, str))
        raise ConstraintError(f"token_strings must be str or None, got {type(bad).__name__}: {bad!r}")
    arr = np.array([t or "" for t in token_strings], dtype=str)
    if arr.dtype.itemsize == 0 or len(arr) == 0:
        arr = arr.astype("<U1")
    lengths = np.char.str_len(arr).astype(np.int64)
    codes = arr.view(np.uint32).reshape(len(arr), -1)
    uniq, inv = np.unique(codes, return_inverse=True)
    inv = inv.reshape(codes.shape).astype(np.int64)
    chars = tuple(chr(c) for c in uniq.tolist())
    node = np.zeros(len(arr), dtype=np.int64)  # each token's node at the current depth
    parents, chs = [], []
    by_depth = [(np.flatnonzero(lengths == 0), np.zeros(int((lengths == 0).sum()), dtype=np.int64))]
    for d in range(codes.shape[1]):
        tok = np.flatnonzero(lengths > d)
        if not len(tok):
            break
        key = node[tok] * len(chars) + inv[tok, d]
        keys, node[tok] = np.unique(key, return_inverse=True)
        parents.append(keys // len(chars))
        chs.append(keys % len(chars))
        ends = tok[lengths[tok] == d + 1]
        by_depth.append((ends, node[ends]))
    return EncodedVocab(tuple(parents), tuple(chs), tuple(by_depth), valid, chars, char_bits(chars))


def _stepper(dfa: CharDFA):
    """Flat transition table [(Q+1) * C] with a dead sink Q, its entries premultiplied by C:
    from ``q * C`` reading class c leads to ``flat[q * C + c] = q' * C``."""
    q, c = dfa.table.shape
    full = np.full((q + 1, c), q, dtype=np.intp)  # intp: numpy indexes without a cast
    full[:q] = np.where(dfa.table >= 0, dfa.table, q)
    return (full * c).reshape(-1), c


def _run(starts: np.ndarray, enc: EncodedVocab, lut: np.ndarray, flat, dead: int, probe=None):
    """End states (premultiplied, see :func:`_stepper`) of every token read from each of
    ``starts`` [f], depth by depth over the trie. Returns (token ids [n], end states [f, n]);
    tokens dead from every start are left out. With ``probe`` ([V] bool), stop at the first
    depth where a token with ``probe`` true is readable, and return only whether there is one."""
    state = starts[:, None].astype(flat.dtype)  # [f, nodes alive at this depth]
    single = len(starts) == 1
    pos = None  # node index -> column of `state` at this depth (-1: cut); None: all alive
    ids, ends = [], []
    for d, (tokens, nodes) in enumerate(enc.by_depth):
        if d > 0:
            parent, char = enc.parent[d - 1], enc.char[d - 1]
            if pos is not None:  # cut the subtrees of dead nodes
                p = pos[parent]
                sel = np.flatnonzero(p >= 0)
                parent, char = p[sel], char[sel]
            step = flat[np.take(state, parent, axis=1) + lut[char]]  # np.take: 3x faster than [:, idx]
            # the dead sink has the largest index: a node is alive iff some row is below it
            keep = step[0] < dead if single else step.min(axis=0) < dead
            alive = np.flatnonzero(keep)
            if len(alive) < len(keep) or pos is not None:
                if not len(alive):
                    break
                if len(alive) < len(keep):
                    step = np.take(step, alive, axis=1)
                nodes_alive = alive if pos is None else sel[alive]
                pos = np.full(len(enc.parent[d - 1]), -1, dtype=np.int64)
                pos[nodes_alive] = np.arange(len(alive))
            state = step
        if len(tokens):
            if probe is not None:
                hit = tokens if pos is None else tokens[pos[nodes] >= 0]
                if probe[hit].any():
                    return True
            elif pos is None:
                ids.append(tokens)
                ends.append(np.take(state, nodes, axis=1))
            else:
                p = pos[nodes]
                hit = p >= 0
                ids.append(tokens[hit])
                ends.append(np.take(state, p[hit], axis=1))
    if probe is not None:
        return False
    if not ids:
        return np.zeros(0, dtype=np.int64), np.zeros((len(starts), 0), dtype=flat.dtype)
    return np.concatenate(ids), np.concatenate(ends, axis=1)


def lift(dfa: CharDFA, enc: EncodedVocab, separator: str, eos_id: int | None, max_states: int):
    """Token-level automaton, or None if nothing is accepted.

    All token-level candidates are stepped in one pass: row 0 is "nothing emitted yet" (the DFA
    start), row 1 + q is "DFA state q after at least one token" (the separator comes first).
    Reachability from row 0 and co-reachability to acceptance then select the states. Before
    that pass, a probe walks the trie from row 0 alone until a first token is readable: if none
    is (and the empty text does not match), nothing is accepted and the lift stops there.

    Returns (table [S, U] int32, accepting [S], min_tokens [S], live, tokens [W], which [W])
    where ``live`` counts the reachable and co-reachable states before merging:
    ``next_state[:, tokens] = table[:, which]`` and every other token is dead everywhere.
    Unreachable and non-co-reachable states are removed and equivalent states merged."""
    flat, width = _stepper(dfa)
    num_char = dfa.table.shape[0]
    if (num_char + 1) * enc.size > MAX_TABLE_ENTRIES:
        raise ConstraintError(
            f"constraint too large: {num_char + 1} candidate states x {enc.size} tokens exceed "
            f"{MAX_TABLE_ENTRIES} table entries"
        )
    lut = dfa.class_of(list(enc.chars), enc.bits).astype(flat.dtype)
    sep_classes = dfa.class_of(list(separator), char_bits(separator))
    if not _spellable_by_characters(dfa, np.concatenate([lut, sep_classes])):
        return None
    usable = enc.valid.copy()
    if eos_id is not None:
        usable[eos_id] = False
    dead = num_char * width
    start = np.array([dfa.initial * width], dtype=flat.dtype)
    if not dfa.accepting[dfa.initial] and not _run(start, enc, lut, flat, dead, probe=usable):
        return None  # no token can be read first
    after_sep = np.arange(num_char + 1, dtype=flat.dtype) * width
    for k in sep_classes.tolist():
        after_sep = flat[after_sep + k]
    starts = np.concatenate([start, after_sep[:num_char]])
    # step each distinct live start once (with a separator many candidates share one, or die)
    distinct, row_of = np.unique(starts, return_inverse=True)
    live = distinct != dead
    tokens, ends = _run(distinct[live], enc, lut, flat, dead)
    keep = np.flatnonzero(usable[tokens])
    tokens, ends = tokens[keep], np.take(ends, keep, axis=1) // width  # DFA states, Q = dead
    columns, which = distinct_columns(ends)  # tokens acting alike on every state share a column
    # expand to all candidates: candidate r is distinct start row_of[r], or dead
    columns = np.concatenate([columns, np.full((1, columns.shape[1]), num_char, dtype=columns.dtype)])
    columns = columns[np.where(live, np.cumsum(live) - 1, len(columns) - 1)[row_of]]
    table = np.where(columns == num_char, -1, columns + 1).astype(np.int32)  # [Q + 1, U]
    accepting = np.concatenate([[dfa.accepting[dfa.initial]], dfa.accepting])
    out = _prune(table, accepting, max_states)
    return None if out is None else (*out, tokens, which)


def _spellable_by_characters(dfa: CharDFA, classes: np.ndarray) -> bool:
    """Whether the DFA accepts some text using only characters the vocabulary has (a cheap
    necessary condition, checked before lifting)."""
    available = np.zeros(dfa.table.shape[1], dtype=bool)
    available[classes] = True
    src, cls = np.nonzero((dfa.table >= 0) & available[None, :])
    dist = reverse_distances(src, dfa.table[src, cls], dfa.accepting, len(dfa.accepting))
    return bool(dist[dfa.initial] >= 0)


def _distinct_edges(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (src, dst) pairs of a [S, W] table (dead -1 excluded)."""
    s = table.shape[0]
    keys = (np.arange(s, dtype=np.int64)[:, None] * s + table)[table >= 0]
    if s * s <= 50_000_000:
        seen = np.zeros(s * s, dtype=bool)
        seen[keys] = True
        pairs = np.flatnonzero(seen)
    else:
        pairs = np.unique(keys)
    return pairs // s, pairs % s


def _prune(next_state: np.ndarray, accepting: np.ndarray, max_states: int):
    """Keep states reachable from 0 that can reach acceptance, merge equivalent ones."""
    src, dst = _distinct_edges(next_state)
    start = np.zeros(len(accepting), dtype=bool)
    start[0] = True
    reach = reverse_distances(dst, src, start, len(accepting)) >= 0  # forward from state 0
    dist = reverse_distances(src, dst, accepting, len(accepting))
    keep = reach & (dist >= 0)
    if not keep[0]:
        return None
    if keep.sum() > max_states:
        raise ConstraintError(
            f"constraint too large: {int(keep.sum())} token-level states > max_states={max_states}"
        )
    remap = np.append(np.where(keep, np.cumsum(keep) - 1, -1), -1).astype(np.int32)
    table = remap[next_state[keep]]  # dead (-1) picks the appended -1
    table, acc, reps = minimize(table, accepting[keep], 0, hint=dist[keep])
    return table, acc, dist[keep][reps], int(keep.sum())
