"""Log-semiring tensor contractions with well-defined gradients at zero weight (-inf).

``log_einsum(eq, A, B)`` computes ``log einsum(eq, exp(A), exp(B))`` without overflow: each
operand is shifted by its (detached) maximum over the contracted axes, the real-space einsum
runs on BLAS, and the shifts are added back::

    out[o] = log sum_c exp(A[a] + B[b]) = log einsum(exp(A - mA), exp(B - mB))[o] + mA[o] + mB[o]

Zero weights (-inf) stay exactly -inf and receive a zero gradient (never NaN). Underflow is
only possible when, for an output entry, every term lies more than ~87 nats (float32; ~708
in float64) below the product of the two operands' maxima.
"""

from __future__ import annotations

import torch


def safe_log(x: torch.Tensor) -> torch.Tensor:
    """``log x`` with ``log 0 = -inf`` and a zero (not NaN) gradient at 0."""
    positive = x > 0
    return torch.where(positive, torch.where(positive, x, torch.ones_like(x)).log(), -torch.inf)


def _shift(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """Detached max of ``x`` over ``dims`` (keepdim), 0 where that max is not finite."""
    m = x.detach() if not dims else x.detach().amax(dim=dims, keepdim=True)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def _align(m: torch.Tensor, subs: str, keep: str, out: str) -> torch.Tensor:
    """``m`` (keepdim over ``subs``) squeezed to the letters ``keep``, laid out for ``out``."""
    squeezed = m.reshape([m.shape[subs.index(c)] for c in keep])
    order = [keep.index(c) for c in out if c in keep]
    view = squeezed.permute(order) if order else squeezed
    shape = [view.shape[order.index(keep.index(c))] if c in keep else 1 for c in out]
    return view.reshape(shape)


def log_einsum(eq: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log einsum(eq, exp(a), exp(b))`` for a two-operand equation ``"ab,cd->ef"`` whose
    operands carry no repeated letter. -inf entries are zero weights."""
    inputs, out = eq.replace(" ", "").split("->")
    sa, sb = inputs.split(",")
    keep_a = "".join(c for c in sa if c in out)
    keep_b = "".join(c for c in sb if c in out)
    ma = _shift(a, [i for i, c in enumerate(sa) if c not in out])
    mb = _shift(b, [i for i, c in enumerate(sb) if c not in out])
    real = torch.einsum(eq, torch.exp(a - ma), torch.exp(b - mb))
    return safe_log(real) + _align(ma, sa, keep_a, out) + _align(mb, sb, keep_b, out)


def log_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log(exp(a) + exp(b))``, elementwise; -inf + -inf = -inf with a zero gradient."""
    m = torch.maximum(a, b).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return safe_log(torch.exp(a - m) + torch.exp(b - m)) + m


def log_normalize(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``softmax`` over ``dim`` of log-weights ``x`` (at least one entry finite per slice)."""
    return torch.softmax(x, dim=dim)
