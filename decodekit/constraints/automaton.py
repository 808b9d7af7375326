"""The token-level automaton that constrained decoding runs on."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch

from decodekit.errors import ConstraintError


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
        """A copy with the tables on ``device`` (self if already there)."""
        if self.next_state.device == torch.device(device):
            return self
        tables = ("next_state", "accepting", "min_tokens_to_accept")
        return dataclasses.replace(self, **{k: getattr(self, k).to(device) for k in tables})

    def allowed(self, states: torch.Tensor, remaining: int | torch.Tensor | None = None) -> torch.Tensor:
        """[N] long states (-1 = dead row: nothing allowed) -> [N, V] bool, the tokens that may be
        emitted next: t (not EOS) iff ``next = next_state[s, t] >= 0`` and
        ``min_tokens_to_accept[next] <= remaining - 1``; EOS iff ``accepting[s]``. ``remaining``
        (int or [N] long; None: no limit) counts the tokens still allowed *including this one*."""
        states = states.to(self.device).long()
        live = states >= 0
        s = states.clamp(min=0)
        nxt = self.next_state[s]  # [N, V]
        ok = nxt >= 0
        if remaining is not None:
            rem = torch.as_tensor(remaining, device=self.device).long().reshape(-1, 1)
            ok &= self.min_tokens_to_accept[nxt.clamp(min=0)] <= rem - 1
        if self.eos_id is not None:
            ok[:, self.eos_id] = self.accepting[s]
        return ok & live[:, None]

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[N] states, [N] tokens -> [N] next states (-1 if dead; -1 stays -1; EOS -> -1)."""
        states = states.to(self.device).long()
        nxt = self.next_state[states.clamp(min=0), tokens.to(self.device).long()]
        return torch.where(states >= 0, nxt, torch.full_like(nxt, -1))

    def walk(self, tokens: Iterable[int], state: int | None = None) -> int:
        """The state after reading ``tokens`` from ``state`` (default: initial), or -1 if dead."""
        s = self.initial if state is None else int(state)
        for t in tokens:
            t = int(t)
            if not 0 <= t < self.vocab_size:
                raise ConstraintError(f"token id {t} out of range for vocabulary size {self.vocab_size}")
            if s < 0:
                return -1
            s = int(self.next_state[s, t])
        return s

    def accepts(self, tokens: Iterable[int]) -> bool:
        """Whether the token sequence is accepted; a single trailing EOS is allowed."""
        tokens = [int(t) for t in tokens]
        if tokens and self.eos_id is not None and tokens[-1] == self.eos_id:
            tokens = tokens[:-1]
        s = self.walk(tokens)
        return s >= 0 and bool(self.accepting[s])

    def __repr__(self) -> str:
        return (
            f"TokenAutomaton(pattern={self.pattern!r}, num_states={self.num_states}, "
            f"vocab_size={self.vocab_size}, shortest={self.shortest}, eos_id={self.eos_id})"
        )
