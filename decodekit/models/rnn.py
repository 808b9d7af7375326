"""Elman (tanh) recurrent language model, the RNNLM of Mikolov et al. (2010),
"Recurrent neural network based language model" (Interspeech 2010)::

    e_t = dropout(E[x_t])                           # [N, T, embed]
    h_t^l = tanh(W^l h_t^{l-1} + U^l h_{t-1}^l + b^l)
    logits_t = W_o dropout(h_t^L) + b_o              # [N, T, V]  (W_o = E when tied)

Training runs the fused ``nn.RNN`` over whole chunks; ``step`` runs the same module on one token.
"""

from __future__ import annotations

import torch
from torch import nn

from decodekit.models.configs import RNNConfig
from decodekit.models.neural import NeuralLM
from decodekit.models.recurrent import build_recurrent_lm
from decodekit.vocab import Vocab


class RNNLM(NeuralLM):
    """Multi-layer Elman RNN LM. State: ``h`` [N, L, H] (batch-first)."""

    def __init__(self, config: RNNConfig, vocab: Vocab) -> None:
        super().__init__()
        build_recurrent_lm(self, config, vocab, nn.RNN, nonlinearity="tanh")

    def initial_state(self, batch_size: int) -> torch.Tensor:
        """Zero state ``h`` [N, L, H]."""
        p = self.head.bias
        return torch.zeros(batch_size, self.config.layers, self.config.hidden, dtype=p.dtype, device=p.device)

    def features(self, state: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Args: state h [N, L, H]; tokens [N, T]. Returns (H [N, T, H], h [N, L, H])."""
        x = self.drop(self.embedding(tokens))  # [N, T, E]
        out, h = self.rnn(x, state.transpose(0, 1).contiguous())
        return self.drop(out), h.transpose(0, 1)
