"""Initialising a model's input embeddings from a word2vec text file (Liza & Grzes 2018 start
from skip-gram vectors).

Format (word2vec ``-binary 0`` / gensim ``save_word2vec_format(binary=False)``): a header line
``<count> <dim>``, then ``count`` lines ``<word> <v_1> ... <v_dim>`` separated by spaces. Only
the lines whose word is in the vocabulary are parsed into numbers; rows of vocabulary words
absent from the file keep their random initialisation.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch
from torch import nn

from decodekit.errors import ConfigError
from decodekit.util.files import bounded_lines, open_regular


@dataclass(frozen=True)
class EmbeddingStats:
    """found: vocabulary words given a vector; missing: vocabulary words not in the file
    (first 10 in ``missing_examples``); file_words: vectors in the file; dim: their size."""

    found: int
    missing: int
    file_words: int
    dim: int
    missing_examples: tuple[str, ...]


MAX_DIM = 65_536  # word2vec vectors have hundreds of components; a header beyond this is not one
_NUMBER_BYTES, _WORD_BYTES = 64, 64 * 1024  # the longest line read: a word and dim numbers


def _header(line: str, path: Path, expected_dim: int | None) -> tuple[int, int]:
    parts = line.split()
    try:
        count, dim = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(
            f"{path}: line 1 must be the word2vec header '<count> <dim>', got {line.strip()[:60]!r}"
        ) from None
    if count < 0 or dim < 1:
        raise ConfigError(f"{path}: header gives count={count}, dim={dim}; need count >= 0, dim >= 1")
    if expected_dim is not None and dim != expected_dim:
        raise ConfigError(
            f"{path}: vectors have dimension {dim}, but the model's embedding has {expected_dim}"
        )
    if dim > MAX_DIM:
        raise ConfigError(f"{path}: header gives dim={dim:,}, more than the {MAX_DIM:,} this reader accepts")
    return count, dim


def _text(line: bytes | None, n: int, path: Path, limit: int) -> str:
    if line is None:
        raise ConfigError(f"{path}: line {n} is longer than {limit:,} bytes (a word and its numbers)")
    try:
        return line.decode("utf-8-sig" if n == 1 else "utf-8")
    except UnicodeDecodeError:
        raise ConfigError(
            f"{path}: line {n} is not UTF-8 text (binary word2vec files are not supported)"
        ) from None


def read_word2vec_text(
    path: str | Path, keep: set[str] | None = None, *, dim: int | None = None
) -> tuple[list[str], torch.Tensor, int]:
    """Read a word2vec text file. Returns (words, vectors [M, dim] float32, lines in the file),
    keeping only words in ``keep`` (all when None).

    The file is read a line at a time (a regular file only: a FIFO or a device is refused), the
    header first: a ``dim`` other than the one given (the model's), or above :data:`MAX_DIM`, is
    refused before any vector is read; only the kept vectors are held (4 bytes a number).

    Raises ValueError on a missing, binary or malformed file (with its line number), a line count
    that differs from the header, a repeated word, or a NaN or infinite value."""
    path = Path(path)
    try:
        f = open_regular(path, "embedding file")
    except FileNotFoundError:
        raise ConfigError(f"embedding file not found: {path}") from None
    except OSError as e:
        raise ConfigError(f"cannot read embedding file {path}: {e.strerror or e}") from None
    try:
        with f:
            return _read(f, path, keep, dim)
    except OSError as e:
        raise ConfigError(f"cannot read embedding file {path}: {e.strerror or e}") from None


def _read(f: BinaryIO, path: Path, keep: set[str] | None, expected_dim: int | None):
    first = next(bounded_lines(f, _WORD_BYTES), False)  # the header line only
    if first is False:
        raise ConfigError(f"{path}: empty embedding file")
    count, dim = _header(_text(first, 1, path, _WORD_BYTES), path, expected_dim)
    limit = _WORD_BYTES + _NUMBER_BYTES * dim
    lines = bounded_lines(f, limit)
    words: list[str] = []
    values, numbers = array("f"), []  # the kept vectors, and their line numbers
    seen: set[str] = set()
    body = 0
    for n, raw in enumerate(lines, start=2):
        line = _text(raw, n, path, limit)
        if not line.strip():
            continue
        body += 1
        parts = line.rstrip().split(" ")
        word = parts[0]
        if len(parts) != dim + 1:
            raise ConfigError(
                f"{path}: line {n}: expected a word and {dim} numbers, got {len(parts) - 1} fields"
            )
        if word in seen:
            raise ConfigError(f"{path}: line {n}: word {word!r} appears twice")
        seen.add(word)
        if keep is not None and word not in keep:
            continue
        try:
            values.extend(float(x) for x in parts[1:])
        except ValueError:
            raise ConfigError(f"{path}: line {n}: non-numeric value in the vector of {word!r}") from None
        words.append(word)
        numbers.append(n)
    if body != count:
        raise ConfigError(f"{path}: header says {count} vectors but the file has {body}")
    vectors = torch.frombuffer(values, dtype=torch.float32).clone() if words else torch.empty(0)
    vectors = vectors.view(len(words), dim)
    bad = (~torch.isfinite(vectors).all(dim=1)).nonzero()
    if len(bad):
        row = int(bad[0])
        raise ConfigError(
            f"{path}: line {numbers[row]}: the vector of {words[row]!r} contains NaN or infinity"
            " (or a number too large for float32)"
        )
    return words, vectors, count


def load_embeddings(model: nn.Module, path: str | Path, *, freeze: bool = False) -> EmbeddingStats:
    """Copy the vectors of ``path`` into ``model.embedding.weight`` rows of the vocabulary words
    they name; optionally freeze the embedding (``requires_grad = False``).

    Raises ValueError if the model has no ``embedding``/``vocab``, the dimensions differ, no
    vocabulary word is in the file, or ``freeze`` is asked of an embedding tied to the output layer.
    """
    emb = getattr(model, "embedding", None)
    vocab = getattr(model, "vocab", None)
    if not isinstance(emb, nn.Embedding) or vocab is None:
        raise ConfigError(f"{type(model).__name__} has no input embedding table to initialise")
    head = getattr(model, "head", None)
    if freeze and head is not None and head.weight is emb.weight:
        raise ConfigError(
            "cannot freeze embeddings tied to the output layer (tie=True): untie them or do not freeze"
        )
    words, vectors, total = read_word2vec_text(path, keep=set(vocab.tokens), dim=emb.embedding_dim)
    if not words:
        raise ConfigError(
            f"{path}: none of the {total} words is in the model's vocabulary ({len(vocab)} words)"
        )
    ids = torch.tensor([vocab.index[w] for w in words], dtype=torch.long, device=emb.weight.device)
    with torch.no_grad():
        emb.weight.index_copy_(0, ids, vectors.to(emb.weight))
    if freeze:
        emb.weight.requires_grad_(False)
    found = set(words)
    missing = [t for t in vocab.tokens if t not in found]
    return EmbeddingStats(len(words), len(missing), total, emb.embedding_dim, tuple(missing[:10]))
