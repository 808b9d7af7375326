"""NS / RNS stacks against brute-force enumeration of every PDA run (sum over all transition
sequences, grouped by configuration), with and without the memory limit D."""

from __future__ import annotations

import pytest
import torch

from decodekit.errors import DecodekitError
from decodekit.models.stack.nondeterministic import NondeterministicStack, initial_ns_state, ns_update


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one intra-op thread is fastest on a shared machine (restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def brute_force_alpha(push, repl, pop, window=None):
    """alpha[t][r, y] for t = 1..n by enumerating runs. Args: real weights push/repl [n, Q, S, Q, S],
    pop [n, Q, S, Q]. A stack element is (symbol, i) with i the step before its push (bottom: -1);
    with a window D, a run dies when its top element has t - i > D (gamma's t - i <= D)."""
    n, q_size, s_size = pop.shape[0], pop.shape[1], pop.shape[2]
    configs = {(0, ((0, -1),)): 1.0}
    alphas = []
    for t in range(1, n + 1):
        new: dict = {}

        def add(key, w, t=t, new=new):
            if window is None or t - key[1][-1][1] <= window:
                new[key] = new.get(key, 0.0) + w

        for (q, stack), w in configs.items():
            x = stack[-1][0]
            for r in range(q_size):
                for y in range(s_size):
                    add((r, stack + ((y, t - 1),)), w * float(push[t - 1, q, x, r, y]))
                    add((r, stack[:-1] + ((y, stack[-1][1]),)), w * float(repl[t - 1, q, x, r, y]))
                if len(stack) >= 2:
                    add((r, stack[:-1]), w * float(pop[t - 1, q, x, r]))
        configs = new
        alpha = torch.zeros(q_size, s_size, dtype=torch.float64)
        for (r, stack), w in configs.items():
            alpha[r, stack[-1][0]] += w
        alphas.append(alpha)
    return alphas


def random_weights(n, q=2, s=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.rand(n, q, s, q, s, generator=g, dtype=torch.float64) + 0.05,
        torch.rand(n, q, s, q, s, generator=g, dtype=torch.float64) + 0.05,
        torch.rand(n, q, s, q, generator=g, dtype=torch.float64) + 0.05,
    )


def run_lang(push, repl, pop, window):
    q, s = pop.shape[1], pop.shape[2]
    state = initial_ns_state(1, q, s, window, torch.float64, "cpu")
    alphas = []
    for t in range(pop.shape[0]):
        state, alpha = ns_update(
            state, push[t : t + 1].log(), repl[t : t + 1].log(), pop[t : t + 1].log(), window
        )
        alphas.append(alpha[0])
    return alphas


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("window", [None, 1, 2, 3, 5, 6])
def test_lang_equals_brute_force(n, window):
    push, repl, pop = random_weights(n, seed=n)
    expected = brute_force_alpha(push, repl, pop, window)
    got = run_lang(push, repl, pop, window)
    for t in range(n):
        torch.testing.assert_close(got[t].exp(), expected[t], rtol=1e-10, atol=0)


def test_window_at_least_n_plus_one_equals_unlimited():
    n = 5
    push, repl, pop = random_weights(n, seed=7)
    full = run_lang(push, repl, pop, None)
    for window in (n + 1, n + 4):
        for a, b in zip(run_lang(push, repl, pop, window), full):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=0)
    # With D = n the bottom-only configuration at step n is out of the window (t - (-1) = n + 1 > D).
    short = run_lang(push, repl, pop, n)
    assert not torch.allclose(short[-1], full[-1])
    for a, b in zip(short[:-1], full[:-1]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=0)


@pytest.mark.parametrize("renormalizing", [False, True])
@pytest.mark.parametrize("window", [None, 2])
def test_module_readings_equal_brute_force(renormalizing, window):
    torch.manual_seed(3)
    n, q, s, hidden = 4, 2, 2, 5
    stack = NondeterministicStack(hidden, q, s, renormalizing=renormalizing, window=window).double()
    hs = torch.randn(n, 1, hidden, dtype=torch.float64)
    with torch.no_grad():
        weights = [stack.transition_weights(h) for h in hs]
    push, repl, pop = (torch.cat([w[i] for w in weights]).exp() for i in range(3))
    if not renormalizing:  # NS: a distribution over the 2|Q||S| + |Q| actions of every (q, x)
        total = push.sum((3, 4)) + repl.sum((3, 4)) + pop.sum(3)
        torch.testing.assert_close(total, torch.ones_like(total))
    expected = brute_force_alpha(push, repl, pop, window)
    state, reading = stack.initial(1, hs)
    torch.testing.assert_close(reading[0], torch.eye(q * s if renormalizing else s, dtype=torch.float64)[0])
    for t in range(n):
        state, reading = stack(state, hs[t])
        alpha = expected[t]
        want = (alpha.flatten() if renormalizing else alpha.sum(0)) / alpha.sum()
        torch.testing.assert_close(reading[0], want, rtol=1e-10, atol=1e-12)


def test_gradcheck_double():
    n = 3
    push, repl, pop = (w.log().requires_grad_() for w in random_weights(n, seed=11))
    probe = torch.randn(2, 2, dtype=torch.float64)

    def f(push, repl, pop):
        state = initial_ns_state(1, 2, 2, None, torch.float64, "cpu")
        out = 0
        for t in range(n):
            state, alpha = ns_update(state, push[t : t + 1], repl[t : t + 1], pop[t : t + 1], None)
            out = out + (torch.softmax(alpha.flatten(), 0) * probe.flatten()).sum()
        return out

    assert torch.autograd.gradcheck(f, (push, repl, pop))


def test_gradients_finite_through_zero_weights():
    torch.manual_seed(0)
    stack = NondeterministicStack(4, 2, 3, renormalizing=True, window=3)
    hs = torch.randn(6, 2, 4, requires_grad=True)
    state, _ = stack.initial(2, hs)
    loss = 0
    for t in range(6):
        state, r = stack(state, hs[t])
        loss = loss + r[:, 1].sum()
    loss.backward()
    assert torch.isfinite(hs.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in stack.parameters())


def test_state_is_not_mutated():
    stack = NondeterministicStack(4, 2, 2, renormalizing=True)
    state, _ = stack.initial(2, torch.zeros(1))
    before = [t.clone() for t in state]
    stack(state, torch.randn(2, 4))
    for a, b in zip(state, before):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(num_states=0, num_symbols=2), "stack_states"),
        (dict(num_states=2, num_symbols=1), "stack_symbols"),
        (dict(num_states=2, num_symbols=2, window=0), "window"),
    ],
)
def test_bad_sizes(kwargs, match):
    with pytest.raises(DecodekitError, match=match):
        NondeterministicStack(4, renormalizing=True, **kwargs)


def test_unlimited_max_length_error_suggests_window():
    stack = NondeterministicStack(4, 2, 2, renormalizing=False, max_length=3)
    state, _ = stack.initial(1, torch.zeros(1))
    stack.check_length(state, 3)
    with pytest.raises(DecodekitError, match="window"):
        stack.check_length(state, 4)


@pytest.mark.parametrize("stack", ["ns", "rns"])
def test_float32_long_sequence_matches_float64(stack):
    """Lang's contractions pair gamma[i->k] (growing with k) with gamma[k->t] (shrinking): without
    balancing the log-space shifts, float32 underflows to NaN readings after ~35 steps (RNS)."""
    from decodekit.models.stack import StackLSTM, StackLSTMConfig
    from decodekit.vocab import CharVocab

    torch.manual_seed(0)
    vocab = CharVocab(["<eos>", "0", "1", "#"], unk=None)
    model = StackLSTM(StackLSTMConfig(stack=stack, embed=8, hidden=8, init_range=0.5), vocab)
    x = torch.randint(0, 4, (1, 60))
    with torch.no_grad():
        single, _ = model(x)
        double, _ = model.double()(x)
    assert torch.isfinite(single).all()
    torch.testing.assert_close(single.double(), double, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["superposition", "stratification"])
def test_gradcheck_vector_stacks(kind):
    from decodekit.models.stack.stratification import StratificationStack
    from decodekit.models.stack.superposition import SuperpositionStack

    torch.manual_seed(0)
    stack = (
        SuperpositionStack(3, 2, depth=3) if kind == "superposition" else StratificationStack(3, 2)
    ).double()
    hs = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)

    def f(hs):
        state, _ = stack.initial(2, hs)
        total = 0
        for h in hs:
            state, r = stack(state, h)
            total = total + (r * torch.arange(1.0, 3.0, dtype=torch.float64)).sum()
        return total

    assert torch.autograd.gradcheck(f, (hs,))
