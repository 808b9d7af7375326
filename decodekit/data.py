"""Corpora and truncated-BPTT batching.

* :func:`read_lines`: UTF-8 text lines; invalid bytes raise a ValueError naming file and line.
* :func:`load_corpus`: a directory with train/valid/test files, one sentence per line, an
  ``<eos>`` appended to every line (the Penn Treebank convention of Mikolov et al. 2011).
* :func:`load_brown`: the Brown corpus from NLTK's ``brown.zip`` (or its unpacked directory),
  tags stripped, Bengio et al.'s (2003) split: the first 800,000 words train, the next 200,000
  validation, the rest test; training words seen ``min_count - 1`` = 3 times or fewer -> ``<unk>``.
* :func:`batchify` / :func:`bptt_batches`: the stream cut into B parallel streams and chunks of
  T steps (inputs x_t, targets x_{t+1}); the trainer carries the hidden state across chunks and
  detaches it between them (truncated BPTT).

The vocabularies live in :mod:`decodekit.vocab` and are re-exported here.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from decodekit.errors import ConfigError
from decodekit.vocab import EOS, UNK, CharVocab, Vocab, WordVocab

__all__ = [
    "CharVocab",
    "Corpus",
    "Vocab",
    "WordVocab",
    "batchify",
    "bptt_batches",
    "brown_split",
    "encode_tokens",
    "eval_tokens",
    "find_splits",
    "is_brown",
    "load_brown",
    "load_corpus",
    "load_data",
    "read_lines",
    "read_tokens",
]

SPLIT_NAMES = {
    "train": ("ptb.train.txt", "train.txt"),
    "valid": ("ptb.valid.txt", "valid.txt"),
    "test": ("ptb.test.txt", "test.txt"),
}


@dataclass(frozen=True)
class Corpus:
    """A vocabulary and three id streams (1-D long tensors)."""

    vocab: Vocab
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor


def _decode_bytes(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{name}: line {line}: invalid UTF-8 (byte 0x{data[e.start]:02x})") from None


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file. Missing, empty or non-UTF-8 files raise ValueError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"data file not found: {path}")
    text = _decode_bytes(path.read_bytes(), str(path))
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise ConfigError(f"data file is empty: {path}")
    return lines


def read_tokens(path: str | Path, *, chars: bool = False) -> list[str]:
    """The token stream of a file: words (or characters) of every non-empty line, then ``<eos>``."""
    tokens: list[str] = []
    for line in read_lines(path):
        if chars:
            if line.strip():
                tokens.extend(line)
                tokens.append(EOS)
        else:
            words = line.split()
            if words:
                tokens.extend(words)
                tokens.append(EOS)
    return tokens


def encode_tokens(tokens: Sequence[str], vocab: Vocab) -> tuple[torch.Tensor, int]:
    """Token strings -> ids [T] (long); unknown tokens -> ``<unk>``. Returns (ids, #unknown).
    Raises ValueError when there are unknown tokens and the vocabulary has no ``<unk>``."""
    index, unk = vocab.index, vocab.unk_id
    ids = [index.get(t, -1) for t in tokens]
    n_unknown = ids.count(-1)
    if n_unknown:
        if unk is None:
            bad = [t for t in tokens if t not in index][:5]
            raise ConfigError(f"{n_unknown} tokens are not in the vocabulary (e.g. {bad}); it has no <unk>")
        ids = [unk if i < 0 else i for i in ids]
    return torch.tensor(ids, dtype=torch.long), n_unknown


def find_splits(directory: str | Path) -> dict[str, Path]:
    """The train/valid/test files of a corpus directory: ``ptb.{train,valid,test}.txt`` or
    ``{train,valid,test}.txt``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"data directory not found: {directory}")
    found = {}
    for split, names in SPLIT_NAMES.items():
        for name in names:
            if (directory / name).is_file():
                found[split] = directory / name
                break
        else:
            raise ConfigError(f"{directory}: no {split} file (looked for {', '.join(names)})")
    return found


def _build_vocab(train: list[str], chars: bool, min_count: int, max_size: int | None) -> Vocab:
    if chars:
        return CharVocab.build("".join(t for t in train if t != EOS))
    return WordVocab.build(train, min_count=min_count, max_size=max_size)


def load_corpus(
    directory: str | Path,
    *,
    vocab: Vocab | None = None,
    min_count: int = 1,
    max_size: int | None = None,
    chars: bool = False,
) -> Corpus:
    """A one-sentence-per-line corpus with ``<eos>`` after every line. The vocabulary (words, or
    characters if ``chars``) is built from the training file (specials first, then by frequency)
    unless ``vocab`` is given."""
    files = find_splits(directory)
    tokens = {split: read_tokens(path, chars=chars) for split, path in files.items()}
    if vocab is None:
        vocab = _build_vocab(tokens["train"], chars, min_count, max_size)
    streams = {split: encode_tokens(toks, vocab)[0] for split, toks in tokens.items()}
    return Corpus(vocab, streams["train"], streams["valid"], streams["test"])


def load_text_file(
    path: str | Path, *, chars: bool = False, min_count: int = 1, max_size: int | None = None
) -> Corpus:
    """One text file split by lines: the first 90% train, the next 5% validation, the last 5% test."""
    lines = [line for line in read_lines(path) if line.strip()]
    if len(lines) < 3:
        raise ConfigError(f"{path}: need at least 3 non-empty lines to split into train/valid/test")
    a, b = max(1, int(0.9 * len(lines))), max(2, int(0.95 * len(lines)))
    b = min(b, len(lines) - 1)
    parts = [lines[:a], lines[a:b], lines[b:]]
    toks = [[t for line in part for t in ([*line] if chars else line.split()) + [EOS]] for part in parts]
    vocab = _build_vocab(toks[0], chars, min_count, max_size)
    return Corpus(vocab, *(encode_tokens(t, vocab)[0] for t in toks))


_BROWN_FILE = re.compile(r"(?:^|/)c[a-r]\d\d$")


def _brown_texts(path: Path) -> list[tuple[str, bytes]]:
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = sorted(n for n in z.namelist() if _BROWN_FILE.search(n))
            return [(f"{path}:{n}", z.read(n)) for n in names]
    if path.is_dir():
        root = path / "brown" if (path / "brown").is_dir() else path
        files = sorted(p for p in root.iterdir() if _BROWN_FILE.search(p.name))
        return [(str(p), p.read_bytes()) for p in files]
    raise ConfigError(f"Brown corpus not found at {path} (expected NLTK's brown.zip or its directory)")


def brown_words(path: str | Path) -> list[str]:
    """The Brown word stream, files in name order (ca01 ... cr09), ``word/tag`` -> ``word``,
    one ``<eos>`` after every paragraph (blank-line separated block), Bengio et al.'s
    "text/paragraph separator marks"."""
    texts = _brown_texts(Path(path))
    if not texts:
        raise ConfigError(f"no Brown files (ca01 ... cr09) found in {path}")
    words: list[str] = []
    for name, data in texts:
        for block in re.split(r"\n\s*\n", _decode_bytes(data, name)):
            toks = [t.rsplit("/", 1)[0] for t in block.split()]
            if toks:
                words.extend(toks)
                words.append(EOS)
    return words


def load_brown(
    path: str | Path, *, train_words: int = 800_000, valid_words: int = 200_000, min_count: int = 4
) -> Corpus:
    """Brown with Bengio et al.'s (2003) split; words seen fewer than ``min_count`` times in the
    training part map to ``<unk>``."""
    train, valid, test = brown_split(path, train_words=train_words, valid_words=valid_words)
    vocab = WordVocab.build(train, min_count=min_count, eos=EOS, unk=UNK)
    return Corpus(vocab, *(encode_tokens(w, vocab)[0] for w in (train, valid, test)))


def brown_split(
    path: str | Path, *, train_words: int = 800_000, valid_words: int = 200_000
) -> tuple[list[str], list[str], list[str]]:
    """(train, valid, test) words of Bengio et al.'s split of :func:`brown_words`."""
    words = brown_words(path)
    if len(words) <= train_words + valid_words:
        raise ConfigError(
            f"Brown stream has {len(words)} words, fewer than train+valid={train_words + valid_words}"
        )
    end = train_words + valid_words
    return words[:train_words], words[train_words:end], words[end:]


def is_brown(path: str | Path) -> bool:
    """Whether ``path`` is NLTK's ``brown.zip`` or a directory holding its ``ca01`` ... files."""
    p = Path(path)
    return (p.is_file() and p.suffix == ".zip") or (
        p.is_dir()
        and any(_BROWN_FILE.search(x.name) for d in (p, p / "brown") if d.is_dir() for x in d.iterdir())
    )


def eval_tokens(path: str | Path, *, chars: bool = False) -> tuple[list[str], str]:
    """The tokens ``decodekit eval`` scores for ``--data path``, and what they are: the test
    part of Bengio's split for Brown, a corpus directory's test file, or the file itself."""
    p = Path(path)
    if is_brown(p):
        return brown_split(p)[2], f"{p} (Brown test split)"
    if p.is_dir():
        p = find_splits(p)["test"]
    return read_tokens(p, chars=chars), str(p)


def load_data(
    path: str | Path, *, min_count: int | None = None, max_size: int | None = None, chars: bool = False
) -> Corpus:
    """The corpus at ``path``: NLTK's Brown (``brown.zip`` or a directory of ``ca01`` ... files;
    ``min_count`` defaults to Bengio's 4), a directory with train/valid/test files (see
    :func:`find_splits`), or one text file (:func:`load_text_file`)."""
    p = Path(path)
    if is_brown(p):
        return load_brown(p, min_count=4 if min_count is None else min_count)
    if p.is_file():
        return load_text_file(p, chars=chars, min_count=min_count or 1, max_size=max_size)
    return load_corpus(p, min_count=min_count or 1, max_size=max_size, chars=chars)


def batchify(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Cut a stream [L] into B parallel streams [B, L // B] (row b is the b-th contiguous
    piece; the last L mod B tokens are dropped)."""
    if batch_size < 1:
        raise ConfigError(f"batch size must be >= 1, got {batch_size}")
    n = ids.numel() // batch_size
    if n < 2:
        raise ConfigError(f"a stream of {ids.numel()} tokens is too short for {batch_size} parallel streams")
    return ids[: n * batch_size].view(batch_size, n)


def bptt_batches(
    data: torch.Tensor, bptt: int, start: int = 0
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Chunks of a [B, L] stream: ``(x [B, t], y [B, t])`` with ``y = x`` shifted by one step,
    t = ``bptt`` (the last chunk may be shorter). ``start``: skip the first chunks (resume)."""
    if bptt < 1:
        raise ConfigError(f"bptt must be >= 1, got {bptt}")
    for i in range(start * bptt, data.shape[1] - 1, bptt):
        t = min(bptt, data.shape[1] - 1 - i)
        yield data[:, i : i + t], data[:, i + 1 : i + 1 + t]


def num_bptt_batches(data: torch.Tensor, bptt: int) -> int:
    """How many chunks :func:`bptt_batches` yields for ``data`` [B, L]."""
    return -(-(data.shape[1] - 1) // bptt)
