"""Model checkpoints: a directory that loads without unpickling anything.

Layout::

    DIR/config.json          {"format": "decodekit-checkpoint", "version": 1, "model": {"kind": ...}, ...}
    DIR/model.safetensors    the weights; its header metadata repeats the config, the vocabulary's
                             fingerprint and a sha256 over all tensors (name, dtype, shape, bytes)
    DIR/vocab.txt            the vocabulary (:meth:`decodekit.vocab.Vocab.save`: JSON strings per line)

Every file is written to a temporary name and moved into place with ``os.replace``, in the order
vocab, weights, config. The weights file is the commit point: its header holds the whole
``config.json`` (key ``info``), so an update of a checkpoint whose vocabulary stays the same (every
save of a training run) is one atomic rename. A ``config.json`` left behind by a kill between the
two renames is stale only in its descriptive fields (epoch, validation perplexity): the header's
copy wins (:func:`read_config`), and ``decodekit train`` rewrites the file when it next starts.

Loading checks that the three agree; a truncated or edited file, a config of another model kind, or a
vocabulary that does not belong to the weights raises :class:`~decodekit.errors.CheckpointError`.
Nothing is trusted before it is checked: only regular files of a plausible size are read (a FIFO or
a link to ``/dev/zero`` is refused), and the config and the vocabulary are checked against the
tensor shapes in the weights' header before a model is built, so a crafted ``config.json``
(``hidden=12000``, ``layers=10**6``, a vocabulary of millions of tokens) fails in milliseconds
without allocating anything.

The safetensors header is parsed here (:func:`read_weights`), bounded, and every tensor in it
checked against the file and the model before any data is read; the checksum is verified reading
the file in pieces before the tensors are allocated, and NaN or infinite weights are refused,
naming the tensor.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import torch
from safetensors.torch import save_file

from decodekit.errors import CheckpointError
from decodekit.models.neural import NeuralLM
from decodekit.models.registry import config_from_dict, config_to_dict, create_model
from decodekit.util.files import (
    MiB,
    atomic_write,
    open_regular,
    read_bytes,
    temporary_name,  # noqa: F401 (where tests and older code look for it)
)
from decodekit.vocab import Vocab

FORMAT, VERSION = "decodekit-checkpoint", 1
CONFIG, WEIGHTS, VOCAB = "config.json", "model.safetensors", "vocab.txt"
MAX_CONFIG_BYTES, MAX_VOCAB_BYTES = 1 * MiB, 512 * MiB  # beyond these, a file is not what it claims
# A decodekit header is a few KiB (the config twice, a digest) and lists tens of tensors
# (safetensors itself allows 100 MB: 1M empty tensors took a minute to list).
MAX_HEADER_BYTES, MAX_TENSORS = 16 * MiB, 100_000


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
    meta["info"] = json.dumps(info, sort_keys=True)
    atomic_write(directory / VOCAB, model.vocab.save)
    atomic_write(directory / WEIGHTS, lambda p: save_file(tensors, str(p), metadata=meta))  # the commit
    write_config(directory, info)
    return directory


def write_config(directory: Path, info: dict) -> None:
    """(Re)write ``config.json`` from ``info`` (atomically)."""
    text = json.dumps(info, indent=2) + "\n"
    atomic_write(Path(directory) / CONFIG, lambda p: p.write_text(text, encoding="utf-8"))


def _read_config_file(directory: str | Path) -> dict:
    path = Path(directory) / CONFIG
    try:
        data = read_bytes(path, CONFIG, max_bytes=MAX_CONFIG_BYTES, error=CheckpointError)
        info = json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{directory} is not a checkpoint: {CONFIG} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{path}: unreadable ({str(e)[:200]})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT or not isinstance(info.get("model"), dict):
        raise CheckpointError(f"{path}: not a decodekit checkpoint config")
    if info.get("version") != VERSION:
        raise CheckpointError(
            f"{path}: format version {info.get('version')!r}, this decodekit reads {VERSION}"
        )
    return info


def header_info(meta: dict[str, str]) -> dict | None:
    """The copy of ``config.json`` a weights header holds (None for checkpoints written before it)."""
    try:
        info = json.loads(meta["info"])
    except (KeyError, TypeError, json.JSONDecodeError):
        return None
    return info if isinstance(info, dict) else None


def read_config(directory: str | Path) -> dict:
    """The checkpoint's config (CheckpointError if unreadable): ``config.json``, or the copy in
    the weights' header when ``config.json`` is stale (a kill between the weights and the config
    write); the model config itself must agree (that is checked when loading)."""
    info = _read_config_file(directory)
    try:
        _, meta = read_header(Path(directory) / WEIGHTS)
    except CheckpointError:
        return info
    saved = header_info(meta)
    if saved is not None and saved != info and saved.get("model") == info.get("model"):
        return saved
    return info


def read_header(path: Path) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Tensor shapes and metadata from a safetensors header, without reading the tensors
    (the header checked as :func:`read_weights` checks it)."""
    with _open_weights(path) as f:
        entries, meta = _parse_header(f, path)
    return {name: e.shape for name, e in entries.items()}, meta


def read_weights(
    path: Path, expected: Callable[[str, tuple[int, ...]], str | None] | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and header metadata of a safetensors file written by decodekit.

    Nothing is allocated before it is checked: the header is parsed here (at most
    :data:`MAX_HEADER_BYTES`, :data:`MAX_TENSORS` tensors, each one's dtype, shape and byte range
    consistent and inside the file), every tensor is checked by ``expected(name, shape)`` (None
    when it belongs to the model, else what was expected), and the checksum is verified reading
    the file in 1 MiB pieces. Only then are the tensors read, the checksum computed once more over
    what was read, and every floating tensor checked to be finite.

    Raises:
        CheckpointError: a missing, unreadable, truncated, oversized or modified file, a tensor
            the model has no place for, NaN or infinite weights (the tensor named).
    """
    with _open_weights(path) as f:
        entries, meta = _parse_header(f, path)
        if meta.get("format") != FORMAT or "sha256" not in meta:
            raise CheckpointError(f"{path}: not written by decodekit (no checksum in the header)")
        if expected is not None:
            for name in sorted(entries):
                if (want := expected(name, entries[name].shape)) is not None:
                    raise CheckpointError(
                        f"{path}: the weights do not fit this model: tensor {name!r} "
                        f"{entries[name].shape} ({want}); refusing to read it"
                    )
        try:
            if _file_digest(f, entries) != meta["sha256"]:
                raise CheckpointError(f"{path}: checksum mismatch, the weights were modified or damaged")
            tensors, digest = _read_tensors(f, entries, path)
        except OSError as e:
            raise CheckpointError(f"{path}: cannot read ({e.strerror or e})") from None
    if digest != meta["sha256"]:
        raise CheckpointError(f"{path}: checksum mismatch, the file changed while it was read")
    check_finite(tensors, path)
    return tensors, meta


def check_finite(tensors: dict[str, torch.Tensor], path: Path | str) -> None:
    """CheckpointError naming the first floating tensor (in name order) holding NaN or infinity."""
    for name in sorted(tensors):
        t = tensors[name]
        if not t.is_floating_point() or bool(torch.isfinite(t).all()):
            continue
        nan = int(torch.isnan(t).sum())
        inf = int(torch.isinf(t).sum())
        counts = [f"{nan} NaN" if nan else "", f"{inf} infinite" if inf else ""]
        raise CheckpointError(
            f"{path}: tensor {name!r} has {' and '.join(c for c in counts if c)} values; "
            "the checkpoint is damaged (retrain or restore it)"
        )


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
    shapes, meta = read_header(directory / WEIGHTS)
    try:
        stored = json.loads(meta.get("model", "null"))
    except json.JSONDecodeError:
        stored = None
    if stored != info["model"]:
        raise CheckpointError(f"{directory}: {CONFIG} does not match the config stored with the weights")
    try:
        config = config_from_dict(_with_recorded_defaults(info["model"]))
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{directory}: {CONFIG}: {e}") from None
    _check_layers(config, shapes, directory)
    vocab = _load_vocab(directory, shapes)
    if vocab.fingerprint != meta.get("vocab"):
        raise CheckpointError(
            f"{directory}: {VOCAB} ({len(vocab)} tokens) is not the vocabulary the model was trained with"
        )
    expected = _check_shapes(config, vocab, shapes, directory)  # before anything is allocated
    tensors, meta = read_weights(directory / WEIGHTS, expected)  # the header checked again as read
    try:
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


def _check_layers(config: Any, shapes: dict[str, tuple[int, ...]], directory: Path) -> None:
    """Building a model takes time per layer even without memory: a config claiming more layers
    than the weights hold tensors is refused before anything is built."""
    for name in ("layers", "num_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > len(shapes):
            raise CheckpointError(
                f"{directory}: {CONFIG} says {name}={value}, but {WEIGHTS} holds only {len(shapes)} "
                "tensors; the config does not belong to these weights"
            )


def _load_vocab(directory: Path, shapes: dict[str, tuple[int, ...]]) -> Vocab:
    """``vocab.txt``, its size checked against the weights' shapes before it is parsed: a model
    over V tokens has a tensor with V rows (the embedding or the output layer)."""
    dims = {d for shape in shapes.values() for d in shape}
    try:
        return Vocab.load(directory / VOCAB, max_bytes=MAX_VOCAB_BYTES, allowed_sizes=dims)
    except ValueError as e:
        raise CheckpointError(str(e)) from None


class _SkipRandomInit(torch.overrides.TorchFunctionMode):
    """Random fills do nothing (shapes are all that is wanted): the first ``normal_`` on a meta
    tensor would otherwise import torch's compiler stack, a second per process."""

    SKIPPED = frozenset({"normal_", "uniform_", "erfinv_", "bernoulli_", "exponential_", "random_"})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) in self.SKIPPED:
            target = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(target, torch.Tensor):
                return target
        return func(*args, **kwargs)


def _check_shapes(
    config: Any, vocab: Vocab, shapes: dict[str, tuple[int, ...]], directory: Path
) -> Callable[[str, tuple[int, ...]], str | None]:
    """The tensors ``config`` and ``vocab`` describe (built on the meta device: no memory, no
    initialisation) must be exactly those in the weights' header, tied aliases aside. Returns
    the check :func:`read_weights` makes of each tensor (None: it belongs, else what was expected)."""
    kind = getattr(config, "kind", "?")
    try:
        with torch.device("meta"), _SkipRandomInit():
            expected = create_model(config, vocab).state_dict(keep_vars=True)
    except (ValueError, RuntimeError, TypeError) as e:
        raise CheckpointError(f"{directory}: {CONFIG} is not a valid {kind} config ({e})") from None
    groups: dict[int, list[str]] = {}
    for name, t in expected.items():
        groups.setdefault(id(t), []).append(name)
    unexpected = sorted(set(shapes) - set(expected))
    missing = [names[0] for names in groups.values() if not any(n in shapes for n in names)]
    wrong = [
        f"{n} {shapes[n]} instead of {tuple(expected[n].shape)}"
        for n in shapes
        if n in expected and shapes[n] != tuple(expected[n].shape)
    ]
    if unexpected or missing or wrong:
        parts = [f"shapes {', '.join(wrong[:3])}"] if wrong else []
        parts += [f"missing {missing[:3]}"] if missing else []
        parts += [f"unexpected {unexpected[:3]}"] if unexpected else []
        need = sum(math.prod(expected[names[0]].shape) for names in groups.values()) * 4
        raise CheckpointError(
            f"{directory}: the weights do not fit the {kind} config in {CONFIG} ({'; '.join(parts)}; "
            f"that config would need {need / 2**20:,.1f} MiB of float32 weights)"
        )
    want = {name: tuple(t.shape) for name, t in expected.items()}

    def check(name: str, shape: tuple[int, ...]) -> str | None:
        if name not in want:
            return "the model has no such tensor"
        return None if shape == want[name] else f"expected {want[name]}"

    return check


def _with_recorded_defaults(model: dict) -> dict:
    """A saved model config with the defaults it was trained under, where a default changed
    since: NS/RNS stack checkpoints written before the ``bottom`` field existed used the
    replaceable bottom (the paper's frozen bottom is the default only for new models)."""
    if model.get("kind") == "stack-lstm" and model.get("stack") in ("ns", "rns") and "bottom" not in model:
        return {**model, "bottom": "replaceable"}
    return model


# Reading safetensors files: decodekit parses the header itself (bounded), so that nothing a
# header claims is allocated or read before it is checked against the file and the model.

_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_CHUNK = 1 * MiB


@dataclass(frozen=True)
class _Entry:
    """One tensor of a safetensors header; ``begin``/``end``: absolute offsets in the file."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    begin: int
    end: int


@contextlib.contextmanager
def _open_weights(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading once known to be a regular file; one-line CheckpointErrors."""
    try:
        f = open_regular(path, path.name, error=CheckpointError)
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read ({e.strerror or e})") from None
    with f:
        yield f


def _parse_header(f: BinaryIO, path: Path) -> tuple[dict[str, _Entry], dict[str, str]]:
    """The tensors and metadata of a safetensors header, each entry checked (known dtype,
    non-negative shape, a byte range of exactly its size; the ranges tile the data region)."""
    corrupt = f"{path}: truncated or corrupt safetensors file"
    try:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        n = int.from_bytes(head, "little")
        if len(head) < 8 or 8 + n > size:
            raise CheckpointError(f"{corrupt} (a header of {n} bytes in a file of {size} bytes)")
        if n > MAX_HEADER_BYTES:
            raise CheckpointError(
                f"{path}: the safetensors header is {n / MiB:.1f} MiB, more than the "
                f"{MAX_HEADER_BYTES // MiB} MiB a decodekit file needs; refusing to read it"
            )
        raw = f.read(n)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{corrupt} (header: {str(e)[:100]})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{corrupt} (the header is not a JSON object)")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{corrupt} (__metadata__ must map names to strings)")
    if len(header) > MAX_TENSORS:
        raise CheckpointError(
            f"{path}: the header lists {len(header):,} tensors, more than the {MAX_TENSORS:,} a decodekit "
            "file holds; refusing to read it"
        )
    entries = {name: _entry(name, e, 8 + n, corrupt) for name, e in header.items()}
    at = 8 + n
    for name, e in sorted(entries.items(), key=lambda item: (item[1].begin, item[1].end)):
        if e.begin != at:
            raise CheckpointError(f"{corrupt} (tensor {name!r} starts at byte {e.begin - 8 - n} of the data)")
        at = e.end
    if at != size:
        raise CheckpointError(
            f"{corrupt} (the header describes {at - 8 - n:,} bytes of tensors, "
            f"the file holds {size - 8 - n:,})"
        )
    return entries, meta


def _entry(name: str, e: Any, start: int, corrupt: str) -> _Entry:
    ok = isinstance(e, dict) and isinstance(e.get("shape"), list) and isinstance(e.get("data_offsets"), list)
    shape, offsets = (e["shape"], e["data_offsets"]) if ok else ([], [])
    ints = all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in [*shape, *offsets])
    if not ok or not ints or len(offsets) != 2 or e.get("dtype") not in _DTYPES:
        raise CheckpointError(f"{corrupt} (tensor {name!r}: {str(e)[:100]})")
    dtype = _DTYPES[e["dtype"]]
    begin, end = offsets
    if end - begin != math.prod(shape) * dtype.itemsize:
        raise CheckpointError(
            f"{corrupt} (tensor {name!r} {tuple(shape)} {e['dtype']} needs "
            f"{math.prod(shape) * dtype.itemsize:,} bytes, its range holds {end - begin:,})"
        )
    return _Entry(dtype, tuple(shape), start + begin, start + end)


def _entry_prefix(name: str, e: _Entry) -> bytes:
    return f"{name}\0{e.dtype}\0{e.shape}\0".encode()  # as tensors_digest hashes it


def _file_digest(f: BinaryIO, entries: dict[str, _Entry]) -> str:
    """:func:`tensors_digest` of the tensors, computed from the file in pieces (nothing allocated)."""
    h, fd = hashlib.sha256(), f.fileno()
    for name in sorted(entries):
        e = entries[name]
        h.update(_entry_prefix(name, e))
        for at in range(e.begin, e.end, _CHUNK):
            piece = os.pread(fd, min(_CHUNK, e.end - at), at)
            if not piece:
                break  # shorter than its header says: the digest differs
            h.update(piece)
    return h.hexdigest()


def _read_tensors(f: BinaryIO, entries: dict[str, _Entry], path: Path) -> tuple[dict[str, torch.Tensor], str]:
    """The tensors (fresh, aligned CPU tensors) and the digest of what was read."""
    total = sum(e.end - e.begin for e in entries.values())
    h, fd, tensors = hashlib.sha256(), f.fileno(), {}
    for name in sorted(entries):
        e = entries[name]
        try:
            t = torch.empty(e.shape, dtype=e.dtype)
        except (RuntimeError, MemoryError) as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            raise CheckpointError(
                f"{path}: cannot allocate memory for its {total / MiB:,.1f} MiB of weights ({reason})"
            ) from None
        view = memoryview(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else memoryview(b"")
        done = 0
        while done < len(view):
            got = os.preadv(fd, [view[done : done + _CHUNK]], e.begin + done)
            if got <= 0:
                raise CheckpointError(f"{path}: truncated while it was read")
            done += got
        h.update(_entry_prefix(name, e))
        h.update(view)
        tensors[name] = t
    return tensors, h.hexdigest()
