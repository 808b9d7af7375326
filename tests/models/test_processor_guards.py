"""ConstraintLogitsProcessor never hands transformers a row with nothing allowed, checks its
arguments at construction, and restarts for a new prompt (issue 35, item 3): each case failed
before (silent non-matching text, torch's inf/nan error, a TypeError at the first step)."""

from __future__ import annotations

import pytest
import regex
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from decodekit import ConstraintLogitsProcessor  # noqa: E402
from decodekit.errors import ConstraintError  # noqa: E402
from tests.support.fakes import generate_with, tiny_gpt2  # noqa: E402

TEXTS = ["the café opened in 2024-05-17 — déjà vu", "naïve dates 1999-12-31 and 2000-01-01 ünd so"] * 20
DATE = r"\d{4}-\d{2}-\d{2}"


@pytest.fixture(scope="module")
def gpt2():
    return tiny_gpt2(TEXTS)


@pytest.mark.parametrize(("pattern", "budget"), [(DATE, 3), ("[a-z]{50}", 5), ("a{99999}", 60)])
def test_no_match_within_max_new_tokens_is_refused_at_construction(gpt2, pattern, budget):
    _, tok = gpt2
    with pytest.raises(ConstraintError, match="max_new_tokens") as e:
        ConstraintLogitsProcessor(pattern, tok, max_new_tokens=budget)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((DATE, None), {}), ((DATE, "tok"), {"max_new_tokens": -3}), ((DATE, "tok"), {"max_new_tokens": 2.5}),
     (("a(b", "tok"), {})],
)  # fmt: skip
def test_arguments_are_checked_at_construction(gpt2, args, kwargs):
    _, tok = gpt2
    args = tuple(tok if a == "tok" else a for a in args)
    with pytest.raises(ConstraintError):
        ConstraintLogitsProcessor(*args, **kwargs)


def test_a_live_row_with_nothing_allowed_raises_instead_of_an_all_minus_inf_row(gpt2, monkeypatch):
    """The exact masks leave no such row; the guard behind them: an automaton whose mask allows
    nothing for a live row (as an inexact one could near the limit) raises in one line."""
    _, tok = gpt2
    processor = ConstraintLogitsProcessor(DATE, tok, max_new_tokens=12)
    automaton = processor.automaton
    monkeypatch.setattr(
        type(automaton), "mask", lambda self, logits, *a, **k: torch.full_like(logits, float("-inf"))
    )
    with pytest.raises(ConstraintError, match="no token is allowed") as e:
        processor.mask(torch.zeros(1, len(tok)), [tok.encode("2024", add_special_tokens=False)])
    assert "\n" not in str(e.value)


def _generate(model, tok, processor, prompt, max_new_tokens, **options):
    return [
        tok.decode(row) for row in generate_with(model, tok, processor, prompt, max_new_tokens, **options)
    ]


def test_a_reused_processor_restarts_for_each_prompt(gpt2):
    """Second call with a longer prompt (and a third, one token longer than the first call's
    last rows): every text still matches."""
    model, tok = gpt2
    processor = ConstraintLogitsProcessor(DATE, tok, max_new_tokens=12)
    for prompt in ("the café", "naïve dates 1999-12-31 and the café opened in", "the café opened in 2024"):
        for text in _generate(model, tok, processor, prompt, 12, num_beams=4, num_return_sequences=4):
            assert regex.fullmatch(DATE, text), (prompt, text)
