"""Inputs that hang, nest, grow or lie about their size (issue 23, items 7, 8 and 12): FIFOs and
devices as --json-schema or --embeddings, deep schemas, huge enums, a byte order mark in --input,
safetensors headers and embedding headers that claim more than the model needs, --input read a
line at a time, NaN weights. Each is one line (exit 2 on the command line), quickly, before
anything large is read or allocated."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from decodekit.checkpoint import WEIGHTS, _SkipRandomInit, load_checkpoint, save_checkpoint
from decodekit.constraints.frontends.schema import MAX_DEPTH, json_schema
from decodekit.errors import CheckpointError, ConstraintError
from decodekit.jobs import generate_jsonl
from decodekit.models.registry import create_model, make_config
from decodekit.training.embeddings import load_embeddings
from decodekit.vocab import WordVocab
from tests.support.cli import exit_and_stderr as cli

VOCAB = WordVocab(["<unk>", "<eos>", "a", "b", "c"])
ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("blocking_alarm")  # tests/conftest.py


@pytest.fixture
def model():
    torch.manual_seed(0)
    return create_model(make_config("lstm", embed=4, hidden=4, layers=1), VOCAB).eval()


@pytest.fixture
def ckpt(model, tmp_path):
    return save_checkpoint(model, tmp_path / "m")


# -- item 7: hangs and deep inputs -------------------------------------------------------------


@pytest.mark.parametrize("kind, says", [("fifo", "a FIFO (named pipe)"), ("/dev/zero", "a character device")])
def test_json_schema_fifo_or_device_is_one_line(ckpt, tmp_path, capfd, kind, says):
    path = tmp_path / "schema.json"
    os.mkfifo(path) if kind == "fifo" else os.symlink(kind, path)
    code, err = cli(capfd, "generate", "a", "--model", str(ckpt), "--json-schema", str(path))
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("Error: ") and says in err[0] and "--json-schema" in err[0]


def test_deep_schemas_are_one_line(ckpt, tmp_path, capfd):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    code, err = cli(capfd, "generate", "a", "--model", str(ckpt), "--json-schema", str(path))
    assert code == 2 and err == [f"Error: --json-schema {path} is nested too deeply to parse"]
    with pytest.raises(ConstraintError, match="nested too deeply to parse"):
        json_schema("[" * 100_000 + "]" * 100_000)
    deep: dict = {}
    for _ in range(1000):  # 1,000 levels: a RecursionError in the compiler before
        deep = {"items": deep}
    with pytest.raises(ConstraintError, match=f"nests subschemas more than {MAX_DEPTH} levels deep"):
        json_schema(deep)
    value: list = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(ConstraintError, match="a value in the JSON Schema is nested too deeply"):
        json_schema({"enum": [value]})


def test_nested_arrays_cannot_double_the_regex_without_bound():
    deep: dict = {}
    for _ in range(30):  # each level of items doubles the regex: 2**30 copies before
        deep = {"items": deep}
    start = time.process_time()
    pattern = json_schema(deep)  # a DAG: each level's items one node used twice (2**42 characters written)
    assert time.process_time() - start < 2.0
    assert pattern.size() < 20_000 < pattern.text_length()


def test_a_large_enum_compiles_in_linear_time():
    # was quadratic (a list's `in` per value): 20,000 values 2.8 s, 100,000 about 70 s
    values = [f"w{i:07d}" for i in range(100_000)]
    start = time.process_time()
    pattern = json_schema({"enum": values + values[:10]})  # repeats are dropped, order kept
    assert time.process_time() - start < 3.0
    assert pattern.startswith('(?:"w0000000"|"w0000001"|') and pattern.count("|") == 99_999


def test_byte_order_mark_in_input_is_not_an_error(model, ckpt, tmp_path, capfd):
    (tmp_path / "in.jsonl").write_bytes(
        '\ufeff{"id": 1, "prompt": "a b"}\n{"id": 2, "prompt": "c"}\n'.encode()
    )
    out = tmp_path / "out.jsonl"
    code, err = cli(
        capfd, "generate", "--model", str(ckpt), "--input", str(tmp_path / "in.jsonl"), "--output", str(out)
    )
    assert code == 0, err
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [1, 2]
    counts = generate_jsonl(model, ['\ufeff{"id": 3, "prompt": "a"}'], tmp_path / "o2.jsonl")  # str lines too
    assert counts["errors"] == 0 and counts["written"] == 1


@pytest.mark.parametrize("kind, says", [("fifo", "a FIFO (named pipe)"), ("/dev/zero", "a character device")])
def test_embeddings_fifo_or_device_says_what_it_is(model, tmp_path, kind, says):
    path = tmp_path / "vectors.txt"
    os.mkfifo(path) if kind == "fifo" else os.symlink(kind, path)
    with pytest.raises(ValueError, match=re.escape(f"embedding file is {says}, not a regular file")) as e:
        load_embeddings(model, path)
    assert "\n" not in str(e.value)


# -- item 8: sizes and headers checked before reading ---------------------------------------


def test_embedding_header_dimension_is_checked_before_the_vectors(model, tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("2 20000000\ncat 1 2\n")  # before: read whole, then line 2 blamed
    with pytest.raises(ValueError, match="dimension 20000000, but the model's embedding has 4"):
        load_embeddings(model, path)


def test_an_overlong_input_line_gets_an_error_record_unread(model, tmp_path, monkeypatch):
    import decodekit.jobs as batch

    monkeypatch.setattr(batch, "MAX_LINE_BYTES", 1024)
    long = json.dumps({"id": 2, "prompt": "a " * 2000})
    (tmp_path / "in.jsonl").write_text(f'{{"id": 1, "prompt": "a"}}\n{long}\n{{"id": 3, "prompt": "b"}}\n')
    out = tmp_path / "out.jsonl"
    counts = generate_jsonl(model, batch.jsonl_lines(tmp_path / "in.jsonl"), out)
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert counts["written"] == 2 and counts["errors"] == 1
    assert {"id": None, "line": 2, "error": "line longer than 1,024 bytes"} in records


def write_raw(path: Path, entries: dict, metadata: dict, data_bytes: int, header_bytes: int | None = None):
    """A safetensors file with this header whose data is a hole (a sparse file: no disk used)."""
    header = json.dumps({"__metadata__": metadata, **entries}).encode()
    header += b" " * (-len(header) % 8)
    n = len(header) if header_bytes is None else header_bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n) + header)
        f.truncate(8 + n + data_bytes)


def metadata_of(path: Path) -> dict:
    with safe_open(str(path), "pt") as f:
        return f.metadata()


@pytest.mark.parametrize(
    "tensors, extra, message",
    [
        (1001, 0, "lists 1,001 tensors, more than the 1,000"),  # MAX_TENSORS made 1,000 below
        (1, 2**30, "the header describes 64 bytes of tensors, the file holds 1,073,741,888"),
        (1, -32, "a header of"),
    ],
)
def test_lying_headers_are_refused_before_reading(ckpt, tensors, extra, message, monkeypatch):
    monkeypatch.setattr("decodekit.checkpoint.MAX_TENSORS", 1000, raising=False)
    path = ckpt / WEIGHTS
    meta = metadata_of(path)
    entries = {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(tensors)}
    if tensors == 1:
        entries = {"embedding.weight": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}
    write_raw(path, entries, meta, 64 + extra if extra >= 0 else 0, None)
    if extra < 0:  # the 8-byte length points past the end of the file
        with open(path, "r+b") as f:
            f.write(struct.pack("<Q", 2**40))
    start = time.process_time()
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(ckpt)
    assert time.process_time() - start < 1.0


def test_an_oversized_header_is_refused_unread(ckpt):
    """safetensors allows 100 MB: a 64 MiB header of 1M empty tensors took a minute to list."""
    path = ckpt / WEIGHTS
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", 64 * 2**20))
        f.truncate(8 + 64 * 2**20)
    with pytest.raises(CheckpointError, match="header is 64.0 MiB, more than the 16 MiB"):
        load_checkpoint(ckpt)


SPARSE_SCRIPT = """
import json, resource, sys
from pathlib import Path
import decodekit.jobs as batch
from decodekit.checkpoint import load_checkpoint
from decodekit.cli.generate_batch import read_input
from decodekit.errors import DecodekitError
from decodekit.models.registry import create_model, make_config
from decodekit.training.resume import load_training_state
from decodekit.vocab import WordVocab

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

batch.MAX_LINE_BYTES = 2**20  # (an unused attribute before the fix)
model = create_model(make_config("lstm", embed=4, hidden=4), WordVocab(["<unk>", "<eos>", "a", "b", "c"]))
class Optimizer:  # what load_training_state reads before the file's data (no torch.optim import)
    param_groups = [{"params": list(model.parameters())}]
out = {}
for name, run in [
    ("input", lambda: sum(1 for _ in read_input(sys.argv[2]))),  # first: the smallest peak before
    ("checkpoint", lambda: load_checkpoint(sys.argv[1])),
    ("resume", lambda: load_training_state(Path(sys.argv[3]), model=model, optimizer=Optimizer(),
                                           hidden_template=None)),
]:
    before = peak()
    try:
        run()
        message = None
    except DecodekitError as e:
        message = str(e)
    out[name] = [peak() - before, message]
print(json.dumps(out))
"""


def test_sparse_files_are_refused_or_streamed_without_allocating(ckpt, model, tmp_path):
    """In a fresh process (peak memory is what is measured): a checkpoint whose config and header
    agree on ~190 MiB of weights that are a hole in the file (its checksum is verified reading
    1 MiB at a time), a 128 MiB --input without a newline, a resume file with a 1 GiB tensor the
    model has no place for. Before: ~2x the claimed size each (4.2 GB for a 2.2 GiB claim)."""
    info = json.loads((ckpt / "config.json").read_text())
    info["model"].update(hidden=3500, embed=4)
    (ckpt / "config.json").write_text(json.dumps(info))
    meta = metadata_of(ckpt / WEIGHTS) | {
        "model": json.dumps(info["model"], sort_keys=True),
        "info": json.dumps(info, sort_keys=True),
    }
    with torch.device("meta"), _SkipRandomInit():
        shapes = {
            k: list(t.shape)
            for k, t in create_model(make_config(**info["model"]), VOCAB).state_dict().items()
        }
    entries, at = {}, 0
    for k, shape in shapes.items():
        n = 4 * int(torch.Size(shape).numel())
        entries[k], at = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + n]}, at + n
    assert 150 * 2**20 < at < 250 * 2**20
    write_raw(ckpt / WEIGHTS, entries, meta, at)
    with open(tmp_path / "in.jsonl", "wb") as f:
        f.truncate(128 * 2**20)
    resume = tmp_path / "resume.safetensors"
    big = {"optim.0.momentum_buffer": {"dtype": "F32", "shape": [2**28], "data_offsets": [0, 2**30]}}
    write_raw(resume, big, {"format": "decodekit-checkpoint", "sha256": "0" * 64}, 2**30)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SPARSE_SCRIPT,
            str(ckpt),
            str(tmp_path / "in.jsonl"),
            str(resume),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "checksum mismatch" in out["checkpoint"][1]
    assert out["resume"][1] is not None and "do not fit this model" in out["resume"][1]
    for name, (grew, _) in out.items():
        assert grew < 64 * 2**20, f"{name}: peak memory grew by {grew / 2**20:.0f} MiB"


# -- item 12: non-finite weights -------------------------------------------------------------


@pytest.mark.parametrize("value, says", [(float("nan"), "3 NaN values"), (float("inf"), "3 infinite values")])
def test_non_finite_weights_are_refused_naming_the_tensor(model, tmp_path, capfd, value, says):
    with torch.no_grad():
        model.embedding.weight.view(-1)[:3] = value
    path = save_checkpoint(model, tmp_path / "m")
    with pytest.raises(
        CheckpointError, match=f"tensor 'embedding.weight' has {says}; the checkpoint is damaged"
    ):
        load_checkpoint(path)
    (tmp_path / "test.txt").write_text("a b c\n")
    code, err = cli(capfd, "eval", "--model", str(path), "--data", str(tmp_path / "test.txt"))
    assert code == 2 and len(err) == 1 and err[0].startswith("Error: ") and says in err[0], err
