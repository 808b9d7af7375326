"""Speculative decoding: a cheap draft proposes k tokens, the target verifies them in one
:func:`~decodekit.models.base.step_many` call (Leviathan et al. 2023, https://arxiv.org/abs/2211.17192;
Chen et al. 2023, https://arxiv.org/abs/2302.01318).

The draft is any step-protocol model over the target's vocabulary (:class:`ModelDraft`), or the
prompt itself (:class:`LookupDraft`: the tokens after an earlier occurrence of the last n-gram,
transformers' prompt-lookup decoding). With the target's distributions ``p_1 .. p_{k+1}`` after
the context and each draft prefix, and the draft's ``q_i`` (one-hot for a deterministic draft):

* greedy: ``d_i`` is kept while ``d_i = argmax p_i``; the first other position gives
  ``argmax p_i`` itself. The tokens are the target's greedy tokens, whatever the draft.
* sampling: ``d_i`` is kept with probability ``min(1, P_i(d_i) / Q_i(d_i))``; at the first
  rejection a token is drawn from ``norm(max(0, P_i - Q_i))``; when all k are kept a (k+1)-th from
  ``P_{k+1}``. Each token is then distributed as ``P`` (the theorem of both papers), so sequences
  have the target's distribution. ``P``, ``Q`` are the processed distributions (temperature,
  top-k, top-p, min-p, as :func:`~decodekit.decoding.rowwise.sample` applies them).
* under a constraint ``p_i`` and the draft's ``q_i`` are masked by the automaton in the state
  after the draft prefix (``remaining`` counted as the plain search counts it), so the guarantee
  is the masked search's.

Each reported log-probability is the target's own (unmasked, unprocessed), as the plain search
reports it. The target state is only advanced over tokens it has verified: after a rejection
the kept tokens wait (``pending``) and are fed at the front of the next verification call, which
costs compute, not calls (and not their output layer: ``step_many(..., keep_last)``); more than
:data:`MAX_PENDING` waiting tokens are fed in a call of their own. One row at a time (a
prompt's ``num_samples`` rows one after another).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from decodekit.constraints import TokenConstraint
from decodekit.decoding import processors
from decodekit.decoding.ahead import FORCED_TEXT_BYTES, forced_tokens
from decodekit.decoding.plan import compile_for
from decodekit.errors import ConfigError
from decodekit.models.base import LanguageModel, model_device, prefill, step_many
from decodekit.outputs import Hypothesis

__all__ = ["ForcedDraft", "LookupDraft", "ModelDraft", "speculative_generate"]

MAX_PENDING = 16  # verified tokens waiting to be fed before they get a call of their own
ADAPTIVE_START = 5  # the draft length when none is set: +2 after a fully kept draft, -1 else
NEG_INF = float("-inf")

Distribution = Callable[[torch.Tensor], torch.Tensor]  # masked logprobs [N, V] -> probs [N, V]


def _start(model: LanguageModel, prompt: list[int]) -> tuple[object, list[int], int]:
    """The state after all but the last input token (``bos_id`` first when the model has one),
    that last token, still to be fed, and the model calls made (0 or 1): ``(state, pending, calls)``."""
    bad = [t for t in prompt if not 0 <= t < model.vocab_size]
    if bad:
        raise ConfigError(
            f"the prompt has token id(s) {bad[:5]} outside the vocabulary [0, {model.vocab_size})"
        )
    inputs = prompt if model.bos_id is None else [model.bos_id, *prompt]
    if not inputs:
        raise ConfigError("the prompt is empty and the model has no bos_id to start from")
    state = model.initial_state(1)
    if len(inputs) > 1:
        ids = torch.tensor([inputs[:-1]], dtype=torch.long, device=model_device(model))
        _, state = prefill(model, state, ids)
    return state, [inputs[-1]], int(len(inputs) > 1)


class Picker:
    """How the search picks a draft token at position i from the draft's logprobs [1, V]: masked by
    the constraint in the state after the draft so far, then the argmax (greedy) or a draw from
    the processed distribution. ``pick`` returns (token, Q [V] or None for greedy), or None where
    the masked draft allows nothing."""

    def __init__(self, search: Speculation, a_state, remaining: int) -> None:
        self.search, self.a_state, self.remaining = search, a_state, remaining

    def pick(self, logprobs: torch.Tensor, i: int) -> tuple[int, torch.Tensor | None] | None:
        s = self.search
        masked = logprobs
        if s.automaton is not None:
            masked = s.automaton.mask(logprobs, self.a_state, self.remaining - i)
        if float(masked.max()) == NEG_INF:
            return None
        if s.distribution is None:
            token, q = int(masked.argmax(-1)), None
        else:
            q = s.distribution(masked)[0]  # [V]
            token = int(torch.multinomial(q, 1, generator=s.generator))
        if s.automaton is not None:
            self.a_state = s.automaton.step(self.a_state, torch.tensor([token], device=self.a_state.device))
        return token, q


class ModelDraft:
    """A step-protocol model as the draft: its pending tokens in one ``step_many`` call, then one
    ``step`` per further token. ``calls`` counts its model calls."""

    def __init__(self, model: LanguageModel) -> None:
        self.model, self.calls = model, 0

    def start(self, prompt: list[int]) -> None:
        self.state, self.pending, calls = _start(self.model, prompt)
        self.calls += calls

    def propose(self, k: int, context: list[int], picker: Picker) -> tuple[list[int], list]:
        """Up to k tokens (fewer after EOS or where the masked draft allows nothing), and their
        ``Q_i`` (None each when greedy)."""
        self.trail: list[object] = []  # trail[i]: the state after pending + d_1 .. d_i
        tokens: list[int] = []
        qs: list[torch.Tensor | None] = []
        self.proposal = tokens
        if k <= 0:
            return tokens, qs
        device = model_device(self.model)
        lps, state = step_many(self.model, self.state, torch.tensor([self.pending], device=device), 1)
        logprobs = lps[:, -1]  # [1, V]
        self.calls += 1
        self.trail.append(state)
        for i in range(k):
            picked = picker.pick(logprobs, i)
            if picked is None:
                break
            tokens.append(picked[0])
            qs.append(picked[1])
            if picked[0] == picker.search.eos or i == k - 1:
                break
            logprobs, state = self.model.step(state, torch.tensor([picked[0]], device=device))
            self.calls += 1
            self.trail.append(state)
        return tokens, qs

    def accept(self, kept: int, token: int) -> None:
        """The target kept ``kept`` draft tokens, then chose ``token``."""
        if not self.trail:  # nothing was drafted
            self.pending = [*self.pending, token]
        elif kept < len(self.trail):
            self.state, self.pending = self.trail[kept], [token]
        else:  # all kept: the last draft token was never fed to the draft
            self.state, self.pending = self.trail[-1], [self.proposal[-1], token]


class LookupDraft:
    """Prompt lookup (transformers' ``prompt_lookup_num_tokens``): the k tokens after the first
    earlier occurrence of the context's last n-gram, n from ``max_ngram`` down to 1; none without a
    match. Deterministic (``Q`` one-hot); no model calls."""

    calls = 0

    def __init__(self, max_ngram: int = 2) -> None:
        self.max_ngram = max_ngram

    def start(self, prompt: list[int]) -> None:
        pass

    def propose(self, k: int, context: list[int], picker: Picker) -> tuple[list[int], list]:
        if k <= 0 or len(context) < 2:
            return [], []
        ids = torch.tensor(context)
        for n in range(min(self.max_ngram, len(context) - 1), 0, -1):
            windows = ids[:-1].unfold(0, n, 1)  # [T - n, n]: every n-gram with a token after it
            found = (windows == ids[-n:]).all(1).nonzero()
            if found.numel():
                start = int(found[0]) + n
                tokens = context[start : start + k]
                eos = picker.search.eos
                if eos in tokens:  # nothing is verified past an EOS
                    tokens = tokens[: tokens.index(eos) + 1]
                return tokens, [None] * len(tokens)
        return [], []

    def accept(self, kept: int, token: int) -> None:
        pass


class ForcedDraft:
    """The text the constraint forces next, tokenized canonically (issue 40 item 2b): where the
    constraint allows one continuation only for the next bytes (a JSON key, a separator), its
    tokens ``encode(text)`` are the draft, deterministic (``Q`` one-hot), without model calls;
    elsewhere ``inner``'s proposal (prompt lookup) or none. A constraint without byte states
    (``forced_text``) drafts nothing. The text is cut to whole characters (a forced text that
    begins inside one is not drafted)."""

    calls = 0

    def __init__(
        self,
        encode: Callable[[str], list[int]],
        inner: LookupDraft | None = None,
        limit: int = FORCED_TEXT_BYTES,
    ):
        self.encode, self.inner, self.limit = encode, inner, limit
        self.forced = 0  # draft tokens proposed from forced texts, for the benchmarks

    def start(self, prompt: list[int]) -> None:
        pass

    def propose(self, k: int, context: list[int], picker: Picker) -> tuple[list[int], list]:
        tokens = self._forced(k, picker) if k > 0 else []
        if tokens:
            self.forced += len(tokens)
            return tokens, [None] * len(tokens)
        return self.inner.propose(k, context, picker) if self.inner is not None else ([], [])

    def _forced(self, k: int, picker: Picker) -> list[int]:
        forced_text = getattr(picker.search.automaton, "forced_text", None)
        if forced_text is None or picker.a_state is None or int(picker.a_state[0]) < 0:
            return []
        return forced_tokens(forced_text(int(picker.a_state[0]), self.limit), self.encode)[:k]

    def accept(self, kept: int, token: int) -> None:
        pass


@dataclass
class Speculation:
    """One speculative search: the target, its constraint, the draft and how tokens are chosen.

    distribution: masked logprobs [1, V] -> the processed probabilities [1, V] (None: greedy).
    num_tokens: the draft length k (None: adaptive, from :data:`ADAPTIVE_START`).
    calls: the target's model calls so far (prefill included)."""

    model: LanguageModel
    automaton: TokenConstraint | None
    draft: ModelDraft | LookupDraft | ForcedDraft
    distribution: Distribution | None
    generator: torch.Generator | None
    max_length: int
    num_tokens: int | None
    calls: int = 0
    drafted: int = 0
    kept: int = 0

    @property
    def eos(self) -> int | None:
        return self.model.eos_id

    def row(self, prompt: list[int]) -> Hypothesis | None:
        """One hypothesis for ``prompt``, as the plain greedy search / one sample gives it (None:
        ended unmatched under the constraint)."""
        model, automaton, device = self.model, self.automaton, model_device(self.model)
        state, pending, calls = _start(model, prompt)
        self.calls += calls
        self.draft.start(prompt)
        a_state = None if automaton is None else torch.tensor([automaton.initial], device=device)
        out: list[int] = []
        token_lps: list[float] = []
        k = self.num_tokens or ADAPTIVE_START
        while True:
            remaining = self.max_length - len(out)
            if remaining <= 0:
                return self._end(out, token_lps, False, a_state)
            picker = Picker(self, a_state, remaining)
            draft, qs = self.draft.propose(min(k, remaining - 1), [*prompt, *out], picker)
            fed = torch.tensor([pending + draft], device=device)
            lps, verified = step_many(model, state, fed, keep_last=len(draft) + 1)
            self.calls += 1
            lps = lps[0]  # [len(draft) + 1, V]: p_1 .. p_{k+1} (the output layer skips the rest)
            kept, token, a_state = self._verify(lps, draft, qs, a_state, remaining)
            self.drafted, self.kept = self.drafted + len(draft), self.kept + kept
            for i, t in enumerate([*draft[:kept], *([] if token is None else [token])]):
                token_lps.append(float(lps[i, t]))
                if t == self.eos:
                    return self._end(out, token_lps, True, a_state)
                out.append(t)
            if token is None:  # the masked target allows nothing: a match without EOS, or unmatched
                stuck = automaton is not None and self.eos is None and bool(automaton.is_accepting(a_state))
                return self._end(out, token_lps, False, a_state) if stuck else None
            self.draft.accept(kept, token)
            if self.num_tokens is None:
                k = k + 2 if kept == len(draft) else max(1, k - 1)
            if kept == len(draft):
                state, pending = verified, [token]
            else:
                pending = [*pending, *draft[:kept], token]
                if len(pending) > MAX_PENDING:
                    _, state = step_many(model, state, torch.tensor([pending[:-1]], device=device), 0)
                    self.calls, pending = self.calls + 1, pending[-1:]

    def _verify(self, lps: torch.Tensor, draft: list[int], qs: list, a_state, remaining: int):
        """The kept draft tokens and the target's own next token (None: the masked target allows
        nothing there), and the automaton state after them. lps [len(draft) + 1, V]."""
        automaton = self.automaton
        for i in range(len(draft) + 1):
            p = lps[i : i + 1]  # [1, V]
            if automaton is not None:
                p = automaton.mask(p, a_state, remaining - i)
            if float(p.max()) == NEG_INF:
                return i, None, a_state
            if self.distribution is None:
                chosen = int(p.argmax(-1))
                token = None if i < len(draft) and chosen == draft[i] else chosen
            else:
                token = self._accept_or_resample(self.distribution(p)[0], draft, qs, i)
            if token is not None:
                return i, token, self._advance(a_state, token)
            a_state = self._advance(a_state, draft[i])
        raise AssertionError("unreachable: the last position always yields a token")

    def _accept_or_resample(self, P: torch.Tensor, draft: list[int], qs: list, i: int) -> int | None:
        """None: d_i kept (probability min(1, P(d)/Q(d))); else the token drawn from the residual
        norm(max(0, P - Q)), or from P past the draft."""
        if i == len(draft):
            return int(torch.multinomial(P, 1, generator=self.generator))
        d = draft[i]
        Q = qs[i] if qs[i] is not None else torch.nn.functional.one_hot(torch.tensor(d), P.shape[0]).to(P)
        u = float(torch.rand((), generator=self.generator, device=P.device))
        if float(Q[d]) > 0 and u * float(Q[d]) < float(P[d]):
            return None
        residual = (P - Q).clamp(min=0)
        if float(residual.sum()) <= 0:  # P == Q up to rounding: rejection had probability ~0
            residual = P
        return int(torch.multinomial(residual, 1, generator=self.generator))

    def _advance(self, a_state, token: int):
        if self.automaton is None:
            return a_state
        return self.automaton.step(a_state, torch.tensor([token], device=a_state.device))

    def _end(self, out: list[int], token_lps: list[float], finished: bool, a_state) -> Hypothesis | None:
        if not finished and self.automaton is not None and not bool(self.automaton.is_accepting(a_state)):
            return None
        total = sum(token_lps)
        return Hypothesis(tuple(out), total, total, finished, tuple(token_lps))


def text_encoder(model: LanguageModel) -> Callable[[str], list[int]] | None:
    """``text -> ids`` of a model whose tokens are pieces of text joined without a separator
    (byte-level BPE, characters), which :class:`ForcedDraft` drafts with; else None."""
    vocab = getattr(model, "vocab", None)
    if vocab is None or getattr(vocab, "separator", None) != "":
        return None
    pieces: dict[str, int] = {}  # made on first use: surface -> its first id
    longest = [0]

    def longest_first(text: str) -> list[int]:  # a vocabulary without a tokenizer of its own
        if not pieces:
            pieces.update((t, i) for i, t in reversed(list(enumerate(vocab.surfaces()))) if t)
            longest[0] = max(map(len, pieces), default=0)
        out, i = [], 0
        while i < len(text):
            most = min(longest[0], len(text) - i)
            n = next((n for n in range(most, 0, -1) if text[i : i + n] in pieces), 0)
            if not n:
                return out  # a character no token spells: the draft stops before it
            out.append(pieces[text[i : i + n]])
            i += n
        return out

    def encode(text: str) -> list[int]:
        try:
            return vocab.encode(text, warn_unknown=False)
        except NotImplementedError:
            return longest_first(text)

    return encode


def drafts_forced(settings, model: LanguageModel) -> bool:
    """Whether ``generate`` drafts forced texts (:class:`ForcedDraft`, issue 40 item 2b):
    ``draft_forced_text`` under a constraint, greedy or sampling, a model whose tokens are text
    pieces (:func:`text_encoder`), nothing asked that speculative decoding does not report
    (per-token top log-probabilities, the prompt's)."""
    return bool(
        settings.draft_forced_text
        and (settings.constraint is not None or settings.exclude)
        and settings.resolved_strategy in ("greedy", "sample")
        and not (settings.logprobs or settings.prompt_logprobs)
        and text_encoder(model) is not None
    )


def draft_for(model: LanguageModel, assistant: LanguageModel | None) -> ModelDraft | LookupDraft:
    """The draft for ``assistant`` (None: prompt lookup), refused where its vocabulary is not
    the target's (same size, and the same tokens where both have a ``vocab``)."""
    if assistant is None:
        return LookupDraft()
    if not all(hasattr(assistant, a) for a in ("vocab_size", "step", "initial_state")):
        raise ConfigError(f"assistant_model must be a step-protocol model, got {type(assistant).__name__}")
    if assistant.vocab_size != model.vocab_size:
        raise ConfigError(
            f"the assistant model has {assistant.vocab_size:,} tokens, the model {model.vocab_size:,}: "
            "a draft must share the target's vocabulary"
        )
    mine, theirs = getattr(model, "vocab", None), getattr(assistant, "vocab", None)
    if mine is not None and theirs is not None and list(mine.tokens) != list(theirs.tokens):
        raise ConfigError("the assistant model's vocabulary differs from the model's: a draft must share it")
    return ModelDraft(assistant)


def speculative_generate(
    model: LanguageModel, prompts: list[list[int]], settings, draft: ModelDraft | LookupDraft
) -> tuple[list[list[Hypothesis]], Speculation]:
    """Greedy (one hypothesis per prompt) or sampling (``settings.num_samples`` per prompt) with
    ``draft``, for the settings' strategy, processors, seed and constraint. Returns the
    hypotheses of each prompt (less those that ended unmatched) and the :class:`Speculation`
    (its counts: ``calls``, ``drafted``, ``kept``; the draft's ``calls``)."""
    strategy = settings.search.name
    if strategy not in ("greedy", "sample"):
        raise ConfigError(
            f"speculative decoding (assistant_model, prompt_lookup_num_tokens) runs greedy or sample, "
            f"not {settings.search.what}"
        )
    settings.search.check(settings)
    automaton = compile_for(settings, "masks", model)
    distribution, generator, copies = None, None, 1
    if strategy == "sample":
        s, copies, generator = settings, settings.num_samples, settings.seed
        if isinstance(generator, int):
            generator = torch.Generator(device=model_device(model)).manual_seed(generator)

        def distribution(logprobs: torch.Tensor) -> torch.Tensor:
            weights = processors.process_settings(logprobs, s)
            return torch.softmax(weights.float(), dim=-1)

    lookup = isinstance(draft, LookupDraft) or isinstance(getattr(draft, "inner", None), LookupDraft)
    num_tokens = getattr(settings, "prompt_lookup_num_tokens" if lookup else "num_assistant_tokens", None)
    search = Speculation(model, automaton, draft, distribution, generator, settings.max_length, num_tokens)
    out = []
    with torch.inference_mode():
        for prompt in prompts:
            rows = [search.row(list(prompt)) for _ in range(copies)]
            out.append([h for h in rows if h is not None])
    return out, search
