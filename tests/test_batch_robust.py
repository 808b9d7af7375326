"""Batch generation under bad input, resumption, seeds and a second writer (issue 16)."""

from __future__ import annotations

import json
import os

import pytest
import torch

from decodekit.checkpoint import save_checkpoint
from decodekit.decoding.generation import GenerationConfig
from decodekit.errors import DecodekitError
from decodekit.jobs import generate_jsonl, record_seed
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab
from tests.support.cli import exit_and_stderr as cli
from tests.support.fakes import held_by_another_process

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return LSTMLM(LSTMConfig(embed=16, hidden=16, layers=1), WordVocab(["<unk>", "<eos>", *WORDS])).eval()


@pytest.fixture(scope="module")
def model_dir(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_checkpoint(model, path)
    return str(path)


def read(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def good(i, **extra):
    return json.dumps({"id": i, "prompt": WORDS[i % 8] + " " + WORDS[(i + 3) % 8], **extra})


BAD = {
    "top_k": ('{"id": "k", "prompt": "the", "strategy": "sample", "top_k": [1, 2]}', "top_k must be"),
    "max_length": ('{"id": "m", "prompt": "the", "max_length": null}', "max_length must be an integer"),
    "temperature": (
        '{"id": "t", "prompt": "the", "strategy": "sample", "temperature": "hot"}',
        "temperature",
    ),
    "seed": ('{"id": "s", "prompt": "the", "strategy": "sample", "seed": "abc"}', "seed must be an integer"),
    "nested": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "samples": ('{"id": "n", "prompt": "the", "strategy": "sample", "num_samples": 1000000}', "at most num"),
    "beam": ('{"id": "b", "prompt": "the", "strategy": "beam", "beam_size": 1000000}', "at most beam_size="),
    "surrogate": ('{"id": "\\ud800", "prompt": "the"}', "lone surrogate (\\ud800)"),
    "oov": ('{"id": "o", "prompt": [2, 99999]}', "token id(s) [99999] outside the vocabulary [0, 10)"),
    "utf8": (b'{"id": "u", "prompt": "caf\xe9"}', "not valid UTF-8 (byte 0xe9 at column 27)"),
    "nan": ('{"id": "x", "prompt": "the", "length_penalty": NaN}', "NaN is not valid JSON"),
    "penalty": ('{"id": "y", "prompt": "the", "length_penalty": 1e999}', "length_penalty must be a finite"),
}


def test_every_bad_line_gets_its_own_error_and_resume_writes_nothing_twice(model_dir, tmp_path, capfd):
    rows = (
        [good(i).encode() for i in range(8)]
        + [BAD["oov"][0].encode()]
        + [good(i).encode() for i in range(8, 15)]
    )
    rows += [v.encode() if isinstance(v, str) else v for k, (v, _) in BAD.items() if k != "oov"]
    rows += [good(15).encode(), b"", b"{not json"]  # a blank line is no record
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    args = ["generate", "--model", model_dir, "--input", str(tmp_path / "in.jsonl"), "--output"]
    args += [str(tmp_path / "out.jsonl"), "--max-length", "4", "--max-memory", "200M"]
    code, err = cli(capfd, *args)
    assert code == 1 and err[-1].startswith("Error: 13 line(s) failed (first: line 9: token id(s) [99999]")
    records = read(tmp_path / "out.jsonl")
    assert len(records) == len(rows) - 1  # one record per non-blank line
    results = [r for r in records if "error" not in r]
    assert sorted(r["id"] for r in results) == list(range(16))  # the OOV line's 15 batch mates too
    errors = {r["line"]: r for r in records if "error" in r}
    for number, raw in enumerate(rows, 1):
        for _name, (line, message) in BAD.items():
            if raw == (line.encode() if isinstance(line, str) else line):
                assert message in errors[number]["error"], (number, errors[number])
    assert errors[9]["id"] == "o" and errors[len(rows)]["id"] is None
    before = (tmp_path / "out.jsonl").read_bytes()
    for _ in range(2):  # errors are retried, results kept; nothing appears twice
        code, err = cli(capfd, *args, "--resume")
        assert code == 1 and "0 written, 16 skipped (already done), 13 errors" in err[-2]
        again = read(tmp_path / "out.jsonl")
        assert sorted(map(json.dumps, again)) == sorted(map(json.dumps, records))
    assert before.count(b"\n") == (tmp_path / "out.jsonl").read_bytes().count(b"\n")


def test_duplicate_ids_warn_and_keep_one_result(model, tmp_path):
    lines = [good(1), good(2), good(1, max_length=2), "{}"]
    with pytest.warns(
        UserWarning, match=r"1 line\(s\) repeat an earlier line's id \(id 1 on lines 1 and 3\)"
    ):
        counts = generate_jsonl(model, lines, tmp_path / "o.jsonl", GenerationConfig(max_length=3))
    assert counts["written"] == 2 and counts["duplicates"] == 1 and counts["errors"] == 2
    records = read(tmp_path / "o.jsonl")
    dup = sorted(r.get("error") or "" for r in records if r["id"] == 1)
    assert dup == ["", "duplicate id: line 1 has the same id"]
    with pytest.warns(UserWarning):
        generate_jsonl(model, lines, tmp_path / "o.jsonl", GenerationConfig(max_length=3), resume=True)
    assert sorted(map(json.dumps, read(tmp_path / "o.jsonl"))) == sorted(map(json.dumps, records))


def test_seeded_samples_depend_on_seed_and_id_only(model, tmp_path):
    lines = [json.dumps({"id": i, "prompt": "the company"}) for i in range(32)]
    config = GenerationConfig(strategy="sample", seed=3, max_length=6, num_samples=2)

    def run(name, batch_size, part=None, resume=False):
        generate_jsonl(model, lines[:part], tmp_path / name, config, batch_size=batch_size, resume=resume)
        return {r["id"]: r["hypotheses"] for r in read(tmp_path / name)}

    one = run("a", 1)
    assert len({json.dumps(h) for h in one.values()}) > 10  # not one sample repeated 32 times
    assert run("b", 7) == one == run("c", 32)
    run("d", 5, part=13)
    assert run("d", 4, resume=True) == one
    other = GenerationConfig(strategy="sample", seed=4, max_length=6, num_samples=2)
    generate_jsonl(model, lines, tmp_path / "e", other)
    assert {r["id"]: r["hypotheses"] for r in read(tmp_path / "e")} != one
    assert record_seed(3, "1") != record_seed(3, '"1"')


def test_a_second_writer_is_refused(model_dir, tmp_path, capfd):
    out = tmp_path / "out.jsonl"
    (tmp_path / "in.jsonl").write_text(good(1) + "\n")
    with held_by_another_process(out) as pid:
        code, err = cli(
            capfd,
            "generate",
            "--model",
            model_dir,
            "--input",
            str(tmp_path / "in.jsonl"),
            "--output",
            str(out),
        )
        assert code == 2 and len(err) == 1
        assert err[0].startswith(f"Error: {out} is in use by another decodekit process (pid {pid} on ")
        assert not out.exists()
    code, _ = cli(
        capfd, "generate", "--model", model_dir, "--input", str(tmp_path / "in.jsonl"), "--output", str(out)
    )
    assert (
        code == 0
        and len(read(out)) == 1
        and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]
    )


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"top_k": [1, 2]}, "top_k must be an integer >= 1 or null, got [1, 2]"),
        ({"top_k": 0}, "top_k must be an integer >= 1"),
        ({"max_length": None}, "max_length must be an integer >= 0, got None"),
        ({"max_length": 2.0}, "max_length must be an integer"),
        ({"beam_size": True}, "beam_size must be an integer >= 1, got True"),
        ({"temperature": "hot"}, "temperature must be a finite number > 0, got 'hot'"),
        ({"temperature": -0.5}, "temperature must be a finite number > 0"),  # 0 is greedy (issue 36)
        ({"length_penalty": float("nan")}, "length_penalty must be a finite number, got nan"),
        ({"top_p": 1.5}, "top_p must be a finite number in (0, 1]"),
        ({"min_p": -0.1}, "min_p must be a finite number in [0, 1]"),
        ({"seed": "abc"}, "seed must be an integer"),
        ({"seed": 2**64}, "seed must be an integer in [-2**63, 2**64)"),
        ({"strategy": "nucleus"}, "unknown strategy 'nucleus'"),
        ({"constraint": 5}, "constraint must be a regex string or null, got 5"),
        ({"n_best": [1] * 1000}, "got [1, 1, 1"),
    ],
)
def test_generation_config_checks_every_field(changes, message):
    with pytest.raises(DecodekitError) as e:
        GenerationConfig(**changes)
    assert message in str(e.value) and len(str(e.value)) < 200


@pytest.mark.parametrize("kill_at", [(2, "half"), (3, "before"), (5, "after")])
def test_killed_generation_resumes_with_every_record_once(model, tmp_path, kill_at, one_thread):
    """SIGKILL inside the n-th write of records (half of it written, or just before/after it).
    One thread: a forked child must not use an OpenMP pool its parent started (it would wait)."""
    import signal

    from decodekit import results

    lines = [good(i) for i in range(12)] + ['{"prompt": "no id"}', "oops"]
    config = GenerationConfig(strategy="sample", seed=1, max_length=4)
    generate_jsonl(model, lines, tmp_path / "ref", config, batch_size=3)
    pid = os.fork()
    if pid == 0:
        calls, real = [0], results.append

        def append(handle, records):
            calls[0] += 1
            if calls[0] == kill_at[0]:
                if kill_at[1] == "half":
                    data = b"".join(results.dumps(r) for r in records)
                    handle.write(data[: len(data) // 2])
                    handle.flush()
                if kill_at[1] != "after":
                    os.kill(os.getpid(), signal.SIGKILL)
            real(handle, records)
            if calls[0] == kill_at[0]:
                os.kill(os.getpid(), signal.SIGKILL)

        try:
            results.append = append
            generate_jsonl(model, lines, tmp_path / "out", config, batch_size=3)
        finally:
            os._exit(0)
    assert os.WIFSIGNALED(os.waitpid(pid, 0)[1])
    generate_jsonl(model, lines, tmp_path / "out", config, batch_size=3, resume=True)
    got, ref = read(tmp_path / "out"), read(tmp_path / "ref")
    assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, ref))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "ref"]


class Flaky:
    """The tiny LSTM, except that encoding a prompt with token 7 raises IndexError (a model bug)."""

    def __init__(self, model):
        self.model, self.vocab_size, self.vocab = model, model.vocab_size, model.vocab
        self.bos_id, self.eos_id = model.bos_id, model.eos_id

    def initial_state(self, n):
        return self.model.initial_state(n)

    def step(self, state, tokens):
        return self.model.step(state, tokens)

    def prefill(self, state, tokens):
        if bool((tokens == 7).any()):
            raise IndexError("index out of range in self")
        return self.model.prefill(state, tokens)


def test_a_model_failure_is_one_lines_error(model, tmp_path):
    lines = [json.dumps({"id": i, "prompt": [2 + i]}) for i in range(8)]  # id 5 has token 7
    counts = generate_jsonl(Flaky(model), lines, tmp_path / "o", GenerationConfig(max_length=3), batch_size=8)
    assert counts["written"] == 7 and counts["errors"] == 1
    errors = [r for r in read(tmp_path / "o") if "error" in r]
    assert errors == [{"id": 5, "line": 6, "error": "IndexError: index out of range in self"}]
