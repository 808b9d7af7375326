"""The feed-forward n-gram language model of Bengio, Ducharme, Vincent & Jauvin (2003),
"A Neural Probabilistic Language Model", JMLR 3:1137-1155
(https://www.jmlr.org/papers/volume3/bengio03a/bengio03a.pdf)::

    x = (C[w_{t-n+1}], ..., C[w_{t-1}])           # [(n-1) m], the shared feature matrix C [V, m]
    y = b + W x + U tanh(d + H x)                  # [V]; W x: the optional direct connections
    P(w_t | context) = softmax(y)

In :class:`~decodekit.models.neural.NeuralLM` terms the features are ``[tanh(d + H x); x]``
(or ``tanh(d + H x)`` without direct connections, or ``x`` when h = 0) and the head
``Linear(D, V)`` holds ``[U W]`` and ``b``. The decoding state is the last n-1 token ids [N, n-1];
a sequence starts from a context of n-1 ``bos`` (= ``eos``) ids.
"""

from __future__ import annotations

import torch
from torch import nn

from decodekit.models.configs import MLPConfig
from decodekit.models.neural import NeuralLM
from decodekit.models.recurrent import init_uniform_
from decodekit.util.checks import require
from decodekit.vocab import Vocab


class MLPLM(NeuralLM):
    """Bengio et al. (2003) MLP LM. State: the last n-1 token ids [N, n-1] (long)."""

    def __init__(self, config: MLPConfig, vocab: Vocab) -> None:
        super().__init__()
        require(
            vocab.eos_id is not None,
            "the MLP pads the first context with <eos>: the vocabulary needs an eos token",
        )
        self.config, self.vocab = config, vocab
        self.vocab_size = len(vocab)
        self.bos_id = self.eos_id = vocab.eos_id
        self.context = config.order - 1
        width = self.context * config.embed  # (n-1) m
        self.embedding = nn.Embedding(self.vocab_size, config.embed)  # C
        self.hidden = nn.Linear(width, config.hidden) if config.hidden > 0 else None  # H, d
        self.drop = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.hidden + (width if config.direct else 0), self.vocab_size)  # [U W], b
        init_uniform_(self, config.init_range)

    def initial_state(self, batch_size: int) -> torch.Tensor:
        """A context of n-1 ``bos`` ids [N, n-1]."""
        dev = self.head.bias.device
        return torch.full((batch_size, self.context), self.bos_id, dtype=torch.long, device=dev)

    def features(self, state: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Args: state [N, n-1] ids; tokens [N, T]. Returns (features [N, T, D], last n-1 ids [N, n-1])."""
        full = torch.cat([state, tokens], dim=1)  # [N, n-1+T]
        windows = full.unfold(1, self.context, 1)[:, 1:]  # [N, T, n-1]: context ending at each token
        x = self.drop(self.embedding(windows).flatten(2))  # [N, T, (n-1) m]
        parts = []
        if self.hidden is not None:
            parts.append(self.drop(torch.tanh(self.hidden(x))))  # [N, T, h]
        if self.config.direct:
            parts.append(x)
        out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return out, full[:, -self.context :]
