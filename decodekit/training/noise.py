"""The noise (proposal) distribution of NCE and sampled softmax: unigram counts to a power.

    P_n(w) = (c_w + s)^alpha / sum_v (c_v + s)^alpha     (alpha = 1: unigram, alpha = 0: uniform)

with c_w the count of word w in the training stream and s an optional pseudo-count
(``smoothing``, default 0). ``0^0 = 1``, so alpha = 0 is uniform over the whole vocabulary, seen
or not. For alpha > 0 and s = 0 a word never seen in training has P_n(w) = 0: it is never a
noise sample, so NCE never pushes its score down, and the full softmax used for evaluation can
then give it a large share of the mass (:func:`decodekit.training.sampled.make_loss` warns; use
s > 0 or alpha = 0). Such a word is never a training target either (targets come from the same
stream); :meth:`NoiseDistribution.check_targets` refuses a target with zero mass (its NCE
posterior would be degenerate: log(k P_n(w)) = -inf).

Samples are drawn with replacement (``torch.multinomial``, or ``torch.randint`` when uniform),
from the global torch generator unless a ``generator`` is given, so a seeded (or resumed) run
draws the same noise.
"""

from __future__ import annotations

import math

import torch

from decodekit.errors import ConfigError


def check_noise_options(k: int, alpha: float, vocab_size: int) -> None:
    """Raise ValueError unless 1 <= k <= V and 0 <= alpha <= 1."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= vocab_size:
        raise ConfigError(f"noise samples k must be an integer in [1, V={vocab_size}], got {k!r}")
    if not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"noise exponent alpha must be in [0, 1], got {alpha!r}")


class NoiseDistribution:
    """A fixed distribution over the V word ids with cheap sampling and log-probabilities.

    Attributes:
        probs: [V] float32, sums to 1.
        log_probs: [V] float32, -inf where probs is 0.
        alpha: the exponent it was built with (None when built from explicit probabilities).
    """

    def __init__(self, probs: torch.Tensor, *, alpha: float | None = None) -> None:
        probs = torch.as_tensor(probs, dtype=torch.float64)
        if probs.dim() != 1 or probs.numel() == 0:
            raise ConfigError(
                f"noise probabilities must be a non-empty [V] vector, got shape {tuple(probs.shape)}"
            )
        if not torch.isfinite(probs).all() or (probs < 0).any():
            bad = torch.nonzero(~torch.isfinite(probs) | (probs < 0)).flatten()[:5].tolist()
            raise ConfigError(f"noise probabilities must be finite and >= 0; bad ids {bad}")
        total = probs.sum().item()
        if total <= 0:
            raise ConfigError("noise distribution has no mass (all probabilities are 0)")
        p = probs / total
        self.probs = p.float()
        self.log_probs = p.log().float()
        self.alpha = alpha
        self.uniform = bool((p == p[0]).all())
        self.full_support = bool((p > 0).all())

    @classmethod
    def from_counts(
        cls, counts: torch.Tensor, alpha: float = 1.0, smoothing: float = 0.0
    ) -> NoiseDistribution:
        """P_n(w) = (c_w + smoothing)^alpha / sum_v (c_v + smoothing)^alpha, c = counts [V] >= 0
        (0^0 = 1). ``smoothing`` > 0 gives every word mass (see the module docstring)."""
        counts = torch.as_tensor(counts, dtype=torch.float64)
        check_noise_options(1, alpha, max(counts.numel(), 1))
        if counts.dim() != 1 or (counts < 0).any() or not torch.isfinite(counts).all():
            raise ConfigError("counts must be a [V] vector of finite non-negative numbers")
        if not smoothing >= 0:
            raise ConfigError(f"noise smoothing must be >= 0, got {smoothing!r}")
        counts = counts + smoothing
        if alpha > 0 and counts.sum().item() <= 0:
            raise ConfigError(f"all counts are 0: no unigram distribution (alpha={alpha}); use alpha=0")
        return cls(counts.pow(alpha), alpha=float(alpha))

    @classmethod
    def from_stream(
        cls, ids: torch.Tensor, vocab_size: int, alpha: float = 1.0, smoothing: float = 0.0
    ) -> NoiseDistribution:
        """Unigram^alpha of a token-id stream ``ids`` [L] over ``vocab_size`` ids (counts + smoothing)."""
        ids = torch.as_tensor(ids).flatten().long()
        if ids.numel() and (ids.min().item() < 0 or ids.max().item() >= vocab_size):
            lo, hi = ids.min().item(), ids.max().item()
            raise ConfigError(f"token ids must lie in [0, {vocab_size}); got {lo}..{hi}")
        return cls.from_counts(torch.bincount(ids.cpu(), minlength=vocab_size), alpha, smoothing)

    @property
    def vocab_size(self) -> int:
        return self.probs.numel()

    def to(self, device: torch.device | str) -> NoiseDistribution:
        """The same distribution with its tensors on ``device``."""
        out = object.__new__(NoiseDistribution)
        out.probs, out.log_probs = self.probs.to(device), self.log_probs.to(device)
        out.alpha, out.uniform, out.full_support = self.alpha, self.uniform, self.full_support
        return out

    def sample(self, k: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """k ids drawn i.i.d. from P_n, with replacement: [k] long, on the device of ``probs``."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"number of samples must be an integer >= 1, got {k!r}")
        if self.uniform:
            return torch.randint(
                self.vocab_size, (k,), generator=generator, device=self.probs.device, dtype=torch.long
            )
        return torch.multinomial(self.probs, k, replacement=True, generator=generator)

    def check_targets(self, targets: torch.Tensor) -> None:
        """Raise ValueError if some target id has P_n = 0 (shows up to 5 offending ids).
        Free when every word has mass (no device synchronisation)."""
        if self.full_support:
            return
        zero = self.probs[targets] <= 0
        if zero.any():
            bad = sorted(set(targets[zero].flatten().tolist()))[:5]
            raise ConfigError(
                f"noise distribution (alpha={self.alpha}) has zero mass on target word id(s) {bad}: "
                "NCE needs P_n(w) > 0 for every target; build the noise from the training stream "
                "or use alpha=0 (uniform)"
            )

    def zero_mass_ids(self) -> torch.Tensor:
        """Ids with P_n = 0 (never drawn as noise): [M] long."""
        return torch.nonzero(self.probs <= 0).flatten()

    def entropy(self) -> float:
        """H(P_n) in nats (for logs and docs)."""
        p = self.probs.double()
        nz = p > 0
        return float(-(p[nz] * p[nz].log()).sum().item()) if nz.any() else math.nan
