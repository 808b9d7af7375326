"""Training on a tiny synthetic corpus, exact resume, perplexity against hand computations."""

from __future__ import annotations

import json
import math
import os
import signal

import pytest
import torch

from decodekit.data import Corpus
from decodekit.errors import CheckpointError
from decodekit.models.registry import create_model, make_config
from decodekit.training import TrainConfig, evaluate, softmax_cross_entropy, train
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "the", "cat", "dog", "sat", "ran", "on", "mat"])


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def synthetic(n_sentences: int, seed: int) -> torch.Tensor:
    """Sentences 'the {cat|dog} {sat|ran} on the mat <eos>': highly predictable."""
    g = torch.Generator().manual_seed(seed)
    ids = []
    for _ in range(n_sentences):
        noun = ["cat", "dog"][torch.randint(2, (1,), generator=g).item()]
        verb = ["sat", "ran"][torch.randint(2, (1,), generator=g).item()]
        ids += [VOCAB.index[w] for w in ["the", noun, verb, "on", "the", "mat", "<eos>"]]
    return torch.tensor(ids)


CORPUS = Corpus(VOCAB, synthetic(60, 0), synthetic(10, 1), synthetic(10, 2))
CONFIG = TrainConfig(epochs=3, batch_size=4, bptt=5, lr=0.5, clip=5.0, decay_start=3)


def tiny_model(kind: str = "lstm", **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    sizes = {
        "lstm": {"embed": 8, "hidden": 8},
        "rnn": {"embed": 8, "hidden": 8},
        "mlp": {"order": 3, "embed": 4},
    }
    return create_model(make_config(kind, **{**sizes[kind], **overrides}), VOCAB)


@pytest.mark.parametrize("kind", ["lstm", "rnn", "mlp"])
def test_training_reduces_perplexity(kind, tmp_path):
    model = tiny_model(kind)
    before = evaluate(model, CORPUS.valid).ppl
    config = TrainConfig(epochs=4, batch_size=4, bptt=5, lr=0.03, optimizer="adam", schedule="constant")
    result = train(model, CORPUS, config, out=tmp_path, progress=False)
    after = evaluate(model, CORPUS.valid).ppl
    assert before > 7 and after < 2.5, (before, after)  # uniform: ppl 9; the source: exp(2 ln 2 / 7) = 1.22
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in lines] == [1, 2, 3, 4] == [r["epoch"] for r in result.epochs]
    assert all(r["train_ppl"] > 0 and r["train_tokens_per_s"] > 0 for r in lines)


def test_adam_and_plateau_and_early_stop(tmp_path):
    model = tiny_model("lstm")
    config = TrainConfig(
        epochs=12,
        batch_size=4,
        bptt=5,
        lr=0.1,
        optimizer="adam",
        schedule="plateau",
        decay=0.5,
        patience=1,
        early_stop=2,
    )
    result = train(model, CORPUS, config, out=tmp_path, progress=False)
    assert result.stopped == "early_stop" and len(result.epochs) < 12
    lrs = [r["lr"] for r in result.epochs]
    assert lrs[0] == 0.1 and min(lrs) < 0.1  # decayed after a non-improving epoch


def params(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize(
    "stop_at", [7, 10]
)  # 7: mid-epoch (state carried), 10: an epoch boundary (5 updates/epoch)
def test_resume_is_bitwise_exact(tmp_path, stop_at):
    config = CONFIG
    full = tiny_model("lstm", dropout=0.3)  # dropout: the RNG state must be restored too
    ref = train(full, CORPUS, config, out=tmp_path / "a", progress=False)
    part = tiny_model("lstm", dropout=0.3)
    train(part, CORPUS, config, out=tmp_path / "b", progress=False, stop_after_updates=stop_at)
    resumed = tiny_model("lstm", dropout=0.3)
    torch.manual_seed(123)  # whatever the process did meanwhile
    got = train(resumed, CORPUS, config, out=tmp_path / "b", resume=True, progress=False)
    for k, v in params(full).items():
        assert torch.equal(v, resumed.state_dict()[k]), k
    assert got.epochs[-1]["valid_ppl"] == ref.epochs[-1]["valid_ppl"]
    assert [r["train_loss"] for r in got.epochs] == [r["train_loss"] for r in ref.epochs]


def test_ctrl_c_saves_and_resumes_exactly(tmp_path):
    full = tiny_model("rnn")
    train(full, CORPUS, CONFIG, out=tmp_path / "a", progress=False)
    calls = {"n": 0}

    def interrupting_loss(model, hidden, targets):
        calls["n"] += 1
        if calls["n"] == 8:
            os.kill(os.getpid(), signal.SIGINT)  # arrives mid-update; the loop finishes the update first
        return softmax_cross_entropy(model, hidden, targets)

    part = tiny_model("rnn")
    with pytest.raises(KeyboardInterrupt):
        train(part, CORPUS, CONFIG, out=tmp_path / "b", progress=False, loss_fn=interrupting_loss)
    resumed = tiny_model("rnn")
    train(resumed, CORPUS, CONFIG, out=tmp_path / "b", resume=True, progress=False)
    for k, v in params(full).items():
        assert torch.equal(v, resumed.state_dict()[k]), k


def test_resume_refuses_other_settings(tmp_path):
    train(tiny_model(), CORPUS, CONFIG, out=tmp_path, progress=False, stop_after_updates=2)
    with pytest.raises(CheckpointError, match="training options differ"):
        train(
            tiny_model(),
            CORPUS,
            TrainConfig(epochs=3, batch_size=2),
            out=tmp_path,
            resume=True,
            progress=False,
        )
    with pytest.raises(CheckpointError, match="do not fit|another model"):
        train(tiny_model(hidden=9), CORPUS, CONFIG, out=tmp_path, resume=True, progress=False)
    with pytest.raises(CheckpointError, match="not found"):
        train(tiny_model(), CORPUS, CONFIG, out=tmp_path / "none", resume=True, progress=False)


def test_size_guard_and_vocab_mismatch():
    with pytest.raises(ValueError, match="logits per update exceeds"):
        train(tiny_model(), CORPUS, TrainConfig(batch_size=1000, bptt=1000, max_logits=10**6), progress=False)
    other = Corpus(WordVocab(["<unk>", "<eos>", "x"]), CORPUS.train, CORPUS.valid, CORPUS.test)
    with pytest.raises(ValueError, match="not the corpus vocabulary"):
        train(tiny_model(), other, CONFIG, progress=False)


def test_perplexity_of_uniform_model_is_vocab_size():
    model = tiny_model("mlp")
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    result = evaluate(model, CORPUS.test)
    assert result.tokens == CORPUS.test.numel()  # bos is fed first: every token is predicted
    assert result.ppl == pytest.approx(len(VOCAB), rel=1e-6)
    assert result.nll == pytest.approx(CORPUS.test.numel() * math.log(len(VOCAB)), rel=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "rnn", "mlp"])
def test_perplexity_equals_step_by_step_sum(kind):
    model = tiny_model(kind).double()
    ids = CORPUS.test[:23]
    state, nll = model.initial_state(1), 0.0
    prev = torch.tensor([model.bos_id])
    for t in ids.tolist():  # batch 1, one token at a time, state carried: the literature's definition
        logprobs, state = model.step(state, prev)
        nll -= logprobs[0, t].item()
        prev = torch.tensor([t])
    result = evaluate(model, ids, chunk=4)
    assert result.nll == pytest.approx(nll, rel=1e-6)
    assert result.ppl == pytest.approx(math.exp(nll / 23), rel=1e-6)


def test_resume_header_keeps_the_loop_keys_and_train_ppl_only_for_the_exact_nll(tmp_path):
    """The resume state's ``loop`` entry has the keys run directories have always had (older ones
    must still resume); ``train_ppl`` is reported only when the loss is the exact NLL."""
    from safetensors import safe_open

    from decodekit.training import Loss

    config = TrainConfig(epochs=1, batch_size=4, bptt=5)
    got = train(tiny_model(), CORPUS, config, out=tmp_path / "a", progress=False)
    meta = safe_open(str(tmp_path / "a" / "resume.safetensors"), "pt").metadata()
    keys = ["epoch", "position", "update", "best", "bad_epochs", "history", "run_nll", "run_tokens"]
    assert list(json.loads(meta["loop"])) == [*keys, "run_seconds"]
    assert got.epochs[0]["train_ppl"] == pytest.approx(math.exp(got.epochs[0]["train_loss"]))
    plain = train(tiny_model(), CORPUS, config, progress=False, loss_fn=lambda *a: softmax_cross_entropy(*a))
    exact = Loss(softmax_cross_entropy, nll=True)
    marked = train(tiny_model(), CORPUS, config, progress=False, loss_fn=exact)
    assert plain.epochs[0]["train_ppl"] is None and marked.epochs[0]["train_ppl"] is not None
    assert plain.epochs[0]["train_loss"] == marked.epochs[0]["train_loss"] == got.epochs[0]["train_loss"]


def test_progress_lines_without_a_terminal_and_a_divergence_warning(tmp_path, capsys, monkeypatch):
    """stderr not a terminal (here: captured): no bar, so a progress line every PROGRESS_SECONDS
    (0 here: after every update); a learning rate that blows the loss up is said once."""
    from decodekit.training import loop as loop_module

    monkeypatch.setattr(loop_module, "PROGRESS_SECONDS", 0.0)
    config = TrainConfig(epochs=1, batch_size=4, bptt=5, lr=0.03, optimizer="adam", schedule="constant")
    train(tiny_model("rnn"), CORPUS, config, out=tmp_path / "ok", progress=True)
    err = capsys.readouterr().err.splitlines()
    during = [x for x in err if x.startswith("epoch 1: batch ")]
    assert len(during) >= 5 and all("train ppl" in x and "tok/s" in x for x in during), err
    assert any("(100 %)" in x for x in during) and not any("diverges" in x for x in err)
    wild = TrainConfig(epochs=2, batch_size=4, bptt=5, lr=1e4, clip=1e9, schedule="constant")
    diverges = r"training diverges: .*worse than guessing uniformly among the 9 tokens"
    assert not any("diverges" in x for x in capsys.readouterr().err.splitlines())
    with pytest.warns(UserWarning, match=diverges):
        train(tiny_model("rnn"), CORPUS, wild, out=tmp_path / "wild", progress=True)
