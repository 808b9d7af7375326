"""The model registry: one config format and one factory for every bundled model.

``MODELS`` maps a kind name to ``(ConfigClass, ModelClass)``; a config is a frozen
dataclass with a ``kind`` class attribute, JSON-serialisable with :func:`config_to_dict`.
Further model families add themselves with :func:`register`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from decodekit.errors import ConfigError
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.models.mlp import MLPLM, MLPConfig
from decodekit.models.neural import NeuralLM
from decodekit.models.rnn import RNNLM, RNNConfig
from decodekit.models.stack import StackLSTM, StackLSTMConfig
from decodekit.util.checks import require
from decodekit.vocab import Vocab

MODELS: dict[str, tuple[type, type[NeuralLM]]] = {
    "lstm": (LSTMConfig, LSTMLM),
    "rnn": (RNNConfig, RNNLM),
    "mlp": (MLPConfig, MLPLM),
    "stack-lstm": (StackLSTMConfig, StackLSTM),
}


def register(kind: str, config_cls: type, model_cls: type) -> None:
    """Add a model family: ``config_cls`` is a frozen dataclass with ``kind`` = ``kind``;
    ``model_cls(config, vocab)`` builds the model."""
    got = getattr(config_cls, "kind", None)
    require(got == kind, f"{config_cls.__name__}.kind must be {kind!r}, got {got!r}")
    MODELS[kind] = (config_cls, model_cls)


def create_model(config: Any, vocab: Vocab, *, seed: int | None = None) -> NeuralLM:
    """Build the model a config describes, with freshly initialised weights: drawn from torch's
    global generator, or, with ``seed``, from a generator seeded with it (the same weights on
    every run; the global generator is left as it was)."""
    kind = getattr(config, "kind", None)
    require(
        kind in MODELS and isinstance(config, MODELS[kind][0]),
        f"unknown model config {type(config).__name__} (kind {kind!r}); known: {sorted(MODELS)}",
    )
    if seed is None:
        return MODELS[kind][1](config, vocab)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[kind][1](config, vocab)


def config_to_dict(config: Any) -> dict:
    """``{"kind": ..., field: value, ...}``: JSON-ready."""
    return {"kind": config.kind, **dataclasses.asdict(config)}


def config_from_dict(d: dict) -> Any:
    """Inverse of :func:`config_to_dict`; unknown kinds or fields and impossible values raise
    :class:`~decodekit.errors.ConfigError` (a ValueError)."""
    d = dict(d)
    kind = d.pop("kind", None)
    require(kind in MODELS, f"unknown model kind {kind!r}; known: {sorted(MODELS)}")
    cls = MODELS[kind][0]
    names = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(d) - names)
    require(not extra, f"unknown {kind} config field(s) {extra}; known: {sorted(names)}")
    try:
        return cls(**d)
    except ConfigError as e:
        raise ConfigError(f"not a valid {kind} config: {e}") from None


def make_config(kind: str, **fields: Any) -> Any:
    """The ``kind`` config with ``fields`` overriding its defaults (None values are ignored)."""
    return config_from_dict({"kind": kind, **{k: v for k, v in fields.items() if v is not None}})
