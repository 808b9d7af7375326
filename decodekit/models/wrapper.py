"""The base of the models that wrap another to change its log-probabilities (:mod:`.suppress`,
:mod:`.controls`): the wrapped model is ``self.model``; the step protocol's optional methods are
its own through their one default each, so a wrapper always has them, and the wrapped model's
facts the library reads (``vocab``, ``max_positions``, ``head``, ... below) are forwarded by
name. Nothing else is: ``target_logprobs`` and ``initial_logprobs`` in particular are not
(scoring a stream through a wrapper steps it, so the wrapper's changes count).
"""

from __future__ import annotations

from typing import Any

import torch

from decodekit.models import state as st
from decodekit.models.base import LanguageModel, State, model_device, prefill


def _forwarded(name: str) -> property:
    """The wrapped model's ``name`` (AttributeError, so ``hasattr`` is False, where it has none)."""
    return property(lambda self: getattr(self.model, name), doc=f"The wrapped model's ``{name}``.")


class Wrapper:
    """``model`` seen through :meth:`adjust`, which subclasses define: ``adjust(logprobs [N, V],
    state) -> logprobs [N, V]`` after every ``step`` and ``prefill``."""

    vocab = _forwarded("vocab")
    max_positions = _forwarded("max_positions")
    prefill_chunk = _forwarded("prefill_chunk")
    missing_tokenizer = _forwarded("missing_tokenizer")
    head = _forwarded("head")  # the memory estimate reads its width
    stride = _forwarded("stride")
    training = _forwarded("training")  # an nn.Module's mode and weights
    train = _forwarded("train")
    eval = _forwarded("eval")
    parameters = _forwarded("parameters")

    def __init__(self, model: LanguageModel) -> None:
        self.model = model
        self.vocab_size, self.bos_id, self.eos_id = model.vocab_size, model.bos_id, model.eos_id

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    def to(self, device: Any) -> Wrapper:
        """Move the wrapped model to ``device``; returns self."""
        self.model.to(device)
        return self

    def initial_state(self, batch_size: int) -> State:
        return self.model.initial_state(batch_size)

    def step(self, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
        logprobs, state = self.model.step(state, tokens)
        return self.adjust(logprobs, state), state

    def prefill(self, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
        logprobs, state = prefill(self.model, state, tokens)
        return self.adjust(logprobs, state), state

    def reorder_state(self, state: State, rows: torch.Tensor) -> State:
        return st.select(state, rows, self.model)

    def concat_states(self, states: list[State]) -> State:
        return st.concat(states, self.model)

    def adjust(self, logprobs: torch.Tensor, state: State) -> torch.Tensor:
        raise NotImplementedError
