"""Tokens the loop feeds the model ahead of the selections, so that one call serves several steps
(issue 40): :class:`Ahead`, the loop's next distributions.

* **Forced tokens** (``fast_forward``, :func:`forced_chain`): where every live row's mask allows
  exactly one token, the search takes it whatever it is, so those tokens are fed with the chosen
  ones in one :func:`~decodekit.models.base.step_many` call.
* **Forced texts drafted** (``draft_forced_text``, :func:`drafted_chain`): where the constraint
  allows every live row one continuation text, its canonical tokenization is fed the same way,
  though the search may spell the text otherwise (or end the row). After each selection the
  fed distributions serve only if every live row took its drafted token; at the first step where
  one did not, the model reads the tokens taken since the drafted call began from the state
  before it, in one call that replaces the step's own. So every distribution the search sees is
  the model's after exactly the tokens of the row, as without the draft, and no step costs more
  than one call: a draft the search leaves costs the positions fed for it, not calls. A beam
  fills its rows with the other spellings of a forced text, so most drafts are left there; after
  k drafts in a row left at their first token, the next ``2^k - 1`` steps draft nothing.

The lag (the state before the drafted call, its rows as the selections reorder them, and the
tokens taken since) is kept only while drafted distributions are pending: one more model state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from decodekit.constraints import TokenConstraint
from decodekit.models import state as st
from decodekit.models.base import LanguageModel, State, step_many

if TYPE_CHECKING:
    from decodekit.decoding.search import Selection

NEG_INF = float("-inf")
MAX_FORCED = 32  # tokens fed ahead in one call at most
FORCED_TEXT_BYTES = 64  # bytes of a forced text drafted at most
MAX_REST_EXPONENT = 6  # after drafts left in a row, at most 2^6 - 1 steps without drafting


class Ahead:
    """The distributions after each step's selected tokens: fed ahead (module docstring) or one
    ``model.step``. ``forward``: feed forced tokens; ``encode``: text -> ids, the tokenizer forced
    texts are drafted with (None: none drafted). ``calls`` counts the model calls made here,
    ``drafted`` the drafted steps fed (a token per row each), ``taken`` those every live row took."""

    def __init__(
        self, model: LanguageModel, automaton: TokenConstraint | None, forward: bool,
        encode: Callable[[str], list[int]] | None,
    ) -> None:  # fmt: skip
        self.model, self.automaton = model, automaton
        self.forward = automaton is not None and forward
        self.encode = encode if automaton is not None else None
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # (logprobs [N, V], tokens [N])
        self.lag: tuple[State, torch.Tensor, torch.Tensor] | None = None  # (state, rows [N], taken [N, p])
        self.calls = self.drafted = self.taken = 0
        self._misses = self._rest = 0  # drafts left at their first token in a row; steps not to draft

    def _drafts_now(self) -> bool:
        """Whether to draft at this step: not for ``2^k - 1`` steps after the k-th draft in a row
        that the search left at its first token (a beam fills its rows with other spellings of a
        forced text, so most of its drafts are left: reading them costs positions, not calls)."""
        if self._rest:
            self._rest -= 1
            return False
        return True

    def reorder(self, parents: torch.Tensor) -> None:
        """Follow the selection's rows: row i now extends row ``parents[i]``."""
        self.pending = [(lp[parents], tok[parents]) for lp, tok in self.pending]
        if self.lag is not None:
            state, rows, taken = self.lag
            self.lag = (state, rows[parents], taken[parents])

    def next(
        self, state: State, sel: Selection, remaining: int, eos: int | None
    ) -> tuple[torch.Tensor, State]:
        """(logprobs [N, V] after each row's ``sel.tokens``, the model state), for a selection with
        ``remaining`` tokens left after it; ``state`` is already reordered by its parents."""
        if self.pending:
            logprobs, fed = self.pending.pop(0)
            if self.lag is None:  # forced: no other token could be taken
                if not _took(sel, fed):
                    raise RuntimeError("internal error: fast-forward fed a token the search did not take")
                return logprobs, state
            lag_state, rows, taken = self.lag
            if _took(sel, fed):
                self.taken += 1
                self._misses = 0
                taken = torch.cat([taken, sel.tokens[:, None]], 1)
                self.lag = (lag_state, rows, taken) if self.pending else None  # all taken: state is past them
                return logprobs, state
            if taken.shape[1] == 1:  # left at its first token: draft less often (1, 3, 7, ... steps off)
                self._misses = min(self._misses + 1, MAX_REST_EXPONENT)
                self._rest = 2**self._misses - 1
            self.pending, self.lag = [], None  # a row left its draft: read its tokens from the lag
            tokens = torch.cat([taken, sel.tokens[:, None]], 1)
            many, state = step_many(self.model, st.select(lag_state, rows, self.model), tokens, keep_last=1)
            self.calls += 1
            return many[:, 0], state
        chain = forced_chain(self.automaton, sel, remaining, eos) if self.forward else []
        drafted = not chain and self.encode is not None and self._drafts_now()
        if drafted:
            chain = drafted_chain(self.automaton, sel, remaining, self.encode)
        if not chain:
            self.calls += 1
            return self.model.step(state, sel.tokens)
        if drafted:
            self.lag = (state, torch.arange(len(sel.tokens), device=sel.tokens.device), sel.tokens[:, None])
            self.drafted += len(chain)
        many, state = step_many(self.model, state, torch.stack([sel.tokens, *chain], 1))  # [N, 1 + L]
        self.calls += 1
        self.pending = [(many[:, i + 1], tok) for i, tok in enumerate(chain)]
        return many[:, 0], state


def _live(sel: Selection) -> torch.Tensor:
    """[N] bool: the rows of ``sel`` that go on (a finite log-probability, a live state)."""
    live = sel.logprob > NEG_INF
    return live if sel.states is None else live & (sel.states >= 0)


def _took(sel: Selection, fed: torch.Tensor) -> bool:
    """Whether every live row of ``sel`` took the token fed for it."""
    live = _live(sel)
    return bool((sel.tokens[live] == fed[live]).all())


def forced_chain(
    automaton: TokenConstraint, sel: Selection, remaining: int, eos: int | None
) -> list[torch.Tensor]:
    """The tokens every live row of ``sel`` is forced to take next, one [N] tensor per step, as
    long as each live row's mask (after ``sel.tokens``, with ``remaining`` tokens left after them)
    allows exactly one token and not EOS: whatever the strategy, its next selections take them
    (a live row can take nothing else; a row that dies takes nothing), so the model may read them
    with ``sel.tokens`` in one :func:`~decodekit.models.base.step_many` call. Dead rows (state -1
    or log-probability -inf) follow with token 0. Empty when some live row has a choice."""
    if sel.states is None:
        return []
    rows = _live(sel).nonzero().view(-1)
    if rows.numel() == 0:
        return []
    states, chain = sel.states[rows], []
    while len(chain) < min(MAX_FORCED, remaining - 1):
        allowed = automaton.allowed(states, remaining - len(chain))  # [live, V]
        one = allowed.sum(1) == 1
        if eos is not None:
            one &= ~allowed[:, eos]
        if not bool(one.all()):
            break
        forced = allowed.to(torch.int8).argmax(1)
        chain.append(torch.zeros_like(sel.states).index_copy_(0, rows, forced.to(sel.states.dtype)))
        states = automaton.step(states, forced)
    return chain


def drafted_chain(
    automaton: TokenConstraint, sel: Selection, remaining: int, encode: Callable[[str], list[int]]
) -> list[torch.Tensor]:
    """The canonical tokens of the text each live row of ``sel`` is forced to continue with
    (:func:`forced_tokens`), one [N] tensor per step, as many steps as every live row has (and
    ``remaining - 1`` allows); dead rows follow with token 0. Empty when some live row has none,
    or the constraint has no byte states (``forced_text``)."""
    forced_text = getattr(automaton, "forced_text", None)
    if sel.states is None or forced_text is None:
        return []
    rows = _live(sel).nonzero().view(-1)
    if rows.numel() == 0:
        return []
    drafts = []
    for s in sel.states[rows].tolist():
        tokens = forced_tokens(forced_text(s, FORCED_TEXT_BYTES), encode)
        if not tokens:
            return []
        drafts.append(tokens)
    length = min(min(map(len, drafts)), MAX_FORCED, remaining - 1)
    if length <= 0:
        return []
    table = torch.tensor([d[:length] for d in drafts], dtype=sel.states.dtype, device=sel.states.device)
    return [torch.zeros_like(sel.states).index_copy_(0, rows, table[:, i]) for i in range(length)]


def forced_tokens(data: bytes, encode: Callable[[str], list[int]]) -> list[int]:
    """``encode`` of the forced bytes ``data`` cut to whole characters (a text that begins or ends
    inside one is cut before it); [] where the tokenizer cannot say the text."""
    for cut in range(len(data), max(len(data) - 4, 0), -1):
        try:
            text = data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        try:
            return encode(text)
        except Exception:  # noqa: BLE001 - a tokenizer that cannot say the text: no draft
            return []
    return []
