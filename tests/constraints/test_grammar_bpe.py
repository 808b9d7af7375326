"""Grammars over a byte-level BPE trained in the test (non-ASCII text, characters split across
tokens): masked sampling ends in sentences lark parses, valid texts are accepted token by token
under their canonical and random tokenizations, and budgets give complete sentences."""

from __future__ import annotations

import random

import pytest
import torch

from decodekit import Grammar
from decodekit.constraints import compile_regex
from tests.support.grammars import JSON_GBNF, generate_texts, lark_oracle

pytest.importorskip("tokenizers", reason="the test trains a byte-level BPE")
pytest.importorskip("transformers", reason="the test trains a byte-level BPE")

CALC_LARK = r"""
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom | product "/" atom
?atom: NUMBER | "-" atom | NAME | "(" sum ")"
NAME: /[a-zà-ÿ_][a-zà-ÿ0-9_]*/
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""

TEXTS = [
    '{"name": "Zoë", "ünïcode": ["中文", 1.5, -3e4, true, null], "x": {"y": []}}',
    "(façade + 3.25) * -x_1 / (y - 42)",
    "naïve café résumé 日本語 " * 3,
    '[{"a": 1}, {"b": "ß"}, "\\u00e9"]',
]


@pytest.fixture(scope="module")
def bpe():
    from tests.support.fakes import byte_bpe

    tok = byte_bpe(TEXTS * 20, 400, bos=False)
    from decodekit.models.hf import HFVocab

    vocab = HFVocab(tok, len(tok))
    return tok, tuple(vocab.surface_bytes()), vocab.eos_id


GRAMMARS = {"json.gbnf": (JSON_GBNF, "gbnf"), "calc.lark": (CALC_LARK, "lark")}


def _sample(auto, rng: random.Random, max_length: int) -> list[int]:
    """Masked sampling by hand, uniform over the allowed tokens under the remaining budget."""
    state, out = auto.initial, []
    for step in range(max_length):
        allowed = auto.allowed(torch.tensor([state]), max_length - step)[0]
        choices = allowed.nonzero()[:, 0].tolist()
        assert choices, (out, step)
        t = rng.choice(choices)
        if t == auto.eos_id:
            return out
        out.append(t)
        state = auto.walk([t], state)
        assert state >= 0
    return out


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_masked_sampling_ends_in_sentences_lark_parses(bpe, name):
    _, tokens, eos = bpe
    text, syntax = GRAMMARS[name]
    grammar = Grammar(text, syntax)
    auto = compile_regex(grammar, tokens, eos)
    member = lark_oracle(grammar.cfg)
    rng = random.Random(0)
    for i in range(25):
        max_length = rng.choice([6, 12, 25])
        seq = _sample(auto, rng, max_length)
        assert len(seq) <= max_length
        decoded = b"".join(tokens[t] for t in seq).decode("utf-8")
        assert member(decoded), (i, decoded)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_valid_texts_are_accepted_under_every_tokenization(bpe, name):
    tok, tokens, eos = bpe
    text, syntax = GRAMMARS[name]
    grammar = Grammar(text, syntax)
    auto = compile_regex(grammar, tokens, eos)
    member = lark_oracle(grammar.cfg)
    by_bytes = {t: i for i, t in enumerate(tokens) if t is not None}
    rng = random.Random(1)
    samples = generate_texts(grammar.cfg, 20, seed=2, max_depth=5)
    samples += [TEXTS[0], TEXTS[3]] if name == "json.gbnf" else [TEXTS[1]]
    for sentence in samples:
        assert member(sentence), sentence
        canonical = tok.encode(sentence, add_special_tokens=False)
        assert auto.accepts([*canonical, eos]), sentence
        data = sentence.encode("utf-8")
        for _ in range(3):  # a random split into tokens of the vocabulary (single bytes always are)
            ids, i = [], 0
            while i < len(data):
                n = rng.randint(1, 4)
                while n > 1 and data[i : i + n] not in by_bytes:
                    n -= 1
                ids.append(by_bytes[data[i : i + n]])
                i += n
            state = auto.walk(ids)
            assert state >= 0 and auto.is_accepting(torch.tensor([state]))[0], (sentence, ids)
        broken = sentence + "}" if name == "json.gbnf" else sentence + "+"
        assert not auto.accepts(tok.encode(broken, add_special_tokens=False)) or member(broken)


def test_the_budget_forces_a_complete_sentence(bpe):
    """Two tokens left inside an open object: every allowed token leaves one that completes a
    sentence (EOS not counted, as max_length does not count it)."""
    tok, tokens, eos = bpe
    auto = compile_regex(Grammar(JSON_GBNF, "gbnf"), tokens, eos)
    member = lark_oracle(Grammar(JSON_GBNF, "gbnf").cfg)
    state = auto.walk(tok.encode('{"a": [1', add_special_tokens=False))
    allowed = auto.allowed(torch.tensor([state]), 2)[0].nonzero()[:, 0].tolist()
    assert allowed
    assert len(allowed) < len(tokens) // 2
    for t in allowed:
        nxt = auto.walk([t], state)
        last = auto.allowed(torch.tensor([nxt]), 1)[0].nonzero()[:, 0].tolist()
        assert last, tokens[t]
        for t2 in last:
            text = b'{"a": [1' + tokens[t] + (tokens[t2] if t2 != eos else b"")
            assert member(text.decode("utf-8")), text


@pytest.mark.parametrize("take_whole", [1, 512])
@pytest.mark.parametrize("name", list(GRAMMARS))
def test_rows_shared_by_parse_shape_equal_each_tokens_own_steps(bpe, name, take_whole, monkeypatch):
    """Positions whose parses agree over the next token's bytes share one cached row
    (``GrammarBytes.row_key``), and a walk takes whole the subtrees a state keeps (from
    ``TAKE_WHOLE`` alive nodes on): each row equals every token stepped byte by byte on its own,
    and the sharing happens (fewer distinct keys than states)."""
    monkeypatch.setattr("decodekit.constraints.tokens.derived.TAKE_WHOLE", take_whole)
    tok, tokens, eos = bpe
    text, syntax = GRAMMARS[name]
    auto = compile_regex(Grammar(text, syntax), tokens, eos)
    samples = generate_texts(Grammar(text, syntax).cfg, 12, seed=5, max_depth=6)
    samples += [TEXTS[0], TEXTS[3]] if name == "json.gbnf" else [TEXTS[1]]
    states = set()
    for sentence in samples:
        state = auto.initial
        for t in tok.encode(sentence, add_special_tokens=False):
            state = auto.walk([t], state)
            states.add(state)
    keys = {}
    for state in sorted(states):
        shared = auto.allowed(torch.tensor([state]))[0].nonzero()[:, 0].tolist()
        own = [t for t in range(len(tokens)) if t != eos and auto._next(state, t) >= 0]
        assert shared == sorted(own + ([eos] if auto.bytes.accepting(state) else [])), (name, state)
        keys.setdefault(auto._key(state), []).append(state)
    assert len(keys) < len(states)


def test_rows_under_a_budget_asked_again_equal_a_fresh_automatons(bpe):
    """Rows a length budget cuts are kept per (state, budget), and where it cuts nothing the
    static row answers: asked again, in any order, every row equals a fresh automaton's."""
    tok, tokens, eos = bpe
    grammar = Grammar(JSON_GBNF, "gbnf")
    kept = compile_regex(grammar, tokens, eos)
    states = [
        kept.walk(tok.encode(p, add_special_tokens=False)) for p in ['{"a": [1', '{"ü', "[", '{"x": {"y": ']
    ]
    asks = [(s, r) for s in states for r in (1, 2, 3, 5, 8, 30)]
    first = {q: kept.allowed(torch.tensor([q[0]]), q[1]) for q in asks}
    random.Random(3).shuffle(asks)
    assert all(torch.equal(kept.allowed(torch.tensor([s]), r), first[(s, r)]) for s, r in asks)
    from decodekit.constraints import clear_cache

    clear_cache(vocabularies=False)
    fresh = compile_regex(grammar, tokens, eos)
    assert fresh is not kept
    for p, s in zip(['{"a": [1', '{"ü', "[", '{"x": {"y": '], states):
        f = fresh.walk(tok.encode(p, add_special_tokens=False))
        for r in (1, 2, 3, 5, 8, 30):
            assert torch.equal(fresh.allowed(torch.tensor([f]), r), first[(s, r)]), (p, r)
    assert any(not first[(s, 2)].equal(first[(s, 30)]) for s in states)  # some budget cuts


def test_a_copy_on_another_device_keeps_its_own_rows(bpe):
    """Rows warmed on the CPU are not served to a copy on another device (``meta`` here: any
    device but the CPU; CUDA in the device tests)."""
    _, tokens, eos = bpe
    auto = compile_regex(Grammar(JSON_GBNF, "gbnf"), tokens, eos)
    states = torch.tensor([auto.initial, auto.initial])
    assert auto.allowed(states).device.type == "cpu"  # rows warm on the CPU
    auto.mask(torch.zeros(2, len(tokens)), states)
    elsewhere = auto.to("meta")
    assert elsewhere.allowed(states).device.type == "meta"
    assert elsewhere.mask(torch.zeros(2, len(tokens), device="meta"), states).device.type == "meta"
