"""decodekit: exact, fast decoding for language models.

Public API::

    from decodekit import greedy, sample, beam_search, constrained_beam_search, compile_regex

Every name is imported on first use (PEP 562), so ``import decodekit`` and ``decodekit --help``
do not import torch. ``results`` and ``distributed`` are public modules: the JSON-lines result
files of batch generation, and the torchrun helpers. ``writable_target`` and ``atomic_write`` are
how every output file is written (a symlink's target, never a device or FIFO; atomically).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> (module, attribute in it; None: the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "CharVocab": ("decodekit.vocab", "CharVocab"),
    "CheckpointError": ("decodekit.errors", "CheckpointError"),
    "ConstraintError": ("decodekit.errors", "ConstraintError"),
    "DecodekitError": ("decodekit.errors", "DecodekitError"),
    "GenerationConfig": ("decodekit.generation", "GenerationConfig"),
    "Hypothesis": ("decodekit.outputs", "Hypothesis"),
    "LanguageModel": ("decodekit.models.base", "LanguageModel"),
    "LockedError": ("decodekit.errors", "LockedError"),
    "ConstraintLogitsProcessor": ("decodekit.logits_processor", "ConstraintLogitsProcessor"),
    "ModelOutputError": ("decodekit.errors", "ModelOutputError"),
    "ResourceError": ("decodekit.errors", "ResourceError"),
    "STRATEGIES": ("decodekit.decoding.strategies", "STRATEGIES"),
    "SearchTree": ("decodekit.outputs", "SearchTree"),
    "TokenAutomaton": ("decodekit.constraints", "TokenAutomaton"),
    "Vocab": ("decodekit.vocab", "Vocab"),
    "WordVocab": ("decodekit.vocab", "WordVocab"),
    "atomic_write": ("decodekit.files", "atomic_write"),
    "beam_search": ("decodekit.decoding", "beam_search"),
    "compile_for_vocab": ("decodekit.constraints", "compile_for_vocab"),
    "compile_regex": ("decodekit.constraints", "compile_regex"),
    "constrained_beam_search": ("decodekit.decoding", "constrained_beam_search"),
    "create_model": ("decodekit.models.registry", "create_model"),
    "distributed": ("decodekit.distributed", None),
    "encode_tokens": ("decodekit.data", "encode_tokens"),
    "eval_tokens": ("decodekit.data", "eval_tokens"),
    "exclusive": ("decodekit.locking", "exclusive"),
    "generate": ("decodekit.generation", "generate"),
    "generate_jsonl": ("decodekit.jobs", "generate_jsonl"),
    "greedy": ("decodekit.decoding", "greedy"),
    "json_schema": ("decodekit.constraints", "json_schema"),
    "jsonl_lines": ("decodekit.jobs", "jsonl_lines"),
    "load_checkpoint": ("decodekit.checkpoint", "load_checkpoint"),
    "load_data": ("decodekit.data", "load_data"),
    "load_hf": ("decodekit.models.hf", "load_hf"),
    "load_model": ("decodekit.loading", "load_model"),
    "model_config": ("decodekit.models.registry", "make_config"),
    "parse_size": ("decodekit.memory", "parse_size"),
    "part_path": ("decodekit.jobs", "part_path"),
    "plot_runs": ("decodekit.plotting", "plot_runs"),
    "read_bytes": ("decodekit.files", "read_bytes"),
    "results": ("decodekit.results", None),
    "sample": ("decodekit.decoding", "sample"),
    "stream": ("decodekit.generation", "stream"),
    "writable_target": ("decodekit.files", "writable_target"),
}

__all__ = [
    "CharVocab",
    "CheckpointError",
    "ConstraintError",
    "ConstraintLogitsProcessor",
    "DecodekitError",
    "GenerationConfig",
    "Hypothesis",
    "LanguageModel",
    "LockedError",
    "ModelOutputError",
    "ResourceError",
    "STRATEGIES",
    "SearchTree",
    "TokenAutomaton",
    "Vocab",
    "WordVocab",
    "atomic_write",
    "beam_search",
    "compile_for_vocab",
    "compile_regex",
    "constrained_beam_search",
    "create_model",
    "distributed",
    "encode_tokens",
    "eval_tokens",
    "exclusive",
    "generate",
    "generate_jsonl",
    "greedy",
    "json_schema",
    "jsonl_lines",
    "load_checkpoint",
    "load_data",
    "load_hf",
    "load_model",
    "model_config",
    "parse_size",
    "part_path",
    "plot_runs",
    "read_bytes",
    "results",
    "sample",
    "stream",
    "writable_target",
]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from decodekit import distributed, results
    from decodekit.checkpoint import load_checkpoint
    from decodekit.constraints import TokenAutomaton, compile_for_vocab, compile_regex, json_schema
    from decodekit.data import encode_tokens, eval_tokens, load_data
    from decodekit.decoding import beam_search, constrained_beam_search, greedy, sample
    from decodekit.decoding.strategies import STRATEGIES
    from decodekit.errors import (
        CheckpointError,
        ConstraintError,
        DecodekitError,
        LockedError,
        ModelOutputError,
        ResourceError,
    )
    from decodekit.files import atomic_write, read_bytes, writable_target
    from decodekit.generation import GenerationConfig, generate, stream
    from decodekit.jobs import generate_jsonl, jsonl_lines, part_path
    from decodekit.loading import load_model
    from decodekit.locking import exclusive
    from decodekit.logits_processor import ConstraintLogitsProcessor
    from decodekit.memory import parse_size
    from decodekit.models.base import LanguageModel
    from decodekit.models.hf import load_hf
    from decodekit.models.registry import create_model
    from decodekit.models.registry import make_config as model_config
    from decodekit.outputs import Hypothesis, SearchTree
    from decodekit.plotting import plot_runs
    from decodekit.vocab import CharVocab, Vocab, WordVocab


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'decodekit' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
