"""Exact automata on tiny vocabularies, masks, errors, guards and caching."""

from __future__ import annotations

import pytest
import torch

from decodekit.constraints import (
    ConstraintError,
    TokenAutomaton,
    as_automaton,
    clear_cache,
    compile_for_vocab,
    compile_regex,
)
from decodekit.constraints.tokens import lift
from decodekit.vocab import CharVocab, WordVocab


def test_exact_table_char_level():
    a = compile_regex("ab|b", ["a", "b", "ab", None], eos_id=3)
    assert a.next_state.tolist() == [[1, 2, 2, -1], [-1, 2, -1, -1], [-1, -1, -1, -1]]
    assert a.accepting.tolist() == [False, False, True]
    assert a.min_tokens_to_accept.tolist() == [1, 1, 0]
    assert (a.initial, a.num_states, a.vocab_size, a.shortest) == (0, 3, 4, 1)
    assert a.walk([0, 1]) == 2 and a.walk([0, 0]) == -1 and a.walk([]) == 0
    assert a.accepts([0, 1]) and a.accepts([2, 3]) and not a.accepts([0]) and not a.accepts([3])


def test_exact_table_word_level_separator():
    # text = " ".join(words): "a b" is two tokens, "ab" one token
    a = compile_regex("a b|ab", ["a", "b", "ab"], separator=" ")
    assert a.next_state.tolist() == [[1, -1, 2], [-1, 2, -1], [-1, -1, -1]]
    assert a.min_tokens_to_accept.tolist() == [1, 1, 0]
    # the separator goes only between tokens: "a" + " " + "b"; never before the first token
    b = compile_regex(" a", ["a", " a"], separator=" ")
    assert b.accepts([1]) and not b.accepts([0])
    c = compile_regex("(a )*a", ["a"], separator=" ")
    assert [c.accepts([0] * n) for n in range(4)] == [False, True, True, True]


def test_equivalent_states_are_merged_and_loops_kept():
    a = compile_regex("(ab)*", ["ab", "a", "b"])
    assert a.num_states == 2  # start (accepting) and "after a"
    assert a.next_state.tolist() == [[0, 1, -1], [-1, -1, 0]]
    assert a.accepting.tolist() == [True, False]
    assert a.min_tokens_to_accept.tolist() == [0, 1]


def test_allowed_masks_with_remaining_length():
    a = compile_regex("aaa|b", ["a", "b", "aa", "<eos>"], eos_id=3)
    s = torch.tensor([0, 0, 0, -1])
    m = a.allowed(s, torch.tensor([1, 2, 3, 3]))
    # remaining 1: only 'b' (accepts at once); 2: 'a' and 'aa' too (then 'aa' / 'a')
    assert m.tolist() == [
        [False, True, False, False],
        [True, True, True, False],
        [True, True, True, False],
        [False, False, False, False],
    ]
    assert a.allowed(s[:1]).tolist() == [[True, True, True, False]]
    end = a.walk([1])
    assert a.allowed(torch.tensor([end]), 5).tolist() == [[False, False, False, True]]  # EOS only
    assert a.step(torch.tensor([0, 0, -1]), torch.tensor([0, 3, 0])).tolist() == [1, -1, -1]


def test_specials_and_eos_have_no_transitions():
    a = compile_regex(".*", ["a", None, "<eos>", "<pad>"], eos_id=2)
    assert a.next_state[:, 1].eq(-1).all() and a.next_state[:, 2].eq(-1).all()
    assert a.next_state[0, 3] == 0  # a plain string, even if it looks special


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("a(b", "invalid regex 'a\\(b': missing \\) at position 3"),
        (r"(a)\1", "unsupported regex feature.*back-references"),
        ("a(?=b)b", "unsupported regex feature.*look-around"),
        ("(?<!a)b", "unsupported regex feature.*look-around"),
        ("a++", "possessive"),
        ("(?>a)", "unsupported regex feature"),
        ("(?m)a", "multiline"),
    ],
)
def test_bad_patterns(pattern, message):
    with pytest.raises(ConstraintError, match=message):
        compile_regex(pattern, ["a", "b"])


def test_degenerate_inputs():
    with pytest.raises(ConstraintError, match="empty vocabulary"):
        compile_regex("a", [])
    with pytest.raises(ConstraintError, match="out of range"):
        compile_regex("a", ["a"], eos_id=1)
    with pytest.raises(ConstraintError, match="must be a string"):
        compile_regex(3, ["a"])
    empty = compile_regex("", ["a"], separator=" ")  # only the empty text: accept at once
    assert empty.next_state.tolist() == [[-1]] and empty.accepting.tolist() == [True]
    # an empty token still brings the separator with it
    a = compile_regex("(a )*", ["", "a"], separator=" ")
    assert a.accepts([0]) and a.accepts([1, 0]) and not a.accepts([0, 0]) and not a.accepts([1])


def test_unspellable_pattern_names_missing_characters():
    with pytest.raises(ConstraintError, match=r"no token sequence.*needs characters.*'x', 'y'"):
        compile_regex("a[xy]", ["a", "b", "ab"])
    with pytest.raises(ConstraintError, match=r"cannot form a matching text, e.g. 'aa'"):
        compile_regex("a+", ["aaa", "b"], separator="") and compile_regex("aa", ["aaa"])
    with pytest.raises(ConstraintError, match=r"joined by ' ' cannot form.*'ab'"):
        compile_regex("ab", ["a", "b"], separator=" ")
    with pytest.raises(ConstraintError, match="matches no text at all"):
        compile_regex("[^\\s\\S]", ["a"])


def test_state_guards(monkeypatch):
    with pytest.raises(ConstraintError, match="character automaton exceeds max_states=2000"):
        # a separator: the eager ladder (without, the default builds it from its derivatives instead)
        compile_regex("(a|b)*a(a|b){12}", ["a", "b"], separator=" ", max_states=2000)
    # the token-level guard also bounds the [S, V] table's size
    monkeypatch.setattr(lift, "MAX_TABLE_ENTRIES", 30)
    with pytest.raises(ConstraintError, match="constraint too large: 32 automaton states x the tokens"):
        compile_regex("(a|b)*a(a|b){4}", ["a", "b"], max_states=1000)
    # and the lift's working arrays, before they are allocated
    monkeypatch.setattr(lift, "MAX_STEP_ENTRIES", 40)
    with pytest.raises(ConstraintError, match="stepping 32 automaton states through 2 token prefixes"):
        compile_regex("(a|b)*a(a|b){4}", ["a", "b", "ab", "ba"], max_states=1000)


def test_cache_returns_the_same_object():
    clear_cache()
    tokens = ["a", "b", "ab", "<eos>"]
    a = compile_regex("a*b", tokens, eos_id=3)
    assert compile_regex("a*b", list(tokens), eos_id=3) is a
    assert compile_regex("a*b", tokens, eos_id=None) is not a
    assert compile_regex("a*b", tokens, eos_id=3, separator=" ") is not a
    assert compile_regex("a*b", ["a", "b", "ab", "c"], eos_id=3) is not a
    clear_cache()
    assert compile_regex("a*b", tokens, eos_id=3) is not a


def test_cache_keys_of_tuples_and_lists():
    """A tuple's key is remembered by identity; lists (mutable) are read again on every call."""
    clear_cache()
    tokens = ("a", "b", "ab", "<eos>")
    a = compile_regex("a*b", tokens, eos_id=3)
    assert compile_regex("a*b", tokens, eos_id=3) is a
    assert compile_regex("a*b", tuple(list(tokens)), eos_id=3) is a  # equal, another object
    changing = list(tokens)
    b = compile_regex("a", changing, eos_id=3)
    changing[1] = "a"
    c = compile_regex("a", changing, eos_id=3)
    assert c is not b and c.accepts([1]) and not b.accepts([1]) and b.accepts([0])
    clear_cache(vocabularies=False)
    assert compile_regex("a*b", tokens, eos_id=3) is not a


def test_vocab_helpers_and_as_automaton():
    vocab = WordVocab(["<unk>", "<eos>", "the", "cat", "sat"])
    a = compile_for_vocab("the (cat|sat)", vocab)
    ids = vocab.encode("the cat")
    assert a.accepts(ids + [vocab.eos_id]) and a.eos_id == vocab.eos_id
    assert a.next_state[:, vocab.unk_id].eq(-1).all()

    class Model:
        vocab_size, eos_id = len(vocab), vocab.eos_id

    model = Model()
    with pytest.raises(ConstraintError, match="has none"):
        as_automaton("the cat", model)
    model.vocab = vocab
    b = as_automaton("the (cat|sat)", model)
    assert b is a and as_automaton(a, model) is a
    other = compile_for_vocab("a", CharVocab(["<unk>", "<eos>", "a"]))
    with pytest.raises(ConstraintError, match="compiled for 3 tokens but the model has 5"):
        as_automaton(other, model)
    with pytest.raises(ConstraintError, match="must be a regex string or a TokenAutomaton"):
        as_automaton(3, model)
    assert isinstance(a.to("cpu"), TokenAutomaton) and a.to("cpu") is a
