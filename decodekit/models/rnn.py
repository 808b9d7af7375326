"""Elman (tanh) recurrent language model, the RNNLM of Mikolov et al. (2010),
"Recurrent neural network based language model" (Interspeech 2010)::

    e_t = dropout(E[x_t])                           # [N, T, embed]
    h_t^l = tanh(W^l h_t^{l-1} + U^l h_{t-1}^l + b^l)
    logits_t = W_o dropout(h_t^L) + b_o              # [N, T, V]  (W_o = E when tied)

Training runs the fused ``nn.RNN`` over whole chunks; ``step`` runs the same module on one token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from decodekit.checks import at_least, fraction, positive, require
from decodekit.models.neural import NeuralLM
from decodekit.vocab import Vocab


def check_recurrent_config(config: Any) -> None:
    """Raise ConfigError for impossible sizes of an RNN/LSTM config (its ``__post_init__``)."""
    for name in ("embed", "hidden", "layers"):
        at_least(name, getattr(config, name))
    fraction("dropout", config.dropout)
    positive("init_range", config.init_range)
    require(
        not config.tie or config.embed == config.hidden,
        f"tied embeddings need embed == hidden, got embed={config.embed}, hidden={config.hidden}",
    )


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


@dataclass(frozen=True)
class RNNConfig:
    """Sizes of an Elman RNN LM (see :class:`decodekit.models.lstm.LSTMConfig` for the fields)."""

    kind: ClassVar[str] = "rnn"
    embed: int = 200
    hidden: int = 200
    layers: int = 1
    dropout: float = 0.0
    tie: bool = False
    init_range: float = 0.1

    def __post_init__(self) -> None:
        check_recurrent_config(self)


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
