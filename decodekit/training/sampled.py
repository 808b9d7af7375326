"""Sampled training objectives: noise-contrastive estimation and sampled softmax.

Both follow the loss protocol of :mod:`.losses` -- ``loss(model, hidden [N, T, D], targets [N, T])
-> [N, T]`` per-token losses -- and touch only the rows of ``model.head`` they need: the N*T
target rows and k noise rows drawn once per call (shared by the whole batch) from a
:class:`~decodekit.training.noise.NoiseDistribution` P_n. No [N, T, V] product is formed.

Scores: s(w, h) = W_w . h + b_w (the head's row w; b_w = 0 when the head has no bias).

**NCE** (Gutmann & Hyvarinen 2010; Mnih & Teh 2012, as Liza & Grzes 2018 use it). The model's
unnormalised log-probability is log p~(w|h) = s(w, h) - log Z with log Z = 0 (self-normalised)
or one learned scalar. With delta(w) = log p~(w|h) - log(k P_n(w)), the posterior that w came
from the data rather than from the noise is P(D=1 | w, h) = p~/(p~ + k P_n) = sigmoid(delta(w)),
and the loss for a target y with noise words x_1..x_k is the binary logistic loss

    J = -log sigmoid(delta(y)) - sum_j log(1 - sigmoid(delta(x_j)))
      = softplus(-delta(y)) + sum_j softplus(delta(x_j)).

Its gradient (Mnih & Teh eq. 8, sign flipped to a loss to minimise)::

    dJ/dtheta = -(k P_n(y) / (p~(y) + k P_n(y))) ds(y)/dtheta
                + sum_j p~(x_j) / (p~(x_j) + k P_n(x_j)) ds(x_j)/dtheta

A noise sample that happens to equal the target is kept as a noise sample (no "accidental hit"
removal), as in Mnih & Teh: the objective is then exactly the NCE objective with independent
draws, whose expectation the consistency argument is about.

**Sampled softmax** (importance sampling, Jean et al. 2015; Jozefowicz et al. 2016; TensorFlow's
``sampled_softmax_loss``). The softmax is taken over the target and the k samples with the
logits corrected by the proposal, o(w) = s(w, h) - log(k P_n(w)) (the "log Q" correction; the
log k is a constant shift), and a sample equal to the target is removed (logit -inf, the usual
"remove accidental hits")::

    J = -o(y) + log( exp(o(y)) + sum_j [x_j != y] exp(o(x_j)) ).
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from decodekit.errors import ConfigError
from decodekit.training.config import LOSSES, check_loss_options  # noqa: F401 (LOSSES: re-exported)
from decodekit.training.losses import SOFTMAX, Loss
from decodekit.training.noise import NoiseDistribution, check_noise_options

if TYPE_CHECKING:
    from decodekit.training.config import TrainConfig


def _head_rows(model: nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rows ``ids`` [M] of ``model.head``: (W [M, D], b [M] or None). Gradients flow into the head."""
    head = model.head
    w = head.weight.index_select(0, ids)
    b = head.bias.index_select(0, ids) if head.bias is not None else None
    return w, b


class _Sampled(nn.Module):
    """Shared parts: the noise distribution, k, drawing the shared noise, scoring rows and
    correcting the scores by the noise; each loss defines ``objective(o_y, o_x, targets,
    noise_ids) -> J [N, T]`` of the corrected scores (:meth:`forward`)."""

    def __init__(self, noise: NoiseDistribution, k: int) -> None:
        super().__init__()
        check_noise_options(k, 0.0, noise.vocab_size)
        self.noise, self.k = noise, k
        self._log_k = math.log(k)

    def scores(
        self, model: nn.Module, hidden: torch.Tensor, targets: torch.Tensor, noise_ids: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns (noise ids [k], target scores s(y) [N, T], noise scores s(x_j) [N, T, k])."""
        if hidden.shape[:2] != targets.shape:
            raise ConfigError(f"hidden {tuple(hidden.shape)} does not match targets {tuple(targets.shape)}")
        cpu = targets.device.type == "cpu"  # no host synchronisation on accelerators
        if cpu and targets.numel() and (targets.min() < 0 or targets.max() >= self.noise.vocab_size):
            raise ConfigError(f"target ids must lie in [0, {self.noise.vocab_size})")
        if self.noise.probs.device != hidden.device:
            self.noise = self.noise.to(hidden.device)
        self.noise.check_targets(targets)
        if noise_ids is None:
            noise_ids = self.noise.sample(self.k)
        n = targets.numel()
        w, b = _head_rows(model, torch.cat([targets.flatten(), noise_ids]))
        w_y, w_x = w[:n].view(*targets.shape, -1), w[n:]  # [N, T, D], [k, D]
        s_y = (hidden * w_y).sum(-1)  # [N, T]
        s_x = hidden @ w_x.t()  # [N, T, k]
        if b is not None:
            s_y = s_y + b[:n].view_as(targets)
            s_x = s_x + b[n:]
        dtype = torch.promote_types(s_y.dtype, torch.float32)  # half/bfloat16 scores -> float32
        return noise_ids, s_y.to(dtype), s_x.to(dtype)

    def log_k_noise(self, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """log(k P_n(ids)) in ``dtype``, same shape as ids."""
        return self.noise.log_probs[ids].to(dtype) + self._log_k

    def forward(
        self,
        model: nn.Module,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        noise_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Args: hidden [N, T, D], targets [N, T] long, noise_ids [k] (default: drawn from P_n).
        Returns per-token losses J [N, T]: :meth:`objective` of the scores corrected by the noise,
        o(y) = s(y) - log(k P_n(y)) [N, T] and o(x_j) [N, T, k]."""
        noise_ids, s_y, s_x = self.scores(model, hidden, targets, noise_ids)
        o_y = s_y - self.log_k_noise(targets, s_y.dtype)
        o_x = s_x - self.log_k_noise(noise_ids, s_y.dtype)
        return self.objective(o_y, o_x, targets, noise_ids)


class NCELoss(_Sampled):
    """Noise-contrastive estimation loss (see the module docstring for J and its gradient).

    Args:
        noise: P_n over the V words; k: noise samples per update, 1 <= k <= V, shared by the batch.
        learn_log_z: learn log Z as one scalar parameter (``log_z``, initial value ``log_z``);
            otherwise log Z is fixed at ``log_z`` (default 0: self-normalisation).
        init_bias: :meth:`init_model` sets the head's bias to -log V, so that training starts
            from an (approximately) self-normalised model, p~(w|h) ~ 1/V, instead of p~ ~ 1 for
            every word (with log Z = 0 the latter puts total mass ~V on the vocabulary, and words
            rarely drawn as noise keep it for a long time: on PTB, valid perplexity 4.6e8 instead
            of 545 after 500 updates). For softmax training this shift would change nothing.
    """

    def __init__(
        self,
        noise: NoiseDistribution,
        k: int = 600,
        *,
        learn_log_z: bool = False,
        log_z: float = 0.0,
        init_bias: bool = True,
    ) -> None:
        super().__init__(noise, k)
        self.init_bias = init_bias
        if learn_log_z:
            self.log_z = nn.Parameter(torch.tensor(float(log_z)))
        else:
            self.register_buffer("log_z", torch.tensor(float(log_z)), persistent=False)

    @torch.no_grad()
    def init_model(self, model: nn.Module) -> None:
        """Called by the trainer at the start of a fresh run: b_w = -log V for every w (if
        ``init_bias`` and the head has a bias)."""
        if self.init_bias and model.head.bias is not None:
            model.head.bias.fill_(-math.log(model.head.bias.numel()))

    def objective(self, o_y: torch.Tensor, o_x: torch.Tensor, targets, noise_ids) -> torch.Tensor:
        """J [N, T] from o = s - log(k P_n): delta = o - log Z, the k noise terms summed."""
        log_z = self.log_z.to(o_y.device)
        return F.softplus(log_z - o_y) + F.softplus(o_x - log_z).sum(-1)


class SampledSoftmaxLoss(_Sampled):
    """Sampled softmax / importance sampling over the target and k shared samples, with the
    log(k P_n) correction and accidental hits removed (see the module docstring)."""

    def objective(self, o_y: torch.Tensor, o_x: torch.Tensor, targets, noise_ids) -> torch.Tensor:
        """J [N, T]: the softmax over the target and the samples (accidental hits removed)."""
        o_x = o_x.masked_fill(targets[..., None] == noise_ids, -math.inf)
        logits = torch.cat([o_y[..., None], o_x], dim=-1)  # [N, T, 1 + k]
        return torch.logsumexp(logits, dim=-1) - o_y


def make_loss(
    name: str,
    *,
    train_ids: torch.Tensor | None = None,
    vocab_size: int | None = None,
    k: int = 600,
    alpha: float = 1.0,
    learn_log_z: bool = False,
    smoothing: float = 0.0,
    init_bias: bool = True,
) -> Loss:
    """The training loss ``name`` in :data:`LOSSES`, as a :class:`.losses.Loss`. For "nce" /
    "sampled-softmax" the noise is (count + smoothing)^alpha over ``train_ids`` [L] and
    ``vocab_size`` words (see :mod:`.noise`); warns (UserWarning) when some words get no noise mass."""
    check_loss_options(name, k, alpha, learn_log_z, smoothing)
    if name == "softmax":
        return SOFTMAX
    if train_ids is None or vocab_size is None:
        raise ConfigError(f"loss {name!r} needs the training stream and the vocabulary size for its noise")
    check_noise_options(k, alpha, vocab_size)
    noise = NoiseDistribution.from_stream(train_ids, vocab_size, alpha, smoothing)
    zero = noise.zero_mass_ids()
    if zero.numel():
        warnings.warn(
            f"{zero.numel()} of {vocab_size} words (ids {zero[:5].tolist()}...) never occur in the training "
            f"stream, so with alpha={alpha} they are never noise samples and {name} never lowers their "
            "scores; the full softmax may give them mass. Use noise_smoothing > 0 "
            "or alpha=0.",
            stacklevel=2,
        )
    if name == "nce":
        return Loss(NCELoss(noise, k, learn_log_z=learn_log_z, init_bias=init_bias))
    return Loss(SampledSoftmaxLoss(noise, k))


def loss_for(config: TrainConfig, train_ids: torch.Tensor, vocab_size: int) -> Loss:
    """The loss ``config`` names, its noise drawn from ``train_ids`` [L] over ``vocab_size`` words."""
    return make_loss(
        config.loss,
        train_ids=train_ids,
        vocab_size=vocab_size,
        k=config.noise_samples,
        alpha=config.noise_alpha,
        learn_log_z=config.learn_log_z,
        smoothing=config.noise_smoothing,
        init_bias=config.nce_bias_init,
    )
