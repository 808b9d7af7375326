"""The dense token-level automaton: every state's transitions, acceptance and distance to
acceptance as tables, what constrained decoding runs on (masks: :mod:`~.masks`, which caches
each state's answer; the protocol the decoders see: :mod:`~.interface`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch

from decodekit.constraints.tokens import interface, masks
from decodekit.constraints.tokens.masks import MaskCache


@dataclass(frozen=True, eq=False)
class TokenAutomaton:
    """A DFA over token ids whose accepted token sequences are exactly those whose text
    ``separator.join(token_strings[t] for t in tokens)`` fully matches ``pattern``. Every state is
    reachable from ``initial`` and can still reach acceptance (dead = -1); equivalent states are
    merged. EOS never has a transition: it may be emitted exactly in accepting states.

    Attributes:
        next_state: [S, V] int64 next state after token v, -1 = dead (always for EOS and for
            tokens whose surface is None).
        accepting: [S] bool, the text so far fully matches.
        min_tokens_to_accept: [S] int64, the fewest tokens (EOS not counted) from the state to
            acceptance; 0 iff accepting.
        initial: the start state (always 0). eos_id: the EOS column or None.
        pattern: the regex. separator: the text between tokens. vocab_size: V. num_states: S.
        stats: sizes along the way: ``char_states`` (minimal character DFA), ``byte_states``
            (its UTF-8 byte DFA), ``candidate_states`` (each byte DFA state, plus "nothing emitted
            yet"), ``live_states`` (reachable and co-reachable, before merging equivalent states).
    """

    next_state: torch.Tensor
    accepting: torch.Tensor
    min_tokens_to_accept: torch.Tensor
    eos_id: int | None
    pattern: str
    separator: str
    initial: int = 0
    stats: Mapping[str, int] = dataclasses.field(default_factory=dict)
    _masks: MaskCache = dataclasses.field(default_factory=MaskCache, init=False, compare=False, repr=False)

    @property
    def vocab_size(self) -> int:
        return self.next_state.shape[1]

    @property
    def num_states(self) -> int:
        return self.next_state.shape[0]

    @property
    def device(self) -> torch.device:
        return self.next_state.device

    @property
    def shortest(self) -> int:
        """The fewest tokens (EOS not counted) of an accepted sequence."""
        return int(self.min_tokens_to_accept[self.initial])

    def to(self, device: torch.device | str) -> TokenAutomaton:
        """A copy with the tables on ``device`` (self if already there; the copy is kept, so that
        its mask tables survive from one call to the next)."""
        device = torch.device(device)
        if self.next_state.device == device:
            return self
        copies = self._masks.copies
        if device not in copies:
            tables = ("next_state", "accepting", "min_tokens_to_accept")
            copies[device] = dataclasses.replace(self, **{k: getattr(self, k).to(device) for k in tables})
        return copies[device]

    def allowed(self, states: torch.Tensor, remaining: int | torch.Tensor | None = None) -> torch.Tensor:
        """[N] long states (-1 = dead row: nothing allowed) -> [N, V] bool, the tokens that may be
        emitted next: t (not EOS) iff ``next = next_state[s, t] >= 0`` and
        ``min_tokens_to_accept[next] <= remaining - 1``; EOS iff ``accepting[s]``. ``remaining``
        (int or [N] long; None: no limit) counts the tokens still allowed *including this one*.
        Each state's row is computed once and cached; the length check runs only for rows it can
        change (see the module docstring)."""
        return masks.allowed(self, self._masks, states, remaining)

    def mask(
        self,
        logprobs: torch.Tensor,
        states: torch.Tensor,
        remaining: int | torch.Tensor | None = None,
        *,
        inplace: bool = False,
    ) -> torch.Tensor:
        """``logprobs`` [N, V] with -inf wherever ``allowed(states, remaining)`` is False (a new
        tensor, same dtype; allowed entries unchanged; ``inplace``: written into ``logprobs``,
        which is returned): one add of a cached 0 / -inf row per state when no row needs the
        length check (:func:`~.masks.mask`)."""
        return masks.mask(self, self._masks, logprobs, states, remaining, inplace)

    def fill_bitmask(
        self, bitmask: torch.Tensor, states: torch.Tensor, remaining: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """``allowed(states, remaining)`` written into the preallocated ``bitmask`` [N, ceil(V / 32)]
        int32 (bit ``t % 32`` of word ``t // 32`` set iff token t is allowed: xgrammar's and
        llguidance's layout) and returned (:func:`~.masks.fill_bitmask_tables`)."""
        return masks.fill_bitmask_tables(self, self._masks, bitmask, states, remaining)

    def transitions(
        self, states: torch.Tensor, remaining: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``states [G]`` -> ``(owner [E], tokens [E], next [E])``: the tokens t with
        ``next = next_state[states[owner], t] >= 0`` and ``min_tokens_to_accept[next] <=
        remaining - 1`` (the allowed non-EOS tokens, :class:`~.interface.Transitions`), from the table."""
        rows = self.next_state[states.to(self.device).long()]  # [G, V]
        ok = rows >= 0
        if remaining is not None:
            ok &= self.min_tokens_to_accept[rows.clamp(min=0)] <= remaining - 1
        owner, tokens = ok.nonzero(as_tuple=True)
        return owner, tokens, rows[owner, tokens]

    def is_accepting(self, states: torch.Tensor) -> torch.Tensor:
        """[N] states -> [N] bool: whether each is an accepting state (dead states are not)."""
        states = states.to(self.device).long()
        return (states >= 0) & self.accepting[states.clamp(min=0)]

    def min_tokens(self, states: torch.Tensor) -> torch.Tensor:
        """[N] states -> [N] long: ``min_tokens_to_accept`` of each state (0 for dead states)."""
        states = states.to(self.device).long()
        return self.min_tokens_to_accept[states.clamp(min=0)].masked_fill(states < 0, 0)

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[N] states, [N] tokens -> [N] next states (-1 if dead; -1 stays -1; EOS -> -1)."""
        states = states.to(self.device).long()
        nxt = self.next_state[states.clamp(min=0), tokens.to(self.device).long()]
        return torch.where(states >= 0, nxt, torch.full_like(nxt, -1))

    def walk(self, tokens: Iterable[int], state: int | None = None) -> int:
        """The state after reading ``tokens`` from ``state`` (default: initial), or -1 if dead."""
        start = self.initial if state is None else state
        return interface.walk(lambda s, t: int(self.next_state[s, t]), tokens, start, self.vocab_size)

    def accepts(self, tokens: Iterable[int]) -> bool:
        """Whether the token sequence is accepted; a single trailing EOS is allowed."""
        return interface.accepts(self, lambda s: bool(self.accepting[s]), tokens)

    @property
    def exact(self) -> bool:
        """Always True: the masks are the definition's (:mod:`~.masks`)."""
        return True

    def fits(self, max_length: int) -> bool:
        """Whether an accepted sequence has at most ``max_length`` tokens (EOS not counted)."""
        return self.shortest <= max_length

    def __repr__(self) -> str:
        return (
            f"TokenAutomaton(pattern={self.pattern!r}, num_states={self.num_states}, "
            f"vocab_size={self.vocab_size}, shortest={self.shortest}, eos_id={self.eos_id})"
        )
