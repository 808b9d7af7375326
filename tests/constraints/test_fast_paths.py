"""The compile's fast paths for small patterns (the first row's trie walk in plain Python where few
nodes are alive, the byte DFA read off an ASCII character DFA) give exactly the masks of the whole
automaton at every remaining-length budget, on random small patterns over a small byte-level
vocabulary (every byte a token, multi-byte tokens, two tokens with the same bytes, one token long
enough to be stepped byte by byte), and accept exactly what ``regex.fullmatch`` accepts."""

from __future__ import annotations

import random

import pytest
import regex
import torch

from decodekit.constraints import build as build_module
from decodekit.constraints import clear_cache, compile_regex
from decodekit.constraints.tokens import lift
from decodekit.constraints.tokens.lazy import LazyTokenAutomaton
from decodekit.constraints.tokens.trie import CHAIN, encode_vocab
from tests.support.engines import masked_by_lazy_token_automaton


@pytest.fixture(autouse=True, scope="module")
def _lazy_token_automaton():
    """The masked compiles here build LazyTokenAutomaton, whose own paths these tests exercise
    (the default, the first-visit class over EagerBytes: test_eager_bytes.py, the engine axis)."""
    yield from masked_by_lazy_token_automaton()


hypothesis = pytest.importorskip("hypothesis", reason="the random patterns are drawn with hypothesis")
st = pytest.importorskip("hypothesis.strategies", reason="the random patterns are drawn with hypothesis")

WORDS = ["ab", "ba", "abab", "a-b", "2024", "20", "24-", "-0", "ca", "cab", "b a", "é", "éa", "aé", "café"]
EOS = 0


def _vocabulary() -> tuple:
    """EOS (no text), the 256 single bytes, multi-byte words, a duplicate of one of them, and a
    token longer than :data:`CHAIN` bytes."""
    words = [w.encode("utf-8") for w in WORDS]
    return (None, *(bytes([b]) for b in range(256)), *words, b"abab", b"ab" * (CHAIN // 2 + 20))


TOKENS = _vocabulary()
ATOMS = ["a", "b", "c", "-", "0", "2", "4", "é", " ", "[ab]", "[a-c]", "[0-9]", r"\d", "[^a]", ".", r"\w"]


@st.composite
def patterns(draw, depth: int = 0):
    """A small regex over the vocabulary's characters: atoms, sequences, alternations, repeats."""
    kind = draw(st.sampled_from(["atom"] * 3 + (["seq", "alt", "rep"] if depth < 3 else [])))
    if kind == "atom":
        return draw(st.sampled_from(ATOMS))
    if kind == "seq":
        return "".join(draw(st.lists(patterns(depth + 1), min_size=2, max_size=3)))
    if kind == "alt":
        return "(?:" + "|".join(draw(st.lists(patterns(depth + 1), min_size=2, max_size=3))) + ")"
    inner = draw(patterns(depth + 1))
    suffix = draw(st.sampled_from(["?", "*", "+", "{2}", "{1,3}", "{0,4}"]))
    return f"(?:{inner}){suffix}"


def _text(tokens) -> str | None:
    data = b"".join(TOKENS[t] for t in tokens)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _agree(pattern: str, seed: int) -> None:
    """Random walks through the masked lazy automaton and the whole one: the same masks at every
    budget (None, 0 .. 9), the same acceptance, and acceptance as ``regex.fullmatch`` says."""
    clear_cache(vocabularies=False)
    whole = compile_regex(pattern, TOKENS, EOS, "", lazy="whole")
    clear_cache(vocabularies=False)
    lazy = compile_regex(pattern, TOKENS, EOS, "", lazy="masked")
    assert isinstance(lazy, LazyTokenAutomaton)
    rng = random.Random(seed)
    for _ in range(4):
        w, z, walked = torch.tensor([whole.initial]), torch.tensor([lazy.initial]), []
        for _ in range(8):
            for remaining in [None, *range(10)]:
                assert torch.equal(whole.allowed(w, remaining), lazy.allowed(z, remaining)), (
                    pattern,
                    remaining,
                )
            text = _text(walked)
            accepts = bool(lazy.is_accepting(z)[0])
            assert accepts == bool(whole.is_accepting(w)[0])
            assert accepts == (text is not None and regex.fullmatch(pattern, text) is not None), (
                pattern,
                text,
            )
            choices = [t for t in lazy.allowed(z)[0].nonzero()[:, 0].tolist() if t != EOS]
            if not choices:
                break
            t = rng.choice(choices)
            walked.append(t)
            w, z = whole.step(w, torch.tensor([t])), lazy.step(z, torch.tensor([t]))


@hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
@hypothesis.given(patterns(), st.integers(0, 1000))
def test_fast_masks_equal_the_whole_automatons_at_every_budget(pattern, seed):
    try:
        compile_regex(pattern, TOKENS, EOS, "", lazy="whole")
    except Exception as e:  # noqa: BLE001 - only patterns no token sequence can match are skipped
        hypothesis.assume("no token sequence" not in str(e) and "matches no text" not in str(e))
        raise
    _agree(pattern, seed)


@pytest.mark.parametrize("pattern", [r"[0-9]{4}-[0-9]{2}", "(?:ab)+", "b?a*", "café|aé", r"\w+ a", "a*"])
def test_the_plain_python_walk_equals_the_numpy_walk(pattern, monkeypatch):
    """The first row's walk with the plain-Python depths on and off (they start once at most
    :data:`lift.PY_FRONTIER` nodes are alive): the same tokens and end states."""
    enc = encode_vocab(TOKENS)
    clear_cache(vocabularies=False)
    lazy = compile_regex(pattern, TOKENS, EOS, "", lazy="masked")
    sh = lazy._shared
    start = int(sh.start[0])
    got = lift.walk_one(start, enc, sh.lut, sh.flat, sh.dead)
    monkeypatch.setattr(lift, "PY_FRONTIER", -1)
    want = lift.walk_one(start, enc, sh.lut, sh.flat, sh.dead)
    assert sorted(zip(*(x.tolist() for x in got))) == sorted(zip(*(x.tolist() for x in want)))
    assert len(got[0]) > 0


@pytest.mark.parametrize(
    ("pattern", "walk"),
    [
        (r"[0-9]{2}-(?:ab|ba)+", [b"2", b"0", b"-", b"ab", b"ba"]),
        (r"(?:caf|a)é\w*\b", [b"ca", b"f", b"\xc3", b"\xa9", b"a"]),
    ],
)
def test_fast_paths_can_be_switched_off(pattern, walk):
    """``build.FAST_ASCII`` off gives the same masks through the general UTF-8 layering (an
    ASCII pattern), and through the minimal byte DFA (a pattern with a character past U+007F)."""
    clear_cache(vocabularies=False)
    fast = compile_regex(pattern, TOKENS, EOS, "", lazy="masked")
    build_module.FAST_ASCII = False
    try:
        clear_cache(vocabularies=False)
        slow = compile_regex(pattern, TOKENS, EOS, "", lazy="masked")
    finally:
        build_module.FAST_ASCII = True
        clear_cache(vocabularies=False)
    z, y = torch.tensor([fast.initial]), torch.tensor([slow.initial])
    for t in walk:
        for remaining in [None, *range(8)]:
            assert torch.equal(fast.allowed(z, remaining), slow.allowed(y, remaining))
        tok = torch.tensor([TOKENS.index(t)])
        z, y = fast.step(z, tok), slow.step(y, tok)
        assert int(z) >= 0 and int(y) >= 0
    assert bool(fast.is_accepting(z)) == bool(slow.is_accepting(y))
