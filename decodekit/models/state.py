"""Generic operations over decoding states: the only row-reordering code in decodekit.

A state is a tensor or a nested tuple / list / dict / NamedTuple of tensors whose first
axis is the batch (``N`` rows). Beam search duplicates and permutes rows with
:func:`select`; a model whose state is laid out otherwise defines ``reorder_state``.
Non-tensor leaves (ints, strings, None) are shared by all rows and passed through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from decodekit.models.base import State


def map_state(state: State, fn: Callable[[torch.Tensor], torch.Tensor]) -> State:
    """Apply ``fn`` to every tensor leaf, keeping the structure."""
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, dict):
        return {k: map_state(v, fn) for k, v in state.items()}
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # NamedTuple
        return type(state)(*(map_state(v, fn) for v in state))
    if isinstance(state, (tuple, list)):
        return type(state)(map_state(v, fn) for v in state)
    return state


def select(state: State, rows: torch.Tensor, model: object | None = None) -> State:
    """Rows ``rows`` [N'] (long, may repeat) of every tensor: ``state[rows]`` along axis 0.

    Defers to ``model.reorder_state(state, rows)`` when the model defines it."""
    reorder = getattr(model, "reorder_state", None)
    if reorder is not None:
        return reorder(state, rows)
    return map_state(state, lambda t: t.index_select(0, rows))


def detach(state: State) -> State:
    """Cut the autograd graph (truncated BPTT between chunks)."""
    return map_state(state, torch.Tensor.detach)


def concat(states: Sequence[State], model: object | None = None) -> State:
    """Join states row-wise (axis 0), in order. Defers to ``model.concat_states``."""
    if len(states) == 1:
        return states[0]
    join = getattr(model, "concat_states", None)
    if join is not None:
        return join(list(states))
    first = states[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(list(states), 0)
    if isinstance(first, dict):
        return {k: concat([s[k] for s in states]) for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(concat([s[i] for s in states]) for i in range(len(first))))
    if isinstance(first, (tuple, list)):
        return type(first)(concat([s[i] for s in states]) for i in range(len(first)))
    return first


def batch_size(state: State) -> int | None:
    """The number of rows of the first tensor leaf, or None if there is none."""
    if isinstance(state, torch.Tensor):
        return state.shape[0]
    values = state.values() if isinstance(state, dict) else state if isinstance(state, (tuple, list)) else ()
    for v in values:
        n = batch_size(v)
        if n is not None:
            return n
    return None
