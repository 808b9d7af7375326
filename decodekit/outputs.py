"""Decoding results: plain dataclasses and their rendering to text / JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from decodekit.vocab import Vocab


@dataclass(frozen=True)
class Hypothesis:
    """One generated continuation.

    Attributes:
        tokens: generated token ids; the prompt and a final EOS are excluded.
        logprob: sum of the log-probabilities of the generated tokens, EOS included.
        score: what the search ranked by (``logprob / len**length_penalty`` for beam searches,
            ``len`` counting EOS; ``logprob`` for greedy and sampling).
        finished: True if the hypothesis ended with EOS, False if it stopped at ``max_length``.
    """

    tokens: tuple[int, ...]
    logprob: float
    score: float
    finished: bool

    def text(self, vocab: Vocab) -> str:
        """The continuation as text (detokenised by ``vocab``)."""
        return vocab.decode(self.tokens)

    def to_dict(self, vocab: Vocab | None = None) -> dict:
        """A JSON-ready dict: ``tokens``, ``logprob``, ``score``, ``finished`` (+ ``text``)."""
        d = asdict(self)
        d["tokens"] = list(self.tokens)
        if vocab is not None:
            d = {"text": self.text(vocab), **d}
        return d
