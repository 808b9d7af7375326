"""The Bengio et al. (2003) MLP against its formula, written out by hand."""

from __future__ import annotations

import torch

from decodekit.models.mlp import MLPLM, MLPConfig
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "a", "b", "c"])


def formula(model: MLPLM, context: list[int]) -> torch.Tensor:
    """log softmax(b + W x + U tanh(d + H x)), x = (C[w_{t-n+1}], ..., C[w_{t-1}])."""
    m, h = model.config.embed, model.config.hidden
    x = torch.cat([model.embedding.weight[w] for w in context])  # [(n-1) m]
    U, W = model.head.weight[:, :h], model.head.weight[:, h:]
    hidden = torch.tanh(model.hidden.bias + model.hidden.weight @ x)
    assert W.shape[1] == len(context) * m
    return torch.log_softmax(model.head.bias + W @ x + U @ hidden, -1)


def test_mlp_matches_bengio_formula_and_pads_with_eos():
    torch.manual_seed(0)
    model = MLPLM(MLPConfig(order=4, embed=3, hidden=5, direct=True, init_range=0.5), VOCAB).double().eval()
    eos = VOCAB.eos_id
    seq = [2, 3, 4, 2, 2]
    logits, state = model(torch.tensor([seq]))
    padded = [eos, eos, eos] + seq
    for t in range(len(seq)):
        expected = formula(model, padded[t + 1 : t + 4])  # the 3 tokens ending at seq[t]
        torch.testing.assert_close(torch.log_softmax(logits[0, t], -1), expected, rtol=0, atol=1e-12)
    assert state.tolist() == [seq[-3:]]
    assert model.initial_state(2).tolist() == [[eos] * 3] * 2
