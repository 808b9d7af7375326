"""``load_model``: turn a model spec (None, a checkpoint directory) into a step-protocol model.

``None`` means the model shipped inside the package (``decodekit/pretrained/ptb-lstm/``, an
LSTM trained on the Penn Treebank; see the README, "The default model").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decodekit.errors import CheckpointError

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
DEFAULT_MODEL = "ptb-lstm"


def default_model_path() -> Path:
    """Where the shipped default model lives (it may be absent in a development checkout)."""
    return PRETRAINED_DIR / DEFAULT_MODEL


def load_model(spec: str | Path | None = None, device: Any = None) -> Any:
    """Load a model for decoding (eval mode, float32).

    Args:
        spec: None -> the shipped default model; a name of a model under ``decodekit/pretrained/``;
            or a checkpoint directory written by :func:`decodekit.checkpoint.save_checkpoint`.
        device: torch device (default: CPU).

    Raises:
        CheckpointError: the spec names no checkpoint, or the checkpoint is damaged.
    """
    from decodekit.checkpoint import CONFIG, load_checkpoint

    if spec is None:
        path = default_model_path()
        if not (path / CONFIG).is_file():
            raise CheckpointError(
                f"no default model is installed ({path} is missing); pass --model DIR (a checkpoint "
                "directory written by `decodekit train`)"
            )
        return load_checkpoint(path, device=device)
    path = Path(spec)
    if not path.exists() and (PRETRAINED_DIR / str(spec) / CONFIG).is_file():
        path = PRETRAINED_DIR / str(spec)
    if not path.exists():
        raise CheckpointError(f"model not found: {spec} (expected a checkpoint directory)")
    if path.suffix == ".arpa" and not path.is_dir():  # an n-gram model (KenLM, SRILM, decodekit)
        from decodekit.models.arpa import read_arpa

        return read_arpa(path).to(device or "cpu")
    if not path.is_dir():
        raise CheckpointError(f"model {spec} is a file; expected a checkpoint directory with {CONFIG}")
    return load_checkpoint(path, device=device)
