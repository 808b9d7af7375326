"""The compiler's three nouns: Vocabulary, Compiler, TokenConstraint (issue 37 item 4)."""

from __future__ import annotations

import json
import threading

import pytest
import regex

import decodekit
from decodekit.constraints import (
    Compiler,
    ConstraintError,
    Pattern,
    TokenConstraint,
    Vocabulary,
    compile_regex,
)
from decodekit.constraints.tokens.interface import provides

TOKENS = ["<eos>", "a", "b", "ab", "{", "}", '"', ":", "1", b"\xc3", b"\xa9", "é"]  # é: one token or two


def test_a_compiler_returns_token_constraints_for_each_kind_of_constraint():
    compiler = Compiler(Vocabulary(TOKENS, eos_id=0))
    by_regex = compiler.regex("(a|b)+")
    by_expression = compiler.expression(Pattern("(a|b)+") & ~Pattern(".*bb.*"))
    by_schema = compiler.json_schema({"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]})
    by_grammar = compiler.grammar('start: "a" start "b" | "ab"', syntax="lark")
    for constraint in (by_regex, by_expression, by_schema, by_grammar):
        assert provides(constraint, TokenConstraint) and constraint.vocab_size == len(TOKENS)
    assert by_regex.accepts([1, 3]) and not by_regex.accepts([4])
    assert by_expression.accepts([3, 1]) and not by_expression.accepts([2, 2])
    assert by_schema.accepts([4, 6, 1, 6, 7, 8, 5]) and json.loads('{"a":1}') == {"a": 1}
    assert by_grammar.accepts([1, 3, 2]) and not by_grammar.accepts([1, 3])
    assert compiler.regex("(a|b)+") is by_regex and len(compiler) == 4  # kept
    accented = compiler.regex("é+b")
    assert accented.accepts([11, 9, 10, 2]) and not accented.accepts([9, 2])  # a character over two tokens


def test_the_convenience_is_a_default_compiler():
    a = compile_regex("[ab]+", TOKENS, 0)
    assert compile_regex("[ab]+", list(TOKENS), 0) is a  # the same vocabulary, confirmed by its tokens
    mine = Compiler(Vocabulary(TOKENS, 0)).regex("[ab]+")
    assert mine is not a  # a compiler of one's own keeps its own cache
    for tokens in ([1, 2, 3], [2, 2], [3]):
        assert mine.accepts(tokens) == a.accepts(tokens) is True
    assert mine.accepts([9]) == a.accepts([9]) is False


def test_a_compiler_keeps_at_most_cache_size_and_forgets_when_cleared():
    compiler = Compiler(Vocabulary(TOKENS, 0), cache_size=2)
    first = compiler.regex("a+")
    compiler.regex("b+")
    compiler.regex("(ab)+")
    assert len(compiler) == 2 and compiler.regex("a+") is not first  # evicted, compiled again
    compiler.clear()
    assert len(compiler) == 0


def test_a_compiler_is_thread_safe():
    compiler = Compiler(Vocabulary(TOKENS, 0), cache_size=4)
    patterns = [f"a{{{n}}}b*" for n in range(1, 9)]
    out, errors = {}, []

    def work(i: int) -> None:
        try:
            for p in patterns[i % 4 :] + patterns[: i % 4]:
                out[(i, p)] = compiler.regex(p).accepts([1] * int(p[2]) + [2])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(out.values()) and len(out) == 6 * len(patterns)
    assert len(compiler) <= 4


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Vocabulary("abc"), "token_strings must be a sequence"),
        (lambda: Vocabulary([]), "empty vocabulary"),
        (lambda: Vocabulary(["a"], eos_id=3), "eos_id 3 out of range"),
        (lambda: Vocabulary(["a"], separator=1), "separator must be a string"),
        (lambda: Compiler(["a"]), "Compiler takes a Vocabulary"),
        (lambda: Compiler(Vocabulary(["a"]), cache_size=0), "cache_size must be a positive integer"),
        (lambda: Compiler(Vocabulary(["a"])).regex(Pattern("a")), "use .expression"),
        (lambda: Compiler(Vocabulary(["a"])).expression("a"), "takes a Pattern"),
        (lambda: Compiler(Vocabulary(["a"])).grammar(3), "takes a Grammar or its text"),
    ],
)
def test_bad_arguments_are_one_line_errors(make, message):
    with pytest.raises(ConstraintError, match=message):
        make()


def test_the_nouns_are_public_and_implementation_classes_are_not():
    for name in ("Vocabulary", "Compiler", "TokenConstraint", "Pattern"):
        assert name in decodekit.__all__ and name in decodekit.constraints.__all__
    for name in ("TokenAutomaton", "LazyTokenAutomaton", "DerivedTokenAutomaton"):
        assert name not in decodekit.constraints.__all__
        assert getattr(decodekit.constraints, name).__name__ == name  # still importable for a release
    assert "TokenAutomaton" not in decodekit.__all__ and decodekit.TokenAutomaton.__name__ == "TokenAutomaton"


def test_a_model_vocabulary_becomes_a_vocabulary():
    vocab = decodekit.CharVocab(["<unk>", "<eos>", "a", "b"])
    compiler = Compiler(Vocabulary.of(vocab))
    assert compiler.vocabulary.eos_id == vocab.eos_id and compiler.vocabulary.separator == vocab.separator
    constraint = compiler.regex("a+b")
    assert constraint.accepts([2, 2, 3]) and regex.fullmatch("a+b", vocab.decode([2, 2, 3]))
