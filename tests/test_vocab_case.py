"""Capitalised prompts for a lower-case vocabulary: known lower-case forms, not <unk>."""

import warnings

import pytest

from decodekit.vocab import CharVocab, WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "the", "company", "said", "N", "Paris"])


def test_unknown_capitalised_words_fall_back_to_their_lower_case_form():
    expected = r"2 token\(s\) lower-cased to match the vocabulary: 'The', 'Company'"
    with pytest.warns(UserWarning, match=expected):
        ids = VOCAB.encode("The Company said N Paris")
    assert VOCAB.decode(ids) == "the company said N Paris"  # known tokens keep their case


def test_a_word_with_no_known_form_is_still_unk_and_the_fallback_can_be_switched_off():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert VOCAB.encode("The Moon") == [VOCAB.index["the"], VOCAB.unk_id]
        assert VOCAB.encode("The", case_fallback=False) == [VOCAB.unk_id]
    assert [str(w.message).split(":")[0] for w in caught] == [
        "1 token(s) lower-cased to match the vocabulary",
        "1 unknown token(s) mapped to <unk>",
        "1 unknown token(s) mapped to <unk>",
    ]


def test_specials_are_never_reached_by_lower_casing():
    vocab = WordVocab(["<unk>", "<eos>", "a"])
    with pytest.warns(UserWarning, match="unknown"):
        assert vocab.encode("<UNK> A") == [vocab.unk_id, vocab.index["a"]]
    chars = CharVocab(["<eos>", *"ab"], unk=None)
    with pytest.warns(UserWarning, match="lower-cased"):
        assert chars.decode(chars.encode("AB")) == "ab"
