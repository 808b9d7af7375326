"""The constraint the decoders see: both automata are TokenConstraints (only the dense one has
every state's tables), ``lazy=`` is a Laziness with the older spellings as aliases, and library
messages name the library's API while the CLI says the same with its flags."""

from __future__ import annotations

import itertools

import pytest
import regex
import torch

import decodekit
from decodekit.constraints import (
    ConstraintError,
    LazyTokenAutomaton,
    StateTables,
    TokenAutomaton,
    TokenConstraint,
    clear_cache,
    compile_regex,
)
from decodekit.constraints.build import Laziness  # no longer public: the compiler's own choice
from decodekit.constraints.tokens import lift
from decodekit.constraints.tokens.interface import provides
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab
from tests.support.cli import exit_and_stderr, word_checkpoint
from tests.support.engines import masked_by_lazy_token_automaton


@pytest.fixture(autouse=True, scope="module")
def _lazy_token_automaton():
    """The masked compiles here build LazyTokenAutomaton, whose own paths these tests exercise
    (the default, the first-visit class over EagerBytes: test_eager_bytes.py, the engine axis)."""
    yield from masked_by_lazy_token_automaton()


VOCAB = ["a", "b", "ab", "ba", "<eos>"]
EOS = 4
PATTERN = "(ab|b)+a?"


def both():
    """The dense automaton, and the lazy one with exact masks (every byte is a token)."""
    clear_cache(vocabularies=False)
    args = (PATTERN, VOCAB, EOS)
    return compile_regex(*args, lazy=Laziness.WHOLE), compile_regex(*args, lazy=Laziness.MASKED)


def test_both_automata_are_token_constraints_and_only_the_dense_one_has_every_state():
    eager, lazy = both()
    assert isinstance(eager, TokenAutomaton) and isinstance(lazy, LazyTokenAutomaton)
    for a in (eager, lazy):
        assert isinstance(a, TokenConstraint) and provides(a, TokenConstraint)
    assert isinstance(eager, StateTables) and provides(eager, StateTables)
    assert not isinstance(lazy, StateTables) and not provides(lazy, StateTables)
    assert not provides(PATTERN) and not isinstance(PATTERN, TokenConstraint)


def test_both_answer_the_protocol_as_the_regex_does():
    """Exhaustively over sequences of up to 4 tokens: ``accepts`` is ``regex.fullmatch`` of the
    text, ``walk`` and batched ``step`` agree, and a live sequence's mask with no length limit
    allows exactly the tokens after which some completion of at most 4 tokens matches."""
    eager, lazy = both()
    content = range(EOS)
    for a in (eager, lazy):
        assert a.exact and a.fits(a.shortest) and not a.fits(a.shortest - 1)
        for n in range(5):
            for seq in itertools.product(content, repeat=n):
                text = "".join(VOCAB[t] for t in seq)
                assert a.accepts(seq) == bool(regex.fullmatch(PATTERN, text)), seq
                assert a.accepts((*seq, EOS)) == a.accepts(seq)
                s = torch.tensor([a.initial])
                for t in seq:
                    s = a.step(s, torch.tensor([t]))
                assert int(s) == a.walk(seq)
                if n < 3 and a.walk(seq) >= 0:
                    ok = a.allowed(s)[0]
                    assert bool(ok[EOS]) == a.accepts(seq) == bool(a.is_accepting(s))
                    for t in content:
                        later = (
                            regex.fullmatch(PATTERN, text + VOCAB[t] + "".join(VOCAB[u] for u in rest))
                            for k in range(3)
                            for rest in itertools.product(content, repeat=k)
                        )
                        assert bool(ok[t]) == any(later), (seq, t)


def test_laziness_and_its_older_spellings():
    assert [Laziness.of(v) for v in (None, True, False, "masked")] == [
        Laziness.AUTO,
        Laziness.LAZY,
        Laziness.WHOLE,
        Laziness.MASKED,
    ]
    assert all(Laziness.of(m) is m and Laziness.of(m.value) is m for m in Laziness)
    clear_cache(vocabularies=False)
    for old, new in ((None, Laziness.AUTO), (True, Laziness.LAZY), (False, Laziness.WHOLE)):
        assert compile_regex(PATTERN, VOCAB, EOS, lazy=old) is compile_regex(PATTERN, VOCAB, EOS, lazy=new)
    assert isinstance(compile_regex(PATTERN, VOCAB, EOS, lazy=Laziness.LAZY), LazyTokenAutomaton)
    assert isinstance(compile_regex(PATTERN, VOCAB, EOS), TokenAutomaton)
    for bad in ("yes", 1, 0, "Masked"):
        with pytest.raises(ConstraintError, match="lazy must be"):
            Laziness.of(bad)
    assert Laziness.for_masks(torch.device("cpu")) is Laziness.MASKED
    assert Laziness.for_masks(torch.device("meta")) is Laziness.AUTO


def test_device_copies_of_a_lazy_automaton_share_one_set_of_tables():
    _, lazy = both()
    meta = lazy.to("meta")
    assert lazy.to("cpu") is lazy and lazy.to("meta") is meta and meta.to("meta") is meta
    assert meta._shared is lazy._shared and meta.stats is lazy.stats and meta.device.type == "meta"
    assert meta.to("cpu") is lazy and lazy._shared.copies == {
        torch.device("cpu"): lazy,
        torch.device("meta"): meta,
    }


def test_library_messages_name_the_api_and_the_cli_says_them_with_flags(tmp_path, capfd, monkeypatch):
    words = ["a", "b"]
    vocab = WordVocab(["<unk>", "<eos>", *words])
    lazy = compile_regex("a( a){3}", vocab.surfaces(), vocab.eos_id, vocab.separator, lazy=True)
    model = LSTMLM(LSTMConfig(embed=4, hidden=4, layers=1), vocab).eval()
    with pytest.raises(ConstraintError) as e:
        decodekit.constrained_beam_search(model, [2], lazy, 2, 5)
    assert "strategy='masked-beam'" in str(e.value) and "--" not in str(e.value)
    monkeypatch.setattr(lift, "MAX_TABLE_ENTRIES", 10)  # every constraint too large to build whole
    ckpt = word_checkpoint(tmp_path / "tiny", words)
    code, err = exit_and_stderr(
        capfd, "generate", "a", "--model", ckpt, "--constraint", "a( a)*", "--beam-size", "2"
    )
    assert code == 2 and len(err) == 1 and "one beam per automaton state" in err[0], err
    assert "--strategy masked-beam" in err[0] and "strategy='masked-beam'" not in err[0]
