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
        order = np.argsort(~sparse, axis=1, kind="stable")[:, : max(int(sparse.sum(1).max(initial=0)), 1)]
        pad = ~np.take_along_axis(sparse, order, 1)
        # Candidates of each row: J groups x k columns, then P sparse columns (-1: padding).
        cand_group = np.concatenate([np.repeat(big_group, k, 1), np.where(pad, -1, g[src[:, :1], order])], 1)
        flat = np.repeat(cand_group[:, None], rows_per_kind, 1).reshape(-1)  # [Q*M*C]
        sizes = np.bincount(flat[flat >= 0], minlength=num_groups)
        member = np.argsort(np.where(flat < 0, num_groups, flat), kind="stable")[: sizes.sum()]
        index = np.full((num_groups, max(int(sizes.max(initial=0)), k)), len(flat))  # padding: -inf
        index[flat[member], np.arange(len(member)) - (np.cumsum(sizes) - sizes)[flat[member]]] = member
        # With one big group per kind and few columns outside it, the row's k + (columns outside)
        # best hold the group's k best: one top-k of the row replaces a masked pass over [.., V].
        outside = int((vocab - (big_slot == 0).sum(1))[big.any(1)].max(initial=0))
        self.scan = min(vocab, k + outside) if self.num_big == 1 and outside <= max(64, 4 * k) else 0

        def tensor(a, dtype=torch.long):
            return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=device)

        self.k, self.per_row, self.big_slot = k, cand_group.shape[1], tensor(big_slot)
        self.sparse_cols, self.sparse_pad = tensor(np.where(pad, 0, order)), tensor(pad, bool)  # [Q, P]
        self.cand_group = tensor(np.where(cand_group < 0, num_groups, cand_group))  # [Q, C]
        self.index = tensor(index)  # [G, W] candidate positions of each group

    def __call__(self, values: torch.Tensor, offset: torch.Tensor, closed: torch.Tensor):
        """Like the reference on ``values [B, Q, M, V] + offset [B, Q, M, 1]`` with the groups
        where ``closed [G]`` is True left empty. Returns (values, rows, columns), each [B, G, k],
        and ``alive [B, Q, M]``: whether the row has a finite entry in an open group."""
        kinds = torch.arange(values.shape[1], device=values.device)[:, None, None]
        parts = []  # (values, columns), each [B, Q, M, .]
        if self.scan:
            val, col = values.topk(self.scan, dim=-1)
            inside = self.big_slot[kinds, col] == 0
            first = torch.sort((~inside).to(torch.uint8), dim=-1, stable=True).indices[..., : self.k]
            parts.append(
                (val.gather(-1, first).masked_fill(~inside.gather(-1, first), NEG_INF), col.gather(-1, first))
            )
        else:
            for j in range(self.num_big):
                parts.append(values.masked_fill((self.big_slot != j)[:, None], NEG_INF).topk(self.k, dim=-1))
        cols = self.sparse_cols[:, None].expand(*values.shape[:3], -1)
        parts.append((values.gather(-1, cols).masked_fill(self.sparse_pad[:, None], NEG_INF), cols))
        cand, cols = (torch.cat(x, -1) for x in zip(*parts))  # [B, Q, M, C]
        shut = torch.cat([closed, closed.new_ones(1)])[self.cand_group]  # [Q, C]
        cand = (cand + offset).masked_fill(shut[:, None], NEG_INF)
        flat = torch.cat([cand.flatten(1), cand.new_full((cand.shape[0], 1), NEG_INF)], 1)
        top, pos = flat[:, self.index].topk(self.k, dim=-1)  # [B, G, k]
        groups = torch.arange(self.index.shape[0], device=pos.device)[:, None]
        pos = self.index[groups, pos].clamp(max=cand[0].numel() - 1)  # padding (-inf): any candidate
        columns = cols.flatten(1).gather(1, pos.flatten(1)).view_as(pos)
        return top, pos // self.per_row, columns, (cand > NEG_INF).any(-1)
