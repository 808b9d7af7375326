"""Interpolated modified Kneser-Ney estimation (Chen & Goodman 1998, "An Empirical Study of
Smoothing Techniques for Language Modeling", TR-10-98, https://dash.harvard.edu/handle/1/25104739)::

    p_k(w | h) = (a(h w) - D_k(a(h w))) / sum_v a(h v)  +  gamma_k(h) p_{k-1}(w | h')
    gamma_k(h) = (D_k1 N_1(h .) + D_k2 N_2(h .) + D_k3+ N_3+(h .)) / sum_v a(h v)
    p_1(w)     = (a(w) - D_11(a(w))...) / sum_v a(v)  +  gamma_1 / V          (uniform at the bottom)

with h' = h minus its oldest word, a = raw counts at the highest order and continuation counts
N_1+(. g) below it (raw counts for n-grams that start with the sentence start), and per order
the three discounts D_k1, D_k2, D_k3+ from the counts of counts n_1..n_4 of a:
Y = n1 / (n1 + 2 n2), D1 = 1 - 2Y n2/n1, D2 = 2 - 3Y n3/n2, D3+ = 3 - 4Y n4/n3.

Vectorised with numpy: n-grams are counted with ``np.unique`` over integer keys (prefix index * V +
word), continuation counts with ``np.bincount``; the result is an
:class:`~decodekit.models.ngram.NgramLM` in back-off form (interpolated probabilities of the seen
n-grams, gamma as the back-off weights).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from decodekit.errors import DecodekitError
from decodekit.models.ngram import NgramLM
from decodekit.util.checks import at_least
from decodekit.vocab import Vocab, WordVocab

__all__ = ["FALLBACK_DISCOUNTS", "kn_discounts", "train_kneser_ney", "train_kneser_ney_on_sentences"]

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
"""Used (with a warning) when the counts of counts cannot give discounts in (0, r] (KenLM's
``--discount_fallback`` values)."""


def kn_discounts(adjusted: np.ndarray, order: int) -> tuple[float, float, float]:
    """Chen & Goodman's D1, D2, D3+ from the counts of counts n_1..n_4 of ``adjusted`` [M];
    falls back to :data:`FALLBACK_DISCOUNTS` (with a warning) when some D_r is not in (0, r]."""
    n = [int((adjusted == r).sum()) for r in (1, 2, 3, 4)]
    try:
        y = n[0] / (n[0] + 2 * n[1])
        d = (1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2])
    except ZeroDivisionError:
        d = (0.0, 0.0, 0.0)
    if all(0 < d[r] <= r + 1 for r in range(3)):
        return d
    warnings.warn(
        f"order {order}: counts of counts n1..n4 = {n} give no valid discounts; using {FALLBACK_DISCOUNTS}",
        stacklevel=3,
    )
    return FALLBACK_DISCOUNTS


def _count(s: np.ndarray, order: int, V: int, eos: int | None) -> list[dict[str, np.ndarray]]:
    """Distinct k-grams of ``s`` [T] (s[0] is the sentence start, never predicted) for k = 1..n:
    ``keys`` (prefix index * V + word, sorted), raw ``count``, ``suffix`` (index of the k-gram
    minus its first word in table k-1), ``first`` (its first word)."""
    pos = np.arange(len(s))
    if eos is None:
        max_order = np.minimum(pos + 1, order)
    else:
        before = np.concatenate([[-1], np.maximum.accumulate(np.where(s == eos, pos, -1))[:-1]])
        max_order = np.minimum(pos - before + 1, order)  # tokens since the last sentence start
    max_order[0] = 0
    tables = [{"keys": np.arange(V), "count": np.bincount(s[1:], minlength=V)}]
    index = s  # index of the k-gram ending at each position (valid where max_order >= k)
    for k in range(2, order + 1):
        t = pos[max_order >= k]
        keys, inv, count = np.unique(index[t - 1] * V + s[t], return_inverse=True, return_counts=True)
        suffix, first = np.empty(len(keys), np.int64), np.empty(len(keys), np.int64)
        suffix[inv], first[inv] = index[t], s[t - k + 1]
        tables.append({"keys": keys, "count": count, "suffix": suffix, "first": first})
        index = np.full(len(s), -1, np.int64)
        index[t] = inv
    return tables


def train_kneser_ney(
    ids: Sequence[int] | np.ndarray | torch.Tensor,
    order: int,
    vocab_size: int,
    eos_id: int | None,
    *,
    vocab: Vocab | None = None,
    discounts: Sequence[tuple[float, float, float]] | None = None,
) -> NgramLM:
    """Interpolated modified Kneser-Ney of order n on a token stream, in back-off form.

    Args:
        ids: the training stream [T]; sentences end with ``eos_id`` (a sentence start is assumed
            before the first token; without an eos the first token is context only).
        order: n >= 1.
        vocab_size: V; the bottom distribution is uniform over all V ids.
        eos_id: the sentence boundary (also the model's ``bos_id``), or None.
        vocab: optional vocabulary stored with the model.
        discounts: per order 1..n a (D1, D2, D3+) triple overriding the estimates.
    """
    at_least("n-gram order", order)
    s = np.asarray(torch.as_tensor(ids).view(-1).cpu().numpy() if not isinstance(ids, np.ndarray) else ids)
    s = s.astype(np.int64)
    if s.size and (s.min() < 0 or s.max() >= vocab_size):
        raise DecodekitError(f"token ids must be in [0, {vocab_size}), got {s.min()} .. {s.max()}")
    # the sentence start before the first token (never predicted); without an eos the first
    # token itself plays that part
    stream = np.concatenate([[eos_id], s]) if eos_id is not None else s
    if stream.size == 0:
        raise DecodekitError("cannot train an n-gram model on an empty stream")
    tables = _count(stream.astype(np.int64), order, vocab_size, eos_id)
    logp, logbo, prob, used = [], [], None, []
    for k in range(1, order + 1):
        tab = tables[k - 1]
        if k == order:
            a = tab["count"]
        else:
            a = np.bincount(tables[k]["suffix"], minlength=len(tab["keys"]))
            if k > 1 and eos_id is not None:
                a = np.where(tab["first"] == eos_id, tab["count"], a)
        d = discounts[k - 1] if discounts is not None else kn_discounts(a[a > 0], k)
        used.append(tuple(float(x) for x in d))
        d_of = np.array([0.0, *d])[np.minimum(a, 3)]  # [M_k]
        if k == 1:
            total = max(float(a.sum()), 1.0)
            gamma = d_of.sum() / total if a.sum() else 1.0
            prob = (a - d_of) / total + gamma / vocab_size
        else:
            prefix = tab["keys"] // vocab_size
            n_ctx = len(tables[k - 2]["keys"])
            total = np.bincount(prefix, weights=a, minlength=n_ctx)  # [M_{k-1}]
            gamma = np.divide(np.bincount(prefix, weights=d_of, minlength=n_ctx), total, where=total > 0,
                              out=np.ones(n_ctx))  # fmt: skip
            prob = (a - d_of) / total[prefix] + gamma[prefix] * prob[tab["suffix"]]
            logbo[-1] = np.log(gamma)
        logp.append(np.log(prob))
        logbo.append(np.zeros(len(prob)))
    model = NgramLM(
        [torch.from_numpy(t["keys"]) for t in tables],
        [torch.from_numpy(p) for p in logp],
        [torch.from_numpy(b) for b in logbo],
        vocab_size,
        eos_id,
        vocab=vocab,
    )
    model.discounts = used
    return model


def train_kneser_ney_on_sentences(
    sentences: Iterable[Sequence[str]], order: int, vocab: WordVocab | None = None, **kw
) -> NgramLM:
    """:func:`train_kneser_ney` on lists of words; ``<eos>`` is appended to each sentence; the
    vocabulary is built from the words when not given; ``kw`` go to :func:`train_kneser_ney`."""
    sentences = [list(s) for s in sentences]
    if vocab is None:
        vocab = WordVocab.build(w for s in sentences for w in s)
    ids = []
    for s in sentences:
        ids.extend(vocab.encode(" ".join(s), warn_unknown=False))
        ids.append(vocab.eos_id)
    return train_kneser_ney(ids, order, len(vocab), vocab.eos_id, vocab=vocab, **kw)
