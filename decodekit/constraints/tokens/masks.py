"""The mask caching of a dense token automaton (:class:`~.automaton.TokenAutomaton`): what
``allowed`` and ``mask`` compute from its tables, and how each state's answer is kept.

The definition. Token t (not EOS) may follow state s with ``remaining`` tokens left iff
``next_state[s, t] >= 0`` and ``min_tokens_to_accept[next_state[s, t]] <= remaining - 1``; EOS iff
``accepting[s]`` (:func:`reference_allowed` computes it directly: two O(V) gathers per row).

The scheme. The first condition (and EOS) depends on s alone: the first time a state is asked
about, its *static* row (bool [V]), a 0 / -inf float row of it (per logprobs dtype, so that
masking is one add), and ``max_need[s]``, the largest ``min_tokens_to_accept`` over its static
transitions, are computed and kept (:class:`_Tables`). A row with ``remaining - 1 >= max_need[s]``
is its static row, so the length check (two O(V) gathers) runs only for rows within ``max_need``
tokens of the length limit; with an int ``remaining`` at least ``max(max_need) + 1`` not even the
per-row test runs. Where the host decides (the CPU:
:func:`~.interface.decides_on_host`), rows are filled per visited state and only the rows that
need the length check get it, and a row allowing (or forbidding) at most V / :data:`SPARSE`
tokens is applied by touching those entries only; on another device every state is filled at
first use and each step computes the check for all rows when any may need it (``torch.where``
style, never waiting for the host). The tables are dense ``[S + 1, V]`` (row S: the dead state)
when ``(S + 1) * V <= TABLE_BUDGET`` (bool + float32: 5 bytes an entry against ``next_state``'s
8); beyond it, on the CPU, rows for the first states visited (up to the budget), then the
definition; elsewhere every call computes the definition.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from decodekit.constraints.tokens.interface import (
    Bitmasks,
    StateTables,
    TokenConstraint,
    decides_on_host,
    provides,
)
from decodekit.errors import ConstraintError

NEG_INF = float("-inf")
TABLE_BUDGET = 1 << 25  # (S + 1) * V entries of the cached mask tables
SPARSE = 16  # mask in O(allowed) (or O(forbidden)) when at most V / SPARSE of them
_CHUNK = 1 << 22  # entries of next_state gathered at once while filling tables


def allowed(a: StateTables, cache: MaskCache, states: torch.Tensor, remaining) -> torch.Tensor:
    """:meth:`~.automaton.TokenAutomaton.allowed` through ``cache``: [N] states -> [N, V] bool."""
    states = states.to(a.next_state.device).long()
    tables = cache.tables(a)
    if tables is None:
        return reference_allowed(a, states, remaining)
    rows = tables.rows(a, states)  # [N]
    if rows is None:  # more states visited than the slot tables hold
        return reference_allowed(a, states, remaining)
    ok = tables.allowed.index_select(0, tables.index(rows))  # [N, V]
    tight = tables.tight(rows, remaining)
    if tight is not None:
        ok = _length_checked(a, ok, states, remaining, tight, tables.lazy)
    return ok


def mask(a: StateTables, cache: MaskCache, logprobs: torch.Tensor, states, remaining, inplace: bool):
    """:meth:`~.automaton.TokenAutomaton.mask` through ``cache``: one add of a cached 0 / -inf
    row per state when no row needs the length check."""
    states = states.to(a.next_state.device).long()
    tables = cache.tables(a)
    if tables is None:
        ok = reference_allowed(a, states, remaining)
    else:
        rows = tables.rows(a, states)
        if rows is not None and tables.tight(rows, remaining) is None:
            return tables.apply(logprobs, rows, inplace)
        ok = allowed(a, cache, states, remaining)
    return logprobs.masked_fill_(~ok, NEG_INF) if inplace else logprobs.masked_fill(~ok, NEG_INF)


def fill_bitmask_tables(
    a: StateTables, cache: MaskCache, bitmask: torch.Tensor, states: torch.Tensor, remaining
) -> torch.Tensor:
    """:meth:`~.automaton.TokenAutomaton.fill_bitmask` through ``cache``: on the CPU, where no row
    needs the length check, one copy of each state's cached packed row; else ``allowed`` packed."""
    states = states.to(a.next_state.device).long()
    tables = cache.tables(a)
    rows = tables.rows(a, states) if tables is not None and tables.lazy and bitmask.is_cpu else None
    if rows is None or tables.tight(rows, remaining) is not None:
        ok = allowed(a, cache, states, remaining)
        check_bitmask(bitmask, ok.shape[0], a.vocab_size)
        bitmask.copy_(torch.from_numpy(pack_bits(ok.cpu().numpy())))
        return bitmask
    check_bitmask(bitmask, len(rows), a.vocab_size)
    out = bitmask.numpy()
    for i, r in enumerate(rows):
        bits = tables.bits.get(r)
        if bits is None:
            bits = tables.bits[r] = pack_bits(tables.allowed[r].numpy())
        out[i] = bits
    return bitmask


def reference_allowed(a: StateTables, states: torch.Tensor, remaining) -> torch.Tensor:
    """``allowed`` by its definition: two O(V) gathers per row."""
    live, s = states >= 0, states.clamp(min=0)
    nxt = a.next_state[s]  # [N, V]
    ok = nxt >= 0
    if remaining is not None:
        rem = torch.as_tensor(remaining, device=a.next_state.device).long().reshape(-1, 1)
        ok &= a.min_tokens_to_accept[nxt.clamp(min=0)] <= rem - 1
    if a.eos_id is not None:
        ok[:, a.eos_id] = a.accepting[s]
    return ok & live[:, None]


def _fits(a: StateTables, states: torch.Tensor, rem: torch.Tensor) -> torch.Tensor:
    """[M] states, [M] remaining -> [M, V] bool: no transition, or one that can still accept."""
    nxt = a.next_state[states.clamp(min=0)]  # [M, V]
    return (nxt < 0) | (a.min_tokens_to_accept[nxt.clamp(min=0)] <= rem[:, None] - 1)


def _length_checked(a: StateTables, ok, states, remaining, tight: torch.Tensor, host: bool) -> torch.Tensor:
    """The static rows ``ok`` [N, V] with the length check applied to the rows ``tight`` [N]
    (``host``: only to them, else to every row, without a host decision)."""
    rem = torch.as_tensor(remaining, device=a.next_state.device).long().reshape(-1).expand(states.shape[0])
    if not host:
        return ok & (_fits(a, states, rem) | ~tight[:, None])
    idx = tight.nonzero()[:, 0]
    ok[idx] &= _fits(a, states[idx], rem[idx])
    return ok


class MaskCache:
    """What an automaton caches for masking: the :class:`_Tables` (None until first used; over
    :data:`TABLE_BUDGET` on CPU, tables of the visited states only, else None) and its copies on
    other devices."""

    def __init__(self) -> None:
        self.copies: dict[torch.device, StateTables] = {}
        self._tables: _Tables | None = None
        self._over = False

    def tables(self, a: StateTables) -> _Tables | None:
        if self._tables is None and not self._over:
            self._over = (a.num_states + 1) * a.vocab_size > TABLE_BUDGET
            if not self._over:
                self._tables = _Tables(a)
            elif decides_on_host(a.next_state.device):  # rows for the states visited, up to the budget
                self._tables, self._over = _Tables(a, slots=max(2, TABLE_BUDGET // a.vocab_size)), False
        return self._tables


def _normal_tensors(method):
    """Run ``method`` outside ``torch.inference_mode``: the cached tables it allocates or fills
    must stay normal tensors, since a search fills them inside inference mode and user code (a
    logits processor, a custom loop) fills more rows later outside it, where an inference tensor
    cannot be updated in place."""

    @functools.wraps(method)
    def outside(*args, **kwargs):
        with torch.inference_mode(False):
            return method(*args, **kwargs)

    return outside


class _Tables:
    """Per-state mask rows, [S + 1, ...] (row S: the dead state, nothing allowed).

    allowed [S + 1, V] bool: the static row (``next_state >= 0``; EOS iff accepting).
    max_need [S + 1] long: the largest ``min_tokens_to_accept`` over the static non-EOS
    transitions (-1: none). biases {dtype: [S + 1, V]}: 0 where allowed, -inf elsewhere.
    built [S + 1] numpy bool: rows filled (CPU: lazily, per visited state; else all at once).
    bound: the largest ``max_need`` of a filled row (host int).
    ``slots`` (CPU, an automaton over the budget): the tables have that many rows instead,
    row 0 the dead state and the others given to states as they are first visited (``slot``);
    once they are all taken, :meth:`rows` answers None and the caller computes the definition.
    """

    @_normal_tensors
    def __init__(self, a: StateTables, lazy: bool | None = None, slots: int | None = None) -> None:
        n, v, device = a.num_states, a.vocab_size, a.next_state.device
        self.lazy = decides_on_host(device) if lazy is None else lazy
        self.slot: dict[int, int] | None = None if slots is None else {}
        self.dead = n if slots is None else 0
        size = n + 1 if slots is None else slots
        self.allowed = torch.empty(size, v, dtype=torch.bool, device=device)
        self.allowed[self.dead] = False
        self.max_need = torch.full((size,), -1, dtype=torch.long, device=device)
        self.biases: dict[torch.dtype, torch.Tensor] = {}
        self.bits: dict[int, np.ndarray] = {}  # CPU: row -> its packed row (fill_bitmask), on first need
        self.built = np.zeros(size, dtype=bool)
        self.built[self.dead], self.bound = True, -1
        # CPU: per filled row, (True, allowed ids) or (False, forbidden ids) when at most
        # V / SPARSE of them, else None; the dead row allows nothing
        self.ids: dict[int, tuple[bool, torch.Tensor] | None] = {
            self.dead: (True, torch.zeros(0, dtype=torch.long))
        }
        if not self.lazy:
            self._fill(a, torch.arange(n, device=device))

    def rows(self, a: StateTables, states: torch.Tensor) -> list[int] | torch.Tensor:
        """[N] states -> their N table rows (dead -> S), filling the rows not filled yet: a list
        on CPU (host decisions are cheap there), else a tensor."""
        if not self.lazy:
            return torch.where(states >= 0, states, self.dead)
        if self.slot is not None:
            return self._slots(a, states.tolist())
        rows = [s if s >= 0 else self.dead for s in states.tolist()]
        todo = sorted({r for r in rows if not self.built[r]})
        if todo:
            self._fill(a, torch.tensor(todo))
        return rows

    def _slots(self, a: StateTables, states: list[int]) -> list[int] | None:
        """The slot rows of ``states`` (dead -> 0), giving new states free slots; None when full."""
        new = sorted({s for s in states if s >= 0 and s not in self.slot})
        if new:
            first = len(self.slot) + 1
            if first + len(new) > len(self.built):
                return None
            self.slot.update(zip(new, range(first, first + len(new))))
            self._fill(a, torch.tensor(new), torch.arange(first, first + len(new)))
        return [self.slot[s] if s >= 0 else 0 for s in states]

    def index(self, rows: list[int] | torch.Tensor) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long) if isinstance(rows, list) else rows

    def tight(self, rows: list[int] | torch.Tensor, remaining) -> torch.Tensor | None:
        """[N] bool: the rows whose mask the length check may change; None when none does."""
        if remaining is None or (isinstance(remaining, int) and remaining - 1 >= self.bound):
            return None
        rem = torch.as_tensor(remaining, device=self.max_need.device).long().reshape(-1)
        tight = self.max_need.index_select(0, self.index(rows)) > rem - 1  # [N]
        return None if self.lazy and not bool(tight.any()) else tight

    def apply(
        self, logprobs: torch.Tensor, rows: list[int] | torch.Tensor, inplace: bool = False
    ) -> torch.Tensor:
        """``logprobs`` [N, V] masked by the static rows ``rows`` [N] (into ``logprobs`` itself
        when ``inplace``): one add of the 0 / -inf rows, or on CPU, when every row keeps (or
        every row forbids) at most V / SPARSE tokens, an -inf fill and a copy of the kept entries
        (or an -inf fill of the others)."""
        bias = self.bias(logprobs.dtype)
        if not self.lazy:
            return _add(logprobs, bias.index_select(0, rows), inplace)
        ids = rows
        entries = [self.ids[i] for i in ids]
        if len(ids) == 1:  # the common one-row case, without index tensors
            return apply_row(logprobs, bias[ids[0]], entries[0], inplace)
        if any(e is None for e in entries) or len({e[0] for e in entries}) > 1:
            return _add(logprobs, bias.index_select(0, self.index(rows)), inplace)
        counts = torch.tensor([len(e[1]) for e in entries])
        at = torch.arange(len(ids)).repeat_interleave(counts), torch.cat([e[1] for e in entries])
        if entries[0][0]:
            kept = logprobs[at]
            out = logprobs.fill_(NEG_INF) if inplace else torch.full_like(logprobs, NEG_INF)
            return out.index_put_(at, kept)
        ninf = logprobs.new_tensor(NEG_INF)
        return logprobs.index_put_(at, ninf) if inplace else logprobs.index_put(at, ninf)

    @_normal_tensors
    def bias(self, dtype: torch.dtype) -> torch.Tensor:
        """[S + 1, V] of ``dtype``: 0 where allowed, -inf elsewhere (filled rows only)."""
        if dtype not in self.biases:
            done = torch.from_numpy(np.flatnonzero(self.built)).to(self.allowed.device)
            self.biases[dtype] = torch.empty(self.allowed.shape, dtype=dtype, device=self.allowed.device)
            self.biases[dtype][done] = _bias(self.allowed[done], dtype)
        return self.biases[dtype]

    @_normal_tensors
    def _fill(self, a: StateTables, todo: torch.Tensor, where: torch.Tensor | None = None) -> None:
        """Fill the rows ``where`` (default: ``todo`` itself) with the states ``todo``."""
        where = todo if where is None else where
        step = max(1, _CHUNK // a.vocab_size)
        for i in range(0, todo.shape[0], step):
            states, part = todo[i : i + step], where[i : i + step]
            nxt = a.next_state.index_select(0, states)  # [M, V]
            ok = nxt >= 0
            self.max_need[part] = a.min_tokens_to_accept[nxt.clamp(min=0)].masked_fill_(~ok, -1).amax(1)
            if a.eos_id is not None:
                ok[:, a.eos_id] = a.accepting[states]
            self.allowed[part] = ok
            for q in part.tolist():
                self.bits.pop(q, None)
            if self.lazy:
                for q, row, count in zip(part.tolist(), ok, ok.sum(1).tolist()):
                    self.ids[q] = sparse_ids(row, count)
            for dtype, bias in self.biases.items():
                bias[part] = _bias(ok, dtype)
        self.bound = max(self.bound, int(self.max_need.max()))
        self.built[where.cpu().numpy()] = True


def apply_row(logprobs: torch.Tensor, bias: torch.Tensor, ids, inplace: bool) -> torch.Tensor:
    """``logprobs`` [1, V] masked by one state's row: ``bias`` [V] its 0 / -inf row, ``ids``
    None or (keep, cols): the allowed tokens (keep) or the forbidden ones, when few, so that
    only those entries are touched."""
    if ids is None:
        return _add(logprobs, bias, inplace)
    keep, cols = ids
    if keep:
        cols = cols[None]
        kept = logprobs.gather(1, cols)
        out = logprobs.fill_(NEG_INF) if inplace else torch.full_like(logprobs, NEG_INF)
        return out.scatter_(1, cols, kept)
    return logprobs.index_fill_(1, cols, NEG_INF) if inplace else logprobs.index_fill(1, cols, NEG_INF)


def bitmask_words(vocab_size: int) -> int:
    """W = ceil(V / 32), the int32 words of a row of a packed bitmask."""
    return (vocab_size + 31) // 32


def pack_bits(ok: np.ndarray) -> np.ndarray:
    """[..., V] bool -> [..., ceil(V / 32)] int32: bit ``t % 32`` of word ``t // 32`` set iff
    ``ok[..., t]`` (xgrammar's and llguidance's token bitmask; the bits past V are 0)."""
    v = ok.shape[-1]
    packed = np.packbits(ok, axis=-1, bitorder="little")  # [..., ceil(V / 8)] uint8
    pad = 4 * bitmask_words(v) - packed.shape[-1]
    if pad:
        packed = np.concatenate([packed, np.zeros((*packed.shape[:-1], pad), dtype=np.uint8)], axis=-1)
    return np.ascontiguousarray(packed).view("<i4").astype(np.int32, copy=False)  # little-endian words


def check_bitmask(bitmask: torch.Tensor, rows: int, vocab_size: int) -> None:
    """ConstraintError unless ``bitmask`` is an int32 [rows, ceil(V / 32)] tensor."""
    if bitmask.dtype != torch.int32 or tuple(bitmask.shape) != (rows, bitmask_words(vocab_size)):
        raise ConstraintError(
            f"bitmask must be an int32 tensor of shape ({rows}, {bitmask_words(vocab_size)}) for {rows} "
            f"states over {vocab_size} tokens, got {bitmask.dtype} {tuple(bitmask.shape)}: allocate it with "
            "torch.zeros(N, (V + 31) // 32, dtype=torch.int32)"
        )


def fill_bitmask(
    constraint: TokenConstraint, bitmask: torch.Tensor, states: torch.Tensor, remaining=None
) -> torch.Tensor:
    """``constraint.allowed(states, remaining)`` [N, V] written into ``bitmask`` [N, ceil(V / 32)]
    int32 as :func:`pack_bits` packs it, and returned: through the constraint's own
    ``fill_bitmask`` where it has one (:class:`~.interface.Bitmasks`: a copy of cached packed rows),
    else by packing its ``allowed``."""
    if provides(constraint, Bitmasks):
        return constraint.fill_bitmask(bitmask, states, remaining)
    ok = constraint.allowed(states, remaining)
    check_bitmask(bitmask, ok.shape[0], constraint.vocab_size)
    bitmask.copy_(torch.from_numpy(pack_bits(ok.cpu().numpy())))
    return bitmask


def sparse_ids(row: torch.Tensor, count: int):
    """(keep, cols) for :func:`apply_row`: the allowed tokens of the bool ``row`` [V] (``count``
    of them) if at most V / SPARSE, else the forbidden ones if at most V / SPARSE, else None."""
    v = row.shape[0]
    if min(count, v - count) > v // SPARSE:
        return None
    keep = 2 * count <= v
    if row.is_cpu:  # numpy's flatnonzero: torch's nonzero costs 1-20 ms of CPU on a loaded machine
        ok = row.numpy()
        return keep, torch.from_numpy(np.flatnonzero(ok if keep else ~ok))
    return keep, (row if keep else ~row).nonzero()[:, 0]


def _add(logprobs: torch.Tensor, bias: torch.Tensor, inplace: bool) -> torch.Tensor:
    return logprobs.add_(bias) if inplace else logprobs + bias


def _bias(ok: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(ok.shape, dtype=dtype, device=ok.device).masked_fill_(~ok, NEG_INF)
