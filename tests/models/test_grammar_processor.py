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
from tests.support.fakes import byte_bpe  # noqa: E402
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
    tok = byte_bpe(TEXTS, 300, bos=False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(config).eval(), tok


def _generate(model, tok, processor, max_new_tokens, **options):
    inputs = tok(["the café"], return_tensors="pt")
    out = model.generate(
        **inputs,
        logits_processor=transformers.LogitsProcessorList([processor]),
        max_new_tokens=max_new_tokens,
        pad_token_id=tok.eos_token_id,
        **options,
    )
    new = out[:, inputs["input_ids"].shape[1] :]
    return [tok.decode(row[row != tok.eos_token_id].tolist()) for row in new]


@pytest.mark.parametrize("max_new_tokens", [4, 9])
@pytest.mark.parametrize("options", [{"num_beams": 4, "num_return_sequences": 2}, {"do_sample": True}])
def test_outputs_are_complete_sentences_within_the_budget(gpt2, max_new_tokens, options):
    model, tok = gpt2
    member = lark_oracle(LIST.cfg)
    for seed in range(3):
        torch.manual_seed(seed)
        processor = ConstraintLogitsProcessor(LIST, tok, max_new_tokens=max_new_tokens)
        for text in _generate(model, tok, processor, max_new_tokens, **options):
            assert member(text), (options, max_new_tokens, text)
