"""GenerationConfig: transformers' option names get the local name in the error; suppress checks."""

import pytest

from decodekit import GenerationConfig
from decodekit.errors import ConfigError


def test_transformers_names_are_accepted_as_keywords():
    """transformers' names are folded into ours (issue 28: they used to be refused with the local
    name); contradictions and beam sampling are one-line errors."""
    assert GenerationConfig(max_new_tokens=5).max_length == 5
    beam = GenerationConfig().replace(num_beams=4, num_return_sequences=2)
    assert (beam.strategy, beam.beam_size, beam.n_best) == ("beam", 4, 2)
    drawn = GenerationConfig(do_sample=True, num_return_sequences=3, suppress_tokens=[7])
    assert (drawn.strategy, drawn.num_samples, drawn.suppress) == ("sample", 3, (7,))
    assert GenerationConfig(max_length=12).replace(max_new_tokens=4, top_k=3).max_length == 4
    assert GenerationConfig(max_new_tokens=5) == GenerationConfig(max_length=5)
    for options, message in (
        (dict(num_beams=4, do_sample=True), "beam sampling"),
        (dict(max_length=10, max_new_tokens=5), "not both"),
        (dict(strategy="greedy", do_sample=True), "contradicts do_sample"),
        (dict(num_return_sequences=2), "returns one sequence"),
    ):
        with pytest.raises(ConfigError, match=message):
            GenerationConfig(**options)
    with pytest.raises(ConfigError, match=r"option\(s\) \['beams'\]; known: \['allow_unk'"):
        GenerationConfig().replace(beams=4)


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
    from decodekit.decoding.generation import generate
    from tests.support.fakes import HistoryLM, word_vocab

    model = HistoryLM(
        7, seed=3, bos_id=1, eos_id=1, vocab=word_vocab(["the", "company", "said", "profit", "rose"])
    )
    prompts, pattern = [[2], [3, 4]], r".*\bprofit\b.*"
    config = GenerationConfig(strategy="masked-beam", constraint=pattern, beam_size=3, max_length=4, n_best=2)
    want = decodekit.beam_search(model, prompts, 3, 4, n_best=2, constraint=pattern)
    assert generate(model, prompts, config) == want
    anderson = generate(model, prompts, config.replace(strategy="beam"))
    assert anderson == decodekit.constrained_beam_search(model, prompts, pattern, 3, 4, n_best=2)
