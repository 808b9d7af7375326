"""Data-parallel training (issue 8): 2 CPU processes with gloo against one process on the same
global batch, and resume with a changed world size.

Tolerance: parameters within 1e-5 (absolute) after 18 SGD updates. The two runs compute the
same gradient in different floating-point orders (two half-batch GEMMs and gloo's sum over
ranks instead of one full-batch GEMM), so they agree to rounding, not bitwise.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal
import socket
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from decodekit.data import Corpus
from decodekit.errors import DecodekitError
from decodekit.models.registry import create_model, make_config
from decodekit.training import TrainConfig, TrainingInterrupted, softmax_cross_entropy, train
from decodekit.training.ddp import DataParallel, SingleProcess, bf16_unsupported, local_rows
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "the", "cat", "dog", "sat", "ran", "on", "mat"])
TOL = 1e-5
STOP = 11  # mid-epoch 2 (9 updates per epoch)


def synthetic(n_sentences: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = []
    for _ in range(n_sentences):
        noun, verb = torch.randint(2, (2,), generator=g).tolist()
        words = ["the", ["cat", "dog"][noun], ["sat", "ran"][verb], "on", "the", "mat", "<eos>"]
        ids += [VOCAB.index[w] for w in words]
    return torch.tensor(ids)


CORPUS = Corpus(VOCAB, synthetic(24, 0), synthetic(6, 1), synthetic(6, 2))  # 168 train tokens
# clip 0.5: the global norm is clipped in most updates, so clipping must act on the averaged gradient
CONFIG = TrainConfig(epochs=2, batch_size=4, bptt=5, lr=4.0, clip=1.0, decay_start=2)


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model(make_config("lstm", embed=8, hidden=8), VOCAB)


def _params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _interrupt_on(rank: int, call: int):
    """A softmax loss that sends Ctrl-C to this process at its ``call``-th use on rank ``rank``."""
    calls = {"n": 0}

    def loss(model, hidden, targets):
        calls["n"] += 1
        if calls["n"] == call and int(os.environ["RANK"]) == rank:
            os.kill(os.getpid(), signal.SIGINT)
        return softmax_cross_entropy(model, hidden, targets)

    return loss


# a signal to one rank just after the collective of update n: (rank, n, signal). "boundary": the
# epoch's last update, when the other rank goes on to validation and the epoch's save (issue 23.3:
# the signalled rank used to leave for the save's all_gather while rank 0 was in validation's
# broadcast: a deadlock); "sigterm": mid-epoch, what a scheduler sends
STOPS = {"boundary": (1, 9, signal.SIGINT), "sigterm": (0, 4, signal.SIGTERM)}


def _signal_after_tally(par, rank: int, update: int, sig: int):
    real, calls = par.tally, itertools.count(1)

    def tally(*args):
        out = real(*args)
        if next(calls) == update and par.rank == rank:
            os.kill(os.getpid(), sig)
        return out

    return tally


def _stopped(par, tmp: str, name: str) -> None:
    """Train with one of STOPS; write how this rank ended to NAME.rankR.json."""
    who, update, sig = STOPS[name]
    par.tally = _signal_after_tally(par, who, update, sig)
    got = {}
    try:
        train(tiny_model(), CORPUS, CONFIG, out=Path(tmp, name), progress=False, parallel=par)
    except TrainingInterrupted as e:
        got = {"epoch": e.epoch, "update": e.update, "signum": int(e.signum)}
    finally:
        del par.tally
    Path(tmp, f"{name}.rank{par.rank}.json").write_text(json.dumps(got))


def _worker(rank: int, size: int, port: int, tmp: str) -> None:
    """One rank: a full run, a run stopped at STOP, the resume of a 1-process partial run, a
    run where only rank 1 gets Ctrl-C (at update 13), and the runs of STOPS."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "RANK": rank, "LOCAL_RANK": rank}
    env["WORLD_SIZE"] = size
    os.environ.update({k: str(v) for k, v in env.items()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # a broken test fails, not hangs
    par, _ = DataParallel.from_env(torch.device("cpu"))
    try:
        jobs = {"ddp": {}, "ddp_part": {"stop_after_updates": STOP}, "one_part": {"resume": True}}
        for name, kwargs in jobs.items():
            model = tiny_model()
            result = train(model, CORPUS, CONFIG, out=Path(tmp, name), progress=False, parallel=par, **kwargs)
            if rank == 0:
                torch.save(_params(model), Path(tmp, f"{name}.pt"))
                Path(tmp, f"{name}.json").write_text(json.dumps(dataclasses.asdict(result)))
        with pytest.raises(KeyboardInterrupt):  # on both ranks, after the same update
            loss = _interrupt_on(rank=1, call=13)
            train(
                tiny_model(),
                CORPUS,
                CONFIG,
                out=Path(tmp, "ctrl_c"),
                progress=False,
                parallel=par,
                loss_fn=loss,
            )
        for name in STOPS:
            _stopped(par, tmp, name)
    finally:
        par.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The reference (1 process), a 1-process run stopped at STOP, then 2 gloo processes."""
    tmp = tmp_path_factory.mktemp("ddp")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(tiny_model(), CORPUS, CONFIG, out=tmp / "one_part", progress=False, stop_after_updates=STOP)
        ctx = mp.get_context("forkserver")  # one fresh server imports torch once; the ranks fork from it
        ctx.set_forkserver_preload(["torch", "torch._dynamo", "decodekit.training"])
        ranks = mp.start_processes(
            _worker, args=(2, _free_port(), str(tmp)), nprocs=2, join=False, start_method="forkserver"
        )
        ref_model = tiny_model()  # while the two ranks start up
        ref = train(ref_model, CORPUS, CONFIG, out=tmp / "ref", progress=False)
        while not ranks.join():
            pass
    finally:
        torch.set_num_threads(n)
    return tmp, ref, _params(ref_model)


def _close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    for k, v in want.items():
        diff = (got[k] - v).abs().max().item()
        assert diff <= TOL, f"{k}: max |difference| {diff:.3g} > {TOL}"


def test_two_processes_equal_one_process_on_the_global_batch(runs):
    tmp, ref, ref_params = runs
    _close(torch.load(tmp / "ddp.pt"), ref_params)
    got = json.loads((tmp / "ddp.json").read_text())
    assert [r["updates"] for r in got["epochs"]] == [r["updates"] for r in ref.epochs] == [9, 18]
    for a, b in zip(got["epochs"], ref.epochs):
        assert a["valid_ppl"] == pytest.approx(b["valid_ppl"], rel=1e-5)
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-5)  # summed over both ranks
    # only rank 0 wrote: one metrics line per epoch, one checkpoint
    lines = (tmp / "ddp" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == [1, 2]
    assert (tmp / "ddp" / "resume.safetensors").is_file()


def test_resume_from_two_processes_in_one(runs):
    tmp, ref, ref_params = runs
    assert json.loads((tmp / "ddp_part.json").read_text())["stopped"] == "updates"
    torch.set_num_threads(1)
    model = tiny_model()
    got = train(model, CORPUS, CONFIG, out=tmp / "ddp_part", resume=True, progress=False)
    _close(_params(model), ref_params)
    assert got.epochs[-1]["valid_ppl"] == pytest.approx(ref.epochs[-1]["valid_ppl"], rel=1e-5)


def test_ctrl_c_on_one_rank_stops_all_and_resumes(runs):
    tmp, ref, ref_params = runs
    model = tiny_model()
    got = train(model, CORPUS, CONFIG, out=tmp / "ctrl_c", resume=True, progress=False)
    assert [r["updates"] for r in got.epochs] == [9, 18]
    _close(_params(model), ref_params)


@pytest.mark.parametrize("name", STOPS)
def test_a_signal_to_one_rank_stops_all_at_the_same_point_and_resumes(runs, name):
    """Both ranks stop at one point, the state saved; resumed, the run is the reference (a rank
    left waiting in a collective would end in gloo's timeout error, not this stop: no clock read).
    At the epoch boundary: after that epoch's save (its metrics line written), never in between."""
    tmp, ref, ref_params = runs
    got = [json.loads((tmp / f"{name}.rank{r}.json").read_text()) for r in (0, 1)]
    want = {"boundary": (1, 9, signal.SIGINT), "sigterm": (1, 5, signal.SIGTERM)}[name]
    for g in got:
        assert (g.get("epoch"), g.get("update"), g.get("signum")) == want, got
    metrics = tmp / name / "metrics.jsonl"
    epochs = [json.loads(x)["epoch"] for x in metrics.read_text().splitlines()] if metrics.exists() else []
    assert epochs == ([1] if name == "boundary" else [])
    model = tiny_model()
    result = train(model, CORPUS, CONFIG, out=tmp / name, resume=True, progress=False)
    assert [r["updates"] for r in result.epochs] == [9, 18]
    _close(_params(model), ref_params)


def test_resume_from_one_process_in_two(runs):
    tmp, ref, ref_params = runs
    _close(torch.load(tmp / "one_part.pt"), ref_params)
    got = json.loads((tmp / "one_part.json").read_text())
    assert got["epochs"][-1]["train_loss"] == pytest.approx(ref.epochs[-1]["train_loss"], rel=1e-5)


def test_batch_must_divide_by_world_size():
    assert local_rows(6, 1, 3) == slice(2, 4)
    with pytest.raises(ValueError, match="batch size 5 .* not divisible by the world size 2"):
        local_rows(5, 0, 2)
    data = torch.arange(12).view(4, 3)
    assert torch.equal(SingleProcess().shard(data), data)
    assert torch.equal(DataParallel(1, 2, torch.device("cpu")).shard(data), data[2:])


NO_CPU_BF16 = pytest.mark.skipif(
    bf16_unsupported("cpu") is not None,
    reason=f"this CPU cannot run bfloat16 autocast: {bf16_unsupported('cpu')}",
)


@NO_CPU_BF16
def test_bf16_autocast_trains_on_cpu(tmp_path):
    torch.set_num_threads(1)
    model = tiny_model()
    config = TrainConfig(epochs=1, batch_size=4, bptt=5, lr=0.5, amp="bf16")
    got = train(model, CORPUS, config, out=tmp_path, progress=False)
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())
    assert got.epochs[0]["valid_ppl"] < len(VOCAB)  # learned something: below uniform
    with pytest.raises(ValueError, match="amp must be 'off' or 'bf16', got 'fp8'"):
        TrainConfig(amp="fp8")


@NO_CPU_BF16
def test_cli_under_a_torchrun_environment(tmp_path, monkeypatch):
    """``decodekit train`` as torchrun starts it (here a world of one process, in-process):
    DDP, rank 0's summary, the group closed afterwards; --amp bf16 is accepted."""
    import torch.distributed as dist
    from click.testing import CliRunner

    from decodekit.cli import _register, cli

    _register()
    data = tmp_path / "data"
    data.mkdir()
    for split, ids in (("train", CORPUS.train), ("valid", CORPUS.valid), ("test", CORPUS.test)):
        (data / f"{split}.txt").write_text(" ".join(VOCAB.decode(ids.tolist())).replace(" <eos> ", "\n"))
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": _free_port(),
        "RANK": 0,
        "LOCAL_RANK": 0,
        "WORLD_SIZE": 1,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    torch.set_num_threads(1)
    args = ["train", "--data", str(data), "--hidden", "8", "--embed", "8", "--epochs", "1", "--bptt", "5"]
    result = CliRunner().invoke(cli, [*args, "--no-progress", "--amp", "bf16", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.splitlines()[-1])["event"] == "test"
    assert not dist.is_initialized()


def test_bf16_on_a_cpu_without_it_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    """On an AVX2-only CPU oneDNN has no bfloat16 LSTM: `train --amp bf16` says so, before training."""
    from decodekit.cli import main
    from decodekit.training import ddp

    monkeypatch.setattr(ddp, "bf16_unsupported", lambda device_type: "could not create a primitive")
    with pytest.raises(DecodekitError, match="--amp bf16 cannot run on this CPU .*; use --amp off"):
        train(tiny_model(), CORPUS, TrainConfig(epochs=1, batch_size=4, bptt=5, amp="bf16"), progress=False)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "valid", "test"):
        (data / f"{split}.txt").write_text("a b a b\nb a b a\n")
    args = ["train", "--data", str(data), "--hidden", "8", "--embed", "8", "--epochs", "1", "--amp", "bf16"]
    with pytest.raises(SystemExit) as exit:
        main([*args, "--device", "cpu", "--no-progress", "--out", str(tmp_path / "o")])
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: --amp bf16 cannot run") and "\n" not in err
