"""Forced texts as drafts (issue 40 item 2b): where the constraint allows one continuation text,
its tokenization is drafted and read in one call. Greedy and sampling verify it speculatively
(``speculative.ForcedDraft``): greedy gives the masked greedy tokens and log-probabilities,
sampling keeps the target's masked distribution (exhaustive enumeration, within sampling error).
Every other strategy drafts inside the loop (``ahead.drafted_chain``): the same hypotheses as
without, on every conformance model given a vocabulary of text pieces, in no more calls."""

from __future__ import annotations

import collections
import math

import pytest
import regex
import torch

import decodekit
from decodekit.decoding.speculative import ForcedDraft, drafts_forced, speculative_generate, text_encoder
from tests.decoding.test_fast_forward import Counted
from tests.decoding.test_speculative import sampling_distribution, within_sampling_error
from tests.models.test_conformance import NAMES, model_of
from tests.support.exhaustive import Oracle, SparseLM, approx, vocab_of
from tests.support.fakes import HistoryLM

# over the pieces a, b, ab: "ab" forced first and last, one choice between; "ba" forced inside
PATTERNS = ["ab(?:a|b)ab", "(?:aba)+b?", "a(?:ba)*bb"]


def _target(seed, eos=1):
    vocab = vocab_of(["a", "b", "ab"])
    return SparseLM(len(vocab), seed, 0.3, bos_id=1, eos_id=eos, vocab=vocab)


def test_the_draft_is_the_forced_text_tokenized():
    from decodekit.decoding.plan import compile_for

    target = _target(0)
    settings = decodekit.GenerationConfig(strategy="greedy", max_length=9, constraint="abab(?:a|b)")
    automaton = compile_for(settings, "masks", target)  # what the speculative search compiles
    assert automaton.forced_text(automaton.initial) == b"abab"
    after = automaton.walk([4])  # "ab"
    assert automaton.forced_text(after) == b"ab" and automaton.forced_text(automaton.walk([4, 4])) == b""


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("pattern", PATTERNS)
def test_greedy_is_the_masked_greedy(seed, pattern):
    target = _target(seed, eos=None if seed % 3 == 2 else 1)
    want = Oracle(target, [2], 7, pattern).greedy()
    settings = decodekit.GenerationConfig(strategy="greedy", max_length=7, constraint=pattern)
    draft = ForcedDraft(text_encoder(target))
    got, search = speculative_generate(target, [[2]], settings, draft)
    assert [(h.tokens, h.finished) for h in got[0]] == ([] if want is None else [want[:2]])
    if want is not None:
        assert got[0][0].logprob == approx(want[2])
        assert draft.forced > 0 and search.kept > 0


@pytest.mark.parametrize("pattern", ["ab(?:a|b)ab", "(?:aba)+b?"])
def test_sampling_keeps_the_targets_distribution(pattern):
    vocab = vocab_of(["a", "b", "ab"])
    target = HistoryLM(len(vocab), seed=3, bos_id=1, eos_id=1, sharpness=1.0, vocab=vocab)
    probs = sampling_distribution(target, [2], 4, pattern, 1.0)
    n = 1500
    settings = decodekit.GenerationConfig(
        strategy="sample", max_length=4, constraint=pattern, num_samples=n, seed=0
    )
    draft = ForcedDraft(text_encoder(target))
    got, search = speculative_generate(target, [[2]], settings, draft)
    counts = collections.Counter((h.tokens, h.finished) for h in got[0])
    probs = {**probs, "unmatched": max(0.0, 1 - sum(probs.values()))}
    within_sampling_error({**counts, "unmatched": n - len(got[0])}, probs, n)
    assert draft.forced > 0 and 0 < search.kept < search.drafted  # drafted, kept and rejected


def test_generate_with_draft_forced_text_takes_it_for_greedy_and_sampling():
    target = _target(1)
    pattern = "ab(?:a|b)ab"
    for strategy in ("greedy", "sample"):
        options = dict(strategy=strategy, max_length=7, constraint=pattern, seed=2, num_samples=3)
        assert drafts_forced(decodekit.GenerationConfig(**options, draft_forced_text=True), target)
        assert not drafts_forced(decodekit.GenerationConfig(**options, fast_forward=True), target)
        plain, fast = Counted(target), Counted(target)
        want = decodekit.generate(plain, [2], **options)
        got = decodekit.generate(fast, [2], **options, draft_forced_text=True)
        if strategy == "greedy":
            assert [(h.tokens, h.finished) for h in got] == [(h.tokens, h.finished) for h in want]
            assert got[0].logprob == approx(want[0].logprob)
            assert fast.calls < plain.calls
        assert all(h.text is not None for h in got)


def test_a_word_vocabulary_drafts_nothing():
    from tests.models.test_conformance import model_of

    model = model_of("lstm")
    config = decodekit.GenerationConfig(strategy="greedy", constraint="a b", draft_forced_text=True)
    assert text_encoder(model) is None and not drafts_forced(config, model)


# the conformance models' 7 ids as text pieces: "abab" is spelled a|b|a|b, ab|ab, a|ba|b, ...
PIECES = vocab_of(["a", "b", "ab", "ba", "c"])
SPELLED = "ab(?:a|c)abab(?:c|b)a"  # "ab" and "abab" forced, a choice of one piece between


class Pieces:
    """A conformance model read over :data:`PIECES` (everything but ``vocab`` delegated)."""

    vocab = PIECES

    def __init__(self, model):
        self.inner = model

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_drafting_forced_texts_keeps_its_hypotheses(name, monkeypatch):
    from decodekit.decoding import ahead

    made = []
    init = ahead.Ahead.__init__

    def recorded(self, *args):
        init(self, *args)
        made.append(self)

    monkeypatch.setattr(ahead.Ahead, "__init__", recorded)
    for i, strategy in enumerate(decodekit.STRATEGIES):
        if strategy == "sample":  # speculative sampling: the same distribution, not the same draws (above)
            continue
        options = dict(
            strategy=strategy, max_length=9, beam_size=3, n_best=2, num_samples=2, seed=3,
            num_beam_groups=3, diversity_penalty=0.5, constraint=SPELLED,
        )  # fmt: skip
        plain, fast = Counted(Pieces(model_of(name))), Counted(Pieces(model_of(name)))
        want = decodekit.generate(plain, [[2, 3], [4]], decodekit.GenerationConfig(**options))
        drafting = decodekit.GenerationConfig(**options, draft_forced_text=True, fast_forward=i % 2 == 1)
        got = decodekit.generate(fast, [[2, 3], [4]], drafting)  # every other one feeds forced tokens too
        for a_hyps, b_hyps in zip(want, got):
            assert [(h.tokens, h.finished) for h in a_hyps] == [(h.tokens, h.finished) for h in b_hyps], (
                strategy
            )
            for a, b in zip(a_hyps, b_hyps):
                assert math.isclose(a.logprob, b.logprob, rel_tol=1e-5, abs_tol=1e-5), (strategy, a, b)
                assert regex.fullmatch(SPELLED, PIECES.decode(b.tokens)), (strategy, b.tokens)
        if strategy != "greedy":  # the speculative greedy goes one prompt at a time
            assert fast.calls <= plain.calls, strategy
    if name != "suppressed-lstm":  # its suppressed "a" leaves no match to draft towards
        assert sum(a.drafted for a in made) > 0  # the loop drafted (taken or left: the test below)


@pytest.mark.parametrize("leave", [False, True])
def test_drafted_distributions_serve_while_taken_and_the_lag_after(leave):
    """Two rows with a drafted text: while both take their drafted tokens the distributions come
    from the one call; where a row leaves its draft the model reads the tokens taken since, from
    the state before that call, in one call. Either way they are the model's own (as the prompt
    and the tokens read in one prefill), and the rows may swap in between (the lag follows)."""
    from decodekit.decoding.ahead import Ahead
    from decodekit.decoding.plan import compile_for
    from decodekit.decoding.search import Selection
    from decodekit.models.base import prefill
    from decodekit.models.state import select

    target = Counted(_target(4))
    settings = decodekit.GenerationConfig(strategy="masked-beam", max_length=12, constraint="ab(?:a|b)ababab")
    automaton = compile_for(settings, "masks", target)
    prompt = torch.tensor([[1, 2], [1, 3]])  # the rows differ, so that swapping them shows
    _, state = prefill(target, target.initial_state(2), prompt)
    ahead = Ahead(target, automaton, False, text_encoder(target))
    history, states, rows = [], torch.tensor([automaton.initial] * 2), torch.tensor([0, 1])

    def next_of(tokens, remaining):
        nonlocal states
        history.append(tokens)
        states = automaton.step(states, tokens)
        return ahead.next(
            state, Selection(logprob=torch.zeros(2), states=states, tokens=tokens), remaining, 1
        )

    def model_after():  # the distributions and state after the prompt and the history, read at once
        return prefill(
            target.inner, target.initial_state(2), torch.cat([prompt[rows], torch.stack(history, 1)], 1)
        )

    calls = target.calls
    _, state = next_of(torch.tensor([4, 4]), 11)  # "ab": a choice (a, b) next, nothing drafted
    assert ahead.drafted == 0 and target.calls == calls + 1
    _, state = next_of(torch.tensor([2, 2]), 10)  # "a": "ababab" forced, drafted
    drafts = [tok for _, tok in ahead.pending]
    assert ahead.drafted == len(drafts) >= 2 and target.calls == calls + 2
    swap = torch.tensor([1, 0])
    ahead.reorder(swap)  # the rows change places: the draft and the lag follow
    history, states, state = [h[swap] for h in history], states[swap], select(state, swap)
    rows = swap
    taken = drafts[0][swap].clone()
    if leave:  # row 1 spells the text otherwise: "a" where the draft has "ab", or "ab" for "a"
        taken[1] = 2 if int(taken[1]) != 2 else 4
    got, state = next_of(taken, 9)
    assert target.calls == calls + 2 + leave  # taken: no call; left: one, from the lag
    assert (ahead.lag is None) == leave and bool(ahead.pending) != leave
    want, want_state = model_after()
    assert torch.allclose(got, want, atol=1e-6)
    if not leave:  # the rest of the draft taken too: the state after the call is the rows' own
        for i, (_, tok) in enumerate(list(ahead.pending)):
            got, state = next_of(tok, 8 - i)
        assert ahead.lag is None and not ahead.pending and target.calls == calls + 2
        want, want_state = model_after()
        assert torch.allclose(got, want, atol=1e-6)
    probe = torch.tensor([3, 3])
    assert torch.allclose(
        target.inner.step(state, probe)[0], target.inner.step(want_state, probe)[0], atol=1e-6
    )
