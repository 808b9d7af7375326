"""Lift a character DFA to a token-level automaton for one vocabulary, vectorised over tokens.

Tokens become rows of character-class ids (a padded [V, L] matrix; identical rows are merged
into U unique rows). A breadth-first search over token-level states steps *all* frontier states
through *all* unique rows at once: ``cur[f, u] = T[cur[f, u], cls[u, j]]`` for j = 0 .. L-1,
with a padding class that maps every state to itself and a dead sink.

Separator: the text is ``sep.join(surfaces)``. Token-level state 0 is "nothing emitted yet"
(the DFA's start, no separator before the first token); every other token-level state is a
DFA state q reached after at least one token, and a token read from it first steps through the
separator's characters. With ``sep == ""`` both coincide and state 0 is simply the DFA start.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from decodekit.constraints.chardfa import CharDFA, char_bits
from decodekit.constraints.graph import minimize, reverse_distances
from decodekit.errors import ConstraintError

MAX_TABLE_ENTRIES = 2**28  # next_state [S, V] int64: at most 2 GiB


@dataclass(frozen=True)
class EncodedVocab:
    """Token surfaces as code points, prepared once per vocabulary.

    Attributes:
        inv: [V, L] int32 index into ``chars`` of each character (padding: 0, masked by ``lengths``).
        lengths: [V] int64 surface lengths. valid: [V] bool (surface is not None).
        chars: the distinct characters; bits: [K] their predicate bits (``chardfa.char_bits``).
    """

    fingerprint: str
    inv: np.ndarray
    lengths: np.ndarray
    valid: np.ndarray
    chars: tuple[str, ...]
    bits: np.ndarray


def fingerprint(token_strings, separator: str) -> str:
    """sha256 over the separator and the token strings (None marked apart from any string)."""
    h = hashlib.sha256(separator.encode("utf-8", "surrogatepass") + b"\1")
    h.update(
        b"\0".join(b"\1" if t is None else b"\2" + t.encode("utf-8", "surrogatepass") for t in token_strings)
    )
    return h.hexdigest()


def encode_vocab(token_strings, fp: str) -> EncodedVocab:
    """Code-point matrix of the surfaces; one vectorised numpy conversion."""
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
    chars = tuple(chr(c) for c in uniq.tolist())
    return EncodedVocab(
        fp, inv.reshape(codes.shape).astype(np.int32), lengths, valid, chars, char_bits(chars)
    )


def _class_rows(dfa: CharDFA, enc: EncodedVocab, eos_id: int | None):
    """Unique class rows. Returns (rows [U, L] sorted by decreasing length, inverse [V] -> row,
    active [L] number of rows longer than j)."""
    num_classes = dfa.table.shape[1]
    pad, kill = num_classes, num_classes + 1
    cls = dfa.class_of(list(enc.chars), enc.bits)[enc.inv]
    width = cls.shape[1]
    cls[np.arange(width)[None, :] >= enc.lengths[:, None]] = pad
    dead = ~enc.valid
    if eos_id is not None:
        dead = dead.copy()
        dead[eos_id] = True
    cls[dead, 0] = kill
    dtype = np.int16 if kill < 2**15 else np.int32
    cls = np.ascontiguousarray(cls.astype(dtype))
    rows, inverse = np.unique(cls.view(np.dtype((np.void, width * cls.itemsize))), return_inverse=True)
    rows = rows.view(dtype).reshape(len(rows), width)
    length = (rows != pad).sum(axis=1)
    order = np.argsort(-length, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    active = (length[order][None, :] > np.arange(width)[:, None]).sum(axis=1)
    return rows[order], rank[inverse.reshape(-1)], active


def _stepper(dfa: CharDFA):
    """Flat transition table [(Q+1) * (C+2)] with dead sink Q, padding (identity) and kill classes."""
    q, c = dfa.table.shape
    full = np.full((q + 1, c + 2), q, dtype=np.int64)
    full[:q, :c] = np.where(dfa.table >= 0, dfa.table, q)
    full[:, c] = np.arange(q + 1)
    return full.reshape(-1), c + 2


def lift(dfa: CharDFA, enc: EncodedVocab, separator: str, eos_id: int | None, max_states: int):
    """Token-level automaton. Returns (next_state [S, V] int64, accepting [S], min_tokens [S])
    with unreachable and non-co-reachable states removed and equivalent states merged."""
    rows, inverse, active = _class_rows(dfa, enc, eos_id)
    flat, width = _stepper(dfa)
    num_char = dfa.table.shape[0]
    sep_cls = dfa.class_of(list(separator), char_bits(separator))
    after_sep = np.arange(num_char + 1)
    for k in sep_cls.tolist():
        after_sep = flat[after_sep * width + k]
    token_of = np.full(num_char + 1, -1, dtype=np.int64)  # char state -> token state (started)
    if separator == "":
        token_of[dfa.initial] = 0
    char_of = [dfa.initial]  # token state -> char state
    frontier = np.array([dfa.initial])
    starts = frontier.copy()
    blocks = []
    while len(frontier):
        cur = np.repeat(starts[:, None], len(rows), axis=1)
        for j, n in enumerate(active.tolist()):
            if n == 0:
                break
            cur[:, :n] = flat[cur[:, :n] * width + rows[:n, j]]
        blocks.append(cur)
        found = np.unique(cur)
        found = found[(found < num_char) & (token_of[found] < 0)]
        token_of[found] = len(char_of) + np.arange(len(found))
        char_of.extend(found.tolist())
        if len(char_of) > max_states or len(char_of) * len(inverse) > MAX_TABLE_ENTRIES:
            raise ConstraintError(
                f"constraint too large: more than {min(max_states, MAX_TABLE_ENTRIES // len(inverse))} "
                f"token-level states with this vocabulary ({len(inverse)} tokens; max_states={max_states})"
            )
        frontier, starts = found, after_sep[found]
    next_u = token_of[np.concatenate(blocks)]  # [S, U]
    accepting = dfa.accepting[np.array(char_of)]
    return _prune(next_u, accepting, inverse)


def _distinct_edges(next_u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (src, dst) pairs of a [S, U] table (dead -1 excluded)."""
    s = next_u.shape[0]
    src = np.repeat(np.arange(s), next_u.shape[1])
    dst = next_u.reshape(-1)
    ok = dst >= 0
    if s * (s + 1) <= 50_000_000:
        seen = np.zeros(s * s, dtype=bool)
        seen[src[ok] * s + dst[ok]] = True
        pairs = np.flatnonzero(seen)
    else:
        pairs = np.unique(src[ok] * s + dst[ok])
    return pairs // s, pairs % s


def _prune(next_u: np.ndarray, accepting: np.ndarray, inverse: np.ndarray):
    src, dst = _distinct_edges(next_u)
    dist = reverse_distances(src, dst, accepting, len(accepting))
    keep = dist >= 0
    if not keep[0]:
        return None
    remap = np.where(keep, np.cumsum(keep) - 1, -1)
    table = np.where(next_u >= 0, remap[np.maximum(next_u, 0)], -1)[keep]
    table, acc, reps = minimize(table, accepting[keep], 0)
    return table[:, inverse], acc, dist[keep][reps]
