"""Masked greedy decoding walks into a dead end that Anderson-style search avoids.

The constraint is "a word, then 'y'" over a character vocabulary. The model likes 'a' first,
but after 'a' it almost never writes 'y'; after 'b' it nearly always does. Masking greedily
commits to 'a' and is then forced through an improbable 'y'; constrained beam search keeps a
beam for every automaton state and finds "by", ~1000x more probable.

    python examples/masking_vs_anderson.py
"""

import argparse
import math

import torch

import decodekit
from decodekit.vocab import Vocab


class TableLM:
    """Bigram model over a given vocabulary: log p(next | last) = table[last]."""

    def __init__(self, vocab: Vocab, probs: torch.Tensor):
        self.vocab, self.vocab_size = vocab, len(vocab)
        self.bos_id = self.eos_id = vocab.eos_id
        self.table = torch.log(probs / probs.sum(-1, keepdim=True))

    def initial_state(self, batch_size):
        return torch.zeros(batch_size, dtype=torch.long)

    def step(self, state, tokens):
        return self.table[tokens], tokens


def build() -> TableLM:
    vocab = Vocab(["<unk>", "<eos>", "a", "b", "x", "y"], separator="", eos="<eos>", unk="<unk>")
    a, b, x, y, eos = (vocab.index[t] for t in ("a", "b", "x", "y", "<eos>"))
    p = torch.full((6, 6), 1e-6)
    p[eos, a], p[eos, b] = 0.6, 0.4  # first token: 'a' is likelier
    p[a, x], p[a, y] = 0.999, 0.001  # after 'a': 'x' (forbidden by the regex), rarely 'y'
    p[b, y] = 0.99  # after 'b': 'y'
    p[y, eos] = p[x, eos] = 0.99
    return TableLM(vocab, p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="(runs the same tiny example)")
    parser.parse_args()
    model, pattern = build(), "(a|b)y"
    greedy = decodekit.greedy(model, [], 5, constraint=pattern)[0]
    grid = decodekit.constrained_beam_search(model, [], pattern, beam_size=2, max_length=5)[0]
    for name, h in (("masked greedy", greedy), ("constrained beam search", grid)):
        print(f"{name:>24}: {model.vocab.decode(h.tokens)!r}  p = {math.exp(h.logprob):.2e}")
    assert model.vocab.decode(grid.tokens) == "by" and grid.logprob > greedy.logprob


if __name__ == "__main__":
    main()
