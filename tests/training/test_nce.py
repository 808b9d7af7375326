"""NCE and sampled softmax: values and gradients against explicit formulas, the large-k limit,
the noise distribution and bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from decodekit.training.noise import NoiseDistribution
from decodekit.training.sampled import NCELoss, SampledSoftmaxLoss, make_loss

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Head(nn.Module):
    """The part of a NeuralLM a sampled loss sees: ``head`` (float64 for exact comparisons)."""

    def __init__(self, d: int, v: int, seed: int, scale: float = 1.0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.head = nn.Linear(d, v).double()
        with torch.no_grad():
            self.head.weight.copy_(scale * torch.randn(v, d, generator=g, dtype=torch.float64))
            self.head.bias.copy_(scale * torch.randn(v, generator=g, dtype=torch.float64))


def tiny_case():
    """V = 7, D = 3, N x T = 2 x 2; noise with a repeated id and ids equal to targets."""
    model = Head(3, 7, seed=0)
    hidden = torch.randn(2, 2, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    targets = torch.tensor([[1, 4], [4, 6]])
    noise = NoiseDistribution.from_counts(torch.tensor([5.0, 3, 1, 2, 8, 1, 4]), alpha=0.75)
    noise_ids = torch.tensor([4, 0, 2, 4])  # k = 4: 4 twice, and 4 is also a target
    return model, hidden, targets, noise, noise_ids


def grads(model: nn.Module, hidden: torch.Tensor, loss_fn) -> list[torch.Tensor]:
    model.zero_grad()
    h = hidden.detach().clone().requires_grad_(True)
    loss_fn(h).sum().backward()
    return [h.grad, model.head.weight.grad.clone(), model.head.bias.grad.clone()]


@pytest.mark.parametrize("log_z", [0.0, 1.3])
def test_nce_value_and_gradient_match_the_explicit_formula(log_z):
    model, hidden, targets, noise, noise_ids = tiny_case()
    k = noise_ids.numel()
    loss = NCELoss(noise, k, learn_log_z=True, log_z=log_z).double()
    W, b, lpn = model.head.weight, model.head.bias, noise.log_probs.double()

    def explicit(h):
        """J = -log sigma(delta(y)) - sum_j log(1 - sigma(delta(x_j))), one position at a time."""
        out = torch.zeros(2, 2, dtype=torch.float64)
        for n in range(2):
            for t in range(2):

                def delta(w, n=n, t=t):
                    return h[n, t] @ W[w] + b[w] - loss.log_z - (math.log(k) + lpn[w])

                y = targets[n, t]
                j = -torch.log(torch.sigmoid(delta(y)))
                for x in noise_ids:
                    j = j - torch.log(1 - torch.sigmoid(delta(x)))
                out[n, t] = j
        return out

    ours = loss(model, hidden, targets, noise_ids)
    torch.testing.assert_close(ours, explicit(hidden), rtol=1e-12, atol=1e-12)
    g_ours = grads(model, hidden, lambda h: loss(model, h, targets, noise_ids))
    g_explicit = grads(model, hidden, explicit)
    for a, e in zip(g_ours, g_explicit):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-12)

    # Mnih & Teh's analytic gradient: ds(y) weighted by -kPn(y)/(p~(y)+kPn(y)), ds(x_j) by p~/(p~+kPn).
    with torch.no_grad():
        s = hidden @ W.t() + b  # [N, T, V]
        p = torch.exp(s - loss.log_z)
        kpn = k * noise.log_probs.double().exp()
        coef = torch.zeros_like(s)  # dJ/ds [N, T, V]
        coef.scatter_add_(-1, targets[..., None], -(kpn / (p + kpn)).gather(-1, targets[..., None]))
        idx = noise_ids.expand(2, 2, k)
        coef.scatter_add_(-1, idx, (p / (p + kpn)).gather(-1, idx))
        analytic = [coef @ W, coef.flatten(0, 1).t() @ hidden.flatten(0, 1), coef.sum((0, 1))]
    for a, e in zip(g_ours, analytic):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-12)
    loss.log_z.grad = None
    loss(model, hidden, targets, noise_ids).sum().backward()
    torch.testing.assert_close(loss.log_z.grad, -coef.sum(), rtol=1e-10, atol=1e-12)


def test_sampled_softmax_matches_the_explicit_formula():
    """o(w) = s(w) - log(k Pn(w)); softmax over the target and the samples that differ from it."""
    model, hidden, targets, noise, noise_ids = tiny_case()
    k = noise_ids.numel()
    loss = SampledSoftmaxLoss(noise, k)
    W, b, lpn = model.head.weight, model.head.bias, noise.log_probs.double()

    def explicit(h):
        out = torch.zeros(2, 2, dtype=torch.float64)
        for n in range(2):
            for t in range(2):
                y = int(targets[n, t])
                o = [h[n, t] @ W[w] + b[w] - math.log(k) - lpn[w] for w in [y] + noise_ids.tolist()]
                keep = [o[0]] + [o[1 + j] for j, x in enumerate(noise_ids.tolist()) if x != y]
                out[n, t] = -(o[0] - torch.logsumexp(torch.stack(keep), 0))
        return out

    torch.testing.assert_close(loss(model, hidden, targets, noise_ids), explicit(hidden), rtol=1e-12, atol=0)
    for a, e in zip(
        grads(model, hidden, lambda h: loss(model, h, targets, noise_ids)), grads(model, hidden, explicit)
    ):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-12)


def normalised_case(v: int = 2000, d: int = 16, n: int = 64):
    """Scores whose softmax normaliser is exactly 1 in every context (an extra hidden unit carries
    -logsumexp), so the NCE limit k -> infinity is the softmax gradient; targets drawn from the model."""
    g = torch.Generator().manual_seed(0)
    model = Head(d + 1, v, seed=0, scale=0.5)
    with torch.no_grad():
        model.head.weight[:, d] = 1.0
    h = torch.randn(n, 1, d, generator=g, dtype=torch.float64)
    lse = torch.logsumexp(h @ model.head.weight[:, :d].t() + model.head.bias, -1)
    hidden = torch.cat([h, -lse[..., None]], -1)
    probs = (hidden @ model.head.weight.t() + model.head.bias).exp()  # [n, 1, V], rows sum to 1
    targets = torch.multinomial(probs.view(n, v), 1, generator=g).view(n, 1)
    return model, hidden, targets


def flat_grad(model, hidden, loss_fn) -> torch.Tensor:
    return torch.cat([t.flatten() for t in grads(model, hidden, loss_fn)])


def test_nce_gradient_approaches_the_softmax_gradient_as_k_grows():
    """Cosine(NCE gradient, full-softmax gradient) over all of h, W, b, with fixed seeds, uniform noise,
    V = 2000: mean of 3 draws increases with k (20 < 200 < 2000) and is >= 0.93 at k = V (measured:
    0.47, 0.81, 0.96)."""
    model, hidden, targets = normalised_case()
    v = model.head.weight.shape[0]
    ref = flat_grad(model, hidden, lambda h: F.cross_entropy(model.head(h).view(-1, v), targets.view(-1)))
    noise = NoiseDistribution(torch.ones(v))
    torch.manual_seed(1)
    mean_cos = []
    for k in (20, 200, v):
        loss = NCELoss(noise, k)
        cos = [F.cosine_similarity(flat_grad(model, hidden, lambda h, f=loss: f(model, h, targets)), ref, 0)]
        cos += [F.cosine_similarity(flat_grad(model, hidden, lambda h, f=loss: f(model, h, targets)), ref, 0)]
        cos += [F.cosine_similarity(flat_grad(model, hidden, lambda h, f=loss: f(model, h, targets)), ref, 0)]
        mean_cos.append(float(sum(cos) / 3))
    assert mean_cos[0] < mean_cos[1] < mean_cos[2], mean_cos
    assert mean_cos[2] >= 0.93, mean_cos


def test_shared_noise_gradient_is_unbiased_for_the_expected_nce_gradient():
    """Averaged over 400 draws of the shared noise, the NCE gradient matches its expectation
    E[dJ/ds(x)] = k Pn(x) p~(x) / (p~(x) + k Pn(x)) (unigram^0.75 noise, k = 50): cosine >= 0.995
    (measured 0.9994; one draw alone: 0.82; the expectation with a wrong weight, Pn instead of
    k Pn in front: 0.96)."""
    model, hidden, targets = normalised_case(v=300, d=8, n=16)
    v, k = 300, 50
    noise = NoiseDistribution.from_counts(1.0 / torch.arange(1, v + 1), alpha=0.75)
    loss = NCELoss(noise, k)
    torch.manual_seed(2)
    mean = sum(flat_grad(model, hidden, lambda h: loss(model, h, targets)) for _ in range(400)) / 400
    with torch.no_grad():
        kpn = k * noise.log_probs.double().exp()
        p = (hidden @ model.head.weight.t() + model.head.bias).exp()
        coef = kpn * p / (p + kpn)  # expected noise part
        coef.scatter_add_(-1, targets[..., None], -(kpn / (p + kpn)).gather(-1, targets[..., None]))

    def surrogate(h):
        return (coef * model.head(h)).sum(-1)

    expected = flat_grad(model, hidden, surrogate)
    assert F.cosine_similarity(mean, expected, 0) >= 0.995


def test_nce_bias_initialisation():
    model = Head(3, 7, seed=0)
    noise = NoiseDistribution(torch.ones(7))
    NCELoss(noise, 2, init_bias=False).init_model(model)
    assert not torch.equal(model.head.bias, torch.full((7,), -math.log(7), dtype=torch.float64))
    NCELoss(noise, 2).init_model(model)
    assert torch.equal(model.head.bias, torch.full((7,), -math.log(7), dtype=torch.float64))


def test_noise_distribution_values_and_sampling():
    counts = torch.tensor([4.0, 0.0, 1.0, 9.0])
    p = NoiseDistribution.from_counts(counts, alpha=0.5)
    torch.testing.assert_close(p.probs, torch.tensor([2.0, 0.0, 1.0, 3.0]) / 6)
    uniform = NoiseDistribution.from_counts(counts, alpha=0.0)  # 0^0 = 1: uniform over all words
    torch.testing.assert_close(uniform.probs, torch.full((4,), 0.25))
    smoothed = NoiseDistribution.from_counts(counts, alpha=1.0, smoothing=1.0)
    torch.testing.assert_close(smoothed.probs, torch.tensor([5.0, 1.0, 2.0, 10.0]) / 18)
    assert p.zero_mass_ids().tolist() == [1]
    torch.manual_seed(0)
    draws = p.sample(60_000)
    freq = torch.bincount(draws, minlength=4).double() / 60_000
    assert freq[1] == 0
    torch.testing.assert_close(freq, p.probs.double(), atol=0.01, rtol=0)
    stream = NoiseDistribution.from_stream(torch.tensor([0, 0, 0, 0, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3]), 4, 0.5)
    torch.testing.assert_close(stream.probs, p.probs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k": 0}, r"k must be an integer >= 1, got 0"),
        ({"k": 6}, r"k must be an integer in \[1, V=5\], got 6"),
        ({"alpha": -0.1}, r"alpha must be in \[0, 1\], got -0.1"),
        ({"alpha": 1.5}, r"alpha must be in \[0, 1\], got 1.5"),
        ({"smoothing": -1.0}, "smoothing must be >= 0"),
        ({"learn_log_z": True, "name": "sampled-softmax"}, "learn_log_z applies to the nce loss only"),
        ({"name": "hinge"}, "unknown loss 'hinge'"),
    ],
)
def test_bad_options_raise(kwargs, message):
    args = {"name": "nce", "train_ids": torch.tensor([0, 1, 2, 3, 4]), "vocab_size": 5, "k": 3}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        make_loss(args.pop("name"), **args)


def test_zero_mass_target_raises_and_unseen_words_warn():
    model = Head(3, 5, seed=0)
    with pytest.warns(UserWarning, match=r"1 of 5 words \(ids \[4\]"):
        loss = make_loss("nce", train_ids=torch.tensor([0, 1, 2, 3, 3]), vocab_size=5, k=3, alpha=0.5)
    hidden = torch.zeros(1, 2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"zero mass on target word id\(s\) \[4\]"):
        loss(model, hidden, torch.tensor([[1, 4]]))
    # alpha = 0 (uniform) or smoothing gives every word mass: no warning, no error
    for kw in ({"alpha": 0.0}, {"alpha": 0.5, "smoothing": 1.0}):
        loss = make_loss("nce", train_ids=torch.tensor([0, 1, 2, 3, 3]), vocab_size=5, k=3, **kw)
        assert torch.isfinite(loss(model, hidden, torch.tensor([[1, 4]]))).all()
    with pytest.raises(ValueError, match="noise distribution has no mass"):
        NoiseDistribution(torch.zeros(3))
    with pytest.raises(ValueError, match=r"finite and >= 0; bad ids \[1\]"):
        NoiseDistribution(torch.tensor([1.0, -1.0]))
