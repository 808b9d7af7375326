"""Regex constraints over a byte-level BPE vocabulary (as GPT-2, Llama 3 and Qwen use): tokens
are bytes, a character may span tokens, one token is the NUL byte. The vocabulary is trained in
the test with ``tokenizers`` on text with accents, CJK, emoji and combining marks, and holds all
256 single-byte tokens. The automaton must accept a token sequence exactly when its bytes are
valid UTF-8 whose decoding ``regex.fullmatch``es, and every output of every strategy must
decode to a matching text."""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.constraints import ConstraintError, as_automaton, compile_regex
from tests.support.fakes import TableLM, byte_bpe
from tests.support.regex_strategies import regexes

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from decodekit.models.hf import HFVocab, HuggingFaceLM  # noqa: E402

TEXTS = [
    "a naïve café in the rain, año nuevo",
    "die Straße ist groß; ÆSIR œuvre",
    "中文 日本語のテキスト 한국어 一二三",
    "emoji 😀 and 🎉 and a flag 🇫🇷",
    "combining e\u0301 and a\u0308 marks",
    "digits 2024-05-17 and x\x00y nul",
] * 3
# leaves over ASCII and non-ASCII characters (1 to 4 UTF-8 bytes), classes and predicates
LEAVES = ["a", "é", "ß", "中", "😀", "e\u0301", " ", ".", "[aé]", "[^a]", "[一-龥]", r"\w", r"\d", "[😀-🙏]"]
ALPHABET = "aeé\u0301ß中文😀🙂 1\x00"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def bpe():
    tok = byte_bpe(TEXTS, 400)
    vocab = HFVocab(tok, len(tok))
    return tok, vocab


def _text(vocab, tokens) -> str | None:
    """The decoded text of a token sequence (EOS and specials skipped), None if not UTF-8."""
    data = b"".join(vocab.surface_bytes()[t] or b"" for t in tokens)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_the_vocabulary_is_byte_level(bpe):
    tok, vocab = bpe
    tokens = vocab.surface_bytes()
    singles = {t for t in tokens if t is not None and len(t) == 1}
    assert len(singles) == 256  # every byte, NUL included
    assert any(t is not None and len(t) > 1 and not _valid(t) for t in tokens)  # parts of characters
    for text in TEXTS[:6]:
        ids = tok.encode(text)
        assert b"".join(tokens[i] for i in ids).decode() == text == vocab.decode(ids)


def _valid(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@SETTINGS
@given(regexes(LEAVES, max_leaves=5), st.data())
def test_automaton_accepts_exactly_the_matching_utf8(bpe, pattern, data):
    tok, vocab = bpe
    tokens = vocab.surface_bytes()
    compiled = regex.compile(pattern)
    try:
        auto = compile_regex(pattern, tokens, vocab.eos_id)
    except ConstraintError as e:  # with every byte a token, only a pattern matching nothing fails
        assert "matches no text" in str(e), (pattern, str(e))
        return
    byte_ids = {t[0]: i for i, t in enumerate(tokens) if t is not None and len(t) == 1}
    # texts that match: as the tokenizer splits them, and byte by byte
    for _ in range(5):
        text = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=ALPHABET), label="text")
        if not compiled.fullmatch(text):  # hypothesis reads with `re`: keep what `regex` agrees on
            continue
        assert auto.accepts(tok.encode(text)), (pattern, text)
        assert auto.accepts([byte_ids[b] for b in text.encode()]), (pattern, text)
    # random token sequences, mostly not UTF-8 or not matching
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    ids = [i for i, t in enumerate(tokens) if t is not None]
    for _ in range(200):
        seq = [rng.choice(ids) for _ in range(rng.randint(0, 4))]
        text = _text(vocab, seq)
        expected = text is not None and bool(compiled.fullmatch(text))
        assert auto.accepts(seq) == expected, (pattern, seq, text)
    # random walks in the automaton to an accepting state: the text must match
    table, accepting = auto.next_state, auto.accepting
    for _ in range(20):
        s, seq = 0, []
        while not (accepting[s] and rng.random() < 0.3) and len(seq) < 12:
            options = (table[s] >= 0).nonzero().flatten().tolist()
            if not options:
                break
            seq.append(rng.choice(options))
            s = int(table[s, seq[-1]])
        if accepting[s]:
            text = _text(vocab, seq)
            assert text is not None and compiled.fullmatch(text), (pattern, seq, text)


@pytest.mark.parametrize(
    "pattern, text",
    [
        ("naïve", "naïve"),
        ("Straße", "Straße"),
        ("中文", "中文"),
        ("[一-龥]+", "一二三"),
        ("😀", "😀"),
        ("año", "año"),
        ("e\u0301+", "e\u0301\u0301"),
        (r".*\bcafé\b.*", "a café"),
        (r"(?i)STRASSE|straße", "Straße"),
    ],
)
def test_characters_spelled_in_pieces(bpe, pattern, text):
    """Patterns that a byte-level vocabulary spells only across tokens compile and accept the
    text however it is split into tokens."""
    tok, vocab = bpe
    tokens = vocab.surface_bytes()
    auto = compile_regex(pattern, tokens, vocab.eos_id)
    byte_ids = {t[0]: i for i, t in enumerate(tokens) if t is not None and len(t) == 1}
    assert auto.accepts(tok.encode(text))
    assert auto.accepts([byte_ids[b] for b in text.encode()])
    assert not auto.accepts([byte_ids[b] for b in text.encode()[:-1]])


def test_nul_bytes_are_text():
    """A token holding NUL is not empty text (it used to be, through a fixed-width array)."""
    auto = compile_regex(r"[0-9]+", ["1", "\x00", "<eos>"], eos_id=2)
    assert auto.accepts([0]) and not auto.accepts([0, 1, 0]) and not auto.accepts([1])
    with pytest.raises(ConstraintError, match="no token sequence"):
        compile_regex("a", ["a\x00"])
    auto = compile_regex("a\x00b", ["a", "\x00", "b", "a\x00"])
    assert auto.accepts([0, 1, 2]) and auto.accepts([3, 2]) and not auto.accepts([0, 2])


def test_bytes_and_str_tokens_and_invalid_utf8():
    tokens = [b"\xc3", b"\xa9", "e", b"\xff", "é", "\ud800"]
    auto = compile_regex("é+", tokens)
    assert auto.accepts([0, 1]) and auto.accepts([4, 0, 1]) and auto.accepts([4])
    assert not auto.accepts([1, 0]) and not auto.accepts([0]) and not auto.accepts([0, 1, 3])
    assert int(auto.next_state[:, 3].max()) == -1 and int(auto.next_state[:, 5].max()) == -1
    anything = compile_regex(".*", tokens)
    assert not anything.accepts([3]) and not anything.accepts([5]) and not anything.accepts([0])


def test_long_token_and_large_vocabulary_memory():
    """A 200k-character token is kept whole (no fixed-width array of V x 200k characters)."""
    tokens = ["a", "b", "a" * 200_000, "ab"]
    auto = compile_regex("a*", tokens)
    assert auto.accepts([2, 0]) and not auto.accepts([3])


@pytest.mark.parametrize("bad, message", [
    (dict(eos_id=1.0), "eos_id must be an integer"),
    (dict(eos_id=True), "eos_id must be an integer"),
    (dict(max_states="x"), "max_states must be an integer"),
    (dict(max_states=0), "max_states must be a positive integer"),
    (dict(token_strings="abc"), "token_strings must be a sequence"),
    (dict(token_strings=b"abc"), "token_strings must be a sequence"),
    (dict(token_strings=["a", 3, "<eos>"]), "must hold str, bytes or None"),
    (dict(separator=b" "), "separator must be a string"),
])  # fmt: skip
def test_wrong_argument_types_are_clear_errors(bad, message):
    args = dict(pattern="a+", token_strings=["a", "b", "<eos>"], eos_id=2) | bad
    with pytest.raises(ConstraintError, match=message):
        compile_regex(**args)


def _random_table(vocab_size: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(vocab_size, vocab_size, generator=g) * 3


PATTERNS = ["naïve", "[一-龥]{2,4}", "😀+", "año", r"(caf|na)é \w+", r"[0-9]{4}-[0-9]{2}", r".*\bcafé\b.*"]


def _strategies(model, prompt, pattern, max_length, anderson: bool = True):
    """Every decoding strategy's hypotheses for one constraint."""
    yield from decodekit.greedy(model, prompt, max_length, constraint=pattern)
    yield from decodekit.sample(model, prompt, max_length, generator=0, num_samples=4, constraint=pattern)
    yield from decodekit.beam_search(model, prompt, 4, max_length, n_best=4, constraint=pattern)
    if anderson:
        yield from decodekit.constrained_beam_search(
            model, prompt, pattern, beam_size=2, max_length=max_length
        )


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_strategy_matches_on_a_bigram_model(bpe, pattern):
    tok, vocab = bpe
    model = TableLM(_random_table(len(vocab), 1), bos_id=None, eos_id=vocab.eos_id, vocab=vocab)
    prompt = tok.encode("a naïve")
    hyps = list(_strategies(model, prompt, pattern, 12))
    assert hyps
    for h in hyps:
        text = _text(vocab, h.tokens)
        assert text is not None and regex.fullmatch(pattern, text), (pattern, h, text)
        assert vocab.decode(h.tokens) == text


@pytest.fixture(scope="module")
def gpt2(bpe):
    tok, _ = bpe
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=2, initializer_range=0.3,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return HuggingFaceLM(transformers.GPT2LMHeadModel(config).eval(), tok)


@pytest.mark.parametrize("pattern", PATTERNS + [r"\d{4}-\d{2}-\d{2}"])
def test_every_strategy_matches_on_a_random_gpt2(bpe, gpt2, pattern):
    tok, vocab = bpe
    # Anderson-style search runs a beam per state: with \b over bytes the automaton has hundreds
    # (the UTF-8 layout of \w), which the bigram test above covers at less cost
    anderson = decodekit.compile_for_vocab(pattern, vocab).num_states <= 50
    for prompt in [tok.encode("the café"), tok.encode("中文 x\x00")]:
        for h in _strategies(gpt2, prompt, pattern, 12, anderson):
            text = _text(vocab, h.tokens)
            assert text is not None and regex.fullmatch(pattern, text), (pattern, prompt, h, text)
            assert vocab.decode(h.tokens) == text


@SETTINGS
@given(regexes(LEAVES, max_leaves=5))
def test_byte_dfa_is_minimal_by_construction(pattern):
    """The byte DFA is built minimal (no refinement): partition refinement merges nothing."""
    from decodekit.constraints.automata.chardfa import build_char_dfa
    from decodekit.constraints.automata.graph import minimize, reverse_distances
    from decodekit.constraints.automata.utf8 import byte_dfa, code_point_classes
    from decodekit.constraints.syntax.parser import parse

    ast, boundaries = parse(pattern)
    chars = build_char_dfa(ast, boundaries, 10_000)
    if chars.initial < 0:
        return
    dfa = byte_dfa(chars.table, chars.accepting, code_point_classes(chars.other, chars.explicit))
    table, _, _ = minimize(dfa.table, dfa.accepting, 0)
    assert len(table) == len(dfa.table), pattern
    src, cls = np.nonzero(dfa.table >= 0)
    assert (reverse_distances(src, dfa.table[src, cls], dfa.accepting, len(table)) >= 0).all()
    assert (dfa.table[~dfa.boundary] >= 0).any(axis=1).all()  # inside a character: some byte leads on


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(regexes(LEAVES, max_leaves=4), st.integers(0, 2**16), st.sampled_from([None, "eos"]))
def test_random_patterns_every_strategy_matches(bpe, pattern, seed, eos):
    """Property: for random ASCII / non-ASCII patterns and a random bigram model over the
    byte-level vocabulary (with zero-probability tokens), every output of every strategy decodes
    to a text that fully matches."""
    tok, vocab = bpe
    table = _random_table(len(vocab), seed)
    table[torch.rand(table.shape, generator=torch.Generator().manual_seed(seed)) < 0.3] = float("-inf")
    model = TableLM(table, bos_id=None, eos_id=vocab.eos_id if eos else None, vocab=vocab)
    try:
        auto = as_automaton(pattern, model)
    except ConstraintError:
        return
    prompt = tok.encode("a")
    for h in _strategies(model, prompt, auto, 8, anderson=auto.num_states <= 60):
        text = _text(vocab, h.tokens)
        assert text is not None and regex.fullmatch(pattern, text), (pattern, h, text)


def test_a_round_whose_every_start_is_dead_compiles():
    """Byte tokens with a separator: after 'é' (two byte tokens) no round starts alive. This
    crashed with a zero-size reduction before (lift._walk's min over no starts)."""
    automaton = compile_regex("é+", [b"\xc3", b"\xa9", "a", "é"], None, " ")
    assert automaton.accepts([3])
    assert not automaton.accepts([3, 3])  # "é é": the separator is not in the pattern
    assert not automaton.accepts([0, 1])  # b"\xc3 \xa9": a character split by the separator
