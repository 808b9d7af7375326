"""What transformers', vLLM's, the OpenAI API's and ``llm``'s users set besides the search:
repetition, presence and frequency penalties, logit bias, bad words, no repeated n-grams, a
minimum length and stop strings, as one step-protocol wrapper.

``Controlled(model, repetition_penalty=..., presence_penalty=..., frequency_penalty=...,
logit_bias=..., bad_words=..., no_repeat_ngram_size=..., min_new_tokens=..., stop=...)`` is a
model like any other, so every strategy (greedy, sampling, beam, masked and
Anderson-style constrained search) honours the controls with no code of its own. Its state is
``ControlledState(inner, history [N, T], new [N])``: the wrapped model's state, every token fed
(the prompt, with its BOS, then the generated ones) and how many were generated; rows are
reordered like any state. At each step the wrapped model's log-probabilities ``lp [N, V]`` become

* ``repetition_penalty`` r (transformers' ``RepetitionPenaltyLogitsProcessor``, CTRL's rule) on
  every token already in the row's history: ``lp * r`` where ``lp < 0`` (``lp / r`` where > 0);
* ``presence_penalty`` a and ``frequency_penalty`` f (the OpenAI API's and vLLM's, each in
  [-2, 2]; > 0 discourages repeats, < 0 encourages them): ``lp - f * c - a * (c > 0)``, c [N, V]
  the count of each token among the row's *generated* tokens (the prompt's are not counted);
* ``logit_bias`` {id: b} (the OpenAI API's, b in [-100, 100]): ``lp + b`` at those ids;
* ``bad_words`` (transformers' ``NoBadWordsLogitsProcessor``): token sequences never generated:
  -inf for the last token of each sequence whose other tokens end the history (a one-token
  sequence: always);
* ``no_repeat_ngram_size`` n (``NoRepeatNGramLogitsProcessor``): -inf for each token that would
  complete an n-gram the history already holds;
* ``min_new_tokens`` m (``MinNewTokensLengthLogitsProcessor``): -inf for EOS while fewer than m
  tokens were generated;
* ``stop`` strings: once the generated text contains one (decoded from the vocabulary's token
  bytes), EOS only, so the hypothesis ends there (the stop string is kept in the output, as
  transformers' ``stop_strings`` keep it);

and are then renormalised over what is left (the step protocol returns distributions), so scores
stay log-probabilities of the controlled distribution. Each equals transformers' processor applied
to the same log-probabilities, renormalised (tested). The additive ones (presence, frequency,
bias) change a row by a constant per token, so on log-probabilities or on logits they give the
same distribution: the OpenAI and vLLM ones exactly, in every search. transformers applies the
others to the scores it has: log-probabilities in beam search (unrenormalised, so beams may rank
differently), raw logits in greedy search and sampling. The masks (n-grams, minimum length, stop
strings, bad words) ignore that difference; the repetition penalty does not (its rule depends on
the sign of a logit, which log-probabilities do not keep), so with a penalty greedy search may
differ from transformers'.
Stopping at a stop string needs a model with an EOS token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch

from decodekit.errors import ConfigError, DecodekitError
from decodekit.models import state as st
from decodekit.models.base import LanguageModel, State, model_device, prefill
from decodekit.models.wrapper import Wrapper
from decodekit.util.checks import real

NEG_INF = float("-inf")


class ControlledState(NamedTuple):
    inner: State
    history: torch.Tensor  # [N, T] long: every token fed, the prompt's first
    new: torch.Tensor  # [N] long: tokens generated (fed after the prompt)


class Controlled(Wrapper):
    """``model`` under the controls of the module docstring (the defaults change nothing).

    Args:
        repetition_penalty: r > 0 (1: off).
        presence_penalty, frequency_penalty: in [-2, 2] (0: off).
        logit_bias: {token id: bias in [-100, 100]}.
        bad_words: token id sequences never generated.
        no_repeat_ngram_size: n >= 0 (0: off).
        min_new_tokens: m >= 0.
        stop: strings whose appearance in the generated text ends it (needs ``model.vocab``
            and an EOS).
    """

    def __init__(
        self,
        model: LanguageModel,
        *,
        repetition_penalty: float = 1.0,
        no_repeat_ngram_size: int = 0,
        min_new_tokens: int = 0,
        stop: Sequence[str] = (),
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        logit_bias: Mapping[int, float] | None = None,
        bad_words: Sequence[Sequence[int]] = (),
    ) -> None:
        if not repetition_penalty > 0:
            raise ConfigError(f"repetition_penalty must be > 0, got {repetition_penalty!r}")
        real("presence_penalty", presence_penalty, -2.0, 2.0)
        real("frequency_penalty", frequency_penalty, -2.0, 2.0)
        bias = dict(logit_bias or {})
        for token, value in bias.items():
            real(f"logit_bias[{token}]", value, -100.0, 100.0)
        bad_words = tuple(tuple(int(t) for t in w) for w in bad_words)
        ids = [*bias, *(t for w in bad_words for t in w)]
        outside = [t for t in ids if not (isinstance(t, int) and 0 <= t < model.vocab_size)]
        if outside or not all(bad_words):
            what = f"token id(s) {outside[:5]}" if outside else "an empty sequence"
            raise ConfigError(f"logit_bias and bad_words take ids in [0, {model.vocab_size}), got {what}")
        counts = {"no_repeat_ngram_size": no_repeat_ngram_size, "min_new_tokens": min_new_tokens}
        for name, value in counts.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        stop = (stop,) if isinstance(stop, str) else tuple(stop)
        if any(not isinstance(s, str) or not s for s in stop):
            raise ConfigError(f"stop must be a list of non-empty strings, got {list(stop)!r}")
        super().__init__(model)
        self.penalty = float(repetition_penalty)
        self.presence, self.frequency = float(presence_penalty), float(frequency_penalty)
        device = model_device(model)
        self.bias: torch.Tensor | None = None  # [V]
        if bias:
            self.bias = torch.zeros(model.vocab_size, device=device)
            self.bias[list(bias)] = torch.tensor(list(bias.values()), dtype=torch.float, device=device)
        self.bad_words = bad_words
        self._banned = torch.zeros(model.vocab_size, dtype=torch.bool, device=device)  # one-token bad words
        self._banned[[w[0] for w in bad_words if len(w) == 1]] = True
        self._bad_sequences = [w for w in bad_words if len(w) > 1]
        self.ngram, self.min_new = no_repeat_ngram_size, min_new_tokens
        self.stop = tuple(s.encode("utf-8") for s in stop)
        if self.stop:
            vocab = getattr(model, "vocab", None)
            if vocab is None or model.eos_id is None:
                raise ConfigError("stop strings need a model with a vocabulary and an EOS token")
            surfaces = getattr(vocab, "surface_bytes", None)
            if surfaces is not None:
                raw = surfaces()
            else:
                raw = [None if s is None else s.encode("utf-8") for s in vocab.surfaces()]
            self._bytes = [b or b"" for b in raw]
            self._sep = getattr(vocab, "separator", "").encode("utf-8")

    def initial_state(self, batch_size: int) -> ControlledState:
        empty = torch.zeros(batch_size, 0, dtype=torch.long, device=model_device(self.model))
        return ControlledState(self.model.initial_state(batch_size), empty, empty.new_zeros(batch_size))

    def prefill(self, state: ControlledState, tokens: torch.Tensor) -> tuple[torch.Tensor, ControlledState]:
        """The prompt ``tokens`` [N, T] (not counted as generated)."""
        logprobs, inner = prefill(self.model, state.inner, tokens)
        fed = tokens.clone()
        if self.bos_id is not None:  # the BOS decodekit feeds first is not text: never penalised
            fed[:, 0] = fed[:, 0].masked_fill(fed[:, 0] == self.bos_id, -1)
        state = ControlledState(inner, torch.cat([state.history, fed], 1), state.new)
        return self.adjust(logprobs, state), state

    def step(self, state: ControlledState, tokens: torch.Tensor) -> tuple[torch.Tensor, ControlledState]:
        logprobs, inner = self.model.step(state.inner, tokens)
        fed = tokens.view(-1, 1)
        if self.bos_id is not None and state.history.shape[1] == 0:  # as prefill: BOS is not text
            fed = fed.masked_fill(fed == self.bos_id, -1)
        state = ControlledState(inner, torch.cat([state.history, fed], 1), state.new + 1)
        return self.adjust(logprobs, state), state

    def reorder_state(self, state: ControlledState, rows: torch.Tensor) -> ControlledState:
        return ControlledState(
            st.select(state.inner, rows, self.model), state.history.index_select(0, rows), state.new[rows]
        )

    def concat_states(self, states: list[ControlledState]) -> ControlledState:
        width = max(s.history.shape[1] for s in states)  # prompts of other lengths, left-padded with -1
        pad = [torch.nn.functional.pad(s.history, (width - s.history.shape[1], 0), value=-1) for s in states]
        inner = st.concat([s.inner for s in states], self.model)
        return ControlledState(inner, torch.cat(pad, 0), torch.cat([s.new for s in states]))

    def adjust(self, logprobs: torch.Tensor, state: ControlledState) -> torch.Tensor:
        out = logprobs
        history = state.history  # [N, T], -1: padding
        if self.penalty != 1.0 and history.shape[1]:
            seen = torch.zeros_like(out, dtype=torch.bool)
            seen.scatter_(1, history.clamp(min=0), history >= 0)
            penalised = torch.where(out < 0, out * self.penalty, out / self.penalty)
            out = torch.where(seen, penalised, out)
        if self.presence or self.frequency:
            counts = self._generated_counts(history, state.new, out)
            out = out - self.frequency * counts - self.presence * (counts > 0).to(out.dtype)
        if self.bias is not None:
            out = out + self.bias.to(out)
        if self.bad_words:
            out = out.masked_fill(self._bad_words(history, out.shape), NEG_INF)
        if self.ngram:
            out = out.masked_fill(self._repeated_ngrams(history, out.shape), NEG_INF)
        if self.min_new and self.eos_id is not None:
            early = (state.new < self.min_new).to(out.device)
            out = out.clone() if out is logprobs else out
            out[:, self.eos_id] = out[:, self.eos_id].masked_fill(early, NEG_INF)
        if self.stop:
            ended = self._stopped(history, state.new)
            if bool(ended.any()):
                out = out.clone() if out is logprobs else out
                out[ended] = NEG_INF
                out[ended, self.eos_id] = 0.0
        if out is logprobs:
            return logprobs
        total = torch.logsumexp(out, dim=-1, keepdim=True)
        if not bool(torch.isfinite(total).all()):
            raise DecodekitError(
                "the controls (bad_words, no_repeat_ngram_size, min_new_tokens) leave no token of "
                "non-zero probability here; relax them"
            )
        return out - total

    def _generated_counts(self, history: torch.Tensor, new: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """[N, V]: how often each token occurs among the last ``new`` tokens of each row."""
        width = history.shape[1]
        generated = torch.arange(width, device=history.device) >= width - new[:, None].to(history.device)
        generated &= history >= 0
        counts = torch.zeros_like(like)
        return counts.scatter_add_(1, history.clamp(min=0), generated.to(like.dtype))

    def _bad_words(self, history: torch.Tensor, shape) -> torch.Tensor:
        """[N, V] bool: the last token of each bad word whose other tokens end the row's history."""
        banned = self._banned.to(history.device).expand(shape).clone()
        for word in self._bad_sequences:  # a loop over the bad words, each compared for all rows at once
            if history.shape[1] < len(word) - 1:
                continue
            prefix = history.new_tensor(word[:-1])
            ends = (history[:, history.shape[1] - len(prefix) :] == prefix).all(1)  # [N]
            banned[:, word[-1]] |= ends
        return banned

    def _repeated_ngrams(self, history: torch.Tensor, shape) -> torch.Tensor:
        """[N, V] bool: tokens that would complete an n-gram the row's history already holds."""
        n, banned = self.ngram, torch.zeros(shape, dtype=torch.bool)
        for row, h in enumerate(history.tolist()):
            h = [t for t in h if t >= 0]
            if len(h) < n:
                continue
            prefix = tuple(h[len(h) - n + 1 :]) if n > 1 else ()
            for i in range(len(h) - n + 1):
                if tuple(h[i : i + n - 1]) == prefix:
                    banned[row, h[i + n - 1]] = True
        return banned.to(history.device)

    def _stopped(self, history: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """[N] bool: rows whose generated text contains a stop string."""
        longest = max(len(s) for s in self.stop)
        out = []
        for h, k in zip(history.tolist(), new.tolist()):
            generated = h[len(h) - k :] if k else []
            tail, text = [], b""
            for t in reversed(generated):  # enough tokens from the end to hold a stop ending in the last
                tail.append(self._bytes[t])
                text = self._sep.join(reversed(tail))
                if len(text) >= longest + len(tail[0]):
                    break
            out.append(any(s in text for s in self.stop))
        return torch.tensor(out, dtype=torch.bool, device=history.device)

    def __repr__(self) -> str:
        return (
            f"Controlled({self.model!r}, repetition_penalty={self.penalty}, "
            f"presence_penalty={self.presence}, frequency_penalty={self.frequency}, "
            f"logit_bias={'{...}' if self.bias is not None else None}, bad_words={list(self.bad_words)[:5]}, "
            f"no_repeat_ngram_size={self.ngram}, min_new_tokens={self.min_new}, "
            f"stop={[s.decode() for s in self.stop]})"
        )
