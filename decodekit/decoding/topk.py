"""Grouped top-K: for every group, the K best entries of a score table, exactly.

Anderson's search scores every (hypothesis, token) pair and must keep, for each automaton state
q', the K best pairs whose transition leads to q'. In general terms: ``values [B, Q, M, V]``
holds B independent tables of Q kinds of rows, M rows of each kind, V columns; ``group [Q, V]``
says which group (-1: none) entry (q, ·, v) belongs to. :func:`dense_grouped_topk` is the
definition; :class:`GroupedTopK` computes the same without the [B, G, Q·M·V] tensor.

How: a row's entries in one group of at most K columns are all kept (one gather over the
"sparse" columns); from a larger group only the row's own K best can survive, found by a
masked top-K per such group (J of them per kind, usually one). The resulting Q·M·(J·K + P)
candidates are grouped by a static gather and cut to K.
"""

from __future__ import annotations

import numpy as np
import torch

NEG_INF = float("-inf")


def dense_grouped_topk(values: torch.Tensor, group: torch.Tensor, num_groups: int, k: int):
    """The reference: ``values [B, Q, M, V]``, ``group [Q, V]`` -> (values, rows, columns), each
    [B, G, k]: the k best entries of each group, best first, from rows ``q * M + m``; -inf values
    (arbitrary rows and columns) where a group has fewer finite entries."""
    b, q, m, v = values.shape
    member = group[None, :, None, :] == torch.arange(num_groups, device=values.device).view(-1, 1, 1, 1)
    scores = values[:, None].masked_fill(~member, NEG_INF).flatten(2)  # [B, G, Q*M*V]
    top, pos = scores.topk(k, dim=-1)
    return top, pos // v, pos % v


class GroupedTopK:
    """:func:`dense_grouped_topk` for a fixed ``group [Q, V]``, ``M`` rows per kind and ``k``;
    the layout (see the module docstring) is computed once, on the host."""

    def __init__(self, group: torch.Tensor, num_groups: int, rows_per_kind: int, k: int) -> None:
        g, device = group.cpu().numpy(), group.device
        kinds, vocab = g.shape
        live, src, safe = g >= 0, np.arange(kinds)[:, None].repeat(vocab, 1), np.maximum(g, 0)
        counts = np.zeros((kinds, num_groups), dtype=np.int64)
        np.add.at(counts, (src[live], g[live]), 1)
        big = counts > k  # [Q, G] groups cut to each row's k best by a masked top-k
        rank = np.cumsum(big, axis=1) - 1  # j of each big group within its kind
        self.num_big = int(big.sum(1).max(initial=0))  # J
        big_slot = np.where(live & big[src, safe], rank[src, safe], -1)  # [Q, V]
        big_group = np.full((kinds, self.num_big), -1)
        big_group[np.nonzero(big)[0], rank[big]] = np.nonzero(big)[1]
        sparse = live & (big_slot < 0)
        order = np.argsort(~sparse, axis=1, kind="stable")[:, : int(sparse.sum(1).max(initial=0))]
        pad = ~np.take_along_axis(sparse, order, 1)
        sparse_cols = np.where(pad, 0, order)  # [Q, P]
        # Candidates of each row: J groups x k columns, then the P sparse columns.
        per_row = np.concatenate(
            [np.repeat(big_group, k, 1), np.where(pad, -1, g[src[:, :1], sparse_cols])], 1
        )
        cand_group = np.repeat(per_row[:, None], rows_per_kind, 1).reshape(-1)  # [Q*M*C]
        by_group = np.argsort(np.where(cand_group < 0, num_groups, cand_group), kind="stable")
        sizes = np.bincount(cand_group[cand_group >= 0], minlength=num_groups)
        starts = np.concatenate([[0], np.cumsum(sizes)])[:-1]
        width = max(int(sizes.max(initial=0)), k)
        index = np.full((num_groups, width), len(cand_group))  # padding: one -inf candidate
        member = by_group[: sizes.sum()]  # candidates in some group, sorted by group
        index[cand_group[member], np.arange(len(member)) - starts[cand_group[member]]] = member

        def tensor(a, dtype=torch.long):
            return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=device)

        self.k, self.per_row = k, max(per_row.shape[1], 1)
        self.big_slot, self.sparse_cols, self.sparse_pad = (
            tensor(big_slot),
            tensor(sparse_cols),
            tensor(pad, bool),
        )
        self.index = tensor(index)  # [G, W] candidate positions of each group

    def __call__(self, values: torch.Tensor):
        """``values [B, Q, M, V]`` -> (values, rows, columns), each [B, G, k], as the reference."""
        b, vocab = values.shape[0], values.shape[-1]
        parts = []  # (values, columns), each [B, Q, M, ·]
        for j in range(self.num_big):
            masked = values.masked_fill((self.big_slot != j)[None, :, None, :], NEG_INF)
            parts.append(masked.topk(min(self.k, vocab), dim=-1))
        if self.sparse_cols.shape[1]:
            cols = self.sparse_cols[None, :, None, :].expand(*values.shape[:3], -1)
            parts.append((values.gather(-1, cols).masked_fill(self.sparse_pad[:, None], NEG_INF), cols))
        if not parts:
            cand = values.new_empty(b, 0)
            cols = torch.zeros(b, 0, dtype=torch.long, device=values.device)
        else:
            cand, cols = (torch.cat(x, -1).flatten(1) for x in zip(*parts))  # [B, Q*M*C]
        padded = torch.cat([cand, cand.new_full((b, 1), NEG_INF)], 1)
        top, pos = padded[:, self.index].topk(self.k, dim=-1)  # [B, G, k]
        pos = self.index[torch.arange(self.index.shape[0], device=pos.device)[:, None], pos]
        pos = pos.clamp(max=max(cand.shape[1] - 1, 0))  # padding (value -inf) -> any candidate
        columns = cols.gather(1, pos.flatten(1)).view_as(pos) if cols.shape[1] else torch.zeros_like(pos)
        return top, pos // self.per_row, columns
