"""benchmarks/formal_languages.py follows DuSell & Chiang's protocol: inputs (w_1 from the zero
state), initialisation, the sum-over-sequence loss, the plateau schedule and early stopping."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from decodekit.tasks import make_task
from tests.support.scripts import load_benchmark

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def fl():
    return load_benchmark("formal_languages")


def tiny_args(fl, *extra):
    return fl.parser().parse_args(["--embed", "4", "--hidden", "5", "--stack-embed", "3", *extra])


@pytest.mark.parametrize("kind", ["lstm", "rns", "superposition"])
def test_paper_inputs_and_init(fl, kind):
    task = make_task("marked-reversal", max_length=12)
    args = tiny_args(fl)
    torch.manual_seed(0)
    model = fl.build(kind, task, args).double()
    head = model.head
    assert torch.equal(head.bias, torch.zeros_like(head.bias))
    bound = (6 / (head.in_features + head.out_features)) ** 0.5  # Xavier-uniform
    assert head.weight.abs().max() <= bound and head.weight.abs().max() > 0.1
    others = [p for name, p in model.named_parameters() if not name.startswith("head.")]
    assert all(p.abs().max() <= 0.1 for p in others)
    with torch.no_grad():
        head.bias.uniform_(-1, 1)  # a trained bias: w_1's prediction is exactly softmax(b_y)
        w = torch.tensor([[1, 2, 3, 2, 1], [2, 1, 3, 1, 2]])
        logits = fl.sequence_logits(model, w, "paper")
        assert logits.shape == (2, 6, len(task.vocab))
        torch.testing.assert_close(logits[:, 0], head.bias.expand(2, -1))
        torch.testing.assert_close(logits[:, 1:], model(w)[0])  # reads w_1..w_l, no <eos> input
        eos = fl.sequence_logits(model, w, "eos")
        torch.testing.assert_close(eos, model(torch.cat([torch.zeros(2, 1, dtype=torch.long), w], 1))[0])


def test_sequence_loss_is_summed_per_sequence(fl, monkeypatch):
    """One update with --loss sequence equals one with the per-symbol mean scaled by l + 1 (Adam
    is scale-invariant up to eps, so compare the gradients the optimizer sees)."""
    task = make_task("marked-reversal", max_length=12)
    batch = np.array([[0, 2, 0], [1, 2, 1]])
    grads = {}
    for loss_kind in ("sequence", "symbol"):
        args = tiny_args(fl, "--loss", loss_kind)
        torch.manual_seed(0)
        model = fl.build("rns", task, args).double()
        loss, n = fl.nll(model, batch, args)
        (loss / (batch.shape[0] if loss_kind == "sequence" else n)).backward()
        grads[loss_kind] = model.head.bias.grad.clone()
    torch.testing.assert_close(grads["sequence"], grads["symbol"] * 4)  # l + 1 = 4 symbols per sequence


def test_plateau_schedule_and_early_stopping(fl, monkeypatch):
    """Scripted validation values: improve for 2 epochs, then never again. As in the authors'
    code (ReduceLROnPlateau(patience=5), UpdatesWithoutImprovement(patience=10)) the rate is
    multiplied by 0.9 once more than 5 epochs have not improved (the 6th bad epoch, epoch 8) and
    training stops after 10 (epoch 12)."""
    values = iter([3.0, 2.0] + [2.5] * 50)
    monkeypatch.setattr(fl, "cross_entropy", lambda model, batches, args: next(values))
    task = make_task("marked-reversal", max_length=12)
    args = tiny_args(fl)
    model = fl.build("lstm", task, args)
    points = []
    batches = [np.array([[0, 2, 0]])]
    result = fl.train(model, batches, batches, 0.0, 0.01, args, np.random.default_rng(0), points.append)
    assert result["stopped_by"] == "early stopping" and result["epochs"] == 12
    assert result["best_at_epoch"] == 2 and result["best_valid_diff"] == 2.0
    lrs = [p["lr"] for p in points]
    assert lrs[:8] == [0.01] * 8 and lrs[8:] == pytest.approx([0.009] * 4)  # decayed after epoch 8
    assert result["final_lr"] == pytest.approx(0.009)  # epoch 12: the 10th bad epoch stops first


def test_budget_caps_a_run_and_logs_the_curve(fl, tmp_path):
    log, out = tmp_path / "curve.jsonl", tmp_path / "out.jsonl"
    argv = ["--tasks", "marked-reversal", "--models", "rns", "--embed", "4", "--hidden", "5"]
    argv += ["--train-strings", "30", "--valid-strings", "6", "--batch", "3", "--train-lengths", "5", "9"]
    argv += ["--test-lengths", "9", "13", "--test-per-length", "2", "--budget", "0", "--log", str(log)]
    fl.main([*argv, "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["stopped_by"] == "budget" and result["updates"] == 1
    assert set(result["test_diff_by_length"]) == {"9", "11", "13"}
    assert json.loads(log.read_text().splitlines()[-1])["updates"] == 1


def test_plateau_needs_a_relative_improvement_of_1e4_in_perplexity(fl, monkeypatch):
    """A validation perplexity better by less than a relative 1e-4 is a new best for early
    stopping (strictly lower) but not for the learning-rate plateau, as in the authors' code."""
    tiny = -1e-6  # cross-entropy steps of 1e-6 nats: perplexity better by ~1e-6 relative
    values = iter([2.0 + tiny * i for i in range(30)])
    monkeypatch.setattr(fl, "cross_entropy", lambda model, batches, args: next(values))
    task = make_task("marked-reversal", max_length=12)
    args = tiny_args(fl, "--epochs", "8")
    model = fl.build("lstm", task, args)
    points = []
    batches = [np.array([[0, 2, 0]])]
    result = fl.train(model, batches, batches, 0.0, 0.01, args, np.random.default_rng(0), points.append)
    assert result["stopped_by"] == "epochs" and result["best_at_epoch"] == 8  # every epoch a new best
    lrs = [p["lr"] for p in points]
    assert lrs[:7] == [0.01] * 7 and lrs[7] == pytest.approx(0.009)  # yet the plateau decayed after epoch 7
