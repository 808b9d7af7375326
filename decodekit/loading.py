"""``load_model``: turn a model spec into a step-protocol model, whatever kind of model it names.

A spec is one of (checked in this order):

* ``None``: the model shipped inside the package (``decodekit/pretrained/ptb-lstm/``, an LSTM
  trained on the Penn Treebank; see the README, "The default model");
* a decodekit checkpoint directory (``config.json`` written by ``decodekit train``);
* a local transformers model directory (``config.json`` with ``model_type`` or ``architectures``,
  safetensors weights; needs ``pip install 'decodekit[hf]'``); local directories only, never a
  download;
* an ARPA n-gram file (KenLM, SRILM, ``decodekit ngram``), read through a binary cache kept beside
  it (:func:`decodekit.models.arpa_cache.load_arpa`);
* the name of a model under ``decodekit/pretrained/``;
* a hub name (``gpt2``, ``org/name``) whose snapshot is in the local Hugging Face cache
  (:mod:`decodekit.models.hub_cache`; offline, never a download), loaded as a transformers
  directory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decodekit.errors import CheckpointError, ConfigError

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
DEFAULT_MODEL = "ptb-lstm"


@dataclass(frozen=True)
class Loader:
    """How one kind of model is loaded: ``load(path, device) -> model`` (eval mode, float32)."""

    what: str  # what such a path holds, for messages: "a decodekit checkpoint"
    load: Callable[[Path, Any], Any]


def _checkpoint(path: Path, device: Any) -> Any:
    from decodekit.checkpoint import load_checkpoint

    return load_checkpoint(path, device=device)


def _hf(path: Path, device: Any) -> Any:
    from decodekit.models.hf import load_hf

    return load_hf(path, device=device)


def _arpa(path: Path, device: Any) -> Any:
    from decodekit.models.arpa_cache import load_arpa

    return load_arpa(path).to(device or "cpu")


# kind (what model_kind tells a path holds) -> its loader; the imports happen on first use
LOADERS: dict[str, Loader] = {
    "checkpoint": Loader("a decodekit checkpoint", _checkpoint),
    "hf": Loader("a transformers model", _hf),
    "arpa": Loader("an ARPA file", _arpa),
}
KINDS = (None, *LOADERS)
_EXPECTED = "a checkpoint directory, a transformers model directory, an ARPA file or a bundled model name"


def default_model_path() -> Path:
    """Where the shipped default model lives (it may be absent in a development checkout)."""
    return PRETRAINED_DIR / DEFAULT_MODEL


def pretrained_names() -> list[str]:
    """The names of the models under ``decodekit/pretrained/`` (what ``--model NAME`` accepts)."""
    if not PRETRAINED_DIR.is_dir():
        return []
    return sorted(p.name for p in PRETRAINED_DIR.iterdir() if (p / "config.json").is_file())


def model_kind(path: str | Path) -> str | None:
    """What an existing path holds: ``"checkpoint"``, ``"hf"``, ``"arpa"``, or None (none of them).

    A directory's ``config.json`` tells a transformers model (``model_type`` or ``architectures``)
    from a decodekit checkpoint; a file is ARPA when it is named ``*.arpa`` or starts with the
    ``\\data\\`` header."""
    path = Path(path)
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            return None
        try:
            with open(config, encoding="utf-8") as f:
                info = json.loads(f.read(1 << 20))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return "checkpoint"  # load_checkpoint names what is wrong with it
        is_hf = isinstance(info, dict) and ("model_type" in info or "architectures" in info)
        return "hf" if is_hf else "checkpoint"
    if path.is_file():
        if path.suffix == ".arpa":
            return "arpa"
        try:
            with open(path, "rb") as f:
                head = f.read(4096).lstrip()
        except OSError:
            return None
        return "arpa" if head.startswith(b"\\data\\") else None
    return None


def load_model(spec: str | Path | None = None, device: Any = None, *, kind: str | None = None) -> Any:
    """Load a model for decoding (eval mode, float32).

    Args:
        spec: None -> the shipped default model; a checkpoint directory, a local transformers
            model directory, an ARPA file, the name of a model under ``decodekit/pretrained/``, or
            a hub name cached by Hugging Face (see the module docstring).
        device: torch device (default: CPU).
        kind: None (recognise ``spec``), or ``"checkpoint"``, ``"hf"``, ``"arpa"`` to insist on one.

    Raises:
        CheckpointError: the spec names no model (a hub name not in the cache: the line says how
            to save it once), or not one of ``kind``; a damaged checkpoint.
        DecodekitError: a transformers directory without transformers installed, a malformed
            ARPA file (:class:`~decodekit.models.arpa.ArpaError`).
    """
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "hf":  # a transformers directory, or what load_hf says of it
        return LOADERS["hf"].load(spec, device)
    path = _resolve(spec)
    found = model_kind(path)
    if kind is not None and found is not None and found != kind:
        raise CheckpointError(f"{spec} holds {LOADERS[found].what}, not {LOADERS[kind].what}")
    if found is None and path.is_dir():
        raise CheckpointError(f"{spec} is not a model: config.json is missing (expected {_EXPECTED})")
    if found is None:
        raise CheckpointError(f"model {spec} is a file but not an ARPA file (expected {_EXPECTED})")
    return LOADERS[found].load(path, device)


def _resolve(spec: str | Path | None) -> Path:
    """The path a spec names (None: the shipped model; a bare name: a bundled model)."""
    if spec is None:
        path = default_model_path()
        if not (path / "config.json").is_file():
            raise CheckpointError(
                f"no default model is installed ({path} is missing); pass --model (a checkpoint "
                "directory written by `decodekit train`, an ARPA file or a transformers model directory)"
            )
        return path
    path = Path(spec)
    if path.exists():
        return path
    if str(spec) in pretrained_names():
        return PRETRAINED_DIR / str(spec)
    names = ", ".join(pretrained_names()) or "none installed"
    from decodekit.models.hub_cache import cached_snapshot, is_hub_name, not_cached

    if not is_hub_name(str(spec)):
        raise CheckpointError(f"model not found: {spec} (expected {_EXPECTED}; bundled: {names})")
    snapshot = cached_snapshot(str(spec))  # a hub name: offline, from the local cache only
    if snapshot is None:
        nowhere = f"model not found: {spec} is no file or directory and no bundled model ({names})"
        raise CheckpointError(f"{nowhere}; {not_cached(str(spec))}")
    return snapshot
