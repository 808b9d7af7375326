"""Training killed (SIGKILL) at chosen moments, then resumed (issue 16): every epoch and the test
line appear exactly once in metrics.jsonl, no temporary file is left, config.json agrees with the
weights, and the result is bitwise that of an uninterrupted run.

Each run is a forked child of the test process (no new interpreter, so a run takes a fraction of a
second); the kill is the child sending itself SIGKILL from inside a file write: before it starts,
after the temporary file is written but before it is renamed, or just after the rename; or after
a given number of updates."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import sys

import pytest
import torch
from safetensors.torch import load_file

from decodekit import checkpoint
from decodekit.checkpoint import load_checkpoint, read_config, temporary_name
from decodekit.cli import main
from decodekit.training import loop, resume, rundir
from decodekit.util.locking import LockedError
from tests.support.fakes import held_by_another_process

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    lines = ["the cat sat on the mat", "the dog ran", "a cat ran on a mat"] * 10
    for name, n in (("train.txt", 30), ("valid.txt", 6), ("test.txt", 3)):
        (d / name).write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    return d


def argv(corpus, out):
    return [
        "train", "--data", str(corpus), "--out", str(out), "--hidden", "6", "--embed", "6",
        "--layers", "1", "--epochs", "2", "--bptt", "5", "--batch-size", "4", "--dropout", "0.2",
        "--no-progress", "--threads", "1",
    ]  # fmt: skip


def in_child(args, kill: tuple[int, str] | None = None, stderr=None) -> int:
    """Run ``decodekit`` with ``args`` in a forked child; ``kill = (n, phase)``: SIGKILL at the
    n-th file write (phase "before", "written", "after") or after update n (phase "update"; with
    phase "sigint" or "sigterm" that signal instead; "valid": a Ctrl-C during the n-th
    validation). Returns the wait status (the exit code if it exited)."""
    pid = os.fork()
    if pid:
        status = os.waitpid(pid, 0)[1]
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    code = 99
    try:
        if stderr is not None:
            sys.stderr = open(stderr, "w", buffering=1)  # noqa: SIM115
        if kill is not None:
            _arm(*kill)
        main(args)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _arm(n: int, phase: str) -> None:
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if phase == "valid":
        real_evaluate, calls = loop.evaluate, itertools.count(1)

        def evaluate(*a, **k):
            if next(calls) == n:
                os.kill(os.getpid(), signal.SIGINT)
            return real_evaluate(*a, **k)

        loop.evaluate = evaluate
        return
    if phase in ("update", "sigint", "sigterm"):
        real_update, updates = loop._Run.update, itertools.count(1)
        sig = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}.get(phase)

        def update(self, *a, **k):
            if next(updates) == n:  # during the update, as a real Ctrl-C would arrive
                os.kill(os.getpid(), sig) if sig else die()
            real_update(self, *a, **k)

        loop._Run.update = update
        return
    real, calls = checkpoint.atomic_write, itertools.count(1)

    def write(path, fn):
        i = next(calls)
        if i == n and phase == "before":
            die()
        if i == n and phase == "written":
            fn(temporary_name(path))
            die()
        real(path, fn)
        if i == n and phase == "after":
            die()

    for module in (checkpoint, resume, rundir):
        module.atomic_write = write


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """The uninterrupted run, in this process: the forked children inherit its warm imports."""
    out = tmp_path_factory.mktemp("ref") / "run"
    n = torch.get_num_threads()
    main(argv(corpus, out))
    torch.set_num_threads(n)
    return out


def metrics(out):
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


# 12 file writes in a 2-epoch run: the first resume state; per epoch vocab, weights, config (the
# best checkpoint), resume state, metrics; the metrics with the test line.
KILLS = [(1, "written"), (2, "written"), (3, "after"), (4, "written"), (5, "before"), (6, "written")]
KILLS += [(6, "after"), (9, "written"), (10, "written"), (11, "after"), (12, "written"), (7, "update")]


@pytest.mark.parametrize("kill", KILLS, ids=[f"{n}-{p}" for n, p in KILLS])
def test_kill_then_resume_equals_an_uninterrupted_run(corpus, reference, tmp_path, kill):
    out = tmp_path / "run"
    status = in_child(argv(corpus, out), kill)
    assert status != 0 and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    assert in_child([*argv(corpus, out), "--resume"]) == 0
    got, ref = metrics(out), metrics(reference)
    assert [r.get("epoch") for r in got] == [1, 2, None] and got[-1]["event"] == "test"
    assert [r["valid_ppl"] for r in got[:2]] == [r["valid_ppl"] for r in ref[:2]]
    assert got[-1]["test_ppl"] == ref[-1]["test_ppl"]
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "metrics.jsonl",
        "model.safetensors",
        "resume.safetensors",
        "vocab.txt",
    ]  # fmt: skip  (no temporary file, no lock file)
    assert json.loads((out / "config.json").read_text()) == read_config(out)
    assert read_config(out)["epoch"] == read_config(reference)["epoch"]
    for name in ("model.safetensors", "resume.safetensors"):
        a, b = load_file(str(out / name)), load_file(str(reference / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    load_checkpoint(out)


def test_resume_of_a_finished_run_keeps_one_test_line(corpus, reference, tmp_path):
    out = tmp_path / "run"
    assert in_child(argv(corpus, out)) == 0
    assert in_child([*argv(corpus, out), "--resume"]) == 0
    assert [r.get("event", r.get("epoch")) for r in metrics(out)] == [1, 2, "test"]
    more = [*argv(corpus, out), "--resume"]
    more[more.index("--epochs") + 1] = "3"
    assert in_child(more) == 0
    assert [r.get("event", r.get("epoch")) for r in metrics(out)] == [1, 2, 3, "test"]


def test_ctrl_c_says_what_was_saved_and_how_to_continue(corpus, reference, tmp_path):
    out, log = tmp_path / "run", tmp_path / "stderr.txt"
    assert in_child(argv(corpus, out), (3, "sigint"), stderr=log) == 130
    err = log.read_text().strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"Interrupted: the training state after update 3 (epoch 1) is saved in {out}/")
    command = err[0].split("; continue with: ")[1]
    assert command == shlex.join(["decodekit", *argv(corpus, out), "--resume"])
    assert in_child(shlex.split(command)[1:]) == 0
    a, b = load_file(str(out / "model.safetensors")), load_file(str(reference / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("phase", ["sigterm", "valid"])
def test_sigterm_and_a_stop_during_validation(corpus, reference, tmp_path, phase):
    """SIGTERM (a scheduler's stop) is Ctrl-C with exit status 143; a Ctrl-C during the first
    epoch's validation stops after that epoch's save (its metrics line written)."""
    out, log = tmp_path / "run", tmp_path / "stderr.txt"
    assert in_child(argv(corpus, out), (3 if phase == "sigterm" else 1, phase), stderr=log) == (
        143 if phase == "sigterm" else 130
    )
    err = log.read_text().strip().splitlines()
    update = 3 if phase == "sigterm" else metrics(reference)[0]["updates"]
    assert len(err) == (1 if phase == "sigterm" else 2), err  # "valid": epoch 1's line first
    assert err[-1].startswith(f"Interrupted: the training state after update {update} (epoch 1) ")
    assert (out / "metrics.jsonl").exists() == (phase == "valid")  # written after epoch 1's save
    if phase == "valid":
        assert [r["epoch"] for r in metrics(out)] == [1]
    assert in_child([*argv(corpus, out), "--resume"]) == 0
    assert [r.get("epoch") for r in metrics(out)] == [1, 2, None]
    a, b = load_file(str(out / "model.safetensors")), load_file(str(reference / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_second_writer_is_refused_naming_the_first(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    with held_by_another_process(out) as pid:
        with pytest.raises(SystemExit) as e:
            main(argv(corpus, out))
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1, err
        assert err[0].startswith(f"Error: {out} is in use by another decodekit process (pid {pid} on ")
        assert "choose another --out" in err[0]
        with pytest.raises(LockedError, match=f"pid {pid}"):
            train_library(corpus, out)
        assert not list(out.iterdir())[1:]  # nothing but the lock file was written
    assert not (out / ".lock").exists()
    main(argv(corpus, out))  # free again
    assert [r.get("epoch") for r in metrics(out)] == [1, 2, None]


def train_library(data, out):
    from decodekit.data import load_data
    from decodekit.models.registry import create_model, make_config
    from decodekit.training import TrainConfig, train

    corpus = load_data(data)
    model = create_model(make_config("lstm", embed=4, hidden=4, layers=1), corpus.vocab)
    return train(model, corpus, TrainConfig(epochs=1, batch_size=4, bptt=5), out=out, progress=False)


def test_fresh_run_refuses_an_earlier_runs_files(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"epoch": 1}\n')
    with pytest.raises(SystemExit) as e:
        main(argv(corpus, out))
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1
    assert "already holds a training run (metrics.jsonl); pass --resume" in err[0] and "--overwrite" in err[0]
    with pytest.raises(SystemExit) as e:
        main([*argv(corpus, out), "--resume"])  # files but no resume state
    assert (
        e.value.code == 2 and "no resume.safetensors to resume; pass --overwrite" in capsys.readouterr().err
    )
    main([*argv(corpus, out), "--overwrite"])
    assert [r.get("epoch") for r in metrics(out)] == [1, 2, None]
    with pytest.raises(SystemExit) as e:
        main([*argv(corpus, out), "--overwrite", "--resume"])
    assert e.value.code == 2
    fresh = tmp_path / "fresh"
    main([*argv(corpus, fresh), "--resume"])  # nothing to resume: a new run
    assert "nothing to resume" in capsys.readouterr().err
    assert [r.get("epoch") for r in metrics(fresh)] == [1, 2, None]
