"""Elman (tanh) recurrent language model, the RNNLM of Mikolov et al. (2010),
"Recurrent neural network based language model" (Interspeech 2010)::

    e_t = dropout(E[x_t])                           # [N, T, embed]
    h_t^l = tanh(W^l h_t^{l-1} + U^l h_{t-1}^l + b^l)
    logits_t = W_o dropout(h_t^L) + b_o              # [N, T, V]  (W_o = E when tied)

Training runs the fused ``nn.RNN`` over whole chunks; ``step`` runs the same module on one token.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from decodekit.models.configs import RNNConfig
from decodekit.models.neural import NeuralLM
from decodekit.vocab import Vocab


def init_uniform_(module: nn.Module, r: float) -> None:
    """Every parameter uniform in [-r, r] (Zaremba et al. 2014 initialise all parameters so)."""
    with torch.no_grad():
        for p in module.parameters():
            p.uniform_(-r, r)


def build_recurrent_lm(model: NeuralLM, config: Any, vocab: Vocab, core: type, **core_options: Any) -> None:
    """Give ``model`` the layers every recurrent LM here shares, in one fixed order (so a seed
    gives the same initial weights): embedding, dropout, the fused ``core`` (``nn.LSTM`` or
    ``nn.RNN``, batch-first, dropout between layers), output head, uniform init, optional tying."""
    model.config, model.vocab = config, vocab
    model.vocab_size = len(vocab)
    model.bos_id = model.eos_id = vocab.eos_id
    model.embedding = nn.Embedding(model.vocab_size, config.embed)
    model.drop = nn.Dropout(config.dropout)
    model.rnn = core(
        config.embed,
        config.hidden,
        config.layers,
        batch_first=True,
        dropout=config.dropout if config.layers > 1 else 0.0,
        **core_options,
    )
    model.head = nn.Linear(config.hidden, model.vocab_size)
    init_uniform_(model, config.init_range)
    if config.tie:
        model.head.weight = model.embedding.weight


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
