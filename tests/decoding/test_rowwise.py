import collections
import math

import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.decoding import processors
from decodekit.errors import ConstraintError, ModelOutputError
from tests.support.exhaustive import Oracle, SparseLM, approx, regexes, vocab_of
from tests.support.fakes import HistoryLM, TableLM, all_completions, char_vocab, sequence_logprob


def argmax_chain(model, prompt, max_length):
    seq = [model.bos_id, *prompt]
    state = model.initial_state(1)
    for x in seq:
        lp, state = model.step(state, torch.tensor([x]))
    out, total = [], 0.0
    for _ in range(max_length):
        x = int(lp[0].argmax())
        total += float(lp[0, x])
        if x == model.eos_id:
            return tuple(out), total, True
        out.append(x)
        lp, state = model.step(state, torch.tensor([x]))
    return tuple(out), total, False


@pytest.mark.parametrize("seed", range(8))
def test_greedy_is_the_argmax_chain(seed):
    model = HistoryLM(4, seed=seed, sharpness=1.0)
    h = decodekit.greedy(model, [1, 2], 8)[0]
    toks, lp, fin = argmax_chain(model, [1, 2], 8)
    assert (h.tokens, h.finished) == (toks, fin)
    assert h.logprob == pytest.approx(lp, abs=1e-5) and h.score == h.logprob


def test_greedy_batched_equals_one_at_a_time():
    model = HistoryLM(5, seed=4, sharpness=1.0)
    prompts = [[1], [], [2, 3, 4], [1]]
    batched = decodekit.greedy(model, prompts, 7)
    assert batched == [decodekit.greedy(model, p, 7) for p in prompts]


def chi_square_critical(df: int, z: float = 3.719) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile (z=3.719: p = 1e-4)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def test_sample_frequencies_match_sequence_probabilities():
    torch.manual_seed(0)
    model = TableLM(torch.randn(3, 3))
    n = 20_000
    hyps = decodekit.sample(model, [1], 3, num_samples=n, generator=1234)
    counts = collections.Counter((h.tokens, h.finished) for h in hyps)
    expected = {(toks, fin): math.exp(lp) for toks, lp, _, fin in all_completions(model, [1], 3)}
    assert sum(expected.values()) == pytest.approx(1.0, abs=1e-5)
    assert set(counts) <= set(expected)
    stat = sum((counts.get(k, 0) - n * p) ** 2 / (n * p) for k, p in expected.items())
    assert stat < chi_square_critical(len(expected) - 1)
    for h in hyps[:50]:  # reported log-probabilities are the model's
        seq = (*h.tokens, model.eos_id) if h.finished else h.tokens
        assert h.logprob == pytest.approx(sequence_logprob(model, [1], seq), abs=1e-5)


def test_sample_is_reproducible_from_a_seed():
    model = HistoryLM(6, seed=1)
    a = decodekit.sample(model, [[1], [2]], 10, num_samples=3, generator=42)
    b = decodekit.sample(model, [[1], [2]], 10, num_samples=3, generator=torch.Generator().manual_seed(42))
    assert a == b
    assert a != decodekit.sample(model, [[1], [2]], 10, num_samples=3, generator=43)


def test_processors_exact():
    lp = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.1]]))
    inf = float("-inf")
    assert processors.top_k(lp, 2)[0, 2:].tolist() == [inf, inf]
    kept = processors.top_p(lp, 0.75)  # .5 + .25 reaches .75: keep two
    assert torch.isfinite(kept).tolist() == [[True, True, False, False]]
    kept = processors.top_p(lp, 0.76)
    assert torch.isfinite(kept).tolist() == [[True, True, True, False]]
    assert torch.isfinite(processors.top_p(lp, 0.1)).tolist() == [[True, False, False, False]]
    kept = processors.min_p(lp, 0.3)  # threshold .15
    assert torch.isfinite(kept).tolist() == [[True, True, True, False]]
    t = processors.temperature(lp, 2.0)
    assert torch.allclose(torch.softmax(t, -1), torch.softmax(lp / 2, -1))


def test_sampling_with_top_k_one_is_greedy():
    model = HistoryLM(5, seed=9, sharpness=1.0)
    s = decodekit.sample(model, [1], 8, top_k=1, generator=0)[0]
    g = decodekit.greedy(model, [1], 8)[0]
    assert s.tokens == g.tokens


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(temperature=-1), "temperature"),  # 0 is the argmax (issue 36): not refused
        (dict(top_p=0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(top_k=0), "top_k"),
        (dict(min_p=2), "min_p"),
        (dict(num_samples=0), "num_samples"),
    ],
)
def test_bad_sampling_arguments(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        decodekit.sample(HistoryLM(3), [1], 4, **kwargs)


class BrokenLM(TableLM):
    def __init__(self, fault, at_step):
        super().__init__(torch.zeros(4, 4))
        self.fault, self.at_step, self.n = fault, at_step, 0

    def step(self, state, tokens):
        lp, state = super().step(state, tokens)
        self.n += 1
        if self.n - 1 == self.at_step:
            if self.fault == "shape":
                lp = lp[:, :3]
            elif self.fault == "nan":
                lp = lp.clone()
                lp[0, 1] = float("nan")
            else:
                lp = lp + 0.5
        return lp, state


@pytest.mark.parametrize("fault,match", [("shape", "shape"), ("nan", "NaN"), ("scale", "not normalised")])
@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_bad_model_output_is_named_with_the_step(fault, match, strategy):
    model = BrokenLM(fault, at_step=2)  # call 0 is the BOS prefill; calls 1, 2 are steps 1, 2
    model.eos_id = None
    with pytest.raises(ModelOutputError, match=f"step 2.*{match}|{match}"):
        if strategy == "greedy":
            decodekit.greedy(model, [1], 5)
        else:
            decodekit.beam_search(model, [1], 2, 5)


def test_empty_prompt_without_bos_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        decodekit.greedy(HistoryLM(3, bos_id=None), [], 3)


@pytest.mark.parametrize("vocab,scale", [(5, 1.0), (300, 5.0), (5000, 0.1), (5000, 1.0), (5000, 5.0)])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_partial_top_p_equals_a_full_sort(vocab, scale, p):
    torch.manual_seed(vocab)
    lp = (torch.randn(7, vocab) * scale).log_softmax(-1)
    sorted_lp, order = lp.sort(dim=-1, descending=True)
    probs = torch.softmax(sorted_lp, dim=-1)
    remove = torch.zeros_like(lp, dtype=torch.bool).scatter(-1, order, probs.cumsum(-1) - probs >= p)
    assert torch.equal(torch.isfinite(processors.top_p(lp, p, first=64)), ~remove)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=st.none() | regexes(),
    seed=st.integers(0, 10_000),
    max_length=st.integers(0, 4),
    eos=st.booleans(),
    zeros=st.sampled_from([0.3, 0.6]),
    temperature=st.sampled_from([0.5, 1.0, 3.0]),
    top_k=st.sampled_from([None, 1, 2, 4]),
    top_p=st.sampled_from([None, 0.3, 0.9]),
    min_p=st.sampled_from([None, 0.0, 0.2]),
)
def test_greedy_and_sampling_never_emit_a_zero_probability_or_forbidden_token(
    pattern, seed, max_length, eos, zeros, temperature, top_k, top_p, min_p
):
    """With tokens of probability 0: greedy is the argmax over the allowed tokens of non-zero
    probability (done by hand), and a row with none ends (unmatched: no output, unless it has
    matched and the model has no EOS); every sample is a possible output with its true logprob."""
    vocab = vocab_of(["a", "b", "ab"])
    model = SparseLM(len(vocab), seed, zeros, bos_id=1, eos_id=1 if eos else None, vocab=vocab)
    try:
        oracle = Oracle(model, [2], max_length, pattern)
        hyps = decodekit.greedy(model, [2], max_length, constraint=pattern)
    except ConstraintError:  # nothing of at most max_length tokens matches
        return
    want = oracle.greedy()
    assert [(h.tokens, h.finished) for h in hyps] == ([] if want is None else [want[:2]])
    if hyps:
        assert hyps[0].logprob == approx(want[2])
    options = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, generator=seed)
    samples = decodekit.sample(model, [2], max_length, num_samples=6, constraint=pattern, **options)
    for h in samples:
        assert (h.tokens, h.finished) in oracle.outputs, (h, oracle.outputs)
        assert h.logprob == approx(oracle.outputs[(h.tokens, h.finished)])


def dead_end_after_a(eos: bool):
    """After BOS: a .6, b .4; after a: only <unk> (probability 1); after b: b .5 and EOS .5."""
    vocab = char_vocab("ab")  # <unk> <eos> a b
    p = torch.tensor([[0.25] * 4, [0.0, 0.0, 0.6, 0.4], [1.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.5]])
    return TableLM(torch.log(p), bos_id=1, eos_id=1 if eos else None, vocab=vocab)


@pytest.mark.parametrize("eos", [True, False])
def test_a_row_whose_allowed_tokens_all_have_probability_zero_ends_unmatched(eos):
    # "ab": after "a" only "b" is allowed and it has probability 0. Greedy used to take the
    # argmax of the all -inf row (<unk>, forbidden) and sampling raised on the NaN weights.
    model = dead_end_after_a(eos)
    assert decodekit.greedy(model, [], 4, constraint="ab") == []
    assert decodekit.sample(model, [], 4, num_samples=5, generator=0, constraint="ab") == []
    # "a|ab" without EOS: "a" has matched and cannot go on, so it ends there (a match); with
    # EOS it would need EOS after "a", which has probability 0: no output.
    hyps = decodekit.greedy(model, [], 4, constraint="a|ab")
    assert [(h.tokens, h.finished) for h in hyps] == ([] if eos else [((2,), False)])
    # sampling mixes matched and unmatched rows: only the matches come back, in draw order
    samples = decodekit.sample(model, [], 4, num_samples=40, generator=1, constraint="a|ab|bb")
    texts = [model.vocab.decode(h.tokens) for h in samples]
    assert texts and all(regex.fullmatch("a|ab|bb", t) for t in texts)
    assert ("a" in texts) == (not eos) and "bb" in texts and (len(texts) < 40) == eos


def test_processors_keep_zero_probability_tokens_at_minus_infinity_without_nan():
    inf = float("-inf")
    lp = torch.tensor([[inf, inf, inf, inf], [0.0, inf, inf, inf], [-0.1, -2.5, inf, -3.0]])
    for kwargs in (dict(t=0.5), dict(k=3), dict(p=0.5), dict(minp=0.0), dict(t=2.0, k=2, p=0.9, minp=0.1)):
        out = processors.process(lp, **kwargs)
        assert not out.isnan().any(), kwargs
        assert (out[0] == inf).all() and out[1, 0] > inf and (out[:, 1:][lp[:, 1:] == inf] == inf).all()
        assert out[2, 0] > inf  # the most probable token is always kept


@pytest.mark.parametrize("t", [1e-40, 1e-300, 5e-324])
def test_a_tiny_temperature_samples_the_argmax(t):
    """``logprob / t`` overflows for every token at such temperatures (it used to crash
    ``torch.multinomial`` on NaN weights); the limit t -> 0 is greedy, ties shared."""
    model = SparseLM(6, seed=4, zeros=0.3, bos_id=None, eos_id=0)
    want = decodekit.greedy(model, [1], 5)[0]
    for h in decodekit.sample(model, [1], 5, temperature=t, num_samples=4, generator=0):
        assert h.tokens == want.tokens
    inf = float("inf")
    lp = torch.tensor([[-inf, -inf, -inf], [-1e-3, -1e-3, -5.0], [1e-7, -1.0, -2.0], [-7.0, -0.5, -inf]])
    out = processors.temperature(lp, t)
    assert not out.isnan().any() and (out[0] == -inf).all() and out[3].tolist() == [-inf, 0.0, -inf]
    assert torch.softmax(out[1:], -1)[:, :2].sum(-1).tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert torch.equal(processors.temperature(lp[1:], 0.5), lp[1:] / 0.5)  # no overflow: unchanged
