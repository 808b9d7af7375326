"""Min-plus (tropical) algebra over fewest-byte counts: the arithmetic of a grammar intersected
with a pattern's DFA (:mod:`~decodekit.constraints.grammar.intersect`).

A matrix ``M`` [Q, Q] holds, for DFA states q, q', the fewest bytes of some text (of a symbol, a
terminal, ...) that takes the DFA from q to q' (:data:`INF`: none). Products compose texts:
``(A ⊗ B)[q, q'] = min_m A[q, m] + B[m, q']``; :data:`INF` absorbs (sums are clipped to it).
"""

from __future__ import annotations

import numpy as np

INF = 1 << 40  # no text; the sum of two stays far below int64's range, and is clipped back to INF
_CHUNK = 1 << 22  # elements of the [rows, Q, Q] broadcast of one product chunk (32 MiB of int64)


def identity(n: int) -> np.ndarray:
    """[n, n]: the empty text, 0 bytes from every state to itself."""
    out = np.full((n, n), INF, dtype=np.int64)
    np.fill_diagonal(out, 0)
    return out


def mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a ⊗ b`` for [Q, Q] matrices (row chunks keep the broadcast under :data:`_CHUNK`)."""
    n = a.shape[0]
    out = np.empty((n, b.shape[1]), dtype=np.int64)
    rows = max(1, _CHUNK // max(1, a.shape[1] * b.shape[1]))
    for lo in range(0, n, rows):
        out[lo : lo + rows] = (a[lo : lo + rows, :, None] + b[None, :, :]).min(axis=1)
    return np.minimum(out, INF)


def mv(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a ⊗ v`` for a [Q, Q] matrix and a [Q] vector: ``min_m a[q, m] + v[m]``."""
    return np.minimum((a + v[None, :]).min(axis=1), INF)


def star(a: np.ndarray) -> np.ndarray:
    """``a*``: the fewest bytes of any number (0 included) of texts of ``a`` in a row, by
    squaring ``min(1, a)`` until it is still (at most log2(Q) + 1 products)."""
    out = np.minimum(identity(a.shape[0]), a)
    while True:
        nxt = mm(out, out)
        if np.array_equal(nxt, out):
            return out
        out = nxt
