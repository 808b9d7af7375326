"""decodekit's constraints inside transformers' ``model.generate``: greedy equals decodekit's own
masked greedy token for token; beam search (which reorders rows between calls) and sampling
return only matching texts, also with several constraints, excludes and a JSON Schema, on a tiny
random GPT-2 with a byte-level BPE trained here on non-ASCII text."""

from __future__ import annotations

import json

import pytest
import regex
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import decodekit  # noqa: E402
from decodekit import ConstraintLogitsProcessor  # noqa: E402
from decodekit.models.hf import HuggingFaceLM  # noqa: E402
from tests.support.fakes import generate_with, tiny_gpt2  # noqa: E402

TEXTS = ["the café opened in 2024-05-17 — déjà vu", "naïve dates 1999-12-31 and 2000-01-01 ünd so"] * 20
DATE = r"\d{4}-\d{2}-\d{2}"


@pytest.fixture(scope="module")
def gpt2():
    return tiny_gpt2(TEXTS)


def run(model, tok, processor, max_new_tokens, **options):
    rows = generate_with(model, tok, processor, "the café", max_new_tokens, **options)
    return rows, tok(["the café"], return_tensors="pt")["input_ids"][0].tolist()


def texts(tok, rows):
    return [tok.decode(r) for r in rows]


def test_greedy_equals_decodekits_masked_greedy(gpt2):
    model, tok = gpt2
    processor = ConstraintLogitsProcessor(DATE, tok, max_new_tokens=12)
    (row,), prompt = run(model, tok, processor, 12, do_sample=False)
    assert regex.fullmatch(DATE, tok.decode(row))
    ours = decodekit.greedy(HuggingFaceLM(model, tok), prompt, 12, constraint=DATE)[0]
    assert [t for t in ours.tokens if t != tok.eos_token_id] == row


@pytest.mark.parametrize("beams", [2, 4])
def test_beam_search_reorders_rows_and_still_matches(gpt2, beams):
    model, tok = gpt2
    for pattern in (DATE, r"(?:café|déjà|naïve)( [a-zé]+){1,3}"):
        processor = ConstraintLogitsProcessor(pattern, tok, max_new_tokens=10)
        rows, _ = run(model, tok, processor, 10, num_beams=beams, num_return_sequences=beams, do_sample=False)
        assert len(rows) == beams
        for text in texts(tok, rows):
            assert regex.fullmatch(pattern, text), (pattern, text)


def test_a_row_keyed_processor_would_be_wrong_here(gpt2):
    """The check above has teeth: a processor keeping one state per row index (stepped with each
    row's last token, as xgrammar's does) disagrees with the states of the rows' real tokens."""
    model, tok = gpt2
    processor = ConstraintLogitsProcessor(r"(?:café|déjà|naïve)( [a-zé]+){1,3}", tok, max_new_tokens=10)
    kept, start, disagreements = None, None, 0

    def watch(input_ids, scores):
        nonlocal kept, start, disagreements
        out = processor(input_ids, scores)
        a = processor.automaton
        if start is None:
            start, kept = input_ids.shape[1], torch.full((input_ids.shape[0],), a.initial)
        else:
            kept = a.step(kept, input_ids[:, -1])
        truth = torch.tensor(processor._lookup([tuple(r) for r in input_ids[:, start:].tolist()]))
        disagreements += int((kept != truth).sum())
        return out

    run(model, tok, watch, 10, num_beams=4, do_sample=False)
    assert disagreements > 0


def test_sampling_several_constraints_excludes_and_json_schema(gpt2):
    model, tok = gpt2
    schema = {"type": "integer", "maximum": 99}
    cases = [
        (ConstraintLogitsProcessor([r"[a-zé ]+", r".*é.*"], tok, exclude="the", max_new_tokens=8), None),
        (ConstraintLogitsProcessor(None, tok, json_schema=schema, max_new_tokens=6), schema),
    ]
    for processor, expected in cases:
        torch.manual_seed(1)
        rows, _ = run(model, tok, processor, processor.max_new_tokens, do_sample=True, num_return_sequences=5)
        for text in texts(tok, rows):
            if expected is None:
                assert regex.fullmatch(r"[a-zé ]+", text) and "é" in text and "the" not in text, text
            else:
                value = json.loads(text)
                assert isinstance(value, int) and value <= 99, text


def test_the_mask_api_from_a_loop_of_your_own(gpt2):
    _, tok = gpt2
    processor = ConstraintLogitsProcessor(DATE, tok, vocab_size=len(tok))
    logits = torch.zeros(3, len(tok))
    digits = tok.encode("2024", add_special_tokens=False)
    out = processor.mask(logits, [[], digits, [*digits, tok.eos_token_id]])
    assert out[0].isfinite().sum() > 0 and not out[0, tok.eos_token_id].isfinite()
    assert out[2].isfinite().tolist() == [i == tok.eos_token_id for i in range(len(tok))]  # dead: EOS only
    allowed = {tok.decode([i]) for i in out[1].isfinite().nonzero()[:, 0].tolist()}
    assert allowed and all(t.startswith("-") for t in allowed)
    with pytest.raises(decodekit.ConstraintError, match="columns"):
        processor.mask(torch.zeros(1, len(tok) + 5), [[]])
