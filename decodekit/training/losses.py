"""Training losses: functions ``loss(model, hidden [N, T, D], targets [N, T]) -> [N, T]``
per-token losses, which the trainer reduces. A loss with ``is_nll = True`` returns the exact
negative log-likelihood under the full softmax, so the trainer reports its perplexity; sampled
objectives (NCE, sampled softmax) use ``hidden`` and only the rows of ``model.head`` they need.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def softmax_cross_entropy(
    model: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """-log softmax(head(h_t))[y_t] for every position: [N, T]."""
    logits = model.head(hidden)  # [N, T, V]
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none").view_as(targets)


softmax_cross_entropy.is_nll = True  # type: ignore[attr-defined]
