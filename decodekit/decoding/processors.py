"""Sampling processors: ``logprobs [N, V] -> processed log-weights [N, V]``.

Each keeps -inf for removed tokens; none renormalises (sampling uses softmax afterwards).
Order applied by :func:`process`: temperature, top-k, top-p, min-p, typical, epsilon, eta (as
transformers' ``generate`` builds its warpers); each filter reads the distribution the previous
ones left, renormalised (transformers applies each to the logits its predecessors left, and
softmax renormalises: the same sets).
Zero-probability (-inf) tokens are allowed anywhere: they stay -inf, never turn into NaN, and
each processor keeps at least the most probable token of a row that has a finite entry.
"""

from __future__ import annotations

import math

import torch

from decodekit.util.checks import at_least, real


def temperature(logprobs: torch.Tensor, t: float) -> torch.Tensor:
    """p_i ∝ exp(logprob_i / t). For a tiny t (``1e-40``) ``logprob / t`` overflows to -inf (or
    +inf) even for the most probable token; such rows are divided after subtracting their
    maximum, ``(logprob_i - max_j logprob_j) / t`` (the same distribution: the argmax tokens
    share the mass as t -> 0). Other rows are exactly ``logprob / t``. ``t = 0`` is that limit:
    the most probable tokens of each row share the mass (0), the others are -inf (greedy when the
    argmax is unique; the OpenAI API's and ``llm``'s temperature 0)."""
    if t == 1.0:
        return logprobs
    if t == 0:
        top = logprobs.amax(-1, keepdim=True)
        return torch.where(logprobs == top, torch.zeros_like(logprobs), float("-inf"))
    out = logprobs / t
    if t < 1.0:  # no host decision: the rows that overflowed are replaced where they are
        top = logprobs.amax(-1, keepdim=True)  # [N, 1]
        overflowed = ~out.amax(-1, keepdim=True).isfinite() & top.isfinite()
        gap = logprobs - top.where(top.isfinite(), 0.0)  # <= 0; 0 at the argmax, even where t
        out = torch.where(overflowed, torch.where(gap == 0, gap, gap / t), out)  # underflows to 0
    return out


def top_k(logprobs: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k most probable tokens of each row (ties at the k-th value are all kept)."""
    if k >= logprobs.shape[-1]:
        return logprobs
    kth = logprobs.topk(k, dim=-1).values[:, -1:]  # [N, 1]
    return logprobs.masked_fill(logprobs < kth, float("-inf"))


def top_p(logprobs: torch.Tensor, p: float, first: int = 256) -> torch.Tensor:
    """Nucleus: keep the smallest set of most probable tokens whose mass reaches p
    (the most probable token is always kept).

    Exact and usually cheap: the ``first`` most probable tokens of each row are found with a
    partial top-k; only rows whose nucleus is larger than that are fully sorted."""
    if p >= 1.0:
        return logprobs
    vocab = logprobs.shape[-1]
    k = min(first, vocab)
    top_lp, order = logprobs.topk(k, dim=-1)  # [N, k], most probable first
    probs = top_lp.exp()
    total = torch.logsumexp(logprobs, dim=-1, keepdim=True).exp()  # 1 for normalised rows
    mass_before = (probs.cumsum(-1) - probs) / total  # mass of strictly more probable tokens
    if k < vocab:
        unresolved = mass_before[:, -1] + probs[:, -1] / total[:, 0] < p  # nucleus longer than k
        if bool(unresolved.any()):
            rows = unresolved.nonzero()[:, 0]
            out = logprobs.clone()
            out[rows] = top_p(logprobs[rows], p, first=vocab)
            done = (~unresolved).nonzero()[:, 0]
            if done.numel():
                out[done] = top_p(logprobs[done], p, first=first)
            return out
    keep_sorted = mass_before < p
    keep = torch.zeros_like(logprobs, dtype=torch.bool).scatter(-1, order, keep_sorted)
    return logprobs.masked_fill(~keep, float("-inf"))


def min_p(logprobs: torch.Tensor, p: float) -> torch.Tensor:
    """Keep tokens with probability >= p * (probability of the most probable token)."""
    threshold = logprobs.max(dim=-1, keepdim=True).values + torch.log(torch.tensor(p))
    return logprobs.masked_fill(logprobs < threshold, float("-inf"))


def typical_p(logprobs: torch.Tensor, mass: float) -> torch.Tensor:
    """Locally typical sampling (Meister et al. 2023; transformers' ``TypicalLogitsWarper``):
    with entropy ``H = -sum_i p_i log p_i``, rank tokens by ``|-log p_i - H|`` (closest to the
    expected information first) and keep the shortest prefix of that ranking whose mass reaches
    ``mass`` (ties at its last score all kept; the first token always). A full sort per row, as
    transformers does (the ranking is not by probability, so no partial top-k shortcut)."""
    probs = logprobs.exp()
    entropy = -(logprobs * probs).nansum(-1, keepdim=True)  # -inf * 0: nan, dropped
    surprise = (-logprobs - entropy).abs()  # [N, V]; +inf for -inf tokens
    sorted_surprise, order = surprise.sort(dim=-1)
    cumulative = probs.gather(-1, order).cumsum(-1)
    last = (cumulative < mass).sum(-1, keepdim=True).clamp(max=logprobs.shape[-1] - 1)  # [N, 1]
    threshold = sorted_surprise.gather(-1, last)  # [N, 1]
    return logprobs.masked_fill(surprise > threshold, float("-inf"))


def epsilon_cutoff(logprobs: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Truncation sampling (Hewitt et al. 2022; transformers' ``EpsilonLogitsWarper``): keep
    tokens with ``p_i >= epsilon``, and the most probable token always."""
    top = logprobs.amax(-1, keepdim=True)
    return logprobs.masked_fill((logprobs < math.log(epsilon)) & (logprobs < top), float("-inf"))


def eta_cutoff(logprobs: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Eta sampling (Hewitt et al. 2022; transformers' ``EtaLogitsWarper``): keep tokens with
    ``p_i >= eta = min(epsilon, sqrt(epsilon) * exp(-H))``, H the row's entropy in nats, and
    the most probable token always."""
    entropy = -(logprobs * logprobs.exp()).nansum(-1, keepdim=True)  # [N, 1]
    # p < eta as log p < log eta: log(min(e, sqrt(e) exp(-H))) = min(log e, log(e) / 2 - H)
    log_eta = torch.clamp(0.5 * math.log(epsilon) - entropy, max=math.log(epsilon))
    top = logprobs.amax(-1, keepdim=True)
    return logprobs.masked_fill((logprobs < log_eta) & (logprobs < top), float("-inf"))


def log_normalise(weights: torch.Tensor) -> torch.Tensor:
    """``log_softmax`` over the last axis, except that a row with no finite entry stays all -inf
    instead of becoming NaN (``-inf - -inf``); rows with some -inf entries are exact."""
    empty = ~(weights > float("-inf")).any(-1, keepdim=True)  # [N, 1]
    return torch.where(empty, weights, torch.log_softmax(weights, -1))


def process(
    logprobs: torch.Tensor,
    *,
    t: float = 1.0,
    k: int | None = None,
    p: float | None = None,
    minp: float | None = None,
    typical: float | None = None,
    epsilon: float | None = None,
    eta: float | None = None,
) -> torch.Tensor:
    """Apply temperature, top-k, top-p, min-p, typical-p, epsilon and eta cutoffs in that order
    (transformers' order; None = off, and transformers' defaults: t 1, typical 1, the cutoffs 0),
    each filter on the renormalised result of the previous ones."""
    out = temperature(logprobs, t)
    if k is not None:
        out = top_k(out, k)
    if p is not None:
        out = top_p(log_normalise(out), p)
    if minp is not None:
        out = min_p(log_normalise(out), minp)
    # transformers' off values (its defaults) are accepted: typical_p 1, the cutoffs 0
    cutoffs = ((typical_p, typical, 1.0), (epsilon_cutoff, epsilon, 0.0), (eta_cutoff, eta, 0.0))
    for keep, value, off in cutoffs:
        if value is not None and value != off:
            out = keep(log_normalise(out), value)
    return out


def process_settings(logprobs: torch.Tensor, settings) -> torch.Tensor:
    """:func:`process` with the sampler fields of ``settings`` (a ``GenerationConfig`` or the
    decoders' ``Settings``: temperature, top_k, top_p, min_p, typical_p, epsilon_cutoff,
    eta_cutoff), the one place that reads them, so every sampler filters alike."""
    s = settings
    return process(
        logprobs,
        t=s.temperature,
        k=s.top_k,
        p=s.top_p,
        minp=s.min_p,
        typical=s.typical_p,
        epsilon=s.epsilon_cutoff,
        eta=s.eta_cutoff,
    )


def validate(
    t: float,
    k: int | None,
    p: float | None,
    minp: float | None,
    typical: float | None = None,
    epsilon: float | None = None,
    eta: float | None = None,
) -> None:
    """Raise :class:`~decodekit.errors.ConfigError` for out-of-range sampling parameters
    (typical_p in (0, 1], the cutoffs in [0, 1): transformers' ranges with its off values)."""
    real("temperature", t, 0.0), at_least("top_k", k, optional=True)
    real("top_p", p, 0.0, 1.0, open_low=True, optional=True), real("min_p", minp, 0.0, 1.0, optional=True)
    real("typical_p", typical, 0.0, 1.0, open_low=True, optional=True)
    real("epsilon_cutoff", epsilon, 0.0, 1.0, open_high=True, optional=True)
    real("eta_cutoff", eta, 0.0, 1.0, open_high=True, optional=True)
