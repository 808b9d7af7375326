"""decodekit: exact, fast decoding for language models.

Public API::

    from decodekit import greedy, sample, beam_search, constrained_beam_search, compile_regex
"""

from decodekit.constraints import TokenAutomaton, compile_for_vocab, compile_regex
from decodekit.decoding import beam_search, constrained_beam_search, greedy, sample
from decodekit.errors import (
    CheckpointError,
    ConstraintError,
    DecodekitError,
    LockedError,
    ModelOutputError,
    ResourceError,
)
from decodekit.generation import GenerationConfig, generate
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis
from decodekit.vocab import CharVocab, Vocab, WordVocab

__version__ = "0.1.0"

__all__ = [
    "CharVocab",
    "CheckpointError",
    "ConstraintError",
    "DecodekitError",
    "GenerationConfig",
    "Hypothesis",
    "LanguageModel",
    "LockedError",
    "ModelOutputError",
    "ResourceError",
    "TokenAutomaton",
    "Vocab",
    "WordVocab",
    "beam_search",
    "compile_for_vocab",
    "compile_regex",
    "constrained_beam_search",
    "generate",
    "greedy",
    "sample",
]
