"""Every model in the registry obeys the step protocol exactly: step == forward, prefill ==
a loop of step, select permutes rows, step is pure, configs round-trip through JSON."""

from __future__ import annotations

import json

import pytest
import torch

from decodekit.models.registry import MODELS, config_from_dict, config_to_dict, create_model, make_config
from decodekit.models.state import map_state, select
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "a", "b", "c", "d", "e"])
TINY = {
    "lstm": {"embed": 6, "hidden": 5, "layers": 2},
    "rnn": {"embed": 6, "hidden": 5, "layers": 2},
    "mlp": {"order": 3, "embed": 4, "hidden": 5},
}
CASES = [(kind, {}) for kind in sorted(MODELS)] + [
    ("lstm", {"embed": 5, "hidden": 5, "tie": True, "layers": 1}),
    ("rnn", {"embed": 5, "hidden": 5, "tie": True}),
    ("mlp", {"order": 4, "embed": 3, "hidden": 0}),
    ("mlp", {"order": 2, "embed": 3, "hidden": 4, "direct": False}),
]


def build(kind: str, overrides: dict) -> torch.nn.Module:
    torch.manual_seed(0)
    config = make_config(kind, **{**TINY.get(kind, {}), **overrides})
    model = create_model(config, VOCAB).double().eval()
    return model


def leaves(state) -> list[torch.Tensor]:
    out = []
    map_state(state, lambda t: out.append(t) or t)
    return out


def tokens(n: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, len(VOCAB), (n, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("kind", "overrides"), CASES)
def test_step_equals_forward(kind, overrides):
    model = build(kind, overrides)
    x = tokens(3, 6)
    logits, _ = model(x)
    reference = torch.log_softmax(logits.float(), -1)  # [N, T, V]; step returns float32
    state, steps = model.initial_state(3), []
    for t in range(x.shape[1]):
        logprobs, state = model.step(state, x[:, t])
        steps.append(logprobs)
    torch.testing.assert_close(torch.stack(steps, 1), reference, rtol=0, atol=1e-6)
    assert torch.allclose(reference.exp().sum(-1), torch.ones(3, 6), atol=1e-5)


@pytest.mark.parametrize(("kind", "overrides"), CASES)
def test_prefill_equals_step_loop(kind, overrides):
    model = build(kind, overrides)
    x = tokens(2, 5, seed=2)
    lp_prefill, s_prefill = model.prefill(model.initial_state(2), x)
    state = model.initial_state(2)
    for t in range(5):
        lp, state = model.step(state, x[:, t])
    torch.testing.assert_close(lp_prefill, lp, rtol=0, atol=1e-6)
    for a, b in zip(leaves(s_prefill), leaves(state), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    # continuing from either state gives the same next distribution
    nxt = tokens(2, 1, seed=3)[:, 0]
    torch.testing.assert_close(model.step(s_prefill, nxt)[0], model.step(state, nxt)[0], rtol=0, atol=1e-6)


@pytest.mark.parametrize(("kind", "overrides"), CASES)
def test_select_permutes_rows_exactly(kind, overrides):
    model = build(kind, overrides)
    x = tokens(4, 4, seed=4)
    _, state = model.prefill(model.initial_state(4), x)
    rows = torch.tensor([2, 0, 0, 3, 1])
    chosen = select(state, rows, model)
    nxt = tokens(5, 1, seed=5)[:, 0]
    logprobs, _ = model.step(chosen, nxt)
    for i, r in enumerate(rows.tolist()):  # row by row against a state prefilled with that prompt alone
        _, single = model.prefill(model.initial_state(1), x[r : r + 1])
        expected, _ = model.step(single, nxt[i : i + 1])
        torch.testing.assert_close(logprobs[i : i + 1], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(("kind", "overrides"), CASES)
def test_step_is_pure(kind, overrides):
    model = build(kind, overrides)
    _, state = model.prefill(model.initial_state(3), tokens(3, 3, seed=6))
    before = [t.clone() for t in leaves(state)]
    x = tokens(3, 1, seed=7)[:, 0]
    first, _ = model.step(state, x)
    again, _ = model.step(state, x)
    for a, b in zip(before, leaves(state), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(first, again)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_config_json_round_trip(kind):
    config = make_config(kind, **TINY.get(kind, {}))
    d = json.loads(json.dumps(config_to_dict(config)))
    assert config_from_dict(d) == config
    with pytest.raises(ValueError, match="unknown"):
        config_from_dict({**d, "no_such_field": 1})


def test_config_errors():
    with pytest.raises(ValueError, match="unknown model kind 'gpt'"):
        config_from_dict({"kind": "gpt"})
    with pytest.raises(ValueError, match="embed == hidden"):
        create_model(make_config("lstm", embed=4, hidden=5, tie=True), VOCAB)
    with pytest.raises(ValueError, match="hidden=0 needs direct"):
        create_model(make_config("mlp", hidden=0, direct=False), VOCAB)
    with pytest.raises(ValueError, match="order must be >= 2"):
        create_model(make_config("mlp", order=1), VOCAB)


@pytest.mark.parametrize("kind", ["lstm", "rnn", "mlp"])
def test_bos_eos_and_tied_weights(kind):
    model = build(kind, {})
    assert model.bos_id == model.eos_id == VOCAB.eos_id
    assert model.vocab is VOCAB and model.vocab_size == len(VOCAB)
    if kind != "mlp":
        tied = build(kind, {"embed": 5, "hidden": 5, "tie": True, "layers": 1})
        assert tied.head.weight is tied.embedding.weight


@pytest.mark.parametrize("kind", ["lstm", "rnn"])
def test_init_range_and_dropout_only_in_training(kind):
    model = build(kind, {"init_range": 0.05, "dropout": 0.5})
    assert max(p.abs().max().item() for p in model.parameters()) <= 0.05
    x = tokens(2, 4)
    model.eval()
    assert torch.equal(model(x)[0], model(x)[0])
    model.train()
    assert not torch.equal(model(x)[0], model(x)[0])
