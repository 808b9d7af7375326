"""What an output path may be, and what a failed write says (issue 23, items 1, 2 and 4).

1. An output that exists and is not a regular file (a device such as /dev/null, a FIFO, or a link
   to one) is refused in one line, exit 2, and left as it was: generate --output (with and
   without --resume), --dot, train --out's files, ngram --out, plot -o, the ARPA cache.
2. The writer lock goes by the real file: a symlink and its target share it; a symlink stays a
   symlink and its target is what gets written.
4. A read-only or full disk is one line naming the file (no traceback), and what was written
   before stays intact.
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from pathlib import Path

import pytest

from decodekit import results
from decodekit.checkpoint import load_checkpoint
from decodekit.cli import main
from decodekit.errors import DecodekitError
from decodekit.util.files import atomic_write
from tests.support.cli import word_checkpoint
from tests.support.disk import (
    cli_in_child,
    fill,
    in_child,
    node,
    public_dir,
    read_only,
    same_node,
    small_disk,
)
from tests.support.fakes import held_by_another_process

WORDS = ["the", "company", "said", "profit", "rose"]
KINDS = {"chr": "a character device", "fifo": "a FIFO (named pipe)", "link": "a character device"}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Forked children and a multi-threaded torch do not mix; tiny models are fastest so anyway."""


@pytest.fixture
def public_tmp():
    with public_dir() as path:
        yield path


@pytest.fixture(scope="module")
def ckpt():
    with public_dir() as path:  # a child running as nobody reads it too
        yield word_checkpoint(path / "tiny", WORDS)


def prompts(path: Path, n: int, max_length: int = 3) -> str:
    rows = [{"id": i, "prompt": WORDS[i % 5], "max_length": max_length} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def ids(path: Path) -> list:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()]


# 1. outputs that are not regular files


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_generate_output_that_is_a_device_or_fifo_is_refused_and_left_alone(ckpt, tmp_path, kind, resume):
    out = node(tmp_path / "out", kind)
    before = os.lstat(out), os.stat(out)
    args = ["generate", "--model", ckpt, "--input", prompts(tmp_path / "in.jsonl", 3), "--output", str(out)]
    code, err = cli_in_child(args + ["--resume"] * resume)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"Error: {out}") and f"--output is {KINDS[kind]}, not a regular file" in err[0]
    assert same_node(out, before[0]) and same_node(Path(os.path.realpath(out)), before[1])
    assert {p.name for p in tmp_path.iterdir()} == {
        "in.jsonl",
        "out",
        *(["out.dev"] if kind == "link" else []),
    }


@pytest.mark.parametrize("kind", ["chr", "fifo"])
def test_library_writers_refuse_a_device_or_fifo(ckpt, tmp_path, kind):
    from decodekit import load_model
    from decodekit.jobs import generate_jsonl

    out = node(tmp_path / "out", kind)
    before = os.lstat(out)
    with pytest.raises(DecodekitError, match="not a regular file; refusing to write to it"):
        generate_jsonl(load_model(ckpt), [b'{"id": 1, "prompt": "the"}'], out)
    with pytest.raises(DecodekitError, match="not a regular file"):
        atomic_write(out, lambda p: p.write_text("x"))
    with pytest.raises(DecodekitError, match="not a regular file"):
        results.merge(out, [])
    assert same_node(out, before) and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_dot_that_is_a_device_is_refused_before_decoding(ckpt, tmp_path):
    out = node(tmp_path / "tree.dot", "chr")
    before = os.lstat(out)
    code, err = cli_in_child(["generate", "--model", ckpt, "the", "--strategy", "beam", "--dot", str(out)])
    assert code == 2 and err == [
        f"Error: {out}: --dot is a character device, not a regular file; refusing to write to it"
    ]
    assert same_node(out, before)


def test_train_refuses_a_fifo_among_its_run_files_before_training(tmp_path):
    data = tmp_path / "corpus.txt"
    data.write_text("the cat sat on the mat\nthe dog ran\n" * 5)
    out = tmp_path / "run"
    out.mkdir()
    metrics = node(out / "metrics.jsonl", "fifo")
    before = os.lstat(metrics)
    args = ["train", "--data", str(data), "--out", str(out), "--hidden", "4", "--embed", "4", "--layers", "1"]
    for extra in ([], ["--overwrite"]):
        code, err = cli_in_child([*args, "--epochs", "1", "--no-progress", *extra])
        assert code == 2 and len(err) == 1, err
        assert "the run file metrics.jsonl is a FIFO (named pipe), not a regular file" in err[0]
        assert same_node(metrics, before) and sorted(p.name for p in out.iterdir()) == ["metrics.jsonl"]


def test_ngram_out_that_is_a_device_is_refused_before_training(tmp_path):
    data = tmp_path / "corpus.txt"
    data.write_text("the cat sat\n" * 5)
    out = node(tmp_path / "kn.arpa", "link")
    before = os.lstat(out.with_name("kn.arpa.dev"))
    code, err = cli_in_child(["ngram", "--data", str(data), "--order", "2", "--out", str(out)])
    assert code == 2 and len(err) == 1 and "--out is a character device" in err[0], err
    assert f"{out} (a link to {out.with_name('kn.arpa.dev')})" in err[0]
    assert same_node(out.with_name("kn.arpa.dev"), before) and out.is_symlink()


def test_plot_to_a_fifo_is_refused(tmp_path):
    from decodekit import plot_runs

    out = node(tmp_path / "fig.png", "fifo")
    with pytest.raises(DecodekitError, match=r"fig.png: the figure is a FIFO \(named pipe\)"):
        plot_runs([tmp_path / "no-such-run"], out)  # refused before the runs are read
    assert os.path.exists(out) and not out.is_file()


def test_an_arpa_cache_path_that_is_a_fifo_is_one_warning_and_left_alone(tmp_path):
    from decodekit.models.arpa import write_arpa
    from decodekit.models.arpa_cache import cache_path
    from decodekit.models.kneser_ney import train_kneser_ney_on_sentences

    arpa = tmp_path / "kn2.arpa"
    write_arpa(
        train_kneser_ney_on_sentences([["a", "b"], ["b", "a", "a"]], order=2, discounts=[(0.5, 1, 1.5)] * 2),
        arpa,
    )
    cache = node(cache_path(arpa), "fifo")
    code, err = in_child(lambda: _load_warning(arpa))  # in a child: a FIFO could block
    assert code == 0, err
    assert err.count("cannot write the ARPA cache") == 1 and "a FIFO (named pipe)" in err, err
    assert os.path.exists(cache) and not cache.is_file()


def _load_warning(arpa: Path) -> int:
    """Load ``arpa`` through its cache; print the warnings on stderr; 0 if the model is right."""
    import sys

    from decodekit.models.arpa import read_arpa
    from decodekit.models.arpa_cache import load_arpa

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_arpa(arpa)
    print("\n".join(str(w.message) for w in caught), file=sys.stderr)
    return 0 if model.vocab == read_arpa(arpa).vocab else 1


# 2. a symlink is followed: one lock, one file


@pytest.mark.parametrize("held", ["target", "link"])
def test_a_symlink_and_its_target_share_one_lock(ckpt, tmp_path, held):
    target, link = tmp_path / "res.jsonl", tmp_path / "link.jsonl"
    target.write_text("")
    link.symlink_to(target.name)
    holder, writer = (target, link) if held == "target" else (link, target)
    with held_by_another_process(holder):
        args = [
            "generate",
            "--model",
            ckpt,
            "--input",
            prompts(tmp_path / "in.jsonl", 4),
            "--output",
            str(writer),
        ]
        code, err = cli_in_child([*args, "--resume"])
    assert code == 2 and len(err) == 1 and "is in use by another decodekit process" in err[0], err
    assert target.read_text() == "" and link.is_symlink()


def test_a_symlinked_output_stays_a_link_and_its_target_gets_every_record_once(ckpt, tmp_path):
    target, link = tmp_path / "real" / "res.jsonl", tmp_path / "link.jsonl"
    target.parent.mkdir()
    target.write_text("stale\n")
    os.chmod(target, 0o600)
    link.symlink_to(target)
    args = ["generate", "--model", ckpt, "--input", prompts(tmp_path / "in.jsonl", 5), "--output", str(link)]
    assert cli_in_child(args)[0] == 0
    assert link.is_symlink() and ids(target) == [0, 1, 2, 3, 4]
    target.write_bytes(target.read_bytes()[:-10])  # a cut-off last record: --resume rewrites the file
    assert cli_in_child([*args, "--resume"])[0] == 0
    assert link.is_symlink() and sorted(ids(target)) == [0, 1, 2, 3, 4]
    assert os.stat(target).st_mode & 0o777 == 0o600  # the rewrite kept the file's permissions
    assert sorted(p.name for p in target.parent.iterdir()) == ["res.jsonl"]  # no temporary, no lock left


def test_atomic_write_replaces_a_links_target_and_keeps_the_link(tmp_path):
    from decodekit.util.files import writable_target

    target, link = tmp_path / "metrics.jsonl", tmp_path / "run" / "metrics.jsonl"
    link.parent.mkdir()
    target.write_text("old\n")
    link.symlink_to(target)
    atomic_write(link, lambda p: p.write_text("new\n"))
    assert link.is_symlink() and target.read_text() == "new\n"
    dangling = tmp_path / "run" / "config.json"
    dangling.symlink_to(tmp_path / "config.json")
    assert writable_target(dangling) == tmp_path / "config.json"
    atomic_write(dangling, lambda p: p.write_text("{}\n"))
    assert dangling.is_symlink() and (tmp_path / "config.json").read_text() == "{}\n"


def test_overwrite_removes_a_symlinked_run_file_but_not_its_target(tmp_path):
    from decodekit.training.rundir import remove_run_files

    elsewhere = tmp_path / "keep.jsonl"
    elsewhere.write_text("precious\n")
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").symlink_to(elsewhere)
    (out / "config.json").write_text("{}")
    remove_run_files(out)
    assert list(out.iterdir()) == [] and elsewhere.read_text() == "precious\n"


def test_a_fresh_run_empties_the_results_file_in_place(tmp_path):
    out = tmp_path / "res.jsonl"
    out.write_text('{"id": 1, "hypotheses": []}\n')
    inode = os.stat(out).st_ino
    assert results.prepare(out, resume=False) == set()
    assert out.read_bytes() == b"" and os.stat(out).st_ino == inode


# 4. read-only and full disks


def test_results_append_to_a_full_device_names_the_file():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "ab", buffering=0) as handle, pytest.raises(OSError) as e:
        results.append(handle, [{"id": 1, "hypotheses": []}])
    assert e.value.errno == errno.ENOSPC and e.value.filename == "/dev/full"


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
def test_generate_on_a_read_only_disk_is_one_line_and_keeps_the_results(ckpt, public_tmp, resume):
    out_dir = public_tmp / "out"
    out_dir.mkdir()
    out = out_dir / "res.jsonl"
    out.write_text('{"id": 0, "hypotheses": []}\n{"id": 1, "error": "retry me"}\n')
    before = out.read_bytes()
    args = ["generate", "--model", ckpt, "--input", prompts(public_tmp / "in.jsonl", 3), "--output", str(out)]
    with read_only(out_dir) as uid:
        code, err = cli_in_child(args + ["--resume"] * resume, uid)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"Error: {out}: ") and (
        "Read-only file system" in err[0] or "Permission denied" in err[0]
    )
    assert out.read_bytes() == before and sorted(p.name for p in out_dir.iterdir()) == ["res.jsonl"]


class _FullAfter:
    """A results file on a disk that fills up after ``room`` bytes (where no tmpfs can be mounted)."""

    def __init__(self, handle, room: int) -> None:
        self.handle, self.room, self.name = handle, room, handle.name

    def write(self, data) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = self.handle.write(data[: self.room])
        self.room -= n
        return n

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


def test_generate_on_a_full_disk_is_one_line_and_resume_finishes(ckpt, tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        where = disk or tmp_path
        out = where / "res.jsonl"
        args = ["generate", "--model", ckpt, "--input", prompts(tmp_path / "in.jsonl", 120, 12)]
        args += ["--output", str(out), "--batch-size", "8"]
        if disk is not None:
            filler = fill(disk, leave=2 * 4096)
            code, err = cli_in_child(args)
        else:  # a fault-injecting file: the same write path, failing after 8 KiB

            def full():
                real = results.open_results
                results.open_results = lambda p: _FullAfter(real(p), 8192)
                main(args)

            code, err = in_child(full)
            err = err.strip().splitlines()
        assert code == 2 and err == [f"Error: {out}: No space left on device"], err
        lines = out.read_bytes().split(b"\n")
        complete = [json.loads(x)["id"] for x in lines[:-1]]
        assert 10 < len(complete) < 120 and complete == sorted(set(complete))  # each once, in order
        if disk is not None:
            filler.unlink()
        code, err = cli_in_child([*args, "--resume"])
        assert code == 0, err
        assert sorted(ids(out)) == list(range(120))


def test_train_on_a_full_disk_is_one_line_and_keeps_the_run(tmp_path):
    data = tmp_path / "corpus.txt"
    data.write_text("the cat sat on the mat\nthe dog ran\na cat ran on a mat\n" * 8)
    with small_disk(tmp_path / "disk", size="256k") as disk:
        out = (disk or tmp_path) / "run"
        args = [
            "train",
            "--data",
            str(data),
            "--out",
            str(out),
            "--hidden",
            "6",
            "--embed",
            "6",
            "--layers",
            "1",
        ]
        args += ["--bptt", "5", "--batch-size", "4", "--no-progress", "--threads", "1"]
        main([*args, "--epochs", "1"])  # here: the children below inherit its imports (seconds)
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        if disk is not None:
            fill(disk)
            code, err = cli_in_child([*args, "--epochs", "3", "--resume"])
        else:  # no tmpfs: safetensors failing as it does on a full disk

            def full():
                from safetensors import SafetensorError

                from decodekit.training import resume

                def save_file(*a, **k):
                    raise SafetensorError(
                        "Error while serializing: I/O error: No space left on device (os error 28)"
                    )

                resume.save_file = save_file
                main([*args, "--epochs", "3", "--resume"])

            code, err = in_child(full)
            err = err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].endswith(": No space left on device"), err
        assert err[0].startswith(f"Error: {out}/")
        after = {p.name: p.read_bytes() for p in out.iterdir()}  # no temporary left, the state intact
        assert after.keys() == before.keys() and after["resume.safetensors"] == before["resume.safetensors"]
        assert load_checkpoint(out).vocab is not None  # whichever best checkpoint: a whole one


def test_a_safetensors_write_on_a_full_disk_raises_the_os_error(tmp_path):
    import torch
    from safetensors.torch import save_file

    with small_disk(tmp_path / "disk") as disk:
        if disk is None:
            pytest.skip("mounting a small tmpfs is not permitted here")
        path = disk / "w.safetensors"
        path.write_bytes(b"old")
        fill(disk)
        with pytest.raises(OSError) as e:
            atomic_write(path, lambda p: save_file({"w": torch.zeros(4096)}, str(p)))
        assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
        assert path.read_bytes() == b"old" and sorted(p.name for p in disk.iterdir()) == [
            "filler",
            "w.safetensors",
        ]


@pytest.mark.parametrize("kind", list(KINDS))
def test_cleanup_removes_only_regular_files_decodekit_names(tmp_path, kind):
    """Every deletion goes through files.remove_file: a stale temporary, a part file or a run
    file named as decodekit names them, but a device, a FIFO or a link to one, is left alone."""
    from decodekit.jobs import part_path
    from decodekit.training.rundir import clean_temporaries
    from decodekit.util.files import remove_file

    out = tmp_path / "res.jsonl"
    stale, part = tmp_path / f".{out.name}.tmp123", part_path(out, 1)
    nodes = {path: os.lstat(node(path, kind)) for path in (stale, part)}
    run = tmp_path / "run"
    run.mkdir()
    temp = node(run / ".metrics.jsonl.tmp7", kind)
    before = os.lstat(temp)
    with pytest.raises(DecodekitError, match="not a regular file"):  # resume reads the parts
        results.prepare(out, resume=True, parts=[part])
    results.prepare(out, resume=False, parts=[part])  # removes the parts it may
    assert clean_temporaries(run) == []
    for path, st in [*nodes.items(), (temp, before)]:
        assert same_node(path, st), path
    assert not remove_file(stale) and not remove_file(tmp_path / "missing")
    regular = tmp_path / "plain"
    regular.write_text("x")
    assert remove_file(regular) and not regular.exists()
