"""decodekit: exact, fast decoding for language models.

Public API::

    from decodekit import greedy, sample, beam_search, constrained_beam_search, compile_regex

Every name is imported on first use (PEP 562), so ``import decodekit`` and ``decodekit --help``
do not import torch. ``results`` and ``distributed`` are public modules: the JSON-lines result
file of a generation job (:mod:`decodekit.result_file`), and the torchrun helpers. What the
command line shares with the library but a user does not need (locks, checked file writes, size
parsing) is imported from its module (``decodekit.util.files``, ``decodekit.util.locking``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decodekit.util.lazy import keep_former_names, lazy_exports

__version__ = "0.1.0"

# public name -> where it lives (decodekit.util.lazy: module, module:attribute, module: itself)
_LAZY: dict[str, str] = {
    "CharVocab": "decodekit.vocab",
    "CheckpointError": "decodekit.errors",
    "Compiler": "decodekit.constraints",
    "ConstraintError": "decodekit.errors",
    "DecodekitError": "decodekit.errors",
    "GenerationConfig": "decodekit.decoding.generation",
    "Hypothesis": "decodekit.outputs",
    "Grammar": "decodekit.constraints.grammar.grammar",
    "LanguageModel": "decodekit.models.base",
    "ConstraintLogitsProcessor": "decodekit.logits_processor",
    "ModelOutputError": "decodekit.errors",
    "Pattern": "decodekit.constraints",
    "ResourceError": "decodekit.errors",
    "STRATEGIES": "decodekit.decoding.strategies",
    "SearchTree": "decodekit.outputs",
    "TokenConstraint": "decodekit.constraints",
    "Vocab": "decodekit.vocab",
    "Vocabulary": "decodekit.constraints",
    "WordVocab": "decodekit.vocab",
    "beam_search": "decodekit.decoding",
    "compile_for_vocab": "decodekit.constraints",
    "compile_regex": "decodekit.constraints",
    "constrained_beam_search": "decodekit.decoding",
    "create_model": "decodekit.models.registry",
    "distributed": "decodekit.distributed:",
    "generate": "decodekit.decoding.generation",
    "generate_jsonl": "decodekit.jobs",
    "greedy": "decodekit.decoding",
    "json_schema": "decodekit.constraints",
    "jsonl_lines": "decodekit.jobs",
    "load_checkpoint": "decodekit.checkpoint",
    "load_data": "decodekit.data",
    "load_hf": "decodekit.models.hf",
    "load_model": "decodekit.loading",
    "minimum_bayes_risk": "decodekit.decoding.mbr",
    "model_config": "decodekit.models.registry:make_config",
    "plot_runs": "decodekit.plotting",
    "results": "decodekit.result_file:",  # the module, under its public name
    "sample": "decodekit.decoding",
    "stream": "decodekit.decoding.generation",
    "stream_text": "decodekit.decoding.generation",
}

__all__ = [
    "CharVocab",
    "CheckpointError",
    "Compiler",
    "ConstraintError",
    "ConstraintLogitsProcessor",
    "DecodekitError",
    "GenerationConfig",
    "Grammar",
    "Hypothesis",
    "LanguageModel",
    "ModelOutputError",
    "Pattern",
    "ResourceError",
    "STRATEGIES",
    "SearchTree",
    "TokenConstraint",
    "Vocab",
    "Vocabulary",
    "WordVocab",
    "beam_search",
    "compile_for_vocab",
    "compile_regex",
    "constrained_beam_search",
    "create_model",
    "distributed",
    "generate",
    "generate_jsonl",
    "greedy",
    "json_schema",
    "jsonl_lines",
    "load_checkpoint",
    "load_data",
    "load_hf",
    "load_model",
    "minimum_bayes_risk",
    "model_config",
    "plot_runs",
    "results",
    "sample",
    "stream",
    "stream_text",
]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from decodekit import distributed
    from decodekit import result_file as results
    from decodekit.checkpoint import load_checkpoint
    from decodekit.constraints import (
        Compiler,
        Pattern,
        TokenConstraint,
        Vocabulary,
        compile_for_vocab,
        compile_regex,
        json_schema,
    )
    from decodekit.constraints.grammar.grammar import Grammar
    from decodekit.data import load_data
    from decodekit.decoding import beam_search, constrained_beam_search, greedy, sample
    from decodekit.decoding.generation import GenerationConfig, generate, stream, stream_text
    from decodekit.decoding.mbr import minimum_bayes_risk
    from decodekit.decoding.strategies import STRATEGIES
    from decodekit.errors import (
        CheckpointError,
        ConstraintError,
        DecodekitError,
        ModelOutputError,
        ResourceError,
    )
    from decodekit.jobs import generate_jsonl, jsonl_lines
    from decodekit.loading import load_model
    from decodekit.logits_processor import ConstraintLogitsProcessor
    from decodekit.models.base import LanguageModel
    from decodekit.models.hf import load_hf
    from decodekit.models.registry import create_model
    from decodekit.models.registry import make_config as model_config
    from decodekit.outputs import Hypothesis, SearchTree
    from decodekit.plotting import plot_runs
    from decodekit.vocab import CharVocab, Vocab, WordVocab


# implementation classes no longer public, importable for a release (docs/changelog.md)
_KEPT = {"TokenAutomaton": "decodekit.constraints"}

__getattr__, __dir__ = lazy_exports(globals(), {**_LAZY, **_KEPT})

# modules that moved: their former names import the same module objects (decodekit.util.lazy)
_FORMER_NAMES = {
    "decodekit.batch": "decodekit.jobs",
    "decodekit.checks": "decodekit.util.checks",
    "decodekit.files": "decodekit.util.files",
    "decodekit.generation": "decodekit.decoding.generation",
    "decodekit.lazy": "decodekit.util.lazy",
    "decodekit.locking": "decodekit.util.locking",
    "decodekit.memory": "decodekit.decoding.memory",
}
keep_former_names(_FORMER_NAMES)
