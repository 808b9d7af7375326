"""decodekit.stream_text over a byte-level BPE: text pieces, whole characters only (issue 36
item 10: stream() yields ids and the CLI's split-character handling was not offered in Python)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tests.support.fakes import tiny_gpt2  # noqa: E402

TEXTS = ["the café opened — déjà vu, naïve ünd so", "über café naïve déjà"] * 20


@pytest.fixture(scope="module")
def gpt2():
    return tiny_gpt2(TEXTS)


def test_stream_text_yields_whole_characters_that_join_to_the_text(gpt2):
    """Joined, the pieces are generate()'s text; none holds a replacement character."""
    import decodekit
    from decodekit.models.hf import HuggingFaceLM

    model, tok = gpt2
    lm = HuggingFaceLM(model, tok)
    for seed in range(4):
        options = {"strategy": "sample", "seed": seed, "max_new_tokens": 12, "constraint": "[a-zéüï ]+"}
        pieces = list(decodekit.stream_text(lm, "the café", **options))
        text = decodekit.generate(lm, "the café", **options)[0].text
        assert "".join(pieces) == text and not any("\ufffd" in p for p in pieces)
