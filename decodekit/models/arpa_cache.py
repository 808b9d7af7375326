"""A binary cache beside an ARPA file (what KenLM's ``build_binary`` gives): the PTB 5-gram model
loads in a fraction of a second instead of ~10 s (figures: docs/benchmarks.md, "Kneser-Ney n-grams").

``FILE.arpa.decodekit.safetensors`` holds the :class:`~decodekit.models.ngram.NgramLM` tables
(safetensors: nothing is ever unpickled) and, in its header, the ARPA file's size, modification
time and SHA-256, the vocabulary and the warnings reading the text gave.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

import torch

from decodekit.errors import DecodekitError
from decodekit.models.arpa import read_arpa
from decodekit.models.ngram import NgramLM
from decodekit.util.files import atomic_write
from decodekit.vocab import Vocab, WordVocab

CACHE_SUFFIX = ".decodekit.safetensors"
CACHE_FORMAT = "decodekit-arpa-cache/1"


def cache_path(path: str | Path) -> Path:
    """Where :func:`load_arpa` keeps the binary form of ``path``: ``FILE.arpa.decodekit.safetensors``."""
    path = Path(path)
    return path.with_name(path.name + CACHE_SUFFIX)


def load_arpa(path: str | Path, vocab: Vocab | None = None, *, cache: bool = True) -> NgramLM:
    """:func:`read_arpa` through a binary cache kept beside the file (as KenLM's ``build_binary``).

    The first load reads the text and writes the tables to :func:`cache_path` (safetensors,
    written atomically: nothing is ever unpickled); later loads read that (the PTB 5-gram model:
    see docs/changelog.md). The cache records the ARPA file's size, modification time and SHA-256;
    a cache that does not match them, or that is damaged, is ignored and rewritten. A directory
    that cannot be written to (read-only, full, no permission), or a cache path that is not a
    regular file (a FIFO, a device: left alone), means loading without a cache (one warning).
    With ``vocab`` given (or ``cache=False``) this is :func:`read_arpa`.
    """
    path = Path(path)
    if vocab is not None or not cache:
        return read_arpa(path, vocab)
    st = os.stat(path)
    digest = _sha256(path)
    source = {"size": str(st.st_size), "mtime_ns": str(st.st_mtime_ns), "sha256": digest}
    binary = cache_path(path)
    model = _read_cache(binary, source) if binary.is_file() else None
    if model is not None:
        return model
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = read_arpa(path)
    for w in caught:  # again for the caller, and kept for later loads
        warnings.warn(str(w.message), w.category, stacklevel=2)
    notes = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    _write_cache(binary, model, {**source, "warnings": json.dumps(notes)})
    return model


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def _write_cache(binary: Path, model: NgramLM, source: dict[str, str]) -> None:
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    vocab = model.vocab
    assert vocab is not None  # read_arpa always sets one
    tensors = {}
    for k in range(model.order):
        tensors.update({f"keys.{k}": model.keys[k], f"logp.{k}": model.logp[k], f"logbo.{k}": model.logbo[k]})
    meta = {
        "format": CACHE_FORMAT,
        **source,
        "order": str(model.order),
        "vocab": json.dumps(
            {
                "tokens": vocab.tokens,
                "eos": None if vocab.eos_id is None else vocab.tokens[vocab.eos_id],
                "unk": None if vocab.unk_id is None else vocab.tokens[vocab.unk_id],
            }
        ),
    }
    tensors = {name: t.contiguous().cpu() for name, t in tensors.items()}
    try:  # a full or read-only disk fails inside safetensors: atomic_write raises it as the OSError
        atomic_write(binary, lambda tmp: save_file(tensors, str(tmp), metadata=meta), "the ARPA cache")
    except (OSError, SafetensorError, DecodekitError) as e:  # DecodekitError: the cache is a FIFO, ...
        reason = (e.strerror if isinstance(e, OSError) else None) or str(e)
        warnings.warn(
            f"cannot write the ARPA cache {binary} ({reason}); the next load reads the text again",
            stacklevel=3,
        )


def _read_cache(binary: Path, source: dict[str, str]) -> NgramLM | None:
    """The model in a cache that matches ``source`` (size, mtime, sha256), or None (stale, damaged)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(binary), framework="pt") as f:
            meta = f.metadata() or {}
            if meta.get("format") != CACHE_FORMAT or any(meta.get(k) != v for k, v in source.items()):
                return None
            names = [f"{t}.{k}" for t in ("keys", "logp", "logbo") for k in range(int(meta["order"]))]
            tables = [f.get_tensor(name) for name in names]
        info = json.loads(meta["vocab"])
        vocab = WordVocab(info["tokens"], eos=info["eos"], unk=info["unk"])
        n = len(tables) // 3
        keys, logp, logbo = tables[:n], tables[n : 2 * n], tables[2 * n :]
        if not _tables_ok(keys, logp, logbo, len(vocab)):
            return None
        model = NgramLM(keys, logp, logbo, len(vocab), vocab.eos_id, vocab=vocab)
        notes = json.loads(meta.get("warnings", "[]"))
    except (OSError, SafetensorError, ValueError, KeyError, TypeError, RuntimeError):
        return None  # DecodekitError is a ValueError
    for note in notes:
        warnings.warn(str(note), stacklevel=3)
    return model


def _tables_ok(keys: list[torch.Tensor], logp: list[torch.Tensor], logbo: list[torch.Tensor], V: int) -> bool:
    """The tables as :class:`NgramLM` needs them: 1-d, int64 keys strictly increasing within
    ``[0, M_{k-1} V)``, float32 log-probabilities of the same length; table 1 is ``arange(V)``."""
    if not keys or not torch.equal(keys[0], torch.arange(V)):
        return False
    for k, (key, p, b) in enumerate(zip(keys, logp, logbo)):
        if key.dtype != torch.int64 or p.dtype != torch.float32 or b.dtype != torch.float32:
            return False
        if key.dim() != 1 or not key.shape == p.shape == b.shape:
            return False
        if len(key) and (int(key[0]) < 0 or int(key[-1]) >= max(len(keys[k - 1]), 1) * V):
            return False
        if not bool((key[1:] > key[:-1]).all()):
            return False
    return True
