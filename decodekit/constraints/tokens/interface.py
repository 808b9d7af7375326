"""What a decoder sees of a constraint: :class:`TokenConstraint`; :class:`Transitions`, the
refinement that a search keeping one beam per *visited* automaton state needs (the allowed tokens
of a few states and where they lead); and :class:`StateTables` (every state's tables).

A constraint is compiled once, above the loop (``decodekit.decoding.prompts.compile_constraint``),
into one of these; the searches call only what the protocols name, never asking which automaton
they hold. Both :class:`~.automaton.TokenAutomaton` (dense: :class:`StateTables`) and
:class:`~.lazy.LazyTokenAutomaton` (built on first visit) are :class:`TokenConstraint`; a
strategy declaring ``needs="states"`` is given a :class:`StateTables` where the whole automaton
is small, else a :class:`Transitions` (both automata are).

States are ints (``[N]`` long tensors in the batched calls), -1 the dead state, which stays dead.
``remaining`` counts the tokens still allowed, the one being chosen included (an int, ``[N]``
long, or None: no limit). A token may be emitted from state s iff it leads to a state that can
still reach acceptance within ``remaining - 1`` more tokens; EOS iff s accepts.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

import torch

from decodekit.errors import ConstraintError


@runtime_checkable
class TokenConstraint(Protocol):
    """A token-level automaton as the masked searches use it.

    Attributes:
        initial: the start state. eos_id: the EOS column, or None. vocab_size: V.
        pattern: what it was compiled from, for messages. stats: sizes along the compile.
        shortest: the fewest tokens (EOS not counted) of a sequence its masks let end.
        exact: whether its masks are the definition's at every length budget (a lazy
            automaton without the whole automaton to fall back on may mask more near the limit).
    """

    initial: int
    eos_id: int | None
    pattern: str
    stats: Mapping[str, int]

    @property
    def vocab_size(self) -> int: ...

    @property
    def shortest(self) -> int: ...

    @property
    def exact(self) -> bool: ...

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[N] states, [N] tokens -> [N] next states (-1: dead; EOS -> -1)."""

    def allowed(self, states: torch.Tensor, remaining: int | torch.Tensor | None = None) -> torch.Tensor:
        """[N] states -> [N, V] bool: the tokens that may be emitted next."""

    def mask(
        self,
        logprobs: torch.Tensor,
        states: torch.Tensor,
        remaining: int | torch.Tensor | None = None,
        *,
        inplace: bool = False,
    ) -> torch.Tensor:
        """``logprobs`` [N, V] with -inf wherever :meth:`allowed` is False (a new tensor unless
        ``inplace``, then ``logprobs`` itself; allowed entries unchanged)."""

    def is_accepting(self, states: torch.Tensor) -> torch.Tensor:
        """[N] states -> [N] bool (dead states are not)."""

    def min_tokens(self, states: torch.Tensor) -> torch.Tensor:
        """[N] states -> [N] long: a lower bound on the tokens (EOS not counted) to acceptance
        (exact for :class:`StateTables`; 0 for dead states), as the searches' score bounds need."""

    def walk(self, tokens: Iterable[int], state: int | None = None) -> int:
        """The state after reading ``tokens`` from ``state`` (default: initial), or -1."""

    def accepts(self, tokens: Iterable[int]) -> bool:
        """Whether the token sequence (a single trailing EOS allowed) is accepted."""

    def fits(self, max_length: int) -> bool:
        """Whether the masks let a sequence end within ``max_length`` tokens."""

    def to(self, device: torch.device | str) -> TokenConstraint:
        """The constraint producing tensors on ``device`` (self if already there)."""


@runtime_checkable
class Transitions(TokenConstraint, Protocol):
    """A :class:`TokenConstraint` that lists, for a few states, the tokens allowed from them and
    where they lead (Anderson-style search over the states as they are reached)."""

    def transitions(
        self, states: torch.Tensor, remaining: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``states [G]`` long (live, distinct) -> ``(owner [E], tokens [E], next [E])`` long, on
        the constraint's device: every token (EOS excepted) that :meth:`allowed` allows from
        ``states[owner[e]]`` under ``remaining``, and its next state; ``owner`` ascending, tokens
        ascending within an owner."""


@runtime_checkable
class StateTables(TokenConstraint, Protocol):
    """A :class:`TokenConstraint` with every state built (Anderson-style search: one beam per state).

    Attributes:
        next_state: [S, V] long, the next state after each token (-1: dead; always for EOS).
        accepting: [S] bool. min_tokens_to_accept: [S] long, the fewest tokens to acceptance.
        num_states: S.
    """

    next_state: torch.Tensor
    accepting: torch.Tensor
    min_tokens_to_accept: torch.Tensor

    @property
    def num_states(self) -> int: ...


@runtime_checkable
class Bitmasks(TokenConstraint, Protocol):
    """A :class:`TokenConstraint` that writes its masks into a preallocated packed bitmask, the
    form xgrammar's and llguidance's kernels read (no tensor made per call)."""

    def fill_bitmask(
        self, bitmask: torch.Tensor, states: torch.Tensor, remaining: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """``bitmask`` [N, ceil(V / 32)] int32 filled with :meth:`allowed` ``(states, remaining)``:
        bit ``t % 32`` of word ``t // 32`` set iff token t is allowed (the bits past V are 0);
        returns ``bitmask``."""


def provides(value: object, protocol: type = TokenConstraint) -> bool:
    """``isinstance(value, protocol)`` for these protocols without reading any attribute: Python
    3.11's runtime check reads properties, and a lazy automaton's ``shortest`` may build the whole
    automaton. A member is looked for in the instance's ``__dict__``, then on its type (what
    ``inspect.getattr_static`` finds; kept per type: it took 0.46 ms a call, the searches and the
    benchmarks ask at every compile)."""
    try:
        own = object.__getattribute__(value, "__dict__")
    except AttributeError:
        own = {}
    cls = type(value)
    for name in _members(protocol):
        if name in own:
            continue
        has = _ON_TYPE.get((cls, name))
        if has is None:
            has = _ON_TYPE[(cls, name)] = inspect.getattr_static(cls, name, _ABSENT) is not _ABSENT
        if not has:
            return False
    return True


@functools.cache
def _members(protocol: type) -> tuple[str, ...]:
    """The attribute and method names ``protocol`` and its protocol bases declare."""
    names = set()
    for base in protocol.__mro__:
        if base in (TokenConstraint, Transitions, StateTables, Bitmasks):
            names |= set(base.__annotations__) | {k for k in vars(base) if not k.startswith("_")}
    return tuple(sorted(names))


_ABSENT = object()
_ON_TYPE: dict[tuple[type, str], bool] = {}  # (type, name) -> whether the type itself has it


def decides_on_host(device: torch.device | str) -> bool:
    """Whether per-state decisions are made on the host as the masks go: on the CPU, where they
    cost nothing; elsewhere each one would wait for the device, so tables are built ahead (the
    dense masks fill every row at first use; the masked searches compile whole where they can)."""
    return torch.device(device).type == "cpu"


def walk(next_of: Callable[[int, int], int], tokens: Iterable[int], state: int, vocab_size: int) -> int:
    """The state after reading ``tokens`` from ``state`` by ``next_of(state, token)`` (-1 stays -1)."""
    s = int(state)
    for t in tokens:
        t = int(t)
        if not 0 <= t < vocab_size:
            raise ConstraintError(f"token id {t} out of range for vocabulary size {vocab_size}")
        s = next_of(s, t) if s >= 0 else -1
    return s


def accepts(constraint: TokenConstraint, accepting: Callable[[int], bool], tokens: Iterable[int]) -> bool:
    """Whether ``constraint`` accepts ``tokens`` (one trailing EOS allowed), ``accepting(state)``
    telling a live state's acceptance."""
    tokens = [int(t) for t in tokens]
    if tokens and constraint.eos_id is not None and tokens[-1] == constraint.eos_id:
        tokens = tokens[:-1]
    s = constraint.walk(tokens)
    return s >= 0 and accepting(s)
