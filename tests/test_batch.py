import json

import pytest
import regex

import decodekit
import decodekit.decoding.memory
from decodekit.decoding.generation import GenerationConfig, generate
from decodekit.jobs import generate_jsonl
from tests.support.fakes import HistoryLM, word_vocab

WORDS = ["the", "company", "said", "profit", "rose"]


@pytest.fixture
def model():
    return HistoryLM(len(WORDS) + 2, seed=3, bos_id=1, eos_id=1, vocab=word_vocab(WORDS))


def lines_for(n, **extra):
    return [json.dumps({"id": i, "prompt": "the company", **extra}) for i in range(n)]


def read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_generate_dispatches_like_the_strategies(model):
    prompts = [[2], [3, 4]]
    assert generate(model, prompts, GenerationConfig(max_length=4)) == decodekit.greedy(model, prompts, 4)
    cfg = GenerationConfig(strategy="beam", beam_size=3, max_length=4, n_best=2)
    assert generate(model, prompts, cfg) == decodekit.beam_search(model, prompts, 3, 4, n_best=2)
    cfg = GenerationConfig(constraint=r".*\bprofit\b.*", beam_size=2, max_length=4)
    assert generate(model, prompts, cfg) == decodekit.constrained_beam_search(
        model, prompts, cfg.constraint, 2, 4
    )


def test_jsonl_results_errors_and_per_line_options(model, tmp_path):
    out = tmp_path / "out.jsonl"
    lines = [
        json.dumps({"id": "a", "prompt": "the company"}),
        "{not json",
        json.dumps({"id": "b", "prompt": [2, 3], "constraint": r".*\bprofit\b.*", "max_length": 5}),
        json.dumps({"id": "c", "prompt": "the", "bogus_option": 1}),
        json.dumps({"prompt": "the"}),
        json.dumps({"id": "d", "prompt": "the", "strategy": "sample", "seed": 1, "num_samples": 2}),
    ]
    counts = generate_jsonl(model, lines, out, GenerationConfig(max_length=4), batch_size=2)
    assert counts | {"first_error": None} == {
        "written": 3, "skipped": 0, "errors": 3, "duplicates": 0, "first_error": None,
    }  # fmt: skip
    assert counts["first_error"].startswith("line 2: invalid JSON")
    records = {json.dumps(r["id"]): r for r in read(out)}
    assert regex.fullmatch(r".*\bprofit\b.*", records['"b"']["hypotheses"][0]["text"])
    assert len(records['"d"']["hypotheses"]) == 2
    errors = [r for r in read(out) if "error" in r]
    assert {r["line"] for r in errors} == {2, 4, 5}
    assert any("bogus_option" in r["error"] for r in errors)


def test_resume_skips_done_ids_and_drops_a_partial_line(model, tmp_path):
    out = tmp_path / "out.jsonl"
    lines = lines_for(7)
    generate_jsonl(model, lines[:3], out, GenerationConfig(max_length=3), batch_size=2)
    with open(out, "a") as f:
        f.write('{"id": 3, "hypo')  # a crash in the middle of a write
    counts = generate_jsonl(model, lines, out, GenerationConfig(max_length=3), batch_size=2, resume=True)
    assert counts["skipped"] == 3 and counts["written"] == 4
    ids = [r["id"] for r in read(out)]
    assert sorted(ids) == list(range(7)) and len(ids) == 7
    fresh = tmp_path / "fresh.jsonl"
    generate_jsonl(model, lines, fresh, GenerationConfig(max_length=3), batch_size=2)
    assert sorted(read(fresh), key=lambda r: r["id"]) == sorted(read(out), key=lambda r: r["id"])


def test_batches_share_one_step_per_time_step(model, tmp_path):
    model.eos_id = None  # no EOS: every prompt runs all steps
    decodekit.decoding.memory.state_profile(model)  # the memory estimate measures the state once per model
    model.calls = 0
    generate_jsonl(model, lines_for(4), tmp_path / "o.jsonl", GenerationConfig(max_length=3), batch_size=4)
    assert model.calls == 3 + 2  # prefill of BOS + 2 prompt words, then 2 steps, for all 4 prompts at once


def test_torchrun_two_ranks_equal_one_process(tmp_path):
    """Two gloo processes under torchrun split the lines; the merged output equals one process's."""
    import subprocess
    import sys

    import torch

    from decodekit.checkpoint import save_checkpoint
    from decodekit.models.lstm import LSTMLM, LSTMConfig

    torch.manual_seed(0)
    model = LSTMLM(LSTMConfig(embed=8, hidden=8, layers=1), word_vocab(WORDS)).eval()
    save_checkpoint(model, tmp_path / "ckpt")
    lines = [json.dumps({"id": i, "prompt": WORDS[i % 5]}) for i in range(9)] + ["oops"]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    common = [
        "generate",
        "--input",
        str(tmp_path / "in.jsonl"),
        "--model",
        str(tmp_path / "ckpt"),
        "--max-length",
        "4",
        "--batch-size",
        "2",
    ]
    one = subprocess.run(
        [sys.executable, "-m", "decodekit", *common, "--output", str(tmp_path / "one.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert one.returncode == 1 and "1 line(s) failed (first: line 10: invalid JSON" in one.stderr, one.stderr
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "decodekit",
            *common,
            "--output",
            str(tmp_path / "two.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert two.returncode == 1 and "1 line(s) failed" in two.stderr, two.stderr[-3000:]
    key = lambda r: json.dumps(r.get("id"))  # noqa: E731
    assert sorted(read(tmp_path / "one.jsonl"), key=key) == sorted(read(tmp_path / "two.jsonl"), key=key)
    assert not list(tmp_path.glob("two.jsonl.rank*")) and not list(tmp_path.glob(".*"))  # nor locks
