"""Model checkpoints: a directory that loads without unpickling anything.

Layout::

    DIR/config.json          {"format": "decodekit-checkpoint", "version": 1, "model": {"kind": ...}, ...}
    DIR/model.safetensors    the weights; its header metadata repeats the config, the vocabulary's
                             fingerprint and a sha256 over all tensors (name, dtype, shape, bytes)
    DIR/vocab.txt            the vocabulary (:meth:`decodekit.vocab.Vocab.save`: JSON strings per line)

Every file is written to a temporary name and moved into place with ``os.replace``. Loading
checks that the three agree; a truncated or edited file, a config of another model kind, or a
vocabulary that does not belong to the weights raises :class:`~decodekit.errors.CheckpointError`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from decodekit.errors import CheckpointError
from decodekit.models.neural import NeuralLM
from decodekit.models.registry import config_from_dict, config_to_dict, create_model
from decodekit.vocab import Vocab

FORMAT, VERSION = "decodekit-checkpoint", 1
CONFIG, WEIGHTS, VOCAB = "config.json", "model.safetensors", "vocab.txt"


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)``, then move the temporary file onto ``path`` (``os.replace``)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over (name, dtype, shape, bytes) of every tensor, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def model_tensors(model: torch.nn.Module, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The state dict without tied aliases (a shared tensor is stored once, under its first
    name), contiguous, on the CPU, floating tensors cast to ``dtype`` when given."""
    out, seen = {}, set()
    for name, t in model.state_dict().items():
        key = (t.data_ptr(), tuple(t.shape))
        if t.numel() and key in seen:
            continue
        seen.add(key)
        t = t.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        out[name] = t.contiguous()
    return out


def save_checkpoint(
    model: NeuralLM, directory: str | Path, *, dtype: torch.dtype | None = None, extra: dict | None = None
) -> Path:
    """Write ``model`` (with ``model.config`` and ``model.vocab``) to ``directory``.
    ``dtype``: e.g. ``torch.float16`` to halve the size; ``extra``: JSON-ready info for config.json."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = config_to_dict(model.config)
    tensors = model_tensors(model, dtype)
    meta = {
        "format": FORMAT,
        "version": str(VERSION),
        "model": json.dumps(config, sort_keys=True),
        "vocab": model.vocab.fingerprint,
        "sha256": tensors_digest(tensors),
    }
    info = {
        "format": FORMAT,
        "version": VERSION,
        "model": config,
        "vocab_size": len(model.vocab),
        "vocab_fingerprint": model.vocab.fingerprint,
        **(extra or {}),
    }
    atomic_write(directory / VOCAB, model.vocab.save)
    atomic_write(directory / WEIGHTS, lambda p: save_file(tensors, str(p), metadata=meta))
    atomic_write(
        directory / CONFIG, lambda p: p.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    )
    return directory


def read_config(directory: str | Path) -> dict:
    """The parsed config.json of a checkpoint directory (CheckpointError if unreadable)."""
    path = Path(directory) / CONFIG
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{directory} is not a checkpoint: {CONFIG} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: unreadable ({e})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT or not isinstance(info.get("model"), dict):
        raise CheckpointError(f"{path}: not a decodekit checkpoint config")
    if info.get("version") != VERSION:
        raise CheckpointError(
            f"{path}: format version {info.get('version')!r}, this decodekit reads {VERSION}"
        )
    return info


def read_weights(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and header metadata of a safetensors file, its digest verified."""
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: truncated or corrupt safetensors file ({e})") from None
    if meta.get("format") != FORMAT or "sha256" not in meta:
        raise CheckpointError(f"{path}: not written by decodekit (no checksum in the header)")
    if tensors_digest(tensors) != meta["sha256"]:
        raise CheckpointError(f"{path}: checksum mismatch, the weights were modified or damaged")
    return tensors, meta


def load_checkpoint(
    directory: str | Path, *, kind: str | None = None, device: Any = None, dtype: torch.dtype = torch.float32
) -> NeuralLM:
    """Load a checkpoint directory into a fresh model (eval mode) on ``device``.

    Args:
        kind: if given, the model kind expected (another kind raises CheckpointError).
        dtype: floating tensors are cast to it (fp16 checkpoints load as float32 by default).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"checkpoint directory not found: {directory}")
    info = read_config(directory)
    if kind is not None and info["model"].get("kind") != kind:
        raise CheckpointError(f"{directory} holds a {info['model'].get('kind')!r} model, expected {kind!r}")
    tensors, meta = read_weights(directory / WEIGHTS)
    if json.loads(meta.get("model", "null")) != info["model"]:
        raise CheckpointError(f"{directory}: {CONFIG} does not match the config stored with the weights")
    try:
        vocab = Vocab.load(directory / VOCAB)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    if vocab.fingerprint != meta.get("vocab"):
        raise CheckpointError(
            f"{directory}: {VOCAB} ({len(vocab)} tokens) is not the vocabulary the model was trained with"
        )
    try:
        config = config_from_dict(info["model"])
        model = create_model(config, vocab)
        missing, unexpected = model.load_state_dict(
            {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}, strict=False
        )
    except (ValueError, RuntimeError, TypeError) as e:
        raise CheckpointError(
            f"{directory}: weights do not fit the {info['model'].get('kind')} config ({e})"
        ) from None
    tied = set(model.state_dict()) - set(model_tensors(model))
    if unexpected or set(missing) - tied:
        raise CheckpointError(
            f"{directory}: missing weights {sorted(set(missing) - tied)}, unexpected {unexpected}"
        )
    return model.to(device=device).eval()
