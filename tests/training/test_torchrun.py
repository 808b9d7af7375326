"""``decodekit train`` under torchrun, 2 gloo processes (issue 23.3 and 23.5), started through
``python -m decodekit.distributed`` (torchrun that exits with the workers' status and prints
nothing of its own after a failure). Plain torchrun exits 1 and prints a ~40-line
ChildFailedError traceback after any failing worker, whatever its status (docs/training.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    lines = ["the cat sat on the mat", "the dog ran", "a cat ran on a mat"] * 10
    for name, n in (("train.txt", 30), ("valid.txt", 6), ("test.txt", 3)):
        (d / name).write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    return d


def torchrun(*args: str, timeout: float = 300) -> tuple[int, list[str]]:
    """(exit status, stderr lines without torchrun's OMP_NUM_THREADS banner); ``timeout``: a
    guard against a hang (no collective waiting for a rank that left: the lines and status
    say how it ended), never a budget."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("LOGLEVEL", None)
    cmd = [sys.executable, "-m", "decodekit.distributed", "--nproc-per-node", "2", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and its workers: no hung rank outlives the test
        proc.communicate()
        raise
    lines = [x for x in stderr.splitlines() if "torch/distributed/run.py" not in x and set(x) != {"*"}]
    return proc.returncode, lines


def train_args(data, out, *more):
    return [
        "train", "--data", str(data), "--out", str(out), "--hidden", "6", "--embed", "6", "--layers", "1",
        "--epochs", "2", "--bptt", "5", "--batch-size", "4", "--no-progress", "--device", "cpu", *more,
    ]  # fmt: skip


def test_a_mistake_is_one_line_and_status_2(data, tmp_path):
    code, err = torchrun("-m", "decodekit", *train_args(data, tmp_path / "o", "--batch-size", "3"))
    assert code == 2, err
    assert err == [
        "Error: --batch-size: the batch size 3 (parallel streams, summed over all processes) is not "
        "divisible by the world size 2; pick a multiple of 2"
    ]


def test_ctrl_c_on_one_rank_at_an_epoch_boundary(data, tmp_path):
    """Rank 1 is signalled after epoch 1's last update: both ranks stop after epoch 1's save,
    rank 0 prints the one "Interrupted:" line, status 130; the run resumes to its end."""
    out = tmp_path / "o"
    code, err = torchrun(str(ROOT / "tests/training/torchrun_stop.py"), *train_args(data, out))
    assert code == 130, err
    assert len(err) == 2 and err[0].startswith("epoch 1: train ppl "), err
    assert err[1].startswith("Interrupted: the training state after update ") and " (epoch 1) " in err[1]
    assert [json.loads(x)["epoch"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1]
    from decodekit.cli import main

    main(train_args(data, out, "--resume", "--threads", "1"))  # in this process: no new interpreter
    assert [json.loads(x).get("epoch") for x in (out / "metrics.jsonl").read_text().splitlines()] == [
        1,
        2,
        None,
    ]


def test_a_killed_rank_leaves_one_line_on_the_other(data, tmp_path):
    """Rank 1 is SIGKILLed after its second update (as the out-of-memory killer would): the run's
    status is 137, and rank 0, whose next collective fails, says so in one line. Before: a 44-line
    gloo traceback (``RuntimeError: [.../gloo/transport/tcp/pair.cc:537] Read error ...``)."""
    script = str(ROOT / "tests/training/torchrun_kill.py")
    code, err = torchrun(script, *train_args(data, tmp_path / "o"))
    assert code == 137, err
    assert len(err) <= 1, err  # none when torchrun's SIGTERM reaches rank 0 first
    for line in err:
        assert line.startswith("Error: rank 0 of 2 lost another process of this run (killed or failed"), err
