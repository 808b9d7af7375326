"""What the bundled recurrent LMs (:mod:`.lstm`, :mod:`.rnn`) share, and the uniform
initialisation every bundled net uses (:mod:`.mlp` too): the layers in one fixed order, so a seed
gives the same initial weights whichever model is built."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

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
