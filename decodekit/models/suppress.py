"""Forbidding tokens: a model whose distribution never gives them probability.

``Suppressed(model, token_ids)`` is transformers' ``suppress_tokens`` (and single-token
``bad_words_ids``) as a step-protocol model, so every strategy (greedy, sampling, beam,
constrained) honours it with no code of its own: each step's log-probabilities get -inf at the
suppressed ids and are renormalised over the others,

    logprobs'[t] = logprobs[t] - logsumexp(logprobs[u] for u not suppressed)   (t not suppressed)

so the result is again a distribution (the decoders check that) and beam scores stay
log-probabilities of the model conditioned on never emitting those tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from decodekit.errors import DecodekitError
from decodekit.models.base import LanguageModel, State, model_device
from decodekit.models.wrapper import Wrapper


class Suppressed(Wrapper):
    """``model`` with the tokens ``token_ids`` given probability 0 at every step.

    Args:
        model: any step-protocol model.
        token_ids: ids in ``[0, model.vocab_size)``; at least one token must stay allowed.
    """

    def __init__(self, model: LanguageModel, token_ids: Iterable[int]) -> None:
        ids = sorted({int(t) for t in token_ids})
        bad = [t for t in ids if not 0 <= t < model.vocab_size]
        if bad:
            raise DecodekitError(f"cannot suppress token id(s) {bad[:5]}: ids are in [0, {model.vocab_size})")
        if len(ids) >= model.vocab_size:
            raise DecodekitError("every token is suppressed: nothing could be generated")
        super().__init__(model)
        self.suppressed = tuple(ids)
        self.eos_id = None if model.eos_id in ids else model.eos_id  # a suppressed EOS never ends
        mask = torch.zeros(model.vocab_size, dtype=torch.bool)
        mask[list(ids)] = True
        self._mask = mask.to(model_device(model))  # [V] True = suppressed

    def to(self, device: Any) -> Suppressed:
        """Move the wrapped model (and the mask) to ``device``; returns self."""
        self.model.to(device)
        self._mask = self._mask.to(device)
        return self

    def adjust(self, logprobs: torch.Tensor, state: State) -> torch.Tensor:
        """[N, V] -> [N, V]: -inf at the suppressed ids, the rest shifted to sum to 1.
        DecodekitError when a row gave all its probability to suppressed tokens (then nothing
        can follow: the conditional distribution does not exist)."""
        masked = logprobs.masked_fill(self._mask.to(logprobs.device), float("-inf"))
        total = torch.logsumexp(masked, dim=-1, keepdim=True)  # [N, 1]
        if not bool(torch.isfinite(total).all()):
            raise DecodekitError(
                "the model gives all its probability to suppressed tokens here; suppress fewer tokens"
            )
        return masked - total

    def __repr__(self) -> str:
        return f"Suppressed({self.model!r}, {list(self.suppressed)[:10]})"
