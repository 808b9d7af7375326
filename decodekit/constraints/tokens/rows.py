"""The row cache of a first-visit token automaton: one state's mask row made once, then a lookup.

Both first-visit token levels (:class:`~decodekit.constraints.tokens.lazy.LazyTokenAutomaton`
over an eager byte DFA with its one-byte-per-token bound,
:class:`~decodekit.constraints.tokens.derived.DerivedTokenAutomaton` over any
:class:`~decodekit.constraints.automata.protocol.ByteAutomaton`) compute a state's row their own
way and hold a :class:`RowCache`, which answers the
:class:`~decodekit.constraints.tokens.interface.TokenConstraint` members that only read rows
(``allowed``, ``mask``, ``fill_bitmask``) and ``step``: a warm state is one dict lookup and, for
a packed bitmask, one memcpy.

Warm rows. Per state, the row its owner computed and the budget from which it holds (its static
row, the length check aside: it holds for every ``remaining - 1 >= holds``; None when it was only
asked without a budget), at most :data:`WARM_ROWS` states (then started again).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from decodekit.constraints.tokens import interface
from decodekit.constraints.tokens.masks import SPARSE, apply_row, check_bitmask, pack_bits, sparse_ids

NEG_INF = float("-inf")
WARM_ROWS = 256  # states whose static rows are kept for a lookup (bool + packed [V] each)


class Row:
    """One state's cached answer: ``allowed`` [V] bool (on the automaton's device), its 0 / -inf
    ``biases`` [V] by dtype (made on first need), ``ids`` the few allowed (keep, cols) or
    forbidden tokens or None (:func:`~.masks.sparse_ids`; CPU only), and ``bits`` [ceil(V / 32)]
    int32, the row packed for :meth:`RowCache.fill_bitmask`, and ``raw`` its bytes (both None
    until first asked for)."""

    __slots__ = ("allowed", "biases", "ids", "bits", "raw")

    def __init__(self, allowed: torch.Tensor, ids) -> None:
        self.allowed, self.ids, self.bits, self.raw = allowed, ids, None, None
        self.biases: dict[torch.dtype, torch.Tensor] = {}


class RowCache:
    """The rows of one first-visit token automaton on one ``device`` (module docstring).

    Args:
        vocab_size: V. eos_id: allowed in a row iff its state accepts (None: no EOS).
        compute: ``(state, remaining) -> Row`` of a live state, the owner's (it keeps what it
            computes as it sees fit); called where the warm rows miss.
        holds_from: ``(state, remaining) -> T`` after ``compute`` under an int ``remaining``: the
            row it gave is the state's static row, holding for every ``remaining - 1 >= T``, iff
            ``remaining - 1 >= T``.
        next_state: ``(state, token) -> state`` (-1 dead), for :meth:`step`.
    """

    def __init__(
        self,
        vocab_size: int,
        eos_id: int | None,
        device: torch.device,
        compute: Callable[[int, int | None], Row],
        holds_from: Callable[[int, int], int],
        next_state: Callable[[int, int], int],
    ) -> None:
        self.vocab_size, self.eos_id, self.device = vocab_size, eos_id, device
        self._compute, self._holds_from, self._next_state = compute, holds_from, next_state
        self._warm: dict[int, tuple[int | None, Row]] = {}  # state -> (holds from, its Row)
        self._dead: Row | None = None
        self._bitmask_view: tuple | None = None  # (the last bitmask filled, its data_ptr, rows, byte view)
        self._stepped: tuple | None = None  # (the [N] states step() returned last, their array, data_ptr)

    # ------------------------------------------------------------------ making rows

    def entry(self, tok: np.ndarray, accept: bool) -> Row:
        """The :class:`Row` allowing the distinct tokens ``tok`` [n] int64 (never EOS), and EOS if
        ``accept``."""
        if accept and self.eos_id is not None:
            tok = np.append(tok, self.eos_id)
        cols = torch.from_numpy(tok)
        dense = np.zeros(self.vocab_size, dtype=bool)
        dense[tok] = True
        row = torch.from_numpy(dense)
        ids = None
        if interface.decides_on_host(self.device):  # the allowed ids are at hand: no pass over the row
            few = len(tok) <= self.vocab_size // SPARSE
            ids = (True, cols) if few else sparse_ids(row, len(tok))
        return Row(row.to(self.device), ids)

    def empty(self) -> Row:
        """The row of the dead state: nothing allowed (made once)."""
        if self._dead is None:
            self._dead = self.entry(np.zeros(0, dtype=np.int64), False)
        return self._dead

    def row(self, c: int, remaining: int | None) -> Row:
        """The :class:`Row` of state c under ``remaining``: a warm lookup, else the owner's."""
        got = self._warm.get(c)
        if got is not None and (remaining is None or (got[0] is not None and remaining > got[0])):
            return got[1]
        if c < 0:
            return self.empty()
        r = self._compute(c, remaining)
        holds = None if remaining is None else self._holds_from(c, remaining)
        if holds is None or remaining - 1 >= holds:
            warm = self._warm
            if len(warm) >= WARM_ROWS:
                warm.clear()
            warm[c] = (holds, r)
        return r

    def rows(self, states: torch.Tensor, remaining) -> list[Row]:
        """The :class:`Row` of each of ``states`` (any shape, read flat) under ``remaining`` (None,
        an int, or one per state)."""
        row = self.row
        flat = states if states.dim() == 1 else states.reshape(-1)
        if remaining is None or isinstance(remaining, int):  # the common case: no per-row budgets
            return [row(c, remaining) for c in flat.tolist()]
        listed = flat.tolist()
        budgets = torch.as_tensor(remaining).reshape(-1).expand(len(listed)).tolist()
        return [row(c, r) for c, r in zip(listed, budgets)]

    def bias(self, entry: Row, dtype: torch.dtype) -> torch.Tensor:
        """``entry``'s 0 / -inf row in ``dtype`` (made on first need, kept)."""
        biases, row = entry.biases, entry.allowed
        if dtype not in biases:
            biases[dtype] = torch.zeros(row.shape, dtype=dtype, device=row.device).masked_fill(~row, NEG_INF)
        return biases[dtype]

    @staticmethod
    def pack(entry: Row) -> memoryview:
        """Pack ``entry``'s row (:func:`~.masks.pack_bits`) on first need: ``bits``, and ``raw``
        its bytes; returns ``raw``."""
        entry.bits = pack_bits(entry.allowed.cpu().numpy())
        entry.raw = memoryview(entry.bits).cast("B")
        return entry.raw

    # ------------------------------------------------------------------ the members that read rows

    def allowed(self, states: torch.Tensor, remaining: int | torch.Tensor | None = None) -> torch.Tensor:
        """[N] states -> [N, V] bool, the rows (a new tensor)."""
        rows = self.rows(states, remaining)
        if not rows:
            return torch.zeros(0, self.vocab_size, dtype=torch.bool, device=self.device)
        if len(rows) == 1:
            return rows[0].allowed[None].clone()  # a copy: the row stays cached unchanged
        return torch.stack([r.allowed for r in rows])

    def mask(self, logprobs: torch.Tensor, states: torch.Tensor, remaining, inplace: bool) -> torch.Tensor:
        """``logprobs`` [N, V] with -inf wherever the rows are False (a new tensor, same dtype;
        ``inplace``: written into ``logprobs``)."""
        if isinstance(remaining, torch.Tensor) and remaining.numel() == 1:
            remaining = int(remaining)  # one row's budget as a tensor (the logits processor's)
        rows = self.rows(states, remaining)
        if not rows:
            return logprobs if inplace else logprobs.clone()
        if len(rows) == 1:  # the common one-row case: the bias is only built when needed
            ids = rows[0].ids
            bias = self.bias(rows[0], logprobs.dtype) if ids is None else None
            return apply_row(logprobs, bias, ids, inplace)
        if not logprobs.is_cpu:  # one kernel for the batch
            bias = torch.stack([self.bias(r, logprobs.dtype) for r in rows])
            return logprobs.add_(bias) if inplace else logprobs + bias
        # on the CPU row by row in place: a few allowed (or forbidden) tokens touch only those
        # entries, and no [N, V] bias is stacked (half the time of stack + add at 32 x 50,000)
        out = logprobs if inplace else logprobs.clone()
        for i, r in enumerate(rows):
            ids = r.ids
            apply_row(out[i : i + 1], self.bias(r, logprobs.dtype) if ids is None else None, ids, True)
        return out

    def fill_bitmask(
        self, bitmask: torch.Tensor, states: torch.Tensor, remaining: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """Write the rows of ``states`` into the preallocated ``bitmask`` [N, ceil(V / 32)] int32
        (bit ``t % 32`` of word ``t // 32`` set iff token t is allowed; the bits past V 0) and
        return it: per row one copy of the state's packed row, no tensor made (the owners' own
        ``fill_bitmask``: they bind it as theirs, the hot call a frame shorter)."""
        target = self._bitmask_view
        if target is None or target[0] is not bitmask or target[1] != bitmask.data_ptr():
            target = self._target(bitmask)
        raw = target[3]
        if isinstance(remaining, torch.Tensor) and remaining.numel() == 1:
            remaining = int(remaining)  # one row's budget as a tensor (the logits processor's)
        if raw is not None and target[2] == 1 and (remaining is None or type(remaining) is int):
            # one row on the CPU, the common case: a warm state is a lookup and a memcpy
            made = self._stepped
            if made is not None and made[0] is states and made[2] == states.data_ptr():
                c = made[1].tolist()  # the states step() made, read off their array: no tensor op
            else:
                c = (states if states.dim() == 1 else states.reshape(-1)).tolist()
            if len(c) == 1:
                c = c[0]
                got = self._warm.get(c)
                if got is not None and (remaining is None or (got[0] is not None and remaining > got[0])):
                    r = got[1]
                else:
                    r = self.row(c, remaining)
                raw[:] = r.raw if r.raw is not None else self.pack(r)
                return bitmask
        rows = self.rows(states, remaining)
        if len(rows) != target[2]:
            target = self._target(bitmask)  # the buffer was reshaped in place: look again
            check_bitmask(bitmask, len(rows), self.vocab_size)
        raw = target[3]
        if raw is None:  # on a device: one copy per row
            for i, r in enumerate(rows):
                if r.bits is None:
                    self.pack(r)
                bitmask[i].copy_(torch.from_numpy(r.bits))
        elif len(rows) == 1:  # one memcpy of the packed row
            r = rows[0]
            raw[:] = r.raw if r.raw is not None else self.pack(r)
        else:
            size = 4 * ((self.vocab_size + 31) // 32)
            for i, r in enumerate(rows):
                raw[i * size : (i + 1) * size] = r.raw if r.raw is not None else self.pack(r)
        return bitmask

    def _target(self, bitmask: torch.Tensor) -> tuple:
        """``bitmask`` checked (int32, ``ceil(V / 32)`` words a row, contiguous), as (bitmask, its
        data_ptr, its rows, a byte memoryview of it on the CPU or None), kept while the same tensor
        keeps the same memory: a search fills one buffer at every step, and the checks and the
        view cost more than the copy."""
        words = (self.vocab_size + 31) // 32
        if bitmask.dtype != torch.int32 or bitmask.dim() != 2 or bitmask.shape[1] != words:
            check_bitmask(bitmask, bitmask.shape[0] if bitmask.dim() else 0, self.vocab_size)  # raises
        raw = memoryview(bitmask.numpy()).cast("B") if bitmask.is_cpu and bitmask.is_contiguous() else None
        target = self._bitmask_view = (bitmask, bitmask.data_ptr(), bitmask.shape[0], raw)
        return target

    # ------------------------------------------------------------------ stepping

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[N] states, [N] tokens -> [N] next states (``next_state`` of each; -1 stays -1)."""
        made = self._stepped
        if made is not None and made[0] is states and made[2] == states.data_ptr():
            listed = made[1].tolist()  # the states the last step made, read off their array
        else:
            listed = states.tolist()
        nxt = self._next_state
        out = [nxt(c, t) for c, t in zip(listed, tokens.tolist())]
        if self.device.type != "cpu":
            return torch.tensor(out, dtype=torch.long, device=self.device)
        # on the CPU through numpy (a third of torch.tensor's time), the array kept: the next
        # fill_bitmask or step of this tensor reads its states off it without a tensor op (the
        # same memory, so an in-place change of the tensor is seen; another memory is not it)
        array = np.array(out, dtype=np.int64)
        made = torch.from_numpy(array)
        self._stepped = (made, array, made.data_ptr())
        return made


class MasksFromRows:
    """:meth:`mask` and :meth:`fill_bitmask` of a first-visit token level, answered by its
    :class:`RowCache` (``self._cache``): written once for both first-visit classes. It holds no
    state (each class makes its own cache, and binds ``fill_bitmask`` to it directly: the hot
    call a frame shorter)."""

    _cache: RowCache

    def fill_bitmask(
        self, bitmask: torch.Tensor, states: torch.Tensor, remaining: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """Write ``allowed(states, remaining)`` into the preallocated ``bitmask`` [N, ceil(V / 32)]
        int32 (xgrammar's and llguidance's layout) and return it: per row one copy of the state's
        cached packed row (:class:`~.interface.Bitmasks`, :meth:`RowCache.fill_bitmask`)."""
        return self._cache.fill_bitmask(bitmask, states, remaining)

    def mask(
        self,
        logprobs: torch.Tensor,
        states: torch.Tensor,
        remaining: int | torch.Tensor | None = None,
        *,
        inplace: bool = False,
    ) -> torch.Tensor:
        """``logprobs`` [N, V] with -inf wherever ``allowed(states, remaining)`` is False (a new
        tensor, same dtype; ``inplace``: written into ``logprobs``), from the rows found on first
        visit (:meth:`RowCache.mask`)."""
        return self._cache.mask(logprobs, states, remaining, inplace)
