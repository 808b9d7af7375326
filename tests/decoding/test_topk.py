"""The grouped top-K behind Anderson's search equals its dense reference (the definition)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decodekit.decoding.topk import GroupedTopK, dense_grouped_topk

NEG_INF = float("-inf")


@st.composite
def tables(draw):
    """A random group table [Q, V] (big groups, small groups, columns in no group), scores with
    -inf entries and ties, row offsets (-inf: an empty row) and closed groups."""
    kinds, groups, vocab = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 20))
    rows, batch = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    k = min(draw(st.integers(1, 4)), kinds * rows * vocab)
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    skew = draw(st.sampled_from([0.0, 0.5, 0.9]))  # share of columns sent to group 0 (a big group)
    group = torch.randint(-1, groups, (kinds, vocab), generator=g)
    group = torch.where(torch.rand(kinds, vocab, generator=g) < skew, 0, group)
    values = torch.randint(-3, 1, (batch, kinds, rows, vocab), generator=g).float()  # many ties
    values = values.masked_fill(
        torch.rand(values.shape, generator=g) < draw(st.sampled_from([0, 0.3, 0.8])), NEG_INF
    )
    offset = torch.randint(-2, 1, (batch, kinds, rows, 1), generator=g).float()
    offset = offset.masked_fill(torch.rand(offset.shape, generator=g) < 0.2, NEG_INF)
    closed = torch.rand(groups, generator=g) < draw(st.sampled_from([0.0, 0.3]))
    return group, groups, rows, k, values, offset, closed


@settings(max_examples=300, deadline=None)
@given(tables())
def test_grouped_topk_equals_the_dense_reference(table):
    group, groups, rows, k, values, offset, closed = table
    fast = GroupedTopK(group, groups, rows, k)
    for scan in {fast.scan, 0}:  # one top-k per row, and the masked top-k per big group
        fast.scan = scan
        check(fast(values, offset, closed), group, groups, rows, k, values, offset, closed)


def check(result, group, groups, rows, k, values, offset, closed):
    top, row, col, alive = result
    open_group = torch.where((group >= 0) & ~closed[group.clamp(min=0)], group, -1)
    full = values + offset
    want, _, _ = dense_grouped_topk(full, open_group, groups, k)
    assert torch.equal(top, want)  # the same values, best first, -inf where a group has fewer
    kinds = values.shape[1]
    for b in range(values.shape[0]):
        for q2 in range(groups):
            seen = set()
            for v, r, c in zip(top[b, q2].tolist(), row[b, q2].tolist(), col[b, q2].tolist()):
                if v == NEG_INF:
                    continue
                q, m = divmod(r, rows)
                assert 0 <= q < kinds and open_group[q, c] == q2 and full[b, q, m, c] == v
                assert (r, c) not in seen
                seen.add((r, c))
    assert torch.equal(alive, ((full > NEG_INF) & (open_group >= 0)[:, None]).any(-1))
