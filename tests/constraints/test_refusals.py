"""Typed refusals (issue 37 item 3): no decision in the package reads an exception's message, and
the types the decisions catch carry what they decide on."""

import ast
from pathlib import Path

import pytest
import torch

import decodekit
from decodekit.constraints import compile_regex
from decodekit.constraints.compile import anderson_automaton
from decodekit.constraints.tokens import lift
from decodekit.errors import ConstraintError, ConstraintTooLarge, NoBeamPerState
from decodekit.vocab import CharVocab
from tests.support.fakes import TableLM

PACKAGE = Path(__file__).resolve().parents[2] / "decodekit"
TESTS = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "__contains__"}


def message_reads(path: Path) -> list[str]:
    """``file:line`` of every expression reading the text of a caught exception: ``str(e)`` (or
    ``e.args``) compared with ``in``/``not in``/``==``/``!=``, or tested by a string method
    (``str(e).startswith(...)``), where ``e`` is bound by ``except ... as e``. Rendering the text
    into another message (``str(e).strip()``) is not a decision and is not reported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    caught = {h.name for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler) and h.name}

    def is_caught(node) -> bool:
        return isinstance(node, ast.Name) and node.id in caught

    def is_text(node) -> bool:
        if isinstance(node, ast.Attribute):  # e.args
            return node.attr == "args" and is_caught(node.value)
        called = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return called and node.func.id in ("str", "repr") and len(node.args) == 1 and is_caught(node.args[0])

    def reads(node) -> bool:
        if isinstance(node, ast.Compare):  # "..." in str(e), str(e) == "..."
            return any(map(is_text, [node.left, *node.comparators]))
        method = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        return method and node.func.attr in TESTS and is_text(node.func.value)  # str(e).startswith(...)

    return [f"{path.name}:{n.lineno}" for n in ast.walk(tree) if reads(n)]


def test_the_scan_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "try:\n    f()\nexcept ValueError as e:\n"
        "    if 'too large' not in str(e): raise\n"
        "    if str(e).startswith('x'): pass\n"
        "    if e.args == ('y',): pass\n"
        "    message = str(e).strip()  # rendering a message is not reading one\n"
        "if 'a' in str(other): pass\n"
    )
    assert [s.rsplit(":", 1)[1] for s in message_reads(sample)] == ["4", "5", "6"]


def test_no_decision_reads_an_exception_message():
    hits = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in message_reads(path)]
    assert not hits, f"catch a type (decodekit.errors) instead of reading the message: {hits}"


def test_a_size_refusal_carries_its_figures():
    vocab = CharVocab(["<unk>", "<eos>", "a", "b"])
    with pytest.raises(ConstraintTooLarge, match="exceeds max_states=50") as refused:
        compile_regex("(a|b)*a(a|b){10}", vocab.surface_bytes(), vocab.eos_id, max_states=50, lazy="whole")
    assert (refused.value.bound, refused.value.limit) == ("states", 50)
    assert isinstance(refused.value, ConstraintError)  # callers catching the base class keep working


def test_a_budget_refusal_of_the_parser_is_a_size_refusal():
    with pytest.raises(ConstraintTooLarge, match="regex too large") as refused:
        compile_regex("a{1000000}", ["a"], None)
    assert refused.value.bound == "pattern"


def test_one_beam_per_state_refused_is_its_own_type(monkeypatch):
    vocab = CharVocab(["<unk>", "<eos>", "a", "b"])
    model = TableLM(torch.zeros(len(vocab), len(vocab)), bos_id=None, eos_id=vocab.eos_id, vocab=vocab)
    monkeypatch.setattr(lift, "MAX_TABLE_ENTRIES", 1000)  # a{2000} x 3 tokens: too large whole
    with pytest.raises(NoBeamPerState, match="too large.*one beam per automaton state") as refused:
        anderson_automaton("a{2000}", model)
    assert isinstance(refused.value.cause, ConstraintTooLarge) and refused.value.cause.limit == 1000
    lazy = compile_regex("a{3}", vocab.surface_bytes(), vocab.eos_id, lazy=True)
    with pytest.raises(NoBeamPerState, match="built on first visit") as given:
        decodekit.constrained_beam_search(model, [], lazy, 2, 5)
    assert given.value.cause is None
