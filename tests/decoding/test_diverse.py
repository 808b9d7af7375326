"""Diverse beam search: one group is beam search exactly, zero penalty is beam search of width K/G
in every group, and any setting equals a slow reference written from the paper's algorithm
(Vijayakumar et al. 2018, Alg. 1, with transformers' group beam search's choices)."""

from __future__ import annotations

import math

import pytest
import regex
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decodekit import GenerationConfig, compile_regex, generate
from decodekit.errors import ConfigError
from tests.support.fakes import HistoryLM, char_vocab, step_through


def fields(hyps):
    return [(h.tokens, h.logprob, h.score, h.finished, h.token_logprobs) for h in hyps]


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    beam=st.integers(1, 4),
    penalty=st.sampled_from([0.0, 0.5, 3.0]),
    alpha=st.sampled_from([0.0, 1.0]),
    eos=st.booleans(),
)
def test_one_group_is_beam_search_exactly(seed, beam, penalty, alpha, eos):
    model = HistoryLM(4, seed=seed, eos_id=0 if eos else None)
    common = dict(beam_size=beam, n_best=beam, max_length=4, length_penalty=alpha)
    plain = generate(model, [[1], [2, 3]], GenerationConfig(strategy="beam", **common))
    diverse = generate(
        model, [[1], [2, 3]], GenerationConfig(strategy="diverse-beam", diversity_penalty=penalty, **common)
    )
    assert [fields(h) for h in diverse] == [fields(h) for h in plain]


def test_one_group_is_masked_beam_search_under_a_constraint():
    vocab = char_vocab("ab")
    model = HistoryLM(len(vocab), seed=5, eos_id=vocab.eos_id, bos_id=vocab.eos_id)
    automaton = compile_regex("a+b?a", vocab.surfaces(), vocab.eos_id)
    common = dict(beam_size=3, n_best=3, max_length=5, constraint=automaton)
    plain = generate(model, [[2]], GenerationConfig(strategy="masked-beam", **common))[0]
    diverse = generate(model, [[2]], GenerationConfig(strategy="diverse-beam", **common))[0]
    assert fields(diverse) == fields(plain) and plain


@pytest.mark.parametrize("groups", [2, 3])
def test_zero_penalty_is_beam_search_of_the_group_width_in_every_group(groups):
    model = HistoryLM(5, seed=11)
    plain = generate(model, [[1]], GenerationConfig(strategy="beam", beam_size=2, n_best=2, max_length=5))[0]
    config = GenerationConfig(
        strategy="diverse-beam", beam_size=2 * groups, num_beam_groups=groups, n_best=2 * groups, max_length=5
    )
    diverse = generate(model, [[1]], config)[0]
    assert sorted(fields(diverse)) == sorted(fields(plain) * groups)


def reference(model, prompt, beam, groups, penalty, max_length, alpha, n_best):
    """Diverse beam search by the book, one candidate at a time (float64 keys): each group in
    turn ranks its beams' extensions by key + log p - penalty * (uses of the token by earlier
    groups at this step); an EOS among the group's ``beam / groups`` best ends a hypothesis, the
    best non-EOS ones go on; the n-best of everything that ended (or reached max_length) by
    key / len ** alpha."""
    size, eos, lead = beam // groups, model.eos_id, [model.bos_id, *prompt]
    live = [[(0.0, 0.0, ())] for _ in range(groups)]  # (key, logprob, tokens)
    ended = []  # (score, logprob, tokens, finished)
    for _ in range(max_length):
        uses, grown = {}, []
        for group in live:
            cands = []
            for key, lp, toks in group:
                dist = step_through(model, torch.tensor([[*lead, *toks]]))[0][0].double().tolist()
                for v, d in enumerate(dist):
                    cands.append((key + d - penalty * uses.get(v, 0), lp + d, toks, v))
            cands.sort(key=lambda c: -c[0])
            keep = []
            for rank, (key, lp, toks, v) in enumerate(cands[: 2 * size if eos is not None else size]):
                if v == eos:
                    if rank < size:
                        ended.append((key / (len(toks) + 1) ** alpha, lp, toks, True))
                elif len(keep) < size:
                    keep.append((key, lp, (*toks, v)))
            for _, _, toks in keep:
                uses[toks[-1]] = uses.get(toks[-1], 0) + 1
            grown.append(keep)
        live = grown
    ended += [
        (key / max(len(toks), 1) ** alpha, lp, toks, False) for group in live for key, lp, toks in group
    ]
    return sorted(ended, key=lambda e: -e[0])[:n_best]


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    groups=st.sampled_from([2, 3]),
    size=st.integers(1, 2),
    penalty=st.sampled_from([0.3, 1.0, 4.0]),
    alpha=st.sampled_from([0.0, 1.0]),
    eos=st.booleans(),
)
def test_equals_the_reference(seed, groups, size, penalty, alpha, eos):
    model = HistoryLM(4, seed=seed, eos_id=0 if eos else None)
    beam, n_best, max_length = groups * size, groups * size, 4
    config = GenerationConfig(
        strategy="diverse-beam", beam_size=beam, num_beam_groups=groups, diversity_penalty=penalty,
        n_best=n_best, max_length=max_length, length_penalty=alpha,
    )  # fmt: skip
    got = generate(model, [[1]], config)[0]
    want = reference(model, [1], beam, groups, penalty, max_length, alpha, n_best)
    assert [(h.tokens, h.finished) for h in got] == [(w[2], w[3]) for w in want]
    for h, w in zip(got, want):
        assert h.score == pytest.approx(w[0], abs=1e-4)
        assert h.logprob == pytest.approx(w[1], abs=1e-4)  # the model's, without the penalties


def test_a_penalty_makes_groups_differ_and_every_output_matches_a_constraint():
    vocab = char_vocab("abc")
    model = HistoryLM(len(vocab), seed=2, eos_id=vocab.eos_id, bos_id=vocab.eos_id)
    pattern = "[ab]+c?"
    automaton = compile_regex(pattern, vocab.surfaces(), vocab.eos_id)
    common = dict(strategy="diverse-beam", beam_size=4, num_beam_groups=4, n_best=4, max_length=5)
    same = generate(model, [[2]], GenerationConfig(constraint=automaton, **common))[0]
    apart = generate(model, [[2]], GenerationConfig(constraint=automaton, diversity_penalty=5.0, **common))[0]
    assert len({h.tokens for h in same}) == 1  # four copies of one beam of width 1
    assert len({h.tokens for h in apart}) > 1
    for h in same + apart:
        assert regex.fullmatch(pattern, vocab.decode(h.tokens))


def test_one_model_call_per_step_for_all_groups():
    calls = {}
    for strategy, groups in (("beam", 1), ("diverse-beam", 3)):
        model = HistoryLM(5, seed=1, eos_id=None)
        config = GenerationConfig(
            strategy=strategy, beam_size=6, num_beam_groups=groups, diversity_penalty=1.0, max_length=4
        )
        generate(model, [[1], [2]], config)
        calls[strategy] = model.calls
    assert calls["diverse-beam"] == calls["beam"]  # as many model calls as plain beam search


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(beam_size=5, num_beam_groups=2), "multiple of num_beam_groups"),
        (dict(diversity_penalty=-1.0), "diversity_penalty"),
        (dict(diversity_penalty=math.inf), "diversity_penalty"),
        (dict(num_beam_groups=0), "num_beam_groups"),
    ],
)
def test_bad_settings_are_one_line_errors(options, message):
    with pytest.raises(ConfigError, match=message):
        generate(HistoryLM(3), [[1]], GenerationConfig(strategy="diverse-beam", **options))


def test_side_by_side_with_transformers_group_beam_search():
    transformers = pytest.importorskip("transformers")
    from transformers.generation.utils import GenerationMixin

    if not hasattr(GenerationMixin, "_group_beam_search"):
        pytest.skip(
            f"transformers {transformers.__version__} has no group beam search (moved to the Hub as "
            "transformers-community/group-beam-search; not downloaded in tests)"
        )
    from decodekit.models.hf import HuggingFaceLM
    from tests.support.fakes import tiny_gpt2

    hf, tok = tiny_gpt2(["the cat sat on the mat", "a dog ran"], vocab_size=280)
    ids = tok("the cat", return_tensors="pt").input_ids
    out = hf.generate(
        ids, num_beams=4, num_beam_groups=2, diversity_penalty=1.5, max_new_tokens=4, do_sample=False,
        num_return_sequences=1, early_stopping=True, pad_token_id=tok.eos_token_id,
    )  # fmt: skip
    model = HuggingFaceLM(hf, tok)
    config = GenerationConfig(
        strategy="diverse-beam", beam_size=4, num_beam_groups=2, diversity_penalty=1.5, max_length=4
    )
    got = generate(model, [ids[0].tolist()], config)[0][0]
    theirs = out[0, ids.shape[1] :].tolist()
    assert got.tokens == [t for t in theirs if t != tok.eos_token_id]  # EOS and padding dropped
