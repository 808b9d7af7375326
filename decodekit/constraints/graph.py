"""Small vectorised graph routines on transition tables (-1 = dead)."""

from __future__ import annotations

import numpy as np


def reverse_distances(src: np.ndarray, dst: np.ndarray, targets: np.ndarray, num_states: int) -> np.ndarray:
    """Shortest number of edges from each state to a target state (-1 if none).

    Args:
        src, dst: [E] edges ``src -> dst`` (duplicates allowed).
        targets: [S] bool, the states at distance 0.
    Returns: [S] int64 distances. Breadth-first over the reversed edges, one vectorised step
    per level."""
    dist = np.full(num_states, -1, dtype=np.int64)
    dist[targets] = 0
    frontier = targets.copy()
    level = 0
    while frontier.any():
        level += 1
        hit = np.zeros(num_states, dtype=bool)
        hit[src[frontier[dst]]] = True
        hit &= dist < 0
        dist[hit] = level
        frontier = hit
    return dist


def minimize(
    table: np.ndarray, accepting: np.ndarray, initial: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge equivalent states (Moore's partition refinement, vectorised per round).

    Args:
        table: [S, X] next state per symbol, -1 = dead (all states assumed live).
        accepting: [S] bool.
    Returns: (table [S', X], accepting [S'], representatives [S'] (an original state per new
    state)); the initial state becomes state 0, the others keep the order of their first member."""
    block = accepting.astype(np.int64)
    count = len(np.unique(block))
    while True:
        key = np.column_stack([block, np.where(table >= 0, block[np.maximum(table, 0)], -1)])
        _, block = np.unique(key, axis=0, return_inverse=True)
        block = block.reshape(-1)
        new_count = int(block.max()) + 1 if len(block) else 0
        if new_count == count:
            break
        count = new_count
    # number blocks: the initial state's first, then by first member
    firsts = np.full(count, len(block), dtype=np.int64)
    np.minimum.at(firsts, block, np.arange(len(block)))
    firsts[block[initial]] = -1
    order = np.argsort(firsts, kind="stable")
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count)
    block = rank[block]
    rep_of = np.empty(count, dtype=np.int64)
    rep_of[rank] = np.where(firsts < 0, initial, firsts)
    sub = table[rep_of]
    new_table = np.where(sub >= 0, block[np.maximum(sub, 0)], -1)
    return new_table, accepting[rep_of], rep_of
