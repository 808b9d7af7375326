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


class _SafeLog(torch.autograd.Function):
    """``log x`` (``log 0 = -inf``) whose gradient is 0, not NaN, where x = 0."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.log()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad / x, torch.zeros_like(grad))


def safe_log(x: torch.Tensor) -> torch.Tensor:
    """``log x`` for x >= 0 with ``log 0 = -inf`` and a zero (not NaN) gradient at 0."""
    return _SafeLog.apply(x)


def _shift(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """Detached max of ``x`` over ``dims`` (keepdim), 0 where that max is not finite. Reduces one
    axis at a time, largest first (several times faster than a joint multi-axis reduction on CPU)."""
    m = x.detach()
    for d in sorted(dims, key=lambda d: -x.shape[d]):
        m = m.amax(dim=d, keepdim=True)
    return m.nan_to_num(neginf=0.0)


def _align(m: torch.Tensor, subs: str, keep: str, out: str) -> torch.Tensor:
    """``m`` (keepdim over ``subs``) squeezed to the letters ``keep``, laid out for ``out``."""
    squeezed = m.reshape([m.shape[subs.index(c)] for c in keep])
    order = [keep.index(c) for c in out if c in keep]
    view = squeezed.permute(order) if order else squeezed
    shape = [view.shape[order.index(keep.index(c))] if c in keep else 1 for c in out]
    return view.reshape(shape)


def log_einsum(eq: str, a: torch.Tensor, b: torch.Tensor, balance: str = "") -> torch.Tensor:
    """``log einsum(eq, exp(a), exp(b))`` for a two-operand equation ``"ab,cd->ef"`` whose
    operands carry no repeated letter. -inf entries are zero weights.

    ``balance``: contracted letters shared by both operands along which the two operands trend in
    opposite directions (Lang's algorithm: gamma[i->k] grows with k while gamma[k->t] shrinks).
    b's maximum per balance index is moved into a first -- exp(a + b) = exp((a + mb) + (b - mb)) --
    so the per-operand shifts below stay aligned and nothing underflows."""
    inputs, out = eq.replace(" ", "").split("->")
    sa, sb = inputs.split(",")
    keep_a = "".join(c for c in sa if c in out)
    keep_b = "".join(c for c in sb if c in out)
    if balance:
        kept = "".join(c for c in sb if c in balance or (c in sa and c in out))
        moved = _shift(b, [i for i, c in enumerate(sb) if c not in kept])
        b = b - moved
        moved = _align(moved, sb, kept, sa)
        # max over the contracted axes of (a + moved), reducing the non-balance axes of a first
        ma = a.detach()
        for d in sorted(
            (i for i, c in enumerate(sa) if c not in out and c not in balance), key=lambda d: -a.shape[d]
        ):
            ma = ma.amax(dim=d, keepdim=True)
        ma = _shift(ma + moved, [i for i, c in enumerate(sa) if c in balance])
        ea = (a + (moved - ma)).exp_()
    else:
        ma = _shift(a, [i for i, c in enumerate(sa) if c not in out])
        ea = (a - ma).exp_()
    mb = _shift(b, [i for i, c in enumerate(sb) if c not in out])
    real = torch.einsum(eq, ea, (b - mb).exp_())
    return safe_log(real) + _align(ma, sa, keep_a, out) + _align(mb, sb, keep_b, out)


def log_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log(exp(a) + exp(b))``, elementwise; -inf + -inf = -inf with a zero gradient."""
    m = torch.maximum(a, b).detach().nan_to_num(neginf=0.0)
    return safe_log((a - m).exp_() + (b - m).exp_()) + m
