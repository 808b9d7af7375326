"""A grammar inside transformers' ``model.generate`` through ``ConstraintLogitsProcessor``: beam
search (rows reordered between calls), sampling and greedy return complete sentences of the
grammar within ``max_new_tokens`` (lark is the judge), on a tiny random GPT-2 with a byte-level BPE
trained here on non-ASCII text."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from decodekit import ConstraintLogitsProcessor, Grammar  # noqa: E402
from tests.support.fakes import generate_with, tiny_gpt2  # noqa: E402
from tests.support.grammars import lark_oracle  # noqa: E402

TEXTS = ['{"café": [1, 2.5, "déjà"], "naïve": {"ü": null}}', "(1 + 22) * 3 - x"] * 20
LIST = Grammar(
    r"""
start: "[" [item ("," item)*] "]"
item: NUMBER | WORD | start
WORD: /[a-zé]+/
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""
)


@pytest.fixture(scope="module")
def gpt2():
    return tiny_gpt2(TEXTS)


def _generate(model, tok, processor, prompt, max_new_tokens, **options):
    return [
        tok.decode(row) for row in generate_with(model, tok, processor, prompt, max_new_tokens, **options)
    ]


@pytest.mark.parametrize("max_new_tokens", [4, 9])
@pytest.mark.parametrize("options", [{"num_beams": 4, "num_return_sequences": 2}, {"do_sample": True}])
def test_outputs_are_complete_sentences_within_the_budget(gpt2, max_new_tokens, options):
    model, tok = gpt2
    member = lark_oracle(LIST.cfg)
    for seed in range(3):
        torch.manual_seed(seed)
        processor = ConstraintLogitsProcessor(LIST, tok, max_new_tokens=max_new_tokens)
        for text in _generate(model, tok, processor, "the café", max_new_tokens, **options):
            assert member(text), (options, max_new_tokens, text)
