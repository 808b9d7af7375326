"""``NeuralLM``: the base class the bundled PyTorch models share.

A subclass implements :meth:`features` (and :meth:`initial_state`); the base class adds the
output layer and derives the training ``forward`` and the decoding ``step``/``prefill`` from
the same ``features``, so incremental decoding and full-sequence scoring agree by
construction::

    logits[N, T, V] = head(features(state, tokens[N, T])[0])
    step(state, x[N]) = log_softmax(head(features(state, x[:, None])[0][:, -1]))

NCE and sampled-softmax training use ``features`` plus only the rows of ``head.weight`` and
``head.bias`` they need.
"""

from __future__ import annotations

import torch
from torch import nn

from decodekit.models.base import State


class NeuralLM(nn.Module):
    """Base for bundled models. Subclasses set ``self.head = nn.Linear(D, V)`` (or tie it).

    Attributes:
        vocab_size, bos_id, eos_id: the step protocol's attributes.
        vocab: the :class:`decodekit.vocab.Vocab`, when the model has one (for text and constraints).
    """

    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    head: nn.Linear
    prefill_chunk: int = 4096  # prompt tokens encoded per features() call

    def features(self, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
        """Args: state (batch-first, N rows), tokens [N, T] long.
        Returns (hidden features [N, T, D], the state after the last token)."""
        raise NotImplementedError

    def initial_state(self, batch_size: int) -> State:
        raise NotImplementedError

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, tokens: torch.Tensor, state: State | None = None) -> tuple[torch.Tensor, State]:
        """Training pass. Args: tokens [N, T]. Returns (logits [N, T, V], final state)."""
        if state is None:
            state = self.initial_state(tokens.shape[0])
        hidden, state = self.features(state, tokens)
        return self.head(hidden), state

    @torch.no_grad()
    def step(self, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
        """Args: tokens [N]. Returns (logprobs [N, V], new state)."""
        hidden, state = self.features(state, tokens[:, None])
        return torch.log_softmax(self.head(hidden[:, -1]).float(), dim=-1), state

    @torch.no_grad()
    def step_many(
        self, state: State, tokens: torch.Tensor, keep_last: int | None = None
    ) -> tuple[torch.Tensor, State]:
        """One ``features`` call over L tokens (one fused sequence call for the LSTM / RNN).
        Args: tokens [N, L]. Returns (logprobs [N, L, V] after each token, or the last
        ``keep_last`` of them: the head only there, state after all)."""
        hidden, state = self.features(state, tokens)
        if keep_last is not None:
            hidden = hidden[:, hidden.shape[1] - keep_last :]
        return torch.log_softmax(self.head(hidden).float(), dim=-1), state

    @torch.no_grad()
    def prefill(self, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
        """Args: tokens [N, T], T >= 1. Returns (logprobs [N, V] after the last token, state).

        Long prompts are encoded ``prefill_chunk`` tokens at a time, the state carried (the same
        result as one call): activations stay bounded, so a prompt of a million tokens needs
        megabytes, not gigabytes (and stays within what a fused cuDNN/oneDNN call accepts)."""
        for start in range(0, tokens.shape[1], self.prefill_chunk):
            hidden, state = self.features(state, tokens[:, start : start + self.prefill_chunk])
        return torch.log_softmax(self.head(hidden[:, -1]).float(), dim=-1), state

    def target_logprobs(
        self, state: State, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, State]:
        """``log p(targets[:, t] | state, inputs[:, :t+1])`` with one ``features`` call (the stream
        scorer, :func:`decodekit.models.scoring.stream_logprobs`, uses it).

        Args: inputs, targets [N, T]. Returns (logprobs [N, T] float32, state after the inputs)."""
        hidden, state = self.features(state, inputs)
        logprobs = torch.log_softmax(self.head(hidden).float(), dim=-1)  # [N, T, V]
        return logprobs.gather(-1, targets[..., None])[..., 0], state
