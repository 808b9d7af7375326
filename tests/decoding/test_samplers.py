"""typical_p, epsilon_cutoff and eta_cutoff (decoding.processors): each equals its definition
(a float64 reference written from the papers, one token at a time), composed in transformers'
order; sampling draws from the masked distribution so processed; side by side with
transformers' generate() on a tiny random GPT-2."""

from __future__ import annotations

import collections
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.decoding import processors
from decodekit.errors import ConfigError
from tests.support.fakes import TableLM, char_vocab

INF = float("-inf")


def distribution(weights: list[float]) -> list[float]:
    finite = [w for w in weights if w > INF]
    top = max(finite)
    total = sum(math.exp(w - top) for w in finite)
    return [math.exp(w - top) / total if w > INF else 0.0 for w in weights]


def typical_reference(p: list[float], mass: float) -> set[int]:
    """Meister et al. 2023 as transformers writes it: rank by |-log p_i - H|, keep the ranking's
    shortest prefix of mass >= ``mass`` and every token tied with its last score."""
    h = -sum(q * math.log(q) for q in p if q > 0)
    surprise = [abs(-math.log(q) - h) if q > 0 else math.inf for q in p]
    order = sorted(range(len(p)), key=lambda i: surprise[i])
    total, last = 0.0, order[-1]
    for i in order:
        total += p[i]
        if total >= mass:
            last = i
            break
    return {i for i in range(len(p)) if p[i] > 0 and surprise[i] <= surprise[last]}


def epsilon_reference(p: list[float], epsilon: float) -> set[int]:
    return {i for i, q in enumerate(p) if q > 0 and (q >= epsilon or q == max(p))}


def eta_reference(p: list[float], epsilon: float) -> set[int]:
    h = -sum(q * math.log(q) for q in p if q > 0)
    eta = min(epsilon, math.sqrt(epsilon) * math.exp(-h))
    return {i for i, q in enumerate(p) if q > 0 and (q >= eta or q == max(p))}


def kept(out: torch.Tensor) -> set[int]:
    return set(torch.isfinite(out[0]).nonzero()[:, 0].tolist())


def far_from_thresholds(p: list[float], cuts: list[float]) -> bool:
    """No probability, nor partial mass of the typical ranking, within 1e-9 of a cut: a float64
    sum in another order cannot flip a decision there."""
    return all(abs(q - c) > 1e-9 for q in p for c in cuts)


weights_rows = st.lists(
    st.one_of(st.floats(-6, 6, allow_nan=False), st.just(INF)), min_size=2, max_size=12
).filter(lambda w: any(x > INF for x in w))


@settings(max_examples=150, deadline=None)
@given(weights=weights_rows, value=st.floats(0.01, 0.99))
def test_each_cutoff_keeps_the_set_its_definition_names(weights, value):
    p = distribution(weights)
    lp = torch.tensor([[math.log(q) if q > 0 else INF for q in p]], dtype=torch.float64)
    h = -sum(q * math.log(q) for q in p if q > 0)
    eta = min(value, math.sqrt(value) * math.exp(-h))
    if far_from_thresholds(p, [value, eta]):
        assert kept(processors.epsilon_cutoff(lp, value)) == epsilon_reference(p, value)
        assert kept(processors.eta_cutoff(lp, value)) == eta_reference(p, value)
    surprise = sorted({abs(-math.log(q) - h) for q in p if q > 0})
    if all(b - a > 1e-9 for a, b in zip(surprise, surprise[1:])):  # no near-ties in the ranking
        partial = sorted(p, key=lambda q: abs(-math.log(q) - h) if q > 0 else math.inf)
        masses = [sum(partial[: i + 1]) for i in range(len(partial))]
        if all(abs(m - value) > 1e-9 for m in masses):
            assert kept(processors.typical_p(lp, value)) == typical_reference(p, value)


def test_cutoffs_by_hand():
    """p = (.5, .3, .15, .05): H = 1.1422 nats, e^-H = .3191; |-log p - H| = .449, .062, .755,
    1.853, so typical ranks tokens 1, 0, 2, 3 (cumulative mass .3, .8, .95, 1)."""
    lp = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    assert kept(processors.typical_p(lp, 0.25)) == {1}
    assert kept(processors.typical_p(lp, 0.5)) == {0, 1}
    assert kept(processors.typical_p(lp, 0.85)) == {0, 1, 2}
    assert kept(processors.typical_p(lp, 0.96)) == {0, 1, 2, 3}
    assert kept(processors.epsilon_cutoff(lp, 0.1)) == {0, 1, 2}
    assert kept(processors.epsilon_cutoff(lp, 0.9)) == {0}  # the most probable always stays
    assert kept(processors.eta_cutoff(lp, 0.04)) == {0, 1, 2, 3}  # eta = min(.04, .0638)
    assert kept(processors.eta_cutoff(lp, 0.1)) == {0, 1, 2}  # eta = min(.1, .1009)
    assert kept(processors.eta_cutoff(lp, 0.2)) == {0, 1, 2}  # eta = min(.2, .1427)
    assert kept(processors.eta_cutoff(lp, 0.5)) == {0, 1}  # eta = min(.5, .2256)
    assert kept(processors.eta_cutoff(lp, 0.999)) == {0}  # eta = min(.999, .3190) > .3


@settings(max_examples=60, deadline=None)
@given(
    weights=weights_rows,
    t=st.sampled_from([0.5, 1.0, 1.7]),
    k=st.sampled_from([None, 2, 5]),
    p=st.sampled_from([None, 0.9]),
    minp=st.sampled_from([None, 0.05]),
    typical=st.sampled_from([None, 0.8, 1.0]),
    epsilon=st.sampled_from([None, 0.0, 0.03]),
    eta=st.sampled_from([None, 0.0, 0.05]),
)
def test_the_chain_is_transformers_order_each_on_the_renormalised_rest(
    weights, t, k, p, minp, typical, epsilon, eta
):
    """process() = the filters one after another, each over what the previous left."""
    lp = torch.tensor([weights], dtype=torch.float64).log_softmax(-1)
    want = processors.temperature(lp, t)
    if k is not None:
        want = processors.top_k(want, k)
    steps = [(processors.top_p, p), (processors.min_p, minp)]
    steps += [(processors.typical_p, None if typical == 1.0 else typical)]
    steps += [(processors.epsilon_cutoff, epsilon or None), (processors.eta_cutoff, eta or None)]
    for keep, value in steps:
        if value is not None:
            want = keep(want.log_softmax(-1), value)
    got = processors.process(lp, t=t, k=k, p=p, minp=minp, typical=typical, epsilon=epsilon, eta=eta)
    assert torch.equal(torch.isfinite(got), torch.isfinite(want))
    assert torch.allclose(got.softmax(-1), want.softmax(-1))


def test_sampling_draws_from_the_masked_then_processed_distribution():
    """One step of sampling under a constraint (the regex allows a, b, c, d, not e): the
    frequencies of 20,000 draws against the typical set of the masked, renormalised row."""
    vocab = char_vocab("abcde")  # ids: specials first
    ids = [vocab.index[c] for c in "abcde"]
    table = torch.full((len(vocab), len(vocab)), -30.0)
    probs = torch.tensor([0.05, 0.3, 0.15, 0.02, 0.48])  # e most probable, masked out
    table[:, ids] = probs.log()
    model = TableLM(table, bos_id=vocab.eos_id, eos_id=None, vocab=vocab)
    n = 20_000
    hyps = decodekit.generate(
        model,
        [ids[0]],
        strategy="sample",
        typical_p=0.6,
        max_length=1,
        num_samples=n,
        seed=5,
        constraint="[a-d]",
    )
    masked = [q / (1 - 0.48) for q in probs.tolist()[:4]]
    allowed = typical_reference(masked, 0.6)
    expected = {ids[i]: masked[i] / sum(masked[j] for j in allowed) for i in allowed}
    counts = collections.Counter(h.tokens[0] for h in hyps)
    assert set(counts) == set(expected)
    stat = sum((counts[i] - n * q) ** 2 / (n * q) for i, q in expected.items())
    assert stat < 18.5  # chi-square, df <= 3, p = 1e-4


def test_the_cutoffs_reach_every_entry_point():
    model = TableLM(torch.randn(6, 6, generator=torch.Generator().manual_seed(1)))
    config = decodekit.GenerationConfig(
        strategy="sample", typical_p=0.5, eta_cutoff=0.3, seed=2, max_length=6
    )
    a = decodekit.generate(model, [1], config)
    b = decodekit.sample(model, [1], 6, typical_p=0.5, eta_cutoff=0.3, generator=2)
    assert a == b


@pytest.mark.parametrize(
    "option,value",
    [
        ("typical_p", 0.0),
        ("typical_p", 1.5),
        ("epsilon_cutoff", 1.0),
        ("eta_cutoff", -0.1),
        ("eta_cutoff", "x"),
    ],
)
def test_out_of_range_cutoffs_are_one_line_errors(option, value):
    with pytest.raises(ConfigError, match=option):
        decodekit.GenerationConfig(strategy="sample", **{option: value})
    with pytest.raises(ConfigError, match=option):
        decodekit.sample(TableLM(torch.zeros(3, 3)), [1], 2, **{option: value})


TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the cat ran and the dog sat"]


@pytest.mark.parametrize(
    "options",
    [
        dict(typical_p=0.7),
        dict(epsilon_cutoff=0.004),
        dict(eta_cutoff=0.9),
        dict(temperature=0.7, top_k=40, typical_p=0.9, eta_cutoff=0.5),
    ],
)
def test_next_token_distributions_equal_transformers_generate(options):
    """transformers' generate(do_sample=True, ..., output_scores=True): its processed scores'
    softmax is the distribution it draws from; ours is softmax(process(the model's logprobs))."""
    pytest.importorskip("transformers", reason="the reference implementation is transformers'")
    from decodekit.models.hf import HuggingFaceLM
    from tests.support.fakes import tiny_gpt2

    model, tok = tiny_gpt2(TEXTS)
    ids = tok(["the cat sat on the"], return_tensors="pt")
    theirs = {"top_k": 0, **options}  # transformers' default top_k is 50
    out = model.generate(
        **ids,
        do_sample=True,
        max_new_tokens=1,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
        **theirs,
    )
    want = torch.softmax(out.scores[0][0].double(), -1)
    lm = HuggingFaceLM(model, tok)
    lp, _ = lm.prefill(lm.initial_state(1), ids["input_ids"])
    names = {
        "typical_p": "typical",
        "epsilon_cutoff": "epsilon",
        "eta_cutoff": "eta",
        "temperature": "t",
        "top_k": "k",
    }
    got = torch.softmax(processors.process(lp, **{names[k]: v for k, v in options.items()})[0].double(), -1)
    assert 10 < int((want > 0).sum()) < len(tok)  # the cutoff removed some tokens, not all
    assert torch.equal(want > 0, got > 0)
    assert torch.allclose(want, got, atol=1e-6)
