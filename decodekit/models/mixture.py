"""Linear interpolation of step-protocol models over one vocabulary, with EM-fitted weights::

    p(w | h) = sum_i lambda_i p_i(w | h)        log p = logsumexp_i (log lambda_i + log p_i)

as in Bengio et al. (2003), "A Neural Probabilistic Language Model", JMLR 3:1137-1155 (the
"MLP + interpolated trigram" mixture), and Jelinek & Mercer's deleted interpolation. Each
component keeps its own state; the mixture's state is the tuple of them.

EM for the weights on held-out tokens t = 1..T (Dempster et al. 1977): with
``r_it = lambda_i p_i(w_t) / sum_j lambda_j p_j(w_t)``, set ``lambda_i = mean_t r_it``; the
held-out log-likelihood never decreases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from decodekit.errors import DecodekitError
from decodekit.models.base import model_device, prefill, step_many
from decodekit.models.scoring import chunk_scorer, stream_logprobs
from decodekit.models.state import concat, select

__all__ = ["MixtureLM", "fit_weights"]


class MixtureLM:
    """Interpolate C step-protocol models that share a vocabulary, bos and eos.

    Args:
        models: the components (any step-protocol models).
        weights: C non-negative weights (normalised here); default uniform.

    Raises:
        DecodekitError: the components differ in vocabulary size, vocabulary, bos or eos ids.
    """

    def __init__(self, models: Sequence, weights: Sequence[float] | torch.Tensor | None = None) -> None:
        self.models = list(models)
        if not self.models:
            raise DecodekitError("a mixture needs at least one component model")
        first = self.models[0]
        for i, m in enumerate(self.models[1:], start=1):
            for attr in ("vocab_size", "bos_id", "eos_id"):
                if getattr(m, attr) != getattr(first, attr):
                    raise DecodekitError(
                        f"mixture components differ in {attr}: component 0 has {getattr(first, attr)!r}, "
                        f"component {i} has {getattr(m, attr)!r}"
                    )
        vocabs = [(i, v) for i, m in enumerate(self.models) if (v := getattr(m, "vocab", None)) is not None]
        for i, v in vocabs[1:]:
            if v != vocabs[0][1]:
                diff = [(j, a, b) for j, (a, b) in enumerate(zip(vocabs[0][1].tokens, v.tokens)) if a != b][
                    :3
                ]
                raise DecodekitError(
                    f"mixture components have different vocabularies: component {vocabs[0][0]} vs {i} "
                    f"(first differences (id, token, token): {diff})"
                )
        self.vocab = vocabs[0][1] if vocabs else None
        self.vocab_size, self.bos_id, self.eos_id = first.vocab_size, first.bos_id, first.eos_id
        self.set_weights(torch.full((len(self.models),), 1.0) if weights is None else weights)

    def set_weights(self, weights: Sequence[float] | torch.Tensor) -> None:
        """Set the C interpolation weights (normalised to sum to 1)."""
        w = torch.as_tensor(weights, dtype=torch.float64).flatten()
        if w.numel() != len(self.models) or not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
            raise DecodekitError(f"need {len(self.models)} finite non-negative weights, got {w.tolist()}")
        if float(w.sum()) <= 0:
            raise DecodekitError(f"mixture weights must not all be zero, got {w.tolist()}")
        self.weights = w / w.sum()  # [C]

    @property
    def device(self) -> torch.device:
        return model_device(self.models[0])

    def to(self, device: str | torch.device) -> MixtureLM:
        """Move every component (in place) and return self."""
        for m in self.models:
            m.to(device)
        return self

    def _mix(self, logprobs: list[torch.Tensor]) -> torch.Tensor:
        """logsumexp_i (log lambda_i + logprobs_i): [N, V] (or [N, T], [N, L, V]) each -> the same shape."""
        dev = logprobs[0].device
        stacked = torch.stack([lp.to(dev).float() for lp in logprobs])  # [C, N, V]
        log_w = self.weights.log().float().to(dev).view(-1, *[1] * (stacked.dim() - 1))
        return torch.logsumexp(stacked + log_w, dim=0)

    # ---- the step protocol -------------------------------------------------------------------

    def initial_state(self, batch_size: int) -> tuple:
        return tuple(m.initial_state(batch_size) for m in self.models)

    def step(self, state: tuple, tokens: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Args: state (one per component), tokens [N]. Returns (logprobs [N, V], state)."""
        outs = [m.step(s, tokens.to(model_device(m))) for m, s in zip(self.models, state)]
        return self._mix([o[0] for o in outs]), tuple(o[1] for o in outs)

    def prefill(self, state: tuple, tokens: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Args: tokens [N, T]; each component's own ``prefill`` when it has one."""
        outs = []
        for m, s in zip(self.models, state):
            outs.append(prefill(m, s, tokens.to(model_device(m))))
        return self._mix([o[0] for o in outs]), tuple(o[1] for o in outs)

    def step_many(
        self, state: tuple, tokens: torch.Tensor, keep_last: int | None = None
    ) -> tuple[torch.Tensor, tuple]:
        """Args: tokens [N, L]; each component's own ``step_many`` when it has one.
        Returns (logprobs [N, L, V], or the last ``keep_last`` positions, state)."""
        outs = [step_many(m, s, tokens.to(model_device(m)), keep_last) for m, s in zip(self.models, state)]
        return self._mix([o[0] for o in outs]), tuple(o[1] for o in outs)

    def target_logprobs(
        self, state: tuple, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, tuple]:
        """Stream scoring (:mod:`decodekit.models.scoring`): each component's own chunk scorer,
        mixed. Args: inputs, targets [N, T]. Returns (logprobs [N, T], state)."""
        outs = []
        for m, s in zip(self.models, state):
            dev = model_device(m)
            outs.append(chunk_scorer(m)(s, inputs.to(dev), targets.to(dev)))
        return self._mix([o[0] for o in outs]), tuple(o[1] for o in outs)

    def reorder_state(self, state: tuple, rows: torch.Tensor) -> tuple:
        """Rows ``rows`` [N'] of every component state (each via its model's own reordering)."""
        return tuple(select(s, rows.to(model_device(m)), model=m) for m, s in zip(self.models, state))

    def concat_states(self, states: list[tuple]) -> tuple:
        return tuple(concat([s[i] for s in states], model=m) for i, m in enumerate(self.models))

    # ---- fitting -----------------------------------------------------------------------------

    def fit(self, streams: Sequence[torch.Tensor], **kw) -> list[float]:
        """Fit the weights by EM on held-out token streams (each [T], starting after a sentence
        boundary); ``kw`` go to :func:`fit_weights`. Returns the per-iteration mean log-likelihood."""
        lp = torch.cat(
            [torch.stack([stream_logprobs(m, s).double().cpu() for m in self.models]) for s in streams], 1
        )  # [C, T]
        weights, history = fit_weights(lp, init=self.weights, **kw)
        self.set_weights(weights)
        return history


def fit_weights(
    logprobs: torch.Tensor, init: torch.Tensor | None = None, *, max_iter: int = 200, tol: float = 1e-9
) -> tuple[torch.Tensor, list[float]]:
    """EM for interpolation weights.

    Args:
        logprobs: [C, T] log p_i(w_t | h_t) of each component on each held-out token.
        init: starting weights [C] (default uniform).
        max_iter, tol: stop after ``max_iter`` iterations or when the mean log-likelihood gains
            less than ``tol``.

    Returns:
        (weights [C] float64, mean log-likelihood before each update and after the last one).
    """
    lp = logprobs.double()
    if lp.dim() != 2 or lp.shape[1] == 0:
        raise DecodekitError(
            f"need component log-probabilities of shape [C, T] with T > 0, got {tuple(lp.shape)}"
        )
    C = lp.shape[0]
    w = torch.full((C,), 1.0 / C, dtype=torch.float64) if init is None else torch.as_tensor(init).double()
    log_w = (w / w.sum()).log()
    history: list[float] = []
    for _ in range(max_iter + 1):
        joint = lp + log_w.view(-1, 1)  # [C, T]
        total = torch.logsumexp(joint, 0)  # [T]
        history.append(float(total.mean()))
        if len(history) > 1 and history[-1] - history[-2] < tol or len(history) > max_iter:
            break
        log_w = torch.logsumexp(joint - total, 1) - math.log(lp.shape[1])  # log mean_t r_it
    return log_w.exp(), history
