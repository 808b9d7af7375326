"""Minimum Bayes risk decoding (Kumar and Byrne 2004; with samples as the evidence, Eikema and
Aziz 2020, arXiv:2005.10283): among n candidates, the one of highest expected utility against
the others.

For candidates h_1..h_n (samples, or any n-best list) and a utility u,

    E(h_i) = sum_{j != i} w_j u(h_i, h_j) / sum_{j != i} w_j

with w_j = 1 (samples: the Monte Carlo estimate of the expected utility under the model) or, with
``weighted=True``, ``w_j = exp(logprob_j)`` (an n-best list, whose members are not samples). The
strategy ``mbr`` draws ``num_samples`` samples per prompt (:data:`~.rowwise.SAMPLE`) and returns the
``n_best`` of highest E, best first, with ``score`` = E. Built-in utilities (:data:`UTILITIES`):
``exact`` (1 when the token ids are equal), ``f1`` (token-level F1 of the two bags of token ids, as
SQuAD's), ``chrf`` (chrF of the texts, sacrebleu's ``sentence_chrf`` / 100: the optional extra
``decodekit[mbr]``); or any ``u(a: Hypothesis, b: Hypothesis) -> float``.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Sequence

from decodekit.decoding.rowwise import SAMPLE, check_sampling
from decodekit.errors import ConfigError
from decodekit.outputs import Hypothesis
from decodekit.util.checks import at_least, require, shown

Utility = Callable[[Hypothesis, Hypothesis], float]


def exact_match(a: Hypothesis, b: Hypothesis) -> float:
    """1.0 when ``a`` and ``b`` have the same token ids, else 0.0."""
    return float(a.tokens == b.tokens)


def token_f1(a: Hypothesis, b: Hypothesis) -> float:
    """F1 of the bags of token ids: ``2 P R / (P + R)`` with ``overlap`` the size of the bags'
    intersection, ``P = overlap / len(a)``, ``R = overlap / len(b)``; 1.0 for two empty ones."""
    if not a.tokens and not b.tokens:
        return 1.0
    overlap = sum((Counter(a.tokens) & Counter(b.tokens)).values())
    return 2.0 * overlap / (len(a.tokens) + len(b.tokens))


def chrf(a: Hypothesis, b: Hypothesis) -> float:
    """chrF (Popovic 2015) of ``a``'s text against ``b``'s, by sacrebleu, in [0, 1]."""
    try:
        import sacrebleu
    except ImportError:
        raise ConfigError(
            "mbr_utility 'chrf' needs sacrebleu (pip install 'decodekit[mbr]'); exact and f1 need nothing"
        ) from None
    require(a.text is not None and b.text is not None, "mbr_utility 'chrf' needs hypotheses with text")
    return sacrebleu.sentence_chrf(a.text, [b.text]).score / 100.0


UTILITIES: dict[str, Utility] = {"exact": exact_match, "f1": token_f1, "chrf": chrf}


def utility_of(utility: str | Utility) -> Utility:
    """A utility by name (:data:`UTILITIES`) or the callable itself; ConfigError otherwise."""
    if callable(utility):
        return utility
    require(
        isinstance(utility, str) and utility in UTILITIES,
        f"unknown mbr_utility {shown(utility)}; choose one of {', '.join(UTILITIES)} or pass a function",
    )
    return UTILITIES[utility]


def minimum_bayes_risk(
    hypotheses: Sequence[Hypothesis], utility: str | Utility = "f1", *, weighted: bool = False
) -> list[Hypothesis]:
    """``hypotheses`` ranked by expected utility against the others (module docstring), best first
    (ties in their order), each with ``score`` = its expected utility (0.0 when it is alone)."""
    u, hyps = utility_of(utility), list(hypotheses)
    if weighted:  # exp(logprob - max): the same ratios, no underflow
        top = max((h.logprob for h in hyps), default=0.0)
        weights = [math.exp(h.logprob - top) for h in hyps]
    else:
        weights = [1.0] * len(hyps)
    ranked = []
    for i, h in enumerate(hyps):
        total = sum(w for j, w in enumerate(weights) if j != i)
        gain = sum(weights[j] * u(h, g) for j, g in enumerate(hyps) if j != i)
        ranked.append(dataclasses.replace(h, score=gain / total if total > 0 else 0.0))
    order = sorted(range(len(ranked)), key=lambda i: -ranked[i].score)
    return [ranked[i] for i in order]


def _rank(out, settings):
    """Each prompt's samples -> its ``n_best`` of highest expected utility."""
    single = not out or not isinstance(out[0], list)
    batch = [out] if single else out
    done = [minimum_bayes_risk(hyps, settings.mbr_utility)[: settings.n_best] for hyps in batch]
    return done[0] if single else done


def _check(settings) -> None:
    check_sampling(settings), at_least("n_best", settings.n_best), utility_of(settings.mbr_utility)


MBR = dataclasses.replace(
    SAMPLE,
    name="mbr",
    what="minimum Bayes risk decoding",
    reads=(*SAMPLE.reads, "n_best", "mbr_utility"),
    returns="n_best",
    transformers=None,
    check=_check,
    finish=_rank,
)
