"""``StackLSTM``: an LSTM controller connected to a differentiable stack (DuSell & Chiang 2022, §2).

    h_t, c_t = LSTM([x_t ; r_{t-1}], (h_{t-1}, c_{t-1}))     h_0 = c_0 = 0
    a_t      = Actions(h_t)          y_t = W_y h_t + b_y      (logits of w_{t+1})
    s_t      = Stack(s_{t-1}, a_t)   r_t = Reading(s_t)

Swapping the stack (superposition, stratification, NS, RNS, memory-limited NS/RNS) changes only
Actions, Stack, Reading and s_0. The state is a batch-first pytree
``{"h": [N, H], "c": [N, H], "r": [N, R], "stack": <stack tensors>}`` that is never written in
place, so :func:`decodekit.models.state.select` reorders it and ``step`` decodes incrementally.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from decodekit.models.configs import STACKS, StackLSTMConfig  # noqa: F401 (STACKS: re-exported)
from decodekit.models.neural import NeuralLM
from decodekit.models.stack.nondeterministic import NondeterministicStack
from decodekit.models.stack.stratification import StratificationStack
from decodekit.models.stack.superposition import SuperpositionStack
from decodekit.vocab import Vocab


def build_stack(config: StackLSTMConfig) -> nn.Module:
    """The stack module a (validated) config names, with its action layer."""
    if config.stack == "superposition":
        return SuperpositionStack(config.hidden, config.stack_embed, config.depth, config.push_hidden)
    if config.stack == "stratification":
        return StratificationStack(config.hidden, config.stack_embed, config.depth)
    return NondeterministicStack(
        config.hidden,
        config.stack_states,
        config.stack_symbols,
        renormalizing=config.stack == "rns",
        window=config.window,
        max_length=config.max_length,
        bottom=config.bottom,
    )


class StackLSTM(NeuralLM):
    """Stack-augmented LSTM LM (``bos_id = eos_id = vocab.eos_id``). ``features`` returns h_t."""

    def __init__(self, config: StackLSTMConfig, vocab: Vocab) -> None:
        super().__init__()
        self.config, self.vocab = config, vocab
        self.vocab_size = len(vocab)
        self.bos_id = self.eos_id = vocab.eos_id
        self.stack = build_stack(config)
        self.embedding = nn.Embedding(self.vocab_size, config.embed)
        self.controller = nn.LSTMCell(config.embed + self.stack.reading_size, config.hidden)
        self.head = nn.Linear(config.hidden, self.vocab_size)
        for p in self.parameters():
            nn.init.uniform_(p, -config.init_range, config.init_range)

    def initial_state(self, batch_size: int) -> dict[str, Any]:
        """h_0 = c_0 = 0, the stack's s_0 and r_0."""
        like = self.head.bias
        h = like.new_zeros(batch_size, self.config.hidden)
        stack, reading = self.stack.initial(batch_size, like)
        return {"h": h, "c": h.clone(), "r": reading, "stack": stack}

    def features(self, state: dict[str, Any], tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        """Args: state (N rows), tokens [N, T]. Returns (h_1..h_T [N, T, H], state after x_T).

        With ``config.recompute`` and gradients on, the T steps run in segments of ceil(sqrt(T))
        whose intermediates are recomputed in the backward pass (``torch.utils.checkpoint``): only
        the states at segment boundaries are kept, e.g. O(n^2.5) instead of O(n^3) autograd memory
        for the unlimited NS/RNS stack, for about one extra forward pass."""
        self.stack.check_length(state["stack"], tokens.shape[1])
        x = self.embedding(tokens)  # [N, T, E]
        carry = (state["h"], state["c"], state["r"], state["stack"])
        if not (self.config.recompute and torch.is_grad_enabled() and tokens.shape[1] > 1):
            outputs, carry = self._steps(x, *carry)
        else:
            size, outputs = math.isqrt(tokens.shape[1] - 1) + 1, []
            for start in range(0, tokens.shape[1], size):
                segment = x[:, start : start + size]
                out, carry = checkpoint(self._steps, segment, *carry, use_reentrant=False)
                outputs.append(out)
            outputs = torch.cat(outputs, dim=1)
        h, c, r, stack = carry
        return outputs, {"h": h, "c": c, "r": r, "stack": stack}

    def _steps(self, x: torch.Tensor, h, c, r, stack) -> tuple[torch.Tensor, tuple]:
        """The recurrence over x [N, T', E]. Returns (h_t [N, T', H], (h, c, r, stack))."""
        outputs = []
        for t in range(x.shape[1]):
            h, c = self.controller(torch.cat([x[:, t], r], dim=-1), (h, c))
            stack, r = self.stack(stack, h)
            outputs.append(h)
        return torch.stack(outputs, dim=1), (h, c, r, stack)

    def concat_states(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        """Join row-wise; growing stacks are padded with neutral (zero-weight) cells first."""
        size = max(self.stack.size(s["stack"]) for s in states)
        stacks = [self.stack.pad(s["stack"], size) for s in states]
        out = {k: torch.cat([s[k] for s in states], 0) for k in ("h", "c", "r")}
        first = stacks[0]
        if isinstance(first, torch.Tensor):
            out["stack"] = torch.cat(stacks, 0)
        else:
            out["stack"] = tuple(torch.cat([s[i] for s in stacks], 0) for i in range(len(first)))
        return out
