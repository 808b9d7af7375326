"""NS / RNS stacks against a literal transcription of DuSell & Chiang's (2022) equations, against
brute-force enumeration of every PDA run (sum over all transition sequences, grouped by
configuration; the paper's runs keep the bottom level frozen), against readings worked out by
hand, with and without the memory limit D, for both bottom conventions."""

from __future__ import annotations

import pytest
import torch

from decodekit.errors import DecodekitError
from decodekit.models.stack.nondeterministic import NondeterministicStack, initial_ns_state, ns_update


def brute_force_alpha(push, repl, pop, window=None, bottom="frozen"):
    """alpha[t][r, y] for t = 1..n by enumerating runs. Args: real weights push/repl [n, Q, S, Q, S],
    pop [n, Q, S, Q]. A stack element is (symbol, i) with i the step before its push; with a
    window D, a run dies when its top element has t - i > D (gamma's t - i <= D).

    frozen (DuSell & Chiang 2022): the bottom level is never top again after step 0 -- a run
    whose transition leaves the bottom element on top (replacing it at step 1, popping down to it)
    dies. replaceable: the bottom counts as pushed at i = -1 and only popping it kills a run."""
    n, q_size, s_size = pop.shape[0], pop.shape[1], pop.shape[2]
    configs = {(0, ((0, -1),)): 1.0}
    alphas = []
    for t in range(1, n + 1):
        new: dict = {}

        def add(key, w, t=t, new=new):
            stack = key[1]
            if bottom == "frozen" and len(stack) == 1:
                return  # the bottom level is on top again: weight zero
            if window is None or t - stack[-1][1] <= window:
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


def paper_alpha(push, repl, pop, window=None):
    """DuSell & Chiang (2022), eqs. 2-4, transcribed literally (real weights, explicit loops over
    i, k, t; no log space, no shared code with the implementation). alpha[t] for t = 1..n."""
    n, qn, sn = pop.shape[0], pop.shape[1], pop.shape[2]
    d = window if window is not None else n
    gamma = {}  # (i, t) -> [Q, S, Q, S]
    alpha = {0: torch.zeros(qn, sn, dtype=torch.float64)}
    alpha[0][0, 0] = 1.0
    for t in range(1, n + 1):
        for i in range(t - 1, -1, -1):
            if t - i > d:
                gamma[i, t] = torch.zeros(qn, sn, qn, sn, dtype=torch.float64)
                continue
            g = torch.zeros(qn, sn, qn, sn, dtype=torch.float64)
            for q in range(qn):
                for x in range(sn):
                    for r in range(qn):
                        for y in range(sn):
                            v = float(push[t - 1, q, x, r, y]) if i == t - 1 else 0.0
                            if i <= t - 2:
                                for s_ in range(qn):
                                    for z in range(sn):
                                        v += float(gamma[i, t - 1][q, x, s_, z] * repl[t - 1, s_, z, r, y])
                            for k in range(i + 1, t - 1):
                                for u in range(qn):
                                    gp = sum(
                                        float(gamma[k, t - 1][u, y, s_, z] * pop[t - 1, s_, z, r])
                                        for s_ in range(qn)
                                        for z in range(sn)
                                    )
                                    v += float(gamma[i, k][q, x, u, y]) * gp
                            g[q, x, r, y] = v
            gamma[i, t] = g
        alpha[t] = sum(torch.einsum("qx,qxry->ry", alpha[i], gamma[i, t]) for i in range(max(0, t - d), t))
    return [alpha[t] for t in range(1, n + 1)]


def random_weights(n, q=2, s=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.rand(n, q, s, q, s, generator=g, dtype=torch.float64) + 0.05,
        torch.rand(n, q, s, q, s, generator=g, dtype=torch.float64) + 0.05,
        torch.rand(n, q, s, q, generator=g, dtype=torch.float64) + 0.05,
    )


def run_lang(push, repl, pop, window, bottom="frozen"):
    q, s = pop.shape[1], pop.shape[2]
    state = initial_ns_state(1, q, s, window, torch.float64, "cpu", bottom)
    alphas = []
    for t in range(pop.shape[0]):
        state, alpha = ns_update(
            state, push[t : t + 1].log(), repl[t : t + 1].log(), pop[t : t + 1].log(), window
        )
        alphas.append(alpha[0])
    return alphas


@pytest.mark.parametrize("bottom", ["frozen", "replaceable"])
@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("window", [None, 1, 2, 3, 5, 6])
def test_lang_equals_brute_force(n, window, bottom):
    push, repl, pop = random_weights(n, seed=n)
    expected = brute_force_alpha(push, repl, pop, window, bottom)
    got = run_lang(push, repl, pop, window, bottom)
    for t in range(n):
        torch.testing.assert_close(got[t].exp(), expected[t], rtol=1e-10, atol=0)


@pytest.mark.parametrize(
    ("q", "s", "n", "window"),
    [(1, 2, 4, None), (2, 2, 5, None), (2, 3, 4, None), (3, 2, 4, None), (2, 3, 5, 2), (3, 2, 5, 3)],
)
def test_default_equals_paper_equations(q, s, n, window):
    """The default stack against a literal transcription of the paper's equations, random weights."""
    push, repl, pop = random_weights(n, q, s, seed=q * 100 + s * 10 + n)
    expected = paper_alpha(push, repl, pop, window)
    for t, (a, b) in enumerate(zip(run_lang(push, repl, pop, window), expected)):
        torch.testing.assert_close(a.exp(), b, rtol=1e-12, atol=0, msg=f"t={t + 1}")
    # ... and the paper's runs are exactly the frozen-bottom runs of the enumeration.
    for a, b in zip(brute_force_alpha(push, repl, pop, window, "frozen"), expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=0)


def hand_stack(renormalizing, bottom="frozen"):
    """|Q| = 1, |Gamma| = 2 with constant action weights (the action layer's weight zeroed, its bias
    set): push[x->y] = [[1, 2], [1, 1]], replace[x->y] = [[1, 1], [2, 1]], pop[x] = [5, 5], all
    divided by 10 (each x's 5 weights sum to 1, so NS's softmax keeps them as they are)."""
    stack = NondeterministicStack(3, 1, 2, renormalizing=renormalizing, bottom=bottom).double()
    per_x = (
        torch.tensor([[1.0, 2, 1, 1, 5], [1, 1, 2, 1, 5]], dtype=torch.float64) / 10
    )  # push y0 y1, repl y0 y1, pop
    with torch.no_grad():
        stack.actions.weight.zero_()
        stack.actions.bias.copy_(per_x.log().flatten())
    return stack


@pytest.mark.parametrize("renormalizing", [False, True])
def test_readings_by_hand(renormalizing):
    """Readings of the paper's equations worked out by hand for the weights of ``hand_stack`` (in
    units of 1/10; the common factor 10^-t cancels in the reading):

    t=1  gamma[0->1] = push;  alpha1 = push[bottom] = [1, 2]                         -> [1/3, 2/3]
    t=2  gamma[0->2][x] = sum_z push[x,z] repl[z] = [[5, 3], [3, 2]]; gamma[1->2] = push;
         alpha2 = gamma[0->2][0] + sum_x alpha1[x] push[x] = [5, 3] + [3, 4] = [8, 7]  -> [8/15, 7/15]
    t=3  gamma'[1][y] = sum_z push[y,z] pop[z] = [15, 10];
         gamma[0->3][0] = sum_z gamma[0->2][0,z] repl[z] + push[0,y] gamma'[1][y] = [11, 8] + [15, 20];
         gamma[1->3] = [[5, 3], [3, 2]];  gamma[2->3] = push;
         alpha3 = [26, 28] + (1 [5, 3] + 2 [3, 2]) + (8 [1, 2] + 7 [1, 1]) = [52, 58]  -> [26/55, 29/55]
    """
    stack = hand_stack(renormalizing)
    h = torch.zeros(1, 3, dtype=torch.float64)
    state, reading = stack.initial(1, h)
    torch.testing.assert_close(reading[0], torch.tensor([1.0, 0.0], dtype=torch.float64))
    for want in ([1 / 3, 2 / 3], [8 / 15, 7 / 15], [26 / 55, 29 / 55]):
        state, reading = stack(state, h)
        torch.testing.assert_close(reading[0], torch.tensor(want, dtype=torch.float64), rtol=1e-14, atol=0)


def test_replaceable_bottom_by_hand():
    """With the -1 position the bottom may be replaced at step 1: alpha1 = push[0] + repl[0] = [2, 3]."""
    stack = hand_stack(True, bottom="replaceable")
    h = torch.zeros(1, 3, dtype=torch.float64)
    state, _ = stack.initial(1, h)
    _, reading = stack(state, h)
    torch.testing.assert_close(
        reading[0], torch.tensor([2 / 5, 3 / 5], dtype=torch.float64), rtol=1e-14, atol=0
    )


@pytest.mark.parametrize("bottom", ["frozen", "replaceable"])
def test_large_window_equals_unlimited(bottom):
    n = 5
    push, repl, pop = random_weights(n, seed=7)
    full = run_lang(push, repl, pop, None, bottom)
    # frozen: nothing is older than position 0, so D >= n is unlimited; replaceable needs D >= n + 1.
    enough = n if bottom == "frozen" else n + 1
    for window in (enough, n + 4):
        for a, b in zip(run_lang(push, repl, pop, window, bottom), full):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=0)
    # One less and the last step differs: (frozen) gamma[0->n] is dropped; (replaceable) the
    # bottom-only configuration at step n is out of the window (t - (-1) = n + 1 > D).
    short = run_lang(push, repl, pop, enough - 1, bottom)
    assert not torch.allclose(short[-1], full[-1])
    for a, b in zip(short[:-1], full[:-1]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=0)


@pytest.mark.parametrize("bottom", ["frozen", "replaceable"])
@pytest.mark.parametrize("renormalizing", [False, True])
@pytest.mark.parametrize("window", [None, 2])
def test_module_readings_equal_brute_force(renormalizing, window, bottom):
    torch.manual_seed(3)
    n, q, s, hidden = 4, 2, 2, 5
    stack = NondeterministicStack(hidden, q, s, renormalizing=renormalizing, window=window, bottom=bottom)
    stack = stack.double()
    hs = torch.randn(n, 1, hidden, dtype=torch.float64)
    with torch.no_grad():
        weights = [stack.transition_weights(h) for h in hs]
    push, repl, pop = (torch.cat([w[i] for w in weights]).exp() for i in range(3))
    if not renormalizing:  # NS: a distribution over the 2|Q||S| + |Q| actions of every (q, x)
        total = push.sum((3, 4)) + repl.sum((3, 4)) + pop.sum(3)
        torch.testing.assert_close(total, torch.ones_like(total))
    expected = brute_force_alpha(push, repl, pop, window, bottom)
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


def test_frozen_equals_replaceable_with_zero_alpha_minus_one():
    """Issue 18 matched the authors' code by zeroing alpha[-1] of the replaceable stack; the frozen
    stack (no position -1 at all) gives the same alphas and gradients."""
    n = 5
    weights = [w.log() for w in random_weights(n, 2, 3, seed=5)]
    results = []
    for bottom in ("frozen", "replaceable"):
        push, repl, pop = (w.clone().requires_grad_() for w in weights)
        g, a = initial_ns_state(1, 2, 3, None, torch.float64, "cpu", bottom)
        if bottom == "replaceable":
            a = a.clone()
            a[:, 0] = -torch.inf  # alpha[-1] = 0
        state, out = (g, a), []
        for t in range(n):
            state, alpha = ns_update(state, push[t : t + 1], repl[t : t + 1], pop[t : t + 1], None)
            out.append(alpha)
        out = torch.stack(out)
        torch.softmax(out.flatten(1), -1)[:, 1].sum().backward()
        results.append((out.detach(), push.grad, repl.grad, pop.grad))
    for x, y in zip(*results):
        torch.testing.assert_close(x, y, rtol=1e-13, atol=1e-15)
