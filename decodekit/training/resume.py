"""The training state for exact resume, in one safetensors file (never unpickled).

Tensors: ``model.*`` (float32 weights), ``optim.<param index>.<key>`` (optimiser buffers),
``rng.cpu`` / ``rng.cuda.<i>`` (generator states), ``hidden.<k>`` (the carried BPTT state when
saved mid-epoch). Header metadata (JSON strings): the loop position, the schedule state, the
optimiser's scalar state and param groups, the configs, and a sha256 over all tensors. The
file is replaced atomically, so a crash leaves the previous state intact.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from decodekit.checkpoint import atomic_write, model_tensors, read_weights, tensors_digest
from decodekit.errors import CheckpointError
from decodekit.models.state import map_state

RESUME = "resume.safetensors"


def _leaves(state: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    map_state(state, lambda t: out.append(t) or t)
    return out


def save_training_state(
    path: Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, hidden: Any, meta: dict[str, Any]
) -> None:
    """Write everything needed to continue training exactly where it stopped."""
    tensors = {
        f"model.{k}": v.float() if v.is_floating_point() else v for k, v in model_tensors(model).items()
    }
    opt = optimizer.state_dict()
    scalars: dict[str, dict[str, Any]] = {}
    for i, buf in opt["state"].items():
        for key, v in buf.items():
            if isinstance(v, torch.Tensor):
                tensors[f"optim.{i}.{key}"] = v.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(i), {})[key] = v
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    if hidden is not None:
        for k, t in enumerate(_leaves(hidden)):
            tensors[f"hidden.{k}"] = t.detach().cpu().contiguous()
    header = {
        "format": "decodekit-checkpoint",
        "sha256": tensors_digest(tensors),
        "optim_scalars": json.dumps(scalars),
        "optim_groups": json.dumps(opt["param_groups"]),
        **{k: json.dumps(v) for k, v in meta.items()},
    }
    atomic_write(path, lambda p: save_file(tensors, str(p), metadata=header))


def _expected(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, hidden_template: Any
) -> Callable[[str, tuple[int, ...]], str | None]:
    """What each tensor of a resume file may be (None: it belongs, else what was expected), so that
    a header claiming more than this model and optimiser hold is refused before anything is read:
    ``model.*`` the model's shapes, ``optim.<i>.*`` parameter i's shape or a scalar, ``rng.*`` a
    generator state (1-D, at most 64 KiB), ``hidden.<k>`` the carried state's k-th tensor (any batch size)."""
    weights = {f"model.{k}": tuple(v.shape) for k, v in model_tensors(model).items()}
    params = [tuple(p.shape) for group in optimizer.param_groups for p in group["params"]]
    hidden = [tuple(t.shape) for t in _leaves(hidden_template)] if hidden_template is not None else []

    def check(name: str, shape: tuple[int, ...]) -> str | None:
        kind, _, rest = name.partition(".")
        index, _, key = rest.partition(".")
        if name in weights:
            allowed = {weights[name]}
        elif kind == "optim" and index.isdigit() and int(index) < len(params) and key:
            allowed = {params[int(index)], ()}
        elif kind == "rng" and len(shape) == 1 and shape[0] <= 64 * 1024:
            return None
        elif kind == "hidden" and rest.isdigit() and int(rest) < len(hidden):
            want = hidden[int(rest)]  # another batch size is refused later, naming the options
            allowed = {shape if len(shape) == len(want) and shape[1:] == want[1:] else want}
        else:
            return "no model, optimiser, generator or carried state has such a tensor"
        return None if shape in allowed else f"expected {' or '.join(map(str, sorted(allowed)))}"

    return check


def load_training_state(
    path: Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, hidden_template: Any
) -> tuple[dict[str, Any], Any]:
    """Restore model, optimiser and RNG states in place. Returns (meta, hidden or None).
    ``hidden_template``: an initial state of the right structure (for rebuilding ``hidden``)."""
    if not path.exists():
        raise CheckpointError(f"cannot resume: {path} not found")
    tensors, header = read_weights(path, _expected(model, optimizer, hidden_template))
    try:
        meta = {k: json.loads(v) for k, v in header.items() if k not in ("format", "sha256")}
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: damaged header ({e})") from None
    device = next(model.parameters()).device
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as e:
        raise CheckpointError(f"{path}: weights do not fit this model ({e})") from None
    if unexpected or set(missing) - (set(model.state_dict()) - set(model_tensors(model))):
        raise CheckpointError(
            f"{path}: weights do not fit this model (missing {missing}, unexpected {unexpected})"
        )
    state: dict[int, dict[str, Any]] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, i, key = k.split(".", 2)
            # copy=True: a fresh, aligned tensor (not a view into the file's buffer, whose
            # alignment depends on the header length and changes CPU kernels' rounding)
            state.setdefault(int(i), {})[key] = v.to(device, copy=True) if key != "step" else v
    for i, buf in meta.pop("optim_scalars").items():
        state.setdefault(int(i), {}).update(buf)
    optimizer.load_state_dict({"state": state, "param_groups": meta.pop("optim_groups")})
    torch.set_rng_state(tensors["rng.cpu"])
    cuda = [tensors[f"rng.cuda.{i}"] for i in range(torch.cuda.device_count()) if f"rng.cuda.{i}" in tensors]
    if cuda:
        torch.cuda.set_rng_state_all(cuda)
    hidden = None
    if "hidden.0" in tensors:
        it = iter(tensors[f"hidden.{k}"] for k in range(len(_leaves(hidden_template))))
        hidden = map_state(hidden_template, lambda t: next(it).to(t.device, copy=True))
    return meta, hidden
