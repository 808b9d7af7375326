"""The superposition stack (Joulin & Mikolov 2015), in DuSell & Chiang's controller-stack form.

From h_t the controller emits a_t = softmax(W_a h_t + b_a) = (push, no-op, pop) and the pushed
vector v_t = sigmoid(W_v h_t + b_v) (learned) or v_t = h_t (``push_hidden``). With the stack
s_{t-1} [L, m] (row 0 = top; rows past the bottom are 0)::

    s_t[0] = a_push v_t       + a_noop s_{t-1}[0] + a_pop s_{t-1}[1]
    s_t[i] = a_push s_{t-1}[i-1] + a_noop s_{t-1}[i] + a_pop s_{t-1}[i+1]
    r_t    = s_t[0]

``depth`` = None: the stack grows by one cell per step (O(n) per step, O(n^2) in all);
``depth`` = k: k cells, whatever is pushed below the k-th is lost (O(k) per step).
State: elements [N, L, m].
"""

from __future__ import annotations

import torch
from torch import nn

from decodekit.models.configs import check_vector_stack


class SuperpositionStack(nn.Module):
    """Args: hidden_size H, stack_embed m (vector size; must equal H when ``push_hidden``),
    depth k >= 1 or None (unbounded)."""

    def __init__(
        self, hidden_size: int, stack_embed: int, depth: int | None = None, push_hidden: bool = False
    ):
        super().__init__()
        check_vector_stack(stack_embed, depth, hidden_size if push_hidden else None)
        self.depth, self.push_hidden, self.reading_size = depth, push_hidden, stack_embed
        self.actions = nn.Linear(hidden_size, 3)
        self.push_value = None if push_hidden else nn.Linear(hidden_size, stack_embed)

    def initial(self, batch_size: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(s_0, r_0): an all-zero stack of ``depth`` cells (1 cell when unbounded)."""
        cells = self.depth or 1
        elements = torch.zeros(batch_size, cells, self.reading_size, dtype=like.dtype, device=like.device)
        return elements, elements[:, 0]

    def check_length(self, state: torch.Tensor, steps: int) -> None:
        return None

    def forward(self, state: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Args: state [N, L, m], h_t [N, H]. Returns (s_t [N, L or L+1, m], r_t [N, m])."""
        a = torch.softmax(self.actions(h), dim=-1)[:, :, None, None]  # [N, 3, 1, 1]
        v = h if self.push_value is None else torch.sigmoid(self.push_value(h))
        old = state
        if self.depth is None:
            old = torch.cat([old, torch.zeros_like(old[:, :1])], dim=1)
        pushed = torch.cat([v[:, None], old[:, :-1]], dim=1)
        popped = torch.cat([old[:, 1:], torch.zeros_like(old[:, :1])], dim=1)
        new = a[:, 0] * pushed + a[:, 1] * old + a[:, 2] * popped
        return new, new[:, 0]

    def pad(self, state: torch.Tensor, size: int) -> torch.Tensor:
        """Zero cells below the bottom (neutral)."""
        extra = size - state.shape[1]
        if extra <= 0:
            return state
        return torch.cat([state, state.new_zeros(state.shape[0], extra, state.shape[2])], dim=1)

    def size(self, state: torch.Tensor) -> int:
        return state.shape[1]
