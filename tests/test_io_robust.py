"""Streams that never end, closed standard streams, a reader that goes away, stdin as --input,
prompts that are not integers (issue 35, items 4, 6 and 11): one line and exit 2 for what cannot
be read, the work done without a stderr, a quiet end on a closed pipe, no abort."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import decodekit
from decodekit.errors import ConfigError
from tests.support.cli import run, word_checkpoint

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
WORDS = ["the", "company", "said", "profit", "rose"]
linux_only = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")


def python(script: str, *args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """``python -c script args`` in a fresh interpreter importing this checkout."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=timeout, **kwargs,
    )  # fmt: skip


def bash(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``bash -c script python args`` ($0 is this interpreter: no shim in between)."""
    return subprocess.run(
        ["bash", "-c", script, sys.executable, *args],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return word_checkpoint(tmp_path_factory.mktemp("m"), WORDS)


# -- item 4: streams and files read a line at a time, 64 MiB at most --------------------------

ENDLESS = """
import json, re, resource, sys
import torch
from decodekit.cli import main

size = int(re.search(r"VmSize:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + 512 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
codes = []
for args in (["generate", "-"], ["score", "-"], ["score", sys.argv[1]]):
    try:
        main(args)
        codes.append(0)
    except SystemExit as e:
        codes.append(e.code)
print(json.dumps(codes))
"""


@linux_only
def test_endless_stdin_and_a_huge_file_are_one_line_under_a_memory_limit(tmp_path):
    """``generate - < /dev/zero``, ``score - < /dev/zero`` and ``score`` of a 1 GiB file of one line
    with 512 MiB of address space to spare: each stops after 64 MiB with one line, exit 2, before
    the model loads. Before: sys.stdin.read() and read_bytes held it all (a MemoryError traceback)."""
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(2**30)  # sparse: no disk used
    with open("/dev/zero", "rb") as zero:
        done = python(ENDLESS, str(huge), stdin=zero)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == [2, 2, 2]
    assert done.stderr.splitlines() == [
        "Error: standard input: the prompt is longer than 67,108,864 bytes",
        "Error: standard input: line 1 is longer than 67,108,864 bytes (score reads one sentence per line)",
        f"Error: {huge}: line 1 is longer than 67,108,864 bytes (score reads one sentence per line)",
    ]


def test_score_reads_a_line_at_a_time(ckpt, tmp_path, monkeypatch):
    """The lines before a line over the limit, or before one that is not UTF-8, are scored; that
    line is one error (exit 2) naming it. Line ends: \\n, \\r\\n and those of str.splitlines."""
    monkeypatch.setattr("decodekit.util.files.MAX_LINE_BYTES", 20)
    path = tmp_path / "s.txt"
    path.write_bytes(b"the company\r\nprofit rose\rsaid\n\nthe company said profit rose\nthe\n")
    out = run("score", str(path), "--model", ckpt)
    assert out.exit_code == 2
    assert [x.split("\t")[-1] for x in out.stdout.splitlines()] == ["the company", "profit rose", "said", ""]
    assert (
        out.stderr.strip()
        == f"Error: {path}: line 4 is longer than 20 bytes (score reads one sentence per line)"
    )
    path.write_bytes(b"the\nprofit \xff rose\n")
    out = run("score", str(path), "--model", ckpt)
    assert out.exit_code == 2 and len(out.stdout.splitlines()) == 1
    assert out.stderr.strip() == f"Error: {path}: not UTF-8 text (line 2, byte 7: b'\\xff')"


def test_a_prompt_on_stdin_that_is_not_utf8_is_one_line(ckpt):
    out = run("generate", "-", "--model", ckpt, input=b"the \xff")
    assert out.exit_code == 2
    assert out.stderr.strip() == "Error: standard input: the prompt is not UTF-8 text (byte 4: b'\\xff')"
    out = run("generate", "-", "--model", ckpt, "--max-length", "2", "--json", input="\ufeffthe company\n")
    assert out.exit_code == 0 and len(out.stdout.splitlines()) == 1, out.output


# -- item 6: a closed stderr, a closed pipe ---------------------------------------------------


def test_generate_batch_and_train_work_with_stderr_closed(tmp_path):
    """``2>&-`` (Python then has no sys.stderr): each command does its work, status 0, and no
    file it opens takes descriptor 2. Before: exit 1, nothing done (sys.stderr.isatty() on None)."""
    data = tmp_path / "data"
    data.mkdir()
    lines = ["the cat sat on the mat", "the dog ran", "a cat ran on a mat"] * 4
    for name, n in (("train.txt", 12), ("valid.txt", 3), ("test.txt", 3)):
        (data / name).write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    (tmp_path / "in.jsonl").write_text('{"id": 1, "prompt": "the"}\n{"id": 2, "prompt": "company"}\n')
    script = """
        "$0" -m decodekit generate the --max-new-tokens 3 2>&- > "$1/generate.txt"; echo $? > "$1/s1"
        "$0" -m decodekit generate --input "$1/in.jsonl" --output "$1/out.jsonl" --max-new-tokens 3 2>&-
        echo $? > "$1/s2"
        "$0" -m decodekit train --data "$1/data" --out "$1/run" --hidden 4 --embed 4 --epochs 1 --bptt 5 \
            --batch-size 2 --threads 1 2>&- > "$1/train.txt"; echo $? > "$1/s3"
    """
    done = bash(script, str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    statuses = [(tmp_path / f"s{i}").read_text().strip() for i in (1, 2, 3)]
    assert statuses == ["0", "0", "0"]
    assert (tmp_path / "generate.txt").read_text().strip()
    records = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in records) == [1, 2] and all("hypotheses" in r for r in records)
    summary = json.loads((tmp_path / "train.txt").read_text().splitlines()[-1])
    assert summary["event"] == "test" and summary["epochs"] == 1


def test_a_stream_into_head_ends_quietly(tmp_path):
    """``decodekit generate --stream | head -c 5``: killed by SIGPIPE (status 141, as ``cat``
    would be), or 0 if it finished first; nothing on stderr. Before: SIGABRT (status 134) and
    ``terminate called without an active exception`` (the search thread still running at exit)."""
    script = """
        "$0" -m decodekit generate the --stream --max-new-tokens 400 --min-new-tokens 400 \
            2> "$1/err.txt" | head -c 5 > "$1/head.txt"
        echo "${PIPESTATUS[0]}" > "$1/status"
    """
    done = bash(script, str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "status").read_text().strip() in ("141", "0")
    assert (tmp_path / "err.txt").read_text() == ""
    assert len((tmp_path / "head.txt").read_bytes()) == 5


LEFT_STREAMS = """
import decodekit
lm = decodekit.load_model()
for token in decodekit.stream(lm, "the", max_length=2000):
    break
unfinished = decodekit.stream(lm, "the", max_length=2000, min_new_tokens=2000)
next(unfinished), next(unfinished)
print("left")
"""


def test_streams_left_unfinished_do_not_abort_the_exit():
    """A stream broken out of, and one left unfinished at exit: the searches are stopped and
    waited for. Before: SIGABRT at exit (a daemon thread inside torch while the interpreter ended)."""
    done = python(LEFT_STREAMS)
    assert done.returncode == 0 and done.stdout == "left\n", done.stderr[-2000:]
    assert "terminate called" not in done.stderr


# -- item 11: --input - and prompts that are not integers -------------------------------------


def test_input_dash_is_standard_input_and_an_empty_one_has_no_prompts(ckpt, tmp_path, monkeypatch):
    """``--input - < /dev/null``: no prompts, an empty output, status 0. Before: ``--input
    /dev/stdin is not a regular file or a pipe``, though the user typed ``-``."""
    out = tmp_path / "out.jsonl"
    with open(os.devnull, "rb") as null:
        done = subprocess.run(
            [sys.executable, "-m", "decodekit", "generate", "--input", "-", "--output", str(out),
             "--model", ckpt],
            stdin=null, capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == f"0 written, 0 skipped (already done), 0 errors -> {out}"
    assert out.read_text() == ""
    piped = run("generate", "--input", "-", "--output", str(out), "--model", ckpt, "--max-length", "2",
                input='{"id": "a", "prompt": "the"}\n')  # fmt: skip
    assert piped.exit_code == 0, piped.output
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a"]
    monkeypatch.setenv("WORLD_SIZE", "2")  # under torchrun every rank would read part of the one stdin
    monkeypatch.setenv("RANK", "0")
    shared = run("generate", "--input", "-", "--output", str(out), "--model", ckpt, input="")
    assert shared.exit_code == 2 and "--input - cannot be shared by torchrun's processes" in shared.stderr


@pytest.mark.parametrize(
    "prompt, bad",
    [
        (torch.tensor([1.5, 2.0]), "1.5 (float)"),
        (torch.tensor([1.0, 2.0]), "1.0 (float)"),
        (torch.tensor([True, False]), "True (bool)"),
        ([torch.tensor([3, 4]), torch.tensor([0.5])], "0.5 (float)"),
        ([np.array([2.0, 3.0])], "2.0 (float)"),
        ([[1, None]], "None (NoneType)"),
    ],
    ids=["float-tensor", "whole-floats", "bool-tensor", "batch-of-tensors", "numpy-floats", "none"],
)
def test_prompts_that_are_not_integer_ids_are_refused(prompt, bad):
    """As a float in a JSON line's prompt is: one line, never truncated to ids. Before: a float
    tensor ``[1.5, 2.0]`` was decoded as ids [1, 2]."""
    lm = decodekit.load_model()
    for run_with in (decodekit.generate, decodekit.greedy):
        with pytest.raises(ConfigError, match="must hold integer token ids, got " + re.escape(bad)):
            run_with(lm, prompt, max_length=2)
    batch = decodekit.generate(lm, [torch.tensor([2, 3]), np.array([2, 3])], max_length=2)
    assert batch[0][0].tokens == batch[1][0].tokens == decodekit.generate(lm, [2, 3], max_length=2)[0].tokens
