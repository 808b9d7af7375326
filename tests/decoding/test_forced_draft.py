"""Forced texts as speculative drafts (issue 40 item 2b, decodekit.decoding.speculative.ForcedDraft):
where the constraint allows one continuation text, its tokenization is drafted and verified in
one call. Greedy gives the masked greedy tokens and log-probabilities; sampling keeps the target's
masked distribution (exhaustive enumeration, within sampling error); ``generate``
(``draft_forced_text=True``) takes it for greedy and sampling over a text vocabulary, with fewer
model calls."""

from __future__ import annotations

import collections

import pytest

import decodekit
from decodekit.decoding.speculative import ForcedDraft, drafts_forced, speculative_generate, text_encoder
from tests.decoding.test_fast_forward import Counted
from tests.decoding.test_speculative import sampling_distribution, within_sampling_error
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
    with pytest.raises(decodekit.errors.ConfigError, match="greedy or sample"):
        decodekit.GenerationConfig(strategy="masked-beam", constraint=pattern, draft_forced_text=True)


def test_a_word_vocabulary_drafts_nothing():
    from tests.models.test_conformance import model_of

    model = model_of("lstm")
    config = decodekit.GenerationConfig(strategy="greedy", constraint="a b", draft_forced_text=True)
    assert text_encoder(model) is None and not drafts_forced(config, model)
