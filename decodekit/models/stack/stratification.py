"""The stratification stack (Grefenstette et al. 2015), in DuSell & Chiang's controller-stack form.

From h_t: push strength d_t = sigmoid(.), pop strength u_t = sigmoid(.) (one linear layer),
pushed vector v_t = tanh(W_v h_t + b_v). The stack is V_t [t, m] with thicknesses s_t [t]
(row 0 = bottom, the oldest)::

    V_t[i] = V_{t-1}[i] (i < t),   V_t[t] = v_t
    s_t[i] = max(0, s_{t-1}[i] - max(0, u_t - sum_{j=i+1}^{t-1} s_{t-1}[j]))   (i < t),   s_t[t] = d_t
    r_t    = sum_{i=1}^{t} min(s_t[i], max(0, 1 - sum_{j=i+1}^{t} s_t[j])) V_t[i]

Suffix sums are cumulative sums over the flipped axis (no Python loop over elements).
O(t m) per step, O(n^2 m) in all. State: (V [N, L, m], s [N, L]); r_0 = 0. With ``depth`` = k
only the k most recent elements are kept (the oldest is dropped: an approximation of the paper's
unbounded stack that bounds state size when the state is carried through a long stream).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.functional import relu

from decodekit.models.configs import check_vector_stack

StratState = tuple[torch.Tensor, torch.Tensor]


def _above(s: torch.Tensor) -> torch.Tensor:
    """sum_{j > i} s[..., j] for every i: [N, L]."""
    return torch.flip(torch.cumsum(torch.flip(s, [-1]), dim=-1), [-1]) - s


def stratified_reading(values: torch.Tensor, strengths: torch.Tensor) -> torch.Tensor:
    """r = sum_i min(s[i], relu(1 - above[i])) V[i]. Args: V [N, L, m], s [N, L]. Returns [N, m]."""
    weight = torch.minimum(strengths, relu(1 - _above(strengths)))
    return torch.einsum("nl,nlm->nm", weight, values)


class StratificationStack(nn.Module):
    """Args: hidden_size H, stack_embed m (pushed vector size), depth k >= 1 or None (unbounded)."""

    def __init__(self, hidden_size: int, stack_embed: int, depth: int | None = None):
        super().__init__()
        check_vector_stack(stack_embed, depth)
        self.depth = depth
        self.reading_size = stack_embed
        self.actions = nn.Linear(hidden_size, 2)
        self.push_value = nn.Linear(hidden_size, stack_embed)

    def initial(self, batch_size: int, like: torch.Tensor) -> tuple[StratState, torch.Tensor]:
        """(s_0, r_0): the empty stack (L = 0) and a zero reading."""
        values = like.new_zeros(batch_size, 0, self.reading_size)
        strengths = like.new_zeros(batch_size, 0)
        return (values, strengths), like.new_zeros(batch_size, self.reading_size)

    def check_length(self, state: StratState, steps: int) -> None:
        return None

    def forward(self, state: StratState, h: torch.Tensor) -> tuple[StratState, torch.Tensor]:
        """Args: state (V [N, L, m], s [N, L]), h_t [N, H]. Returns ((V', s') with L+1 rows, r_t [N, m])."""
        values, strengths = state
        push, pop = torch.sigmoid(self.actions(h)).unbind(-1)  # [N] each
        remaining = relu(strengths - relu(pop[:, None] - _above(strengths)))
        strengths = torch.cat([remaining, push[:, None]], dim=1)
        values = torch.cat([values, torch.tanh(self.push_value(h))[:, None]], dim=1)
        if self.depth is not None and values.shape[1] > self.depth:
            values, strengths = values[:, -self.depth :], strengths[:, -self.depth :]
        return (values, strengths), stratified_reading(values, strengths)

    def pad(self, state: StratState, size: int) -> StratState:
        """Zero-thickness rows under the bottom (neutral for pops and readings)."""
        values, strengths = state
        extra = size - values.shape[1]
        if extra <= 0:
            return state
        n, m = values.shape[0], values.shape[2]
        return (
            torch.cat([values.new_zeros(n, extra, m), values], dim=1),
            torch.cat([strengths.new_zeros(n, extra), strengths], dim=1),
        )

    def size(self, state: StratState) -> int:
        return state[0].shape[1]
