"""The lazily built token automaton (issue 15, docs/constraints.md "Huge patterns"): the same
masks as the eager automaton on small patterns (equal without a length limit, a subset under
one), the regex's own acceptance, the match guarantee within ``shortest`` tokens, and the huge
patterns over a byte-level vocabulary in bounded memory; Anderson-style search refuses it."""

from __future__ import annotations

import random
import resource

import pytest
import regex
import torch

import decodekit
from decodekit.constraints import (
    ConstraintError,
    DerivedTokenAutomaton,
    LazyTokenAutomaton,
    TokenAutomaton,
    clear_cache,
    compile_regex,
)
from decodekit.constraints import build as compile_module
from decodekit.constraints.tokens import lift
from decodekit.models.hf import HFVocab
from tests.support.engines import masked_by_lazy_token_automaton
from tests.support.fakes import TableLM, byte_bpe


@pytest.fixture(autouse=True, scope="module")
def _lazy_token_automaton():
    """The masked compiles here build LazyTokenAutomaton, whose own paths these tests exercise
    (the default, the first-visit class over EagerBytes: test_eager_bytes.py, the engine axis)."""
    yield from masked_by_lazy_token_automaton()


TEXTS = ["the cat sat on the mat", "aaaa abab baba 2024-05-17", "naïve café 中文 😀", "0123456789 -:."] * 3
SMALL = [
    r"\d{4}-\d{2}-\d{2}",
    "(a|b)*a(a|b){3}",
    "a{5,9}",
    r"[a-z ]{0,12}",
    r"(cat|mat)( \w+)?",
    "naïve|café",
]
HUGE = {
    "(a|b)*a(a|b){15}": "ab" * 30 + "a" * 16,
    ".{2000}": ("the cat sat " * 200)[:2000],
    "a{10000}": "a" * 10000,
}


@pytest.fixture(scope="module")
def bpe():
    tok = byte_bpe(TEXTS, 400)
    return tok, HFVocab(tok, len(tok))


def _both(vocab, pattern):
    args = (pattern, vocab.surface_bytes(), vocab.eos_id, vocab.separator)
    return compile_regex(*args, lazy=False), compile_regex(*args, lazy=True)


def _text(vocab, tokens) -> str | None:
    data = b"".join(vocab.surface_bytes()[t] or b"" for t in tokens if t != vocab.eos_id)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@pytest.mark.parametrize("pattern", SMALL)
def test_lazy_masks_agree_with_the_eager_automaton(bpe, pattern):
    _, vocab = bpe
    eager, lazy = _both(vocab, pattern)
    assert isinstance(eager, TokenAutomaton) and isinstance(lazy, LazyTokenAutomaton)
    assert lazy.shortest >= eager.shortest
    rng = random.Random(0)
    for _ in range(20):
        e, z = torch.tensor([eager.initial]), torch.tensor([lazy.initial])
        for _ in range(12):
            assert torch.equal(eager.allowed(e), lazy.allowed(z))
            assert torch.equal(eager.is_accepting(e), lazy.is_accepting(z))
            assert int(lazy.min_tokens(z)) <= int(eager.min_tokens(e))  # a lower bound
            remaining = rng.randint(1, 12)
            ez, zz = eager.allowed(e, remaining), lazy.allowed(z, remaining)
            assert not (zz & ~ez).any()  # conservative: a subset under a length limit
            logits = torch.randn(1, len(vocab))
            assert torch.equal(lazy.mask(logits, z, remaining) > float("-inf"), zz)
            choices = eager.allowed(e)[0].nonzero()[:, 0].tolist()
            choices = [t for t in choices if t != vocab.eos_id]
            if not choices:
                break
            t = torch.tensor([rng.choice(choices)])
            e, z = eager.step(e, t), lazy.step(z, t)
            assert (int(e) < 0) == (int(z) < 0)


@pytest.mark.parametrize("pattern", SMALL)
def test_lazy_accepts_exactly_the_regex(bpe, pattern):
    tok, vocab = bpe
    _, lazy = _both(vocab, pattern)
    rng = random.Random(1)
    byte_ids = {t[0]: i for i, t in enumerate(vocab.surface_bytes()) if t is not None and len(t) == 1}
    alphabet = "ab0123456789-cat mïé"
    texts = ["2024-05-17", "aaaaaa", "abab", "cat the", "naïve", "café", ""]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(150)]
    for text in texts:
        want = bool(regex.fullmatch(pattern, text))
        assert lazy.accepts(tok.encode(text)) == want, (pattern, text)
        assert lazy.accepts([byte_ids[b] for b in text.encode()]) == want, (pattern, text)


@pytest.mark.parametrize("pattern", SMALL + ["a{40}"])
def test_the_match_guarantee_at_the_shortest_length(bpe, pattern):
    tok, vocab = bpe
    _, lazy = _both(vocab, pattern)
    g = torch.Generator().manual_seed(3)
    model = TableLM(
        torch.randn(len(vocab), len(vocab), generator=g) * 4, bos_id=None, eos_id=vocab.eos_id, vocab=vocab
    )
    prompt = tok.encode("the")
    n = lazy.shortest
    hyps = decodekit.greedy(model, prompt, n, constraint=lazy)
    hyps += decodekit.sample(model, prompt, n, generator=0, num_samples=6, constraint=lazy)
    hyps += decodekit.beam_search(model, prompt, 3, n, n_best=3, constraint=lazy)
    assert len(hyps) >= 8  # a match always fits: no row ends unmatched
    for h in hyps:
        text = _text(vocab, h.tokens)
        assert text is not None and regex.fullmatch(pattern, text), (pattern, h, text)
    if n > 0:
        with pytest.raises(ConstraintError, match="built lazily.*raise max_length"):
            decodekit.greedy(model, prompt, n - 1, constraint=lazy)


def test_huge_patterns_through_the_api_in_bounded_memory(bpe, monkeypatch):
    tok, vocab = bpe
    monkeypatch.setattr(compile_module, "LAZY_ENTRIES", 2**18)  # the size rule, scaled to 314 tokens
    clear_cache()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    g = torch.Generator().manual_seed(0)
    model = TableLM(
        torch.randn(len(vocab), len(vocab), generator=g), bos_id=None, eos_id=vocab.eos_id, vocab=vocab
    )
    rng = random.Random(2)
    for pattern, text in HUGE.items():
        auto = compile_regex(pattern, vocab.surface_bytes(), vocab.eos_id)  # routed lazily by size
        assert isinstance(auto, (LazyTokenAutomaton, DerivedTokenAutomaton)), pattern  # first visit
        ids = tok.encode(text)
        assert auto.accepts(ids) and auto.accepts(ids + [vocab.eos_id])
        for other in (tok.decode(ids[:-1]), text + "a", text[1:]):
            assert auto.accepts(tok.encode(other)) == bool(regex.fullmatch(pattern, other))
        for _ in range(3):  # sampled strings: one character changed
            i = rng.randrange(len(text))
            other = text[:i] + rng.choice("ab\n") + text[i + 1 :]
            assert auto.accepts(tok.encode(other)) == bool(regex.fullmatch(pattern, other))
        # a walk of masked steps along the text's tokens: each is allowed
        s = torch.tensor([auto.initial])
        for t in ids[:40]:
            assert bool(auto.allowed(s, 1 << 20)[0, t])
            s = auto.step(s, torch.tensor([t]))
    out = decodekit.greedy(model, tok.encode("the"), 40, constraint="(a|b)*a(a|b){15}")
    assert out and regex.fullmatch("(a|b)*a(a|b){15}", _text(vocab, out[0].tokens))
    # issue 15's bound; measured +122 MB on the 50k vocabulary (docs/changelog.md, issue 15)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 500  # MB


def test_anderson_style_search_refuses_what_is_too_large(bpe, monkeypatch):
    tok, vocab = bpe
    monkeypatch.setattr(lift, "MAX_TABLE_ENTRIES", 10**5)  # a{10000} x 314 tokens: too large whole
    model = TableLM(torch.zeros(len(vocab), len(vocab)), bos_id=None, eos_id=vocab.eos_id, vocab=vocab)
    lazy = compile_regex("a{3}", vocab.surface_bytes(), vocab.eos_id, lazy=True)
    with pytest.raises(ConstraintError, match="one beam per automaton state.*beam_search"):
        decodekit.constrained_beam_search(model, tok.encode("a"), lazy, 2, 5)
    with pytest.raises(ConstraintError, match="too large.*one beam per automaton state.*masked beam search"):
        decodekit.constrained_beam_search(model, tok.encode("a"), "a{10000}", 2, 5)


def test_a_lift_refused_for_size_goes_lazy_when_the_automaton_is_large(monkeypatch):
    """A product's in-character states can exceed what its boundary states predict: the lift then
    refuses for size, and with lazy=None (the default) the lazy automaton is used instead, when
    all its byte-level states x V are over LAZY_ENTRIES; lazy=False keeps the refusal. Here: 60
    boundary and 109 byte-level states, V = 18: 1,080 <= LAZY_ENTRIES = 1,500 < 1,962."""
    from decodekit.constraints.tokens import lift as lift_module

    tokens = [*"abcdogprkl ", "dog", "park", "ball", "é", b"\xc3", b"\xa9", "😀"]
    words = [r".*\bdog\b.*", r".*\bpark\b.*", r".*\bball\b.*"]
    monkeypatch.setattr(lift_module, "MAX_TABLE_ENTRIES", 40)
    monkeypatch.setattr(compile_module, "LAZY_ENTRIES", 1500)
    with pytest.raises(ConstraintError, match="constraint too large"):
        compile_regex(words, tokens, None, lazy=False)
    lazy = compile_regex(words, tokens, None)
    assert isinstance(lazy, LazyTokenAutomaton)
    for text in ["dog park ball", "ball dog park", "dog park", "a ball"]:
        ids = [tokens.index(part) for word in text.split(" ") for part in (word, " ")][:-1]
        assert lazy.accepts(ids) == all(regex.fullmatch(w, text) for w in words), text
    monkeypatch.setattr(compile_module, "LAZY_ENTRIES", 5000)  # not large: the refusal stands
    with pytest.raises(ConstraintError, match="constraint too large"):
        compile_regex(words, tokens, None, exclude=["zzz"])


# lazy="masked": what the masked searches compile with (issue 15, compile speed)

MASKED = SMALL + ["中文+", r"(\d+\.)+\d+", "(?:x|yz){2,5}é?"]


@pytest.mark.parametrize("pattern", MASKED)
def test_masked_lazy_automaton_has_exactly_the_eager_masks(bpe, pattern):
    """Over a byte-level vocabulary (every byte a token), lazy="masked" gives the lazy automaton
    with the whole automaton's masks at every length budget, the whole one built only when a
    budget bites, and the same shortest match."""
    _, vocab = bpe
    args = (pattern, vocab.surface_bytes(), vocab.eos_id, vocab.separator)
    clear_cache(vocabularies=False)
    eager, lazy = compile_regex(*args, lazy=False), compile_regex(*args, lazy="masked")
    assert isinstance(lazy, LazyTokenAutomaton) and lazy.exact
    assert lazy._shared.need is None  # nothing built whole yet
    lazy.allowed(torch.tensor([lazy.initial]))
    assert lazy._shared.need is None  # no length limit: the static rows suffice
    assert lazy.shortest == eager.shortest
    rng = random.Random(4)
    for _ in range(25):
        e, z = torch.tensor([eager.initial]), torch.tensor([lazy.initial])
        for _ in range(14):
            for remaining in [None, *range(0, 15)]:
                want = eager.allowed(e, remaining)
                assert torch.equal(want, lazy.allowed(z, remaining)), remaining
                logits = torch.randn(1, len(vocab))
                expected = logits.masked_fill(~want, float("-inf"))
                assert torch.equal(lazy.mask(logits, z, remaining), expected)
                assert lazy.mask(logits, z, remaining, inplace=True) is logits
                assert torch.equal(logits, expected)
            assert torch.equal(eager.is_accepting(e), lazy.is_accepting(z))
            choices = [t for t in eager.allowed(e)[0].nonzero()[:, 0].tolist() if t != vocab.eos_id]
            if not choices:
                break
            t = torch.tensor([rng.choice(choices)])
            e, z = eager.step(e, t), lazy.step(z, t)
            assert (int(e) < 0) == (int(z) < 0)


def test_masked_lazy_only_where_it_is_exact(bpe):
    """Without a token for each byte (a word vocabulary, a separator) "masked" builds whole; a
    pattern no token sequence matches gets the whole build's reason."""
    _, vocab = bpe
    words = ["the", "cat", "sat", "é", " "]
    assert isinstance(compile_regex("the cat", words, None, lazy="masked"), TokenAutomaton)
    assert isinstance(compile_regex("ab", ["a", "b", "ab"], None, " ", lazy="masked"), TokenAutomaton)
    chars = ["a", "b", "ab", "<eos>"]
    assert isinstance(compile_regex("(ab)+", chars, 3, lazy="masked"), LazyTokenAutomaton)
    with pytest.raises(ConstraintError, match="no token sequence"):
        compile_regex("c", chars, 3, lazy="masked")
    with pytest.raises(ConstraintError, match="lazy must be"):
        compile_regex("a", chars, 3, lazy="yes")


def test_masked_searches_compile_lazily_and_anderson_whole(bpe):
    tok, vocab = bpe
    g = torch.Generator().manual_seed(5)
    model = TableLM(
        torch.randn(len(vocab), len(vocab), generator=g) * 3, bos_id=None, eos_id=vocab.eos_id, vocab=vocab
    )
    pattern, prompt = r"\d{4}-\d{2}-\d{2}", tok.encode("the")
    clear_cache(vocabularies=False)
    eager = compile_regex(pattern, vocab.surface_bytes(), vocab.eos_id, lazy=False)
    assert eager.shortest < 10  # the shortest match spelled one byte per token
    for n in (eager.shortest, eager.shortest + 2, 10, 30):
        hyps = decodekit.greedy(model, prompt, n, constraint=pattern)
        hyps += decodekit.beam_search(model, prompt, 3, n, n_best=3, constraint=pattern)
        for h in hyps:
            assert regex.fullmatch(pattern, _text(vocab, h.tokens)), (n, h)
        assert len(hyps) == 4
    with pytest.raises(ConstraintError, match=f"needs at least {eager.shortest} tokens"):
        decodekit.greedy(model, prompt, eager.shortest - 1, constraint=pattern)
    out = decodekit.constrained_beam_search(model, prompt, pattern, 2, 12)
    assert out and regex.fullmatch(pattern, _text(vocab, out[0].tokens))


@pytest.mark.parametrize("pattern", ["[a-z ]{0,12}x", r"(\d+\.)+[a-z]+"])
def test_a_batch_of_rows_is_masked_as_each_row_alone(bpe, pattern):
    """Rows in different states, some with few allowed tokens (touched one by one) and some with
    many (a bias added): ``mask`` of the batch equals each row's ``allowed`` applied, in place or
    not, the input untouched unless in place."""
    _, vocab = bpe
    lazy = compile_regex(pattern, vocab.surface_bytes(), vocab.eos_id, vocab.separator, lazy="masked")
    rng = random.Random(7)
    states = [lazy.initial]
    while len(states) < 12:
        row = lazy.allowed(torch.tensor([states[-1]]))[0]
        choices = [t for t in row.nonzero()[:, 0].tolist() if t != vocab.eos_id]
        states.append(
            lazy.step(torch.tensor([states[-1]]), torch.tensor([rng.choice(choices)]))[0].item()
            if choices
            else lazy.initial
        )
    states = torch.tensor(states)
    from decodekit.constraints.tokens.masks import SPARSE

    sizes, few = lazy.allowed(states).sum(dim=1), len(vocab) // SPARSE
    assert int(sizes.min()) <= few < int(sizes.max()) < len(vocab) - few  # ids touched, and a bias added
    for remaining in (None, 3, torch.tensor([rng.randint(1, 9) for _ in states])):
        want = lazy.allowed(states, remaining)
        logits = torch.randn(len(states), len(vocab))
        before = logits.clone()
        expected = logits.masked_fill(~want, float("-inf"))
        assert torch.equal(lazy.mask(logits, states, remaining), expected)
        assert torch.equal(logits, before)
        assert lazy.mask(logits, states, remaining, inplace=True) is logits
        assert torch.equal(logits, expected)
