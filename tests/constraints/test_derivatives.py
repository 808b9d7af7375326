"""The derivative engine (docs/constraints.md, "The derivative engine"): hash-consed expressions
with intersection and complement, the lazy UTF-8 byte level and the token level built on first
visit. Oracles: ``regex.fullmatch`` on the decoded text, exhaustive enumeration of token
sequences, and the whole automaton's masks (``compile_regex(..., lazy=False)``) at every
remaining-length budget."""

from __future__ import annotations

import itertools
import random

import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.constraints import (
    ConstraintError,
    DerivedTokenAutomaton,
    Pattern,
    TokenAutomaton,
    build,
    clear_cache,
    compile_regex,
    complement,
    intersect,
    union,
)
from decodekit.constraints.automata import algebra, pattern, shortest
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.tokens.trie import encode_vocab
from tests.constraints.test_boundaries import FIXED
from tests.support.regex_strategies import SYNTAX_LEAVES, regexes, vocabularies

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def derived(expr, tokens, eos_id=None) -> DerivedTokenAutomaton:
    """The derivative engine forced on (tokens: every character is a token by itself)."""
    tokens = tuple(tokens)
    enc = encode_vocab(tokens)
    expr = Pattern(expr) if isinstance(expr, str) else expr
    return DerivedTokenAutomaton(CharLevel(expr, enc.available(b"")), enc, tokens, eos_id, str(expr))


def exact_vocab(tokens, alphabet: str) -> list[str]:
    """``tokens`` plus every character of ``alphabet`` alone (so that the engine is exact)."""
    return list(dict.fromkeys([*alphabet, *tokens]))


def sequences(size: int, length: int):
    for n in range(length + 1):
        yield from itertools.product(range(size), repeat=n)


def same_masks(eager: TokenAutomaton, lazy, walks: int = 8, steps: int = 8, budgets: int = 8, seed: int = 0):
    """Along random walks of the eager automaton: equal rows at every budget, equal acceptance."""
    rng = random.Random(seed)
    for _ in range(walks):
        e, z = torch.tensor([eager.initial]), torch.tensor([lazy.initial])
        for _ in range(steps):
            for remaining in [None, *range(0, budgets)]:
                want, got = eager.allowed(e, remaining), lazy.allowed(z, remaining)
                assert torch.equal(want, got), (lazy.pattern, remaining, want.nonzero(), got.nonzero())
            assert torch.equal(eager.is_accepting(e), lazy.is_accepting(z))
            assert int(lazy.min_tokens(z)) <= int(eager.min_tokens(e))
            choices = [t for t in eager.allowed(e)[0].nonzero()[:, 0].tolist() if t != eager.eos_id]
            if not choices:
                break
            t = torch.tensor([rng.choice(choices)])
            e, z = eager.step(e, t), lazy.step(z, t)


def agrees(pattern: str, tokens: list[str], length: int = 3) -> None:
    compiled = regex.compile(pattern)
    try:
        auto = derived(pattern, tokens)
    except ConstraintError as e:
        assert "no token sequence" in str(e)
        for seq in sequences(len(tokens), length):
            assert not compiled.fullmatch("".join(tokens[t] for t in seq))
        return
    for seq in sequences(len(tokens), length):
        text = "".join(tokens[t] for t in seq)
        assert auto.accepts(seq) == bool(compiled.fullmatch(text)), (pattern, tokens, seq)
    eager = compile_regex(pattern, tokens, lazy=False)
    assert auto.shortest == eager.shortest
    same_masks(eager, auto, walks=3, steps=5, budgets=5)


# ----------------------------------------------------------------------------- agreement


@SETTINGS
@given(regexes(), vocabularies())
def test_agrees_with_fullmatch_and_the_whole_masks(pattern, tokens):
    agrees(pattern, exact_vocab(tokens, "ab "))


@FEW
@given(regexes(SYNTAX_LEAVES), vocabularies("abAB ]"))
def test_syntax_constructs_agree(pattern, tokens):
    agrees(pattern, exact_vocab(tokens, "abAB ]"))


CHARS = "abxy _.é1-\u0663\t"


@FEW
@given(st.sampled_from(FIXED), st.lists(st.text(alphabet=CHARS, max_size=7), min_size=1, max_size=20))
def test_word_boundaries_agree(pattern, texts):
    auto = derived(pattern, list(CHARS))
    for text in texts:
        assert auto.accepts([CHARS.index(c) for c in text]) == bool(regex.fullmatch(pattern, text))


@FEW
@given(regexes(leaves=["a", "b", " ", ".", "[ab]", r"\b", r"\B", r"\w", r"\S", "(?:)"], max_leaves=7))
def test_random_boundary_regexes_agree(pattern):
    agrees(pattern, ["a", "b", " ", "ab", "a b"], length=4)


def test_symbolic_repetition_is_one_node():
    char = CharLevel(Pattern("a{10000}"))
    assert char.root.op == algebra.REP and char.root.lo == 10000
    q = char.initial
    for _ in range(3):
        q = char.step(q, char.utf8["ascii"][ord("a")])
    assert char.states[q][0].lo == 9997 and char.distance(q) == 9997


def test_normalisation_makes_equal_derivatives_the_same_object():
    alg = CharLevel(Pattern("a|b")).alg
    a, b = alg.chars(1), alg.chars(2)
    assert alg.union([a, b]) is alg.chars(3) and alg.union([b, a, a]) is alg.chars(3)
    assert alg.complement(alg.complement(a)) is a
    assert alg.intersection([a, alg.top]) is a and alg.intersection([a, alg.empty]) is alg.empty
    assert alg.cat(alg.cat(a, b), a) is alg.cat(a, alg.cat(b, a))
    star = alg.rep(a, 0, None)
    assert alg.union([star, alg.cat(a, star)]) is alg.union([alg.cat(a, star), star])


# ----------------------------------------------------------------------------- & and ~

PARTS = ["(a|b)*", "a.*", ".*b", "(ab)*", "[ab ]{0,3}", r".*\bab\b.*", "a+ ?b*", " .*"]


def _holds(expr, text: str) -> bool:
    """What an expression means, from ``regex.fullmatch`` of its parts (the oracle)."""
    if isinstance(expr, str):
        return bool(regex.fullmatch(expr, text))
    op, args = expr
    if op == "and":
        return all(_holds(a, text) for a in args)
    if op == "or":
        return any(_holds(a, text) for a in args)
    return not _holds(args[0], text)


def _build(expr):
    if isinstance(expr, str):
        return Pattern(expr)
    op, args = expr
    parts = [_build(a) for a in args]
    return intersect(*parts) if op == "and" else union(*parts) if op == "or" else complement(parts[0])


def expressions(depth: int = 3):
    leaf = st.sampled_from(PARTS)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(st.sampled_from(["and", "or"]), st.lists(inner, min_size=2, max_size=3).map(tuple)),
            st.tuples(st.just("not"), st.tuples(inner)),
        ),
        max_leaves=depth + 1,
    )


@SETTINGS
@given(expressions())
def test_intersection_and_complement_at_any_depth_exhaustively(expr):
    """Every token sequence up to length 4 over a small vocabulary is accepted iff the text
    satisfies the expression as ``regex`` says of its parts; the whole automaton explored from
    the derivatives has the same masks at every budget."""
    tokens = ["a", "b", " ", "ab", "ba b"]
    pattern = _build(expr)
    try:
        auto = derived(pattern, tokens)
    except ConstraintError as e:
        assert "no token sequence" in str(e)
        for seq in sequences(len(tokens), 4):
            assert not _holds(expr, "".join(tokens[t] for t in seq))
        return
    for seq in sequences(len(tokens), 4):
        assert auto.accepts(seq) == _holds(expr, "".join(tokens[t] for t in seq)), (pattern, seq)
    whole = compile_regex(pattern, tokens, lazy=False)
    assert isinstance(whole, TokenAutomaton)
    for seq in sequences(len(tokens), 4):
        assert whole.accepts(seq) == auto.accepts(seq)
    same_masks(whole, auto, walks=3, steps=5, budgets=6)


def test_operators_and_functions_build_the_same_expressions():
    a, b = Pattern("[a-z]+"), Pattern("....")
    assert (a & b) == intersect(a, "....") and ("...." & a) == intersect("....", a)
    assert (a | b) == union(a, b) and ~a == complement("[a-z]+")
    assert str(a & ~b) == "([a-z]+) & (~(....))"
    assert len({a & b, intersect(a, b)}) == 1
    with pytest.raises(ConstraintError, match="regex strings or Patterns"):
        intersect(a, 3)


def test_excludes_and_several_constraints_as_expressions():
    """``exclude=`` on a Pattern is ``& ~(.*R.*)``: the same texts as the product API."""
    tokens = ["a", "b", " ", "c", "ab", "cab"]
    old = compile_regex(["[abc ]*", ".*a.*"], tokens, exclude=["ab c", "bb"], lazy=False)
    new = derived(
        intersect("[abc ]*", ".*a.*") & ~Pattern("(?s:.*)(?:ab c)(?s:.*)") & ~Pattern(".*bb.*"), tokens
    )
    via = compile_regex(intersect("[abc ]*", ".*a.*"), tokens, exclude=["ab c", "bb"])
    assert isinstance(via, DerivedTokenAutomaton)
    for seq in sequences(len(tokens), 4):
        assert old.accepts(seq) == new.accepts(seq) == via.accepts(seq)
    same_masks(old, via, walks=4, steps=6, budgets=6)
    with pytest.raises(ConstraintError, match="anchors"):
        compile_regex(Pattern("a*"), tokens, exclude="^a")


def test_an_expression_over_a_word_vocabulary_is_built_whole():
    words = ["the", "cat", "dog", "sat"]
    auto = compile_regex(Pattern(".*") & ~Pattern(".*dog.*"), words, None, " ")
    assert isinstance(auto, TokenAutomaton)
    for seq in sequences(len(words), 3):
        text = " ".join(words[t] for t in seq)
        assert auto.accepts(seq) == (regex.search("dog", text) is None)


def test_contradictions_and_budgets_are_clear_errors(monkeypatch):
    with pytest.raises(ConstraintError, match="no token sequence"):
        derived(Pattern("a+") & Pattern("b+"), ["a", "b"])
    monkeypatch.setattr(shortest, "SEARCH_BUDGET", 50)
    with pytest.raises(ConstraintError, match="searched more than 50 states"):
        derived(Pattern(".*") & ~Pattern(".*") | Pattern("a{200}") & ~Pattern("a*b"), ["a", "b"])


# ----------------------------------------------------------------------------- byte level


@pytest.fixture(scope="module")
def bpe():
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    from decodekit.models.hf import HFVocab
    from tests.support.fakes import byte_bpe

    texts = ["naïve café 中文 😀 ab", "the cat sat on the mat", "aaaa abab 2024-05-17 \x00"] * 4
    tok = byte_bpe(texts, 360)
    return tok, HFVocab(tok, len(tok))


BYTE_PATTERNS = [
    "naïve|café",
    "[一-龥]{2,4}",
    "😀+",
    r"(caf|na)é \w+",
    r".*\bcafé\b.*",
    r"\d{4}-\d{2}",
    "a\x00b*",
]


@pytest.mark.parametrize("pattern", BYTE_PATTERNS)
def test_byte_level_bpe_masks_equal_the_whole_automaton(bpe, pattern):
    """Characters split across tokens, a NUL token: the whole automaton's masks at every budget."""
    _, vocab = bpe
    tokens = vocab.surface_bytes()
    assert any(t is not None and len(t) == 1 and t[0] >= 0x80 for t in tokens)  # byte pieces
    eager = compile_regex(pattern, tokens, vocab.eos_id, lazy=False)
    auto = derived(pattern, tokens, vocab.eos_id)
    assert auto.shortest == eager.shortest
    same_masks(eager, auto, walks=6, steps=10, budgets=12, seed=3)


def test_byte_level_expression_masks(bpe):
    _, vocab = bpe
    tokens = vocab.surface_bytes()
    expr = Pattern("[a-zé中 ]{2,8}") & ~Pattern(".*(?:é|cat).*")
    whole = compile_regex(expr, tokens, vocab.eos_id, lazy=False)
    lazy = compile_regex(expr, tokens, vocab.eos_id, lazy="masked")
    assert isinstance(whole, TokenAutomaton) and isinstance(lazy, DerivedTokenAutomaton)
    same_masks(whole, lazy, walks=6, steps=8, budgets=10, seed=1)


HUGE = ["(a|b)*a(a|b){18}", "a{1200}", "(?:[a-z]+ ){50}", ".{1100}"]


@pytest.mark.parametrize("pattern", HUGE)
def test_huge_patterns_compile_and_constrain_masked_search(bpe, pattern):
    """Patterns the eager engine refuses or builds slowly compile through the rung (nothing but the
    first row built); the short one constrains masked greedy and beam search to matches, the long
    ones keep a match within the length limit along their first steps."""
    tok, vocab = bpe
    clear_cache(vocabularies=False)
    auto = compile_regex(pattern, vocab.surface_bytes(), vocab.eos_id, lazy="masked")
    engine = "derivatives" if pattern != HUGE[2] else "eager"  # HUGE[2]: its byte DFA, first visit
    assert isinstance(auto, DerivedTokenAutomaton) and auto.stats["engine"] == engine
    if not pattern.startswith("(a|b)"):
        limit = 2000
        assert auto.fits(limit) and not auto.fits(3)
        state = torch.tensor([auto.initial])
        for t in range(12):
            row = auto.allowed(state, limit - t)
            assert row.any() and not row[0, vocab.eos_id]
            state = auto.step(state, row[0].nonzero()[-1])
        return
    from tests.support.fakes import TableLM

    g = torch.Generator().manual_seed(2)
    model = TableLM(torch.randn(len(vocab), len(vocab), generator=g) * 3, None, vocab.eos_id, vocab)
    n = auto.shortest + 1
    assert n <= 20
    hyps = decodekit.greedy(model, tok.encode("ab"), n, constraint=auto)
    hyps += decodekit.beam_search(model, tok.encode("ab"), 3, n, n_best=3, constraint=auto)
    for hyp in hyps:
        ids = [t for t in hyp.tokens if t != vocab.eos_id]
        text = b"".join(vocab.surface_bytes()[t] for t in ids).decode("utf-8")
        assert regex.fullmatch(pattern, text), text


def test_the_rung_keeps_small_patterns_eager(bpe, monkeypatch):
    _, vocab = bpe
    tokens = vocab.surface_bytes()
    clear_cache(vocabularies=False)
    small = compile_regex(r"\d{4}-\d{2}", tokens, vocab.eos_id, lazy="masked")
    assert small.stats["engine"] == "eager"  # its byte DFA under the first-visit class, no derivatives
    assert isinstance(
        compile_regex("(a|b)*a(a|b){18}", tokens, vocab.eos_id, lazy="masked"), DerivedTokenAutomaton
    )
    monkeypatch.setattr(build, "DERIVE_ALWAYS", True)
    clear_cache(vocabularies=False)
    assert isinstance(
        compile_regex(r"\d{4}-\d{2}", tokens, vocab.eos_id, lazy="masked"), DerivedTokenAutomaton
    )
    clear_cache(vocabularies=False)


def test_several_constraints_for_the_masked_searches_are_one_intersection(bpe):
    """Several patterns compiled for the masked searches go through the engine as ``A & B``, with
    the product's masks at every budget; with excludes they stay a product."""
    _, vocab = bpe
    tokens = vocab.surface_bytes()
    patterns = [r".*\bcat\b.*", r".*\bmat\b.*", r"[a-z ]{0,30}"]
    clear_cache(vocabularies=False)
    whole = compile_regex(patterns, tokens, vocab.eos_id, lazy=False)
    lazy = compile_regex(patterns, tokens, vocab.eos_id, lazy="masked")
    assert isinstance(lazy, DerivedTokenAutomaton) and lazy.pattern == whole.pattern
    same_masks(whole, lazy, walks=6, steps=10, budgets=12, seed=2)
    kept = compile_regex(patterns[:1], tokens, vocab.eos_id, exclude="dog", lazy="masked")
    assert kept.stats.get("engine") != "derivatives"


def test_device_copies_share_the_states():
    auto = derived("(a|b)*a(a|b){3}", ["a", "b", "ab"])
    assert auto.to("cpu") is auto
    copy = auto.to(torch.device("meta"))
    assert copy is auto.to("meta") and copy.bytes is auto.bytes and copy.device.type == "meta"
    assert copy.step(torch.tensor([0]), torch.tensor([0])).device.type == "meta"


def test_masked_searches_take_an_expression(bpe):
    """``constraint=`` of the masked searches accepts a Pattern; every output satisfies it as
    ``regex`` says of its parts."""
    tok, vocab = bpe
    from tests.support.fakes import TableLM

    g = torch.Generator().manual_seed(7)
    model = TableLM(torch.randn(len(vocab), len(vocab), generator=g) * 3, None, vocab.eos_id, vocab)
    expr = Pattern("[a-z ]{3,12}") & ~Pattern(".*(?:at|the).*")
    hyps = decodekit.greedy(model, tok.encode("ab"), 14, constraint=expr)
    hyps += decodekit.beam_search(model, tok.encode("ab"), 3, 14, n_best=3, constraint=expr)
    assert hyps
    for hyp in hyps:
        text = b"".join(vocab.surface_bytes()[t] for t in hyp.tokens if t != vocab.eos_id).decode("utf-8")
        assert regex.fullmatch("[a-z ]{3,12}", text) and not regex.search("at|the", text), text


CAT_PARTS = ["(a|b)*", "a.*", "(ab)*", "[ab ]{0,2}", "a+ ?b*", " .*", "b", "^a?$"]


def _holds_cat(expr, text: str) -> bool:
    """``_holds`` with ``("cat", parts)``: some split of ``text`` whose pieces hold part by part."""
    if isinstance(expr, str):
        return bool(regex.fullmatch(expr, text))
    op, args = expr
    if op == "rep":
        return _holds_rep(args[0], args[1], args[2], text)
    if op == "cat":
        head, rest = args[0], args[1:]
        if not rest:
            return _holds_cat(head, text)
        return any(
            _holds_cat(head, text[:i]) and _holds_cat(("cat", rest), text[i:]) for i in range(len(text) + 1)
        )
    if op == "and":
        return all(_holds_cat(a, text) for a in args)
    if op == "or":
        return any(_holds_cat(a, text) for a in args)
    return not _holds_cat(args[0], text)


def _holds_rep(expr, lo: int, hi, text: str) -> bool:
    """``lo`` to ``hi`` pieces of ``text`` in a row, each holding ``expr``."""
    if text == "" and (lo == 0 or _holds_cat(expr, "")):
        return True
    if hi == 0:
        return False
    rest_hi = None if hi is None else hi - 1
    return any(
        _holds_cat(expr, text[:i]) and _holds_rep(expr, max(lo - 1, 0), rest_hi, text[i:])
        for i in range(1, len(text) + 1)
    )


def _build_cat(expr):
    if isinstance(expr, str):
        return Pattern(expr)
    op, args = expr
    if op == "rep":
        return pattern.repeat(_build_cat(args[0]), args[1], args[2])
    parts = [_build_cat(a) for a in args]
    if op == "cat":
        return pattern.concat(*parts)
    return intersect(*parts) if op == "and" else union(*parts) if op == "or" else complement(parts[0])


def cat_expressions(depth: int = 3):
    return st.recursive(
        st.sampled_from(CAT_PARTS),
        lambda inner: st.one_of(
            st.tuples(
                st.sampled_from(["and", "or", "cat"]), st.lists(inner, min_size=2, max_size=3).map(tuple)
            ),
            st.tuples(st.just("not"), st.tuples(inner)),
            st.tuples(
                st.just("rep"),
                st.tuples(inner, st.integers(0, 2), st.sampled_from([None, 2, 3])),
            ),
        ),
        max_leaves=depth + 1,
    )


@SETTINGS
@given(cat_expressions())
def test_concatenation_and_repetition_with_intersection_and_complement_exhaustively(expr):
    """Every token sequence up to length 4 is accepted iff some split of the text satisfies the
    concatenation's parts as ``regex`` says (and, or, not as above), on the masked searches and
    on the whole automaton alike."""
    tokens = ["a", "b", " ", "ab", "ba b"]
    pattern = _build_cat(expr)
    texts = {seq: "".join(tokens[t] for t in seq) for seq in sequences(len(tokens), 4)}
    try:
        auto = derived(pattern, tokens)
    except ConstraintError as e:
        assert "no token sequence" in str(e)
        assert not any(_holds_cat(expr, t) for t in texts.values())
        return
    for seq, text in texts.items():
        assert auto.accepts(seq) == _holds_cat(expr, text), (pattern, seq)
    whole = compile_regex(pattern, tokens, lazy=False)
    for seq in texts:
        assert whole.accepts(seq) == auto.accepts(seq)


def test_concatenation_of_plain_regexes_is_one_regex():
    """Regexes that mean the same joined are one regex text (the eager compile as before); an
    anchor, a global flag or a first-character test keeps the concatenation, and word boundaries
    inside one are refused."""
    joined = Pattern("[a-z]+") + "[0-9]" + Pattern.concat("x", "y?")
    assert joined.op == "re" and str(joined) == "(?:(?:[a-z]+)(?:[0-9]))(?:(?:x)(?:y?))"
    assert isinstance(compile_regex(joined, ["a", "b", "1", "x", "y"], lazy=False), TokenAutomaton)
    for kept in [Pattern("^a") + "b", "(?i)a" + Pattern("b"), Pattern("a") + ~Pattern("b")]:
        assert kept.op == "cat" and str(kept).startswith("(")
    assert str(Pattern("a") + ~Pattern("b")) == "(a) + (~(b))"
    assert (Pattern("^a") + (Pattern("^b") + "c")) == Pattern.concat("^a", "^b", "c")
    with pytest.raises(ConstraintError, match="word boundaries"):
        Pattern(r"a\b") + ~Pattern("b")
    tokens = ["A", "a", "b", "B"]
    auto = compile_regex("(?i)a" + Pattern("b"), tokens)
    for seq in sequences(len(tokens), 3):
        text = "".join(tokens[t] for t in seq)
        assert auto.accepts(seq) == bool(regex.fullmatch("[aA]b", text)), text


def test_an_expressions_error_message_shows_a_short_label():
    long = "c" * 500
    with pytest.raises(ConstraintError) as e:
        compile_regex(Pattern(long) & "c+", ["a", "b", "<eos>"], 2, " ")  # a word vocabulary: built whole
    message = str(e.value)
    assert "no token sequence" in message and "\n" not in message
    assert long[: pattern.MESSAGE_CHARS - 10] in message and long not in message


@pytest.mark.parametrize("expr", [Pattern("c") & "c+", Pattern("a") & "b", ~Pattern("(?s:.*)")])
@pytest.mark.parametrize("lazy", [None, "masked"])
def test_an_expression_no_text_of_the_vocabulary_matches_is_refused_clearly(expr, lazy):
    with pytest.raises(ConstraintError, match="no token sequence of this vocabulary"):
        compile_regex(expr, ["a", "b", "<eos>"], 2, " ", lazy=lazy)  # word vocabulary: built whole
    if str(expr) != "(c) & (c+)":  # "c" is a byte-level token
        byte_level = [bytes([b]) for b in range(256)] + [b"<eos>"]
        with pytest.raises(ConstraintError, match="no token sequence of this vocabulary"):
            compile_regex(expr, byte_level, 256, lazy=lazy)  # byte-level: from its derivatives
