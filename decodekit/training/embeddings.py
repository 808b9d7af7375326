"""Initialising a model's input embeddings from a word2vec text file (Liza & Grzes 2018 start
from skip-gram vectors).

Format (word2vec ``-binary 0`` / gensim ``save_word2vec_format(binary=False)``): a header line
``<count> <dim>``, then ``count`` lines ``<word> <v_1> ... <v_dim>`` separated by spaces. Only
the lines whose word is in the vocabulary are parsed into numbers; rows of vocabulary words
absent from the file keep their random initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn


@dataclass(frozen=True)
class EmbeddingStats:
    """found: vocabulary words given a vector; missing: vocabulary words not in the file
    (first 10 in ``missing_examples``); file_words: vectors in the file; dim: their size."""

    found: int
    missing: int
    file_words: int
    dim: int
    missing_examples: tuple[str, ...]


def _header(line: str, path: Path) -> tuple[int, int]:
    parts = line.split()
    try:
        count, dim = (int(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"{path}: line 1 must be the word2vec header '<count> <dim>', got {line.strip()[:60]!r}"
        ) from None
    if count < 0 or dim < 1:
        raise ValueError(f"{path}: header gives count={count}, dim={dim}; need count >= 0, dim >= 1")
    return count, dim


def read_word2vec_text(path: str | Path, keep: set[str] | None = None) -> tuple[list[str], torch.Tensor, int]:
    """Read a word2vec text file. Returns (words, vectors [M, dim] float32, lines in the file),
    keeping only words in ``keep`` (all when None). Raises ValueError on a missing, binary or
    malformed file (with its line number), a line count that differs from the header, or a
    repeated word."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"embedding file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text (binary word2vec files are not supported)") from None
    lines = text.splitlines()
    if not lines:
        raise ValueError(f"{path}: empty embedding file")
    count, dim = _header(lines[0], path)
    words: list[str] = []
    rows: list[list[float]] = []
    seen: set[str] = set()
    body = [(n, line) for n, line in enumerate(lines[1:], start=2) if line.strip()]
    for n, line in body:
        parts = line.rstrip().split(" ")
        word = parts[0]
        if len(parts) != dim + 1:
            raise ValueError(
                f"{path}: line {n}: expected a word and {dim} numbers, got {len(parts) - 1} fields"
            )
        if word in seen:
            raise ValueError(f"{path}: line {n}: word {word!r} appears twice")
        seen.add(word)
        if keep is not None and word not in keep:
            continue
        try:
            rows.append([float(x) for x in parts[1:]])
        except ValueError:
            raise ValueError(f"{path}: line {n}: non-numeric value in the vector of {word!r}") from None
        words.append(word)
    if len(body) != count:
        raise ValueError(f"{path}: header says {count} vectors but the file has {len(body)}")
    vectors = torch.tensor(rows, dtype=torch.float32).view(len(rows), dim)
    if not torch.isfinite(vectors).all():
        raise ValueError(f"{path}: vectors contain NaN or infinity")
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
        raise ValueError(f"{type(model).__name__} has no input embedding table to initialise")
    head = getattr(model, "head", None)
    if freeze and head is not None and head.weight is emb.weight:
        raise ValueError("cannot freeze embeddings tied to the output layer (--tie); untie or do not freeze")
    words, vectors, total = read_word2vec_text(path, keep=set(vocab.tokens))
    if vectors.shape[1] != emb.embedding_dim:
        raise ValueError(
            f"{path}: vectors have dimension {vectors.shape[1]}, "
            f"but the model's embedding has {emb.embedding_dim}"
        )
    if not words:
        raise ValueError(
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
