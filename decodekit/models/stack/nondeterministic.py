"""Nondeterministic stacks: the NS-RNN (DuSell & Chiang 2020) and the renormalising RNS-RNN
(DuSell & Chiang 2022), with the optional memory limit (window D).

The controller emits, from h_t, the weights of a weighted PDA with states Q (q0 = 0) and stack
alphabet Gamma (bottom symbol = 0), for every (q, x): push (q,x -> r, .y), replace
(q,x -> r, y) and pop (q,x -> r, eps). NS: log-softmax over the 2|Q||Gamma| + |Q| choices
(probabilities); RNS: raw logits (log of unnormalised weights). Lang's algorithm (log space),
DuSell & Chiang (2022), eqs. 2-5, for 0 <= i < t:

    gamma[i->t][q,x->r,y] = 1[i=t-1] Delta[t][q,x->r,.y]                                   (push)
        + sum_{s,z} gamma[i->t-1][q,x->s,z] Delta[t][s,z->r,y]                                (replace)
        + sum_{k=i+1}^{t-2} sum_u gamma[i->k][q,x->u,y] gamma'[k][u,y->r]                     (pop)
    gamma'[k][u,y->r] = sum_{s,z} gamma[k->t-1][u,y->s,z] Delta[t][s,z->r,eps]
    alpha[0][r,y] = 1[r=q0, y=bottom]
    alpha[t][r,y] = sum_{i=max(0,t-D)}^{t-1} sum_{q,x} alpha[i][q,x] gamma[i->t][q,x->r,y]
    reading (NS)  r_t[y]   = sum_r alpha[t][r,y] / sum_{r',y'} alpha[t][r',y']
    reading (RNS) r_t[r,y] = alpha[t][r,y] / sum_{r',y'} alpha[t][r',y']

``bottom="frozen"`` (the default) is exactly that definition: the bottom symbol is never
replaced or popped, the first transition is a push, and a run that brings the bottom level back
to the top has weight zero. ``bottom="replaceable"`` (older checkpoints' definition) adds a position
-1 with gamma[-1->0] = 1[q=x=r=y=0] and alpha[-1] = 1[r=y=0], and sums alpha from i = -1: the
bottom symbol then counts as pushed at -1, runs may replace it and may pop back down to it (only
popping the bottom itself kills a run); with a window the bottom then falls out of it after D steps.

Memory limit D: only gamma[i->t] with t - i <= D (unlimited: D = infinity). The state keeps the
last P = min(D, t + 1) positions (frozen; t + 2 with the -1 position) p_0 < ... < p_{P-1} = t:
G [N, P, P, Q, S, Q, S] with G[a, b] = gamma[p_a -> p_b] (-inf unless a < b) and A [N, P, Q, S]
with A[a] = alpha[p_a]. Positions before the first are padding (all -inf, zero weight), so states
of different ages can be left-padded and joined. Per step: O(P^2 |Q|^3 |Gamma|^2 + P |Q|^3 |Gamma|^3).
"""

from __future__ import annotations

import torch
from torch import nn

from decodekit.errors import DecodekitError
from decodekit.models.configs import BOTTOMS, check_pda_sizes  # noqa: F401 (BOTTOMS: re-exported)
from decodekit.models.stack.logspace import log_add, log_einsum

NSState = tuple[torch.Tensor, torch.Tensor]
"""(G [N, P, P, Q, S, Q, S], A [N, P, Q, S]) log-weights."""


def initial_ns_state(
    batch_size: int,
    num_states: int,
    num_symbols: int,
    window: int | None,
    dtype,
    device,
    bottom: str = "frozen",
) -> NSState:
    """frozen: position 0 alone, alpha[0] = one at (q0, bottom). replaceable: positions -1 and 0 with
    gamma[-1->0] and alpha[-1] = alpha[0] = one at (q0, bottom) (with D = 1 only position 0)."""
    p = 2 if bottom == "replaceable" and (window is None or window >= 2) else 1
    q, s = num_states, num_symbols
    g = torch.full((batch_size, p, p, q, s, q, s), -torch.inf, dtype=dtype, device=device)
    a = torch.full((batch_size, p, q, s), -torch.inf, dtype=dtype, device=device)
    if p == 2:
        g[:, 0, 1, 0, 0, 0, 0] = 0.0
    a[:, :, 0, 0] = 0.0
    return g, a


def ns_update(
    state: NSState, push: torch.Tensor, repl: torch.Tensor, pop: torch.Tensor, window: int | None
) -> tuple[NSState, torch.Tensor]:
    """One step of Lang's algorithm. Args: push, repl [N, Q, S, Q, S], pop [N, Q, S, Q] log-weights.
    Returns (new state, alpha[t] [N, Q, S]). Builds new tensors; ``state`` is never written."""
    g, a = state
    p = g.shape[1]
    last = g[:, :, -1]  # gamma[p_a -> t-1]          [N, P, Q, S, Q, S]
    q, s = repl.shape[3], repl.shape[4]
    # One contraction over (s, z) for both replace and gamma': [N, P, Q, S, Q*S + Q]
    both = log_einsum("baqxsz,bszo->baqxo", last, torch.cat([repl.flatten(3), pop], dim=3))
    repl_term = both[..., : q * s].unflatten(-1, (q, s))
    gprime = both[..., q * s :]  # gamma'[k][u,y->r]   [N, P, Q, S, Q]
    pop_term = log_einsum("bakqxuy,bkuyr->baqxry", g, gprime, balance="k")
    column = torch.cat([log_add(repl_term, pop_term)[:, :-1], push[:, None]], dim=1)  # gamma[p_a -> t]
    alpha = log_einsum("baqx,baqxry->bry", a, column, balance="a")  # [N, Q, S]
    # New state over positions p_0..p_{P-1}, t (then drop p_0 if the window is full).
    grown = g.new_full((g.shape[0], p + 1, p + 1, *g.shape[3:]), -torch.inf)  # a fresh tensor
    grown[:, :p, :p] = g
    grown[:, :p, p] = column
    g = grown
    a = torch.cat([a, alpha[:, None]], dim=1)
    if window is not None and p + 1 > window:
        g, a = g[:, 1:, 1:], a[:, 1:]
    return (g, a), alpha


def pad_ns_state(state: NSState, size: int) -> NSState:
    """Left-pad to ``size`` positions with zero-weight (-inf) positions older than any real one."""
    g, a = state
    extra = size - g.shape[1]
    if extra <= 0:
        return state
    g = torch.cat([torch.full_like(g[:, :1], -torch.inf).expand(-1, extra, -1, -1, -1, -1, -1), g], 1)
    g = torch.cat([torch.full_like(g[:, :, :1], -torch.inf).expand(-1, -1, extra, -1, -1, -1, -1), g], 2)
    a = torch.cat([torch.full_like(a[:, :1], -torch.inf).expand(-1, extra, -1, -1), a], 1)
    return g, a


class NondeterministicStack(nn.Module):
    """The NS (``renormalizing=False``) or RNS (``True``) stack with its action layer.

    Args: hidden_size H of the controller, num_states |Q| >= 1, num_symbols |Gamma| >= 2,
    window D >= 1 or None (unlimited, then ``max_length`` bounds the steps; state O(n^2)),
    bottom ``"frozen"`` (DuSell & Chiang's definition) or ``"replaceable"`` (see the module docstring).
    Reading size: |Gamma| (NS) or |Q||Gamma| (RNS)."""

    def __init__(
        self,
        hidden_size: int,
        num_states: int,
        num_symbols: int,
        renormalizing: bool,
        window: int | None = None,
        max_length: int = 512,
        bottom: str = "frozen",
    ) -> None:
        super().__init__()
        check_pda_sizes(num_states, num_symbols, window, bottom, max_length)
        self.num_states, self.num_symbols = num_states, num_symbols
        self.renormalizing, self.window, self.max_length = renormalizing, window, max_length
        self.bottom = bottom
        q, s = num_states, num_symbols
        self.num_ops = 2 * q * s + q
        self.actions = nn.Linear(hidden_size, q * s * self.num_ops)
        self.reading_size = q * s if renormalizing else s

    def transition_weights(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Delta[t] from h_t [N, H]: (push, repl [N, Q, S, Q, S], pop [N, Q, S, Q]) log-weights."""
        q, s = self.num_states, self.num_symbols
        logits = self.actions(h).view(h.shape[0], q, s, self.num_ops)
        if not self.renormalizing:
            logits = torch.log_softmax(logits, dim=-1)
        push, repl, pop = logits.split([q * s, q * s, q], dim=-1)
        n = h.shape[0]
        return push.reshape(n, q, s, q, s), repl.reshape(n, q, s, q, s), pop

    def reading(self, alpha: torch.Tensor) -> torch.Tensor:
        """r_t from alpha[t] [N, Q, S]: [N, |Gamma|] (NS) or [N, |Q||Gamma|] (RNS), sums to 1."""
        if self.renormalizing:
            return torch.softmax(alpha.flatten(1), dim=-1)
        return torch.softmax(torch.logsumexp(alpha, dim=1), dim=-1)

    def initial(self, batch_size: int, like: torch.Tensor) -> tuple[NSState, torch.Tensor]:
        """(s_0, r_0): the bottom symbol alone on the stack, in state q0."""
        st = initial_ns_state(
            batch_size, self.num_states, self.num_symbols, self.window, like.dtype, like.device, self.bottom
        )
        return st, self.reading(st[1][:, -1])

    def check_length(self, state: NSState, steps: int) -> None:
        """Raise if an unlimited stack would exceed ``max_length`` steps (shape-based, no sync)."""
        if self.window is None:
            done = state[0].shape[1] - (2 if self.bottom == "replaceable" else 1)
            if done + steps > self.max_length:
                raise DecodekitError(
                    f"sequence of {done + steps} steps exceeds max_length={self.max_length} of the unlimited "
                    f"{'RNS' if self.renormalizing else 'NS'} stack (O(n^2) memory, O(n^3) time); raise "
                    f"max_length or use the memory-limited variant (window=D, e.g. 35)"
                )

    def forward(self, state: NSState, h: torch.Tensor) -> tuple[NSState, torch.Tensor]:
        """s_t = Stack(s_{t-1}, Actions(h_t)); returns (s_t, r_t)."""
        push, repl, pop = self.transition_weights(h)
        state, alpha = ns_update(state, push, repl, pop, self.window)
        return state, self.reading(alpha)

    def pad(self, state: NSState, size: int) -> NSState:
        return pad_ns_state(state, size)

    def size(self, state: NSState) -> int:
        return state[0].shape[1]
