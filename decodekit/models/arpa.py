"""Read and write back-off n-gram models in the ARPA text format (Doug Paul's format, as written
by SRILM's ``ngram-count -lm`` and KenLM's ``lmplz``)::

    \\data\\
    ngram 1=V+1
    ngram 2=M2
    ...
    \\1-grams:
    log10 p(w)      w       [log10 bo(w)]
    \\2-grams:
    log10 p(w|v)    v w     [log10 bo(v w)]
    ...
    \\end\\

Semantics: ``p(w | h) = p(h w)`` if the n-gram ``h w`` is listed, else ``bo(h) p(w | h')`` with
``bo(h) = 1`` when ``h`` is not listed. ``<s>`` (sentence start: only first in an n-gram, its
unigram probability is the conventional -99) and ``</s>`` (only last) both map to decodekit's single
``eos`` id, the PTB convention (``bos_id == eos_id``).
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from decodekit.errors import DecodekitError
from decodekit.models.ngram import NgramLM
from decodekit.util.checks import collector_paused
from decodekit.util.files import atomic_write, read_bytes
from decodekit.vocab import EOS as DK_EOS
from decodekit.vocab import Vocab, WordVocab

__all__ = ["ArpaError", "read_arpa", "write_arpa"]

BOS, EOS = "<s>", "</s>"
LN10 = math.log(10.0)
_COUNT = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION = re.compile(r"^\\(\d+)-grams:$")


class ArpaError(DecodekitError):
    """A malformed ARPA file; the message starts with ``path:line:``."""


def _fmt(x: float) -> str:
    return "-99" if x == -math.inf else f"{x:.7g}"


def write_arpa(model: NgramLM, path: str | Path) -> None:
    """Write ``model`` (it needs a ``vocab``) as an ARPA file: counts header, one section per
    order in table order (context ids, then word id), log10 probabilities, and a log10 back-off
    weight on every n-gram that is the context of a longer one. Written atomically
    (:func:`decodekit.util.files.atomic_write`): a symlink's target is replaced, a device or FIFO refused."""
    vocab = model.vocab
    if vocab is None:
        raise DecodekitError("write_arpa needs a model with a vocabulary (model.vocab is None)")
    bad = [t for t in vocab.tokens if not t or any(c.isspace() for c in t) or t in (BOS, EOS)]
    if bad:
        raise DecodekitError(
            f"tokens with whitespace (or named <s>/</s>) cannot be written to ARPA: {bad[:5]}"
        )
    eos, V, n = model.eos_id, model.vocab_size, model.order
    first, last = list(vocab.tokens), list(vocab.tokens)
    if eos is not None:
        first[eos], last[eos] = BOS, EOS
    counts = [V + (eos is not None)] + [len(k) for k in model.keys[1:]]
    from tqdm import tqdm

    def write(tmp: Path) -> None:
        bar = tqdm(
            total=sum(counts), desc=f"writing {Path(path).name}", unit="ngram", unit_scale=True, disable=None
        )
        with bar, open(tmp, "w", encoding="utf-8") as f:
            f.write("\\data\\\n" + "".join(f"ngram {k}={c}\n" for k, c in enumerate(counts, 1)))
            for k in range(1, n + 1):
                f.write(f"\n\\{k}-grams:\n")
                logp = (model.logp[k - 1].double() / LN10).tolist()
                has_bo = (model.starts[k].diff() > 0).tolist() if k < n else [False] * len(logp)
                logbo = (model.logbo[k - 1].double() / LN10).tolist()
                if k == 1:
                    for i in range(V):
                        bo = f"\t{_fmt(logbo[i])}" if has_bo[i] else ""
                        if i == eos:
                            f.write(f"-99\t{BOS}{bo}\n{_fmt(logp[i])}\t{EOS}\n")
                        else:
                            f.write(f"{_fmt(logp[i])}\t{vocab.tokens[i]}{bo}\n")
                    bar.update(counts[0])
                    continue
                grams = model.ngram_ids(k).tolist()
                for start in range(0, len(grams), 1 << 16):
                    part = slice(start, start + (1 << 16))
                    for g, p, b, h in zip(grams[part], logp[part], logbo[part], has_bo[part]):
                        words = " ".join([first[g[0]], *(vocab.tokens[w] for w in g[1:-1]), last[g[-1]]])
                        f.write(f"{_fmt(p)}\t{words}\t{_fmt(b)}\n" if h else f"{_fmt(p)}\t{words}\n")
                    bar.update(len(grams[part]))
            f.write("\n\\end\\\n")

    atomic_write(Path(path), write, "the ARPA file")


def _parse(path: Path) -> tuple[list[int], list[tuple[int, list[list[str]]]]]:
    """The counts header and, per order, (line of the section header, [line, prob, words.., bo?])."""
    where = str(path)
    try:
        lines = read_bytes(path, "the ARPA file", error=ArpaError).decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ArpaError(f"{where}: cannot read ARPA file: {e}") from None
    i = next((j for j, line in enumerate(lines) if line.strip() == "\\data\\"), None)
    if i is None:
        raise ArpaError(f"{where}:1: no \\data\\ header: not an ARPA file")
    counts: list[int] = []
    i += 1
    while i < len(lines) and not lines[i].strip().startswith("\\"):
        line = lines[i].strip()
        if line:
            m = _COUNT.match(line)
            if not m or int(m.group(1)) != len(counts) + 1:
                want = f"'ngram {len(counts) + 1}=COUNT'"
                raise ArpaError(f"{where}:{i + 1}: expected {want} in the \\data\\ header, got {line!r}")
            counts.append(int(m.group(2)))
        i += 1
    if not counts:
        raise ArpaError(f"{where}:{i + 1}: the \\data\\ header lists no n-gram counts")
    sections: list[tuple[int, list[list[str]]]] = []
    marks = [j for j in range(i, len(lines)) if lines[j][:1] == "\\"] + [len(lines)]
    for k in range(1, len(counts) + 1):
        head = lines[i].strip() if i < len(lines) else "end of file"
        m = _SECTION.match(head)
        if not m or int(m.group(1)) != k:
            raise ArpaError(f"{where}:{i + 1}: expected '\\{k}-grams:', got {head!r}")
        end = next(j for j in marks if j > i)
        rows = [[str(j), *f] for j, f in zip(range(i + 2, end + 1), map(str.split, lines[i + 1 : end])) if f]
        widths = (k + 2, k + 3) if k < len(counts) else (k + 2,)
        bad = next((r for r in rows if len(r) not in widths), None)
        if bad is not None:
            raise ArpaError(
                f"{where}:{bad[0]}: a {k}-gram line needs a log10 probability, {k} words"
                f"{' and an optional back-off weight' if k < len(counts) else ''}: {lines[int(bad[0]) - 1]!r}"
            )
        if len(rows) != counts[k - 1]:
            raise ArpaError(
                f"{where}:{i + 1}: the header says ngram {k}={counts[k - 1]}"
                f" but the section has {len(rows)} lines"
            )
        sections.append((i + 1, rows))
        i = end
    if i >= len(lines) or lines[i].strip() != "\\end\\":
        got = repr(lines[i].strip()) if i < len(lines) else "end of file"
        raise ArpaError(f"{where}:{i + 1}: expected '\\end\\' after the last section, got {got}")
    return counts, sections


def _floats(rows: list[list[str]], col: int, where: str, default: float | None = None) -> np.ndarray:
    """Column ``col`` of the rows as natural logs [M] (``default`` where a row is shorter)."""
    fill = "0" if default is None else repr(default)
    try:  # fast path: numpy parses the strings
        out = np.array([r[col] if col < len(r) else fill for r in rows], dtype=np.float64)
        if not (np.isnan(out).any() or (out == math.inf).any()):
            return out * LN10
    except ValueError:
        pass
    for r in rows:  # slow path, to name the line
        try:
            x = float(r[col])
            if x != x or x == math.inf:
                raise ValueError
        except ValueError:
            raise ArpaError(f"{where}:{r[0]}: not a number: {r[col]!r}") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _logprobs(rows: list[list[str]], where: str) -> np.ndarray:
    """The log10 probability column as natural logs; a positive one (a probability above 1,
    which would make every perplexity computed with the model wrong) names its line."""
    out = _floats(rows, 1, where)
    bad = np.nonzero(out > 0)[0]
    if len(bad):
        r = rows[int(bad[0])]
        raise ArpaError(
            f"{where}:{r[0]}: log10 probability {r[1]} is positive (a probability above 1): "
            f"{' '.join(r[2:])!r}"
        )
    return out


def _vocab_of(rows: list[list[str]], vocab: Vocab | None, where: str) -> tuple[Vocab, dict[str, int]]:
    """The model vocabulary (given, or the unigrams less ``<s>``, ``</s>`` as eos) and token -> id."""
    names = [r[2] for r in rows]
    seen: dict[str, str] = {}
    for r in rows:
        if r[2] in seen:
            raise ArpaError(f"{where}:{r[0]}: unigram {r[2]!r} listed twice (first at line {seen[r[2]]})")
        seen[r[2]] = r[0]
    if vocab is None:
        if DK_EOS in seen and (BOS in seen or EOS in seen):
            raise ArpaError(
                f"{where}:{seen[DK_EOS]}: the word {DK_EOS} clashes with <s>/</s>, which are read as "
                f"{DK_EOS}; pass vocab= to map them"
            )
        tokens = [DK_EOS if t == EOS else t for t in names if t != BOS]
        tokens += [DK_EOS] if BOS in seen and EOS not in seen else []
        eos = DK_EOS if BOS in seen or EOS in seen else None
        vocab = WordVocab(tokens, eos=eos, unk="<unk>" if "<unk>" in seen else None)
    index = dict(vocab.index)
    if BOS in seen or EOS in seen:
        if vocab.eos_id is None:
            raise ArpaError(f"{where}: the file has <s>/</s> but the vocabulary has no eos token")
        index[BOS] = index[EOS] = vocab.eos_id
    unknown = [r for r in rows if r[2] not in index]
    if unknown:
        raise ArpaError(f"{where}:{unknown[0][0]}: unigram {unknown[0][2]!r} is not in the given vocabulary")
    covered = {index[t] for t in names}
    missing = [vocab.tokens[i] for i in range(len(vocab)) if i not in covered]
    if missing:
        raise ArpaError(f"{where}: vocabulary tokens with no unigram in the file: {missing[:5]}")
    return vocab, index


def _ids(rows: list[list[str]], k: int, index: dict[str, int], where: str) -> np.ndarray:
    """Token ids [M, k] of the k-gram lines; ``<s>`` only first, ``</s>`` only last."""
    marks = dict(index)
    if BOS in index:
        marks[BOS], marks[EOS] = -2, -3
    out = np.array([marks.get(w, -1) for r in rows for w in r[2 : 2 + k]], np.int64).reshape(-1, k)
    bad = (out == -1).any(1)
    if bad.any():
        r = rows[int(np.argmax(bad))]
        word = next(w for w in r[2 : 2 + k] if w not in marks)
        raise ArpaError(f"{where}:{r[0]}: word {word!r} is not a unigram")
    bad = (out[:, 1:] == -2).any(1) | (out[:, :-1] == -3).any(1)
    if bad.any():
        r = rows[int(np.argmax(bad))]
        raise ArpaError(
            f"{where}:{r[0]}: <s> may only come first and </s> only last: {' '.join(r[2 : 2 + k])}"
        )
    if BOS in index:
        out[out < 0] = index[BOS]
    return out


def read_arpa(path: str | Path, vocab: Vocab | None = None) -> NgramLM:
    """Read an ARPA back-off model (KenLM, SRILM, or :func:`write_arpa`) as an :class:`NgramLM`.

    Args:
        path: the ``.arpa`` text file.
        vocab: the vocabulary to map words onto (its tokens must be exactly the file's unigrams,
            ``<s>``/``</s>`` -> its eos); default: the unigrams in file order, ``<s>`` dropped and
            ``</s>`` renamed ``<eos>`` (decodekit's eos, so that text read with
            :func:`decodekit.data.read_tokens` encodes against it).

    Raises:
        ArpaError: malformed lines, counts that disagree with the sections, unknown words,
            or duplicate n-grams (the message starts with ``path:line:``).

    An n-gram whose context is not listed (pruned SRILM models) gets the context added, with the
    probability the back-off rule gives it and no back-off weight, which changes no probability
    (KenLM does the same); a warning says how many.
    """
    with _bar(f"reading {Path(path).name}", 2, "step") as bar:  # closed on errors too
        return _read(Path(path), vocab, bar)


def _read(path: Path, vocab: Vocab | None, bar: tqdm) -> NgramLM:
    where = str(path)
    with collector_paused():  # millions of small lists
        counts, sections = _parse(Path(path))
    bar.update(1)
    bar.total = len(counts) + 2
    vocab, index = _vocab_of(sections[0][1], vocab, where)
    V = len(vocab)
    logp1, logbo1 = np.full(V, -99.0 * LN10), np.zeros(V)
    rows = sections[0][1]
    ids1 = np.array([index[r[2]] for r in rows], np.int64)
    p, b = _logprobs(rows, where), _floats(rows, 3, where, 0.0)
    is_bos = np.array([r[2] == BOS for r in rows], bool)
    logp1[ids1[~is_bos]] = p[~is_bos]
    plain = ids1 != vocab.eos_id
    logbo1[ids1[plain]] = b[plain]  # the back-off of eos is <s>'s: </s> is never a context
    logbo1[ids1[is_bos]] = b[is_bos]
    orders = [(np.arange(V).reshape(-1, 1), logp1, logbo1, None)]
    for k in range(2, len(counts) + 1):
        rows = sections[k - 1][1]
        orders.append(
            (_ids(rows, k, index, where), _logprobs(rows, where), _floats(rows, k + 2, where, 0.0), rows)
        )
        bar.update(1)
    tables = _build(orders, V, vocab, where, added=None)
    if tables is None:  # some n-gram's context is not listed (SRILM pruning does this): fill the gaps
        added = _missing_contexts([o[0] for o in orders])
        example = next(" ".join(vocab.tokens[i] for i in a[0]) for a in added if len(a))
        warnings.warn(
            f"{where}: {sum(len(a) for a in added)} n-gram contexts are not listed (e.g. {example!r}); "
            "added with their back-off probabilities and no back-off weight (as KenLM does)",
            stacklevel=3,  # the caller of read_arpa
        )
        tables = _build(orders, V, vocab, where, added=added)
    bar.update(1)
    return tables


def _bar(desc: str, total: int, unit: str) -> tqdm:
    """A progress bar on stderr, drawn only when stderr is a terminal (tqdm's ``disable=None``)."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit != "step", disable=None, leave=False)


def _lookup(keys: list[np.ndarray], grams: np.ndarray, V: int) -> np.ndarray:
    """Index of each row of ``grams`` [M, L] in table L (``keys`` of tables 1..L), or -1."""
    idx = grams[:, 0].copy()
    for j in range(1, grams.shape[1]):
        if len(keys[j]) == 0:
            return np.full(len(idx), -1)
        key = idx * V + grams[:, j]
        pos = np.searchsorted(keys[j], key).clip(max=len(keys[j]) - 1)
        idx = np.where((idx >= 0) & (keys[j][pos] == key), pos, -1)
    return idx


def _build(orders, V: int, vocab: Vocab, where: str, added: list[np.ndarray] | None) -> NgramLM | None:
    """Sorted tables from per-order (ids [M, k], logp, logbo, rows); None if a context is missing
    and ``added`` (per order, the missing contexts [m, k] to insert) is not given."""
    keys, logp, logbo = [np.arange(V)], [orders[0][1]], [orders[0][2]]
    for k in range(2, len(orders) + 1):
        grams, p, b, rows = orders[k - 1]
        ctx = _lookup(keys, grams[:, :-1], V)
        if (ctx < 0).any():
            if added is None:
                return None
            r = rows[int(np.argmax(ctx < 0))]
            raise ArpaError(
                f"{where}:{r[0]}: the context of {' '.join(r[2 : 1 + k])!r} is not a {k - 1}-gram"
            )
        key = ctx * V + grams[:, -1]
        order = np.argsort(key, kind="stable")
        key, p, b = key[order], p[order], b[order]
        dup = np.nonzero(np.diff(key) == 0)[0]
        if len(dup):
            first, again = rows[order[dup[0]]], rows[order[dup[0] + 1]]
            raise ArpaError(
                f"{where}:{again[0]}: {k}-gram {' '.join(again[2 : 2 + k])!r} repeats line {first[0]}"
            )
        extra = added[k - 1] if added is not None else np.zeros((0, k), np.int64)
        if len(extra):
            lower = NgramLM(*(_as_t(x) for x in (keys + [key], logp + [p], logbo + [b])), V, vocab.eos_id)
            hist, target = torch.from_numpy(extra[:, :-1]), torch.from_numpy(extra[:, -1])
            extra_key = _lookup(keys, extra[:, :-1], V) * V + extra[:, -1]
            key = np.concatenate([key, extra_key])
            p = np.concatenate([p, lower.logprob(hist, target).double().numpy()])
            b = np.concatenate([b, np.zeros(len(extra))])
            order = np.argsort(key, kind="stable")
            key, p, b = key[order], p[order], b[order]
        keys.append(key)
        logp.append(p)
        logbo.append(b)
    return NgramLM(_as_t(keys), _as_t(logp), _as_t(logbo), V, vocab.eos_id, vocab=vocab)


def _as_t(arrays: list[np.ndarray]) -> list[torch.Tensor]:
    return [torch.from_numpy(np.ascontiguousarray(x)) for x in arrays]


def _missing_contexts(grams: list[np.ndarray]) -> list[np.ndarray]:
    """Per order k, the k-grams [m, k] that are contexts of listed or added (k+1)-grams but are not
    listed themselves, found from the highest order down."""
    added = [np.zeros((0, k), np.int64) for k in range(1, len(grams) + 1)]
    for k in range(len(grams), 2, -1):
        contexts = np.unique(np.concatenate([grams[k - 1], added[k - 1]])[:, :-1], axis=0)
        have = grams[k - 2]
        _, inv = np.unique(np.concatenate([have, contexts]), axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        added[k - 2] = contexts[~np.isin(inv[len(have) :], inv[: len(have)])]
    return added
