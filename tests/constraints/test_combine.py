"""Several constraints at once: every pattern fully matches and no exclude matches anywhere.

The product automaton must accept a token sequence exactly when the predicate ``all(fullmatch)
and not any(search)`` holds on its text (word, character and byte-level vocabularies, the last
with characters split across tokens), and the searches must return the exhaustive best among
the sequences that satisfy it."""

from __future__ import annotations

import itertools

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.constraints import ConstraintError, as_automaton, compile_regex
from decodekit.constraints.syntax.firstset import first_char_rejects
from decodekit.decoding.generation import GenerationConfig, generate
from decodekit.errors import ConfigError
from decodekit.vocab import Vocab
from tests.support.exhaustive import Oracle, SparseLM, assert_n_best
from tests.support.regex_strategies import regexes, vocabularies

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WORDS3 = [r".*\bdog\b.*", r".*\bpark\b.*", r".*\bball\b.*"]
UNSAT = ("no text matches", "no token sequence", "matches no text")


def predicate(patterns, excludes):
    """Whether a text satisfies the combination (None: not text at all)."""

    def holds(text) -> bool:
        if text is None:
            return False
        return all(regex.fullmatch(p, text) for p in patterns) and not any(
            regex.search(x, text) for x in excludes
        )

    return holds


def text_of(tokens, separator, seq):
    """The text of a token sequence: str tokens joined, bytes tokens decoded (None if invalid)."""
    if tokens and isinstance(tokens[0], bytes):
        try:
            return separator.encode().join(tokens[t] for t in seq).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return separator.join(tokens[t] for t in seq)


def check_agreement(patterns, excludes, tokens, separator, data, depth=3):
    holds = predicate(patterns, excludes)
    seqs = [s for n in range(depth + 1) for s in itertools.product(range(len(tokens)), repeat=n)]
    try:
        auto = compile_regex(patterns, tokens, separator=separator, exclude=excludes)
    except ConstraintError as e:
        if "first-character test" in str(e):  # refused, never misread (test_first_character_test)
            assert any(first_char_rejects(x) for x in excludes), str(e)
            return
        assert any(m in str(e) for m in UNSAT), str(e)
        assert not any(holds(text_of(tokens, separator, s)) for s in seqs)
        return
    seqs += data.draw(st.lists(st.lists(st.integers(0, len(tokens) - 1), max_size=8), max_size=10))
    for seq in seqs:
        text = text_of(tokens, separator, seq)
        assert auto.accepts(seq) == holds(text), (patterns, excludes, tokens, seq, text)


@SETTINGS
@given(
    st.lists(regexes(max_leaves=4), min_size=1, max_size=3),
    st.lists(regexes(max_leaves=3), max_size=2),
    vocabularies(),
    st.sampled_from(["", " "]),
    st.data(),
)
def test_product_agrees_with_the_predicate(patterns, excludes, tokens, separator, data):
    """Multi-character tokens with and without a separator (characters and words)."""
    check_agreement(patterns, excludes, tokens, separator, data)


WORD_LEAVES = [r"\bdog\b", "dog", "park", " ", ".", "(?:dog|park)", r"\w", "ball"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(regexes(WORD_LEAVES, max_leaves=3).map(lambda p: f".*{p}.*"), min_size=1, max_size=3),
    st.lists(regexes(WORD_LEAVES, max_leaves=2), max_size=2),
    st.data(),
)
def test_product_agrees_over_words(patterns, excludes, data):
    check_agreement(patterns, excludes, ["dog", "park", "ball", "a", "dogpark"], " ", data)


BYTE_LEAVES = ["a", "é", "中", "😀", " ", ".", "[aé]", "[^a]", r"\w", "(?:é|中)"]


def byte_tokens():
    """Byte-level tokens: pieces of the UTF-8 of a few characters, split inside characters."""
    data = "aé中😀 ".encode()
    piece = st.tuples(st.integers(0, len(data) - 1), st.integers(1, 3)).map(
        lambda t: data[t[0] : t[0] + t[1]]
    )
    return st.lists(piece, min_size=2, max_size=6, unique=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(regexes(BYTE_LEAVES, max_leaves=4), min_size=1, max_size=3),
    st.lists(regexes(BYTE_LEAVES, max_leaves=2), max_size=2),
    byte_tokens(),
    st.data(),
)
def test_product_agrees_over_byte_tokens(patterns, excludes, tokens, data):
    """A multi-byte character may be spelled across tokens; invalid UTF-8 never matches."""
    check_agreement(patterns, excludes, tokens, "", data)


class ProductOracle(Oracle):
    """The exhaustive oracle with the combined predicate."""

    def __init__(self, model, prompt, max_length, patterns, excludes):
        self.holds = predicate(patterns, excludes)
        super().__init__(model, prompt, max_length, pattern="(combined)")

    def matches(self, seq) -> bool:
        if any(self.surfaces[x] is None for x in seq):
            return False
        return self.holds(self.model.vocab.decode(seq))


def small_vocab(tokens=("a", "b", "ab")):
    return Vocab(["<unk>", "<eos>", *tokens], separator="", eos="<eos>", unk="<unk>")


AB_LEAVES = ["a", "b", ".", "[ab]", "(?:ab)", "b?"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    patterns=st.lists(regexes(AB_LEAVES, max_leaves=4), min_size=1, max_size=2),
    excludes=st.lists(st.sampled_from(["aa", "bb", "ba", "aba", "b{3}"]), max_size=2),
    seed=st.integers(0, 10_000),
    max_length=st.integers(1, 3),
    alpha=st.sampled_from([0.0, 1.0]),
    n_best=st.integers(1, 2),
    eos=st.booleans(),
    search=st.sampled_from(["masked", "anderson", "greedy"]),
)
def test_searches_equal_exhaustive_search(patterns, excludes, seed, max_length, alpha, n_best, eos, search):
    """Anderson-style and masked beam search with a beam wider than the set of sequences return
    the true n best sequences satisfying the combination; masked greedy equals greedy by hand."""
    vocab = small_vocab()
    model = SparseLM(len(vocab), seed, 0.3, bos_id=1, eos_id=1 if eos else None, vocab=vocab)
    try:
        auto = as_automaton(patterns, model, exclude=excludes)
    except ConstraintError:
        return
    if auto.shortest > max_length:
        return
    oracle = ProductOracle(model, [2], max_length, patterns, excludes)
    if search == "greedy":
        hyps = decodekit.greedy(model, [2], max_length, constraint=auto)
        want = oracle.greedy()
        assert [(h.tokens, h.finished) for h in hyps] == ([] if want is None else [want[:2]])
        return
    width = len(vocab) ** max_length
    if search == "masked":
        hyps = decodekit.beam_search(model, [2], width, max_length, alpha, n_best, constraint=auto)
    else:
        hyps = decodekit.constrained_beam_search(model, [2], auto, width, max_length, alpha, n_best)
    assert_n_best(hyps, oracle, alpha, n_best)


def word_model(seed=0):
    words = ["the", "dog", "park", "ball", "in", "a", "with", "ran"]
    vocab = Vocab(["<unk>", "<eos>", *words], separator=" ", eos="<eos>", unk="<unk>")
    return SparseLM(len(vocab), seed, 0.0, bos_id=1, eos_id=1, vocab=vocab), vocab


def test_three_words_in_any_order():
    """Anderson et al.'s example: the states record which words were seen (at least 2**3)."""
    model, vocab = word_model()
    auto = as_automaton(WORDS3, model)
    assert auto.num_states >= 8 and auto.shortest == 3
    assert auto.pattern == " & ".join(f"({p})" for p in WORDS3)
    for strategy in ("beam", "greedy", "sample"):
        config = GenerationConfig(
            constraint=list(WORDS3), strategy=strategy, max_length=8, seed=1, num_samples=3
        )
        hyps = generate(model, [[2]], config)[0]
        assert hyps, strategy
        for h in hyps:
            assert set(vocab.decode(h.tokens).split()) >= {"dog", "park", "ball"}, (strategy, h)


def test_exclude_in_generation_config():
    model, vocab = word_model(3)
    config = GenerationConfig(constraint=r".*\bdog\b.*", exclude=["park", r"\bthe\b"], max_length=6, n_best=3)
    assert config.resolved_strategy == "beam" and config.exclude == ("park", r"\bthe\b")
    hyps = generate(model, [[2]], config)[0]
    assert hyps
    for h in hyps:
        text = vocab.decode(h.tokens)
        assert "dog" in text.split() and "park" not in text and "the" not in text.split(), text
    only = GenerationConfig(exclude="dog", max_length=4)  # no positive pattern: any text but
    assert only.constrained and only.exclude == ("dog",)
    for h in generate(model, [[2]], only)[0]:
        assert "dog" not in vocab.decode(h.tokens)


def test_single_pattern_takes_the_single_path():
    tokens = ["a", "b", "ab"]
    one = compile_regex("(a|b)*", tokens)
    assert compile_regex(["(a|b)*"], tokens) is one
    assert compile_regex(["(a|b)*"], tokens, exclude=[]) is one
    both = compile_regex(["(a|b)*", ".*b.*"], tokens)
    assert compile_regex(["(a|b)*", ".*b.*"], tokens) is both  # cached by the tuple of patterns
    assert compile_regex(["(a|b)*"], tokens, exclude=".*b.*") is not both
    assert both.stats["constraints"] == 2 and both.pattern == "((a|b)*) & (.*b.*)"
    assert compile_regex("(a|b)*", tokens, exclude="bb").pattern == "((a|b)*) & !(bb)"


def test_errors():
    tokens = ["a", "b", "ab"]
    with pytest.raises(ConstraintError, match=r"no text matches all of \['a\+', 'b\+'\]"):
        compile_regex(["a+", "b+"], tokens)
    with pytest.raises(ConstraintError, match="no text matches"):
        compile_regex(["a*"], tokens, exclude="")  # the empty match is everywhere
    with pytest.raises(ConstraintError, match="no token sequence of this vocabulary"):
        compile_regex(["c+", ".*c.*"], tokens)
    with pytest.raises(ConstraintError, match="anchors"):
        compile_regex(["a*"], tokens, exclude="^b")
    with pytest.raises(ConstraintError, match="fewer or simpler"):
        compile_regex(WORDS3, ["dog", "park", "ball", " "], max_states=30)  # each pattern < 30
    with pytest.raises(ConstraintError, match="must be a string"):
        compile_regex(["a", 3], tokens)
    with pytest.raises(ConstraintError, match="no constraint"):
        compile_regex([], tokens)
    for bad in ([], [1], 3):
        with pytest.raises(ConfigError, match="constraint"):
            GenerationConfig(constraint=bad)
    with pytest.raises(ConfigError, match="exclude"):
        GenerationConfig(exclude=[3])
    auto = compile_regex("a", tokens)
    with pytest.raises(ConfigError, match="exclude"):
        GenerationConfig(constraint=auto, exclude=["b"])


def test_first_character_test_per_component():
    """``regex`` tests the first character against a case-insensitive first set before matching:
    ``(?:[^ab]|(?i)c)`` fully matches ``x`` but not ``A``. Each positive component applies the
    test as a single pattern does; an exclude, searched at every position, is refused in one
    line rather than misread."""
    pattern, tokens = r"(?:[^ab]|(?i)c)", ["A", "x", "<eos>"]
    assert regex.fullmatch(pattern, "x") and not regex.fullmatch(pattern, "A")
    for patterns in ([pattern, ".*"], [".*", pattern], [pattern, pattern, "(?s:.)"]):
        auto = compile_regex(patterns, tokens, 2)
        assert auto.accepts([1]) and not auto.accepts([0]), patterns
        for lazy in (True, "masked"):
            assert not compile_regex(patterns, tokens, 2, lazy=lazy).accepts([0]), (patterns, lazy)
    for seed in range(8):  # masked greedy over models that often prefer "A"
        model = SparseLM(3, seed=seed, zeros=0.0, bos_id=None, eos_id=2)
        (out,) = decodekit.greedy(model, [1], 3, constraint=compile_regex([pattern, ".*"], tokens, 2))
        text = "".join(tokens[t] for t in out.tokens if t != 2)
        assert regex.fullmatch(pattern, text), (seed, out.tokens)
    with pytest.raises(ConstraintError, match="first-character test.*'AB'"):
        compile_regex(".*", tokens, 2, exclude=pattern)
