"""GenerationConfig: transformers' option names get the local name in the error; suppress checks."""

import pytest

from decodekit import GenerationConfig
from decodekit.errors import ConfigError


def test_transformers_names_are_answered_with_the_local_name():
    with pytest.raises(ConfigError, match=r"transformers' num_beams is beam_size with strategy='beam' here"):
        GenerationConfig().replace(num_beams=4)
    with pytest.raises(ConfigError, match=r"transformers' max_new_tokens is max_length here"):
        GenerationConfig().replace(max_new_tokens=4, top_k=3)


@pytest.mark.parametrize("bad", [[-1], [True], "the", [1.5], None])
def test_suppress_takes_token_ids_or_strings(bad):
    with pytest.raises(ConfigError, match="suppress must be a list of token ids or token strings"):
        GenerationConfig(suppress=bad)


def test_suppress_is_stored_as_a_tuple():
    assert GenerationConfig(suppress=[3, "the"]).suppress == (3, "the")
    with pytest.raises(ConfigError, match="allow_unk must be true or false"):
        GenerationConfig(allow_unk="no")


def test_masked_beam_is_beam_search_with_the_constraint_as_a_mask():
    import decodekit
    from decodekit.generation import generate
    from tests.fakes import HistoryLM, word_vocab

    model = HistoryLM(
        7, seed=3, bos_id=1, eos_id=1, vocab=word_vocab(["the", "company", "said", "profit", "rose"])
    )
    prompts, pattern = [[2], [3, 4]], r".*\bprofit\b.*"
    config = GenerationConfig(strategy="masked-beam", constraint=pattern, beam_size=3, max_length=4, n_best=2)
    want = decodekit.beam_search(model, prompts, 3, 4, n_best=2, constraint=pattern)
    assert generate(model, prompts, config) == want
    anderson = generate(model, prompts, config.replace(strategy="beam"))
    assert anderson == decodekit.constrained_beam_search(model, prompts, pattern, 3, 4, n_best=2)
