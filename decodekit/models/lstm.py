"""LSTM language model (Hochreiter & Schmidhuber 1997) as used by Zaremba et al. (2014),
"Recurrent Neural Network Regularization", https://arxiv.org/abs/1409.2329.

Training runs the fused ``nn.LSTM`` (cuDNN on GPU) over whole chunks; decoding runs the
same module one step at a time, so ``step`` and ``forward`` share weights and agree::

    e_t = dropout(E[x_t])                        # [N, T, embed]
    h_t^l, c_t^l = LSTM^l(h_t^{l-1}, (h_{t-1}^l, c_{t-1}^l))
    logits_t = W dropout(h_t^L) + b               # [N, T, V]  (W = E when tied)
"""

from __future__ import annotations

import torch
from torch import nn

from decodekit.models.configs import LSTMConfig
from decodekit.models.neural import NeuralLM
from decodekit.models.recurrent import build_recurrent_lm
from decodekit.vocab import Vocab


class LSTMLM(NeuralLM):
    """Multi-layer LSTM LM. State: ``(h, c)``, each [N, L, H] (batch-first; transposed to
    [L, N, H] only when calling ``nn.LSTM``)."""

    def __init__(self, config: LSTMConfig, vocab: Vocab) -> None:
        super().__init__()
        build_recurrent_lm(self, config, vocab, nn.LSTM)

    def initial_state(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero state: ``(h, c)``, each [N, L, H]."""
        p = self.head.bias
        z = torch.zeros(batch_size, self.config.layers, self.config.hidden, dtype=p.dtype, device=p.device)
        return z, z.clone()

    def features(
        self, state: tuple[torch.Tensor, torch.Tensor], tokens: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Args: state (h, c) [N, L, H] each; tokens [N, T]. Returns (H [N, T, H], (h, c))."""
        h, c = state
        x = self.drop(self.embedding(tokens))  # [N, T, E]
        out, (h, c) = self.rnn(x, (h.transpose(0, 1).contiguous(), c.transpose(0, 1).contiguous()))
        return self.drop(out), (h.transpose(0, 1), c.transpose(0, 1))
