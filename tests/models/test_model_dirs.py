"""Model directories that are not what they claim, and hub names from the local Hugging Face
cache (issues 35.1, 35.2, 35.7 and 36.1): loading never runs code from a model directory and never
reads stdin, every shard an index names is a regular file inside the directory, NaN or infinite
weights are refused naming the tensor, and ``--model org/name`` loads the cached snapshot with the
same checks, offline. Tiny GPT-2s saved once per module; nothing touches the network."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from safetensors.torch import load_file, save_file  # noqa: E402

from decodekit.errors import DecodekitError  # noqa: E402
from decodekit.loading import load_model  # noqa: E402
from decodekit.models.hf import HuggingFaceLM, load_hf  # noqa: E402
from tests.support.fakes import save_tiny_gpt2  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["the cat sat on the mat", "the dog ran to the café", "cats and dogs, 3 of them!"] * 3
POISONED = "transformer.h.0.attn.c_attn.weight"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A saved tiny GPT-2 with its byte-level BPE (copy it before changing it)."""
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "m", TEXTS, 290)


@pytest.fixture(autouse=True)
def _offline_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache of the test's own (the user's is never looked at) and no network."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def copy(tiny: Path, where: Path) -> Path:
    shutil.copytree(tiny, where)
    return where


def cli(args: list[str], capsys) -> tuple[int, list[str], str]:
    """(exit code, stderr lines without transformers' own, stdout) of an in-process CLI run."""
    from decodekit.cli import main

    capsys.readouterr()
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return (
        code,
        [x for x in out.err.splitlines() if x.strip() and not x.startswith("[transformers]")],
        out.out,
    )


def decodekit_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``decodekit ARGS`` in a child process with "1" on its stdin (transformers' consent), killed
    after a timeout that only a hang reaches."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "decodekit", *args],
        input="1\n", capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
    )  # fmt: skip


def one_line_error(code, err, *needles):
    assert code == 2 and len(err) == 1 and err[0].startswith("Error: "), err
    assert "Traceback" not in err[0]
    for needle in needles:
        assert needle in err[0], err[0]


# 35.1: code execution from a model directory

EVIL = """\
import pathlib
pathlib.Path({marker!r}).write_text("ran")
from transformers import PretrainedConfig, PreTrainedModel


class EvilConfig(PretrainedConfig):
    model_type = "evilmodel"


class EvilModel(PreTrainedModel):
    config_class = EvilConfig
"""


def evil_dir(where: Path, marker: Path, *, in_tokenizer: bool = False, tiny: Path | None = None) -> Path:
    """A directory whose config.json (or tokenizer_config.json) names its own evil.py via auto_map;
    importing evil.py creates ``marker``."""
    if tiny is not None:
        copy(tiny, where)
    else:
        where.mkdir(parents=True)
    (where / "evil.py").write_text(EVIL.format(marker=str(marker)))
    auto_map = {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}
    if in_tokenizer:
        info = json.loads((where / "tokenizer_config.json").read_text())
        info["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
        (where / "tokenizer_config.json").write_text(json.dumps(info))
    else:
        (where / "config.json").write_text(json.dumps({"model_type": "evilmodel", "auto_map": auto_map}))
    return where


def test_auto_map_is_refused_before_transformers_and_stdin_is_never_read(tmp_path, monkeypatch):
    """transformers asked "run the custom code? [y/N]" with input() on stdin, and took "1" as yes."""
    marker = tmp_path / "marker"
    directory = evil_dir(tmp_path / "evil", marker)
    stdin = io.StringIO("1\n1\n")
    monkeypatch.setattr(sys, "stdin", stdin)
    for load in (load_model, load_hf):
        with pytest.raises(DecodekitError) as e:
            load(str(directory))
        message = str(e.value)
        assert "\n" not in message and "auto_map" in message and "never runs code" in message, message
    assert not marker.exists()
    assert stdin.read() == "1\n1\n"  # nothing consumed


def test_auto_map_in_the_tokenizer_config_is_refused(tiny, tmp_path):
    marker = tmp_path / "marker"
    directory = evil_dir(tmp_path / "evil", marker, in_tokenizer=True, tiny=tiny)
    with pytest.raises(DecodekitError, match=r"tokenizer_config.json names code of its own \(auto_map"):
        load_model(directory)
    assert not marker.exists()


def test_an_unknown_model_type_is_refused_before_transformers(tmp_path):
    directory = tmp_path / "odd"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"model_type": "nosuchmodel", "architectures": ["X"]}))
    with pytest.raises(
        DecodekitError, match="model_type 'nosuchmodel' is not one transformers .* ships"
    ) as e:
        load_hf(directory)
    assert "\n" not in str(e.value)


def test_the_cli_with_stdin_1_runs_nothing_and_says_one_line(tmp_path):
    """`echo 1 | decodekit eval --model DIR --data f` ran DIR/evil.py."""
    marker = tmp_path / "marker"
    directory = evil_dir(tmp_path / "evil", marker)
    (tmp_path / "f.txt").write_text("the cat\n")
    run = decodekit_cli(["eval", "--model", str(directory), "--data", str(tmp_path / "f.txt")], tmp_path)
    assert not marker.exists()
    err = [x for x in run.stderr.splitlines() if x.strip()]
    one_line_error(run.returncode, err, "auto_map", "never runs code from a model directory")


def test_every_from_pretrained_gets_trust_remote_code_false_and_no_stdin(tiny, monkeypatch):
    """Whatever transformers would ask, it is told no, and its input() meets an empty stdin
    (transformers' own model classes: decodekit's GPT-2 forward, which asks nothing, set aside)."""
    from decodekit.models import hf

    monkeypatch.setattr(hf, "NATIVE_GPT2", False)
    seen = []

    def spy(cls_name, original):
        def call(*args, **kwargs):
            seen.append((cls_name, kwargs.get("trust_remote_code")))
            with pytest.raises(EOFError):
                input()
            return original(*args, **kwargs)

        return call

    for name in ("AutoConfig", "AutoModelForCausalLM", "AutoTokenizer"):
        cls = getattr(transformers, name)
        monkeypatch.setattr(cls, "from_pretrained", spy(name, cls.from_pretrained))
    stdin = io.StringIO("1\n")
    monkeypatch.setattr(sys, "stdin", stdin)
    lm = load_hf(tiny)
    assert lm.vocab is not None and sys.stdin is stdin and stdin.read() == "1\n"
    assert {n for n, _ in seen} == {"AutoConfig", "AutoModelForCausalLM", "AutoTokenizer"}
    assert all(trust is False for _, trust in seen), seen


# 35.2: a sharded index names only regular files inside the directory


def shard(tiny: Path, where: Path) -> Path:
    """The tiny model in two shards with a model.safetensors.index.json."""
    copy(tiny, where)
    tensors = load_file(str(where / "model.safetensors"))
    (where / "model.safetensors").unlink()
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate((names[: len(names) // 2], names[len(names) // 2 :]), 1):
        file = f"model-0000{i}-of-00002.safetensors"
        save_file({k: tensors[k] for k in part}, str(where / file), metadata={"format": "pt"})
        weight_map.update({k: file for k in part})
    index = {"metadata": {}, "weight_map": weight_map}
    (where / "model.safetensors.index.json").write_text(json.dumps(index))
    return where


def rename_shard(directory: Path, new: str) -> None:
    """The index names ``new`` for the tensors of every shard but the first."""
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    index["weight_map"] = {
        k: v if v.startswith("model-00001") else new for k, v in index["weight_map"].items()
    }
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))


def test_a_sharded_directory_loads_as_the_single_file(tiny, tmp_path):
    one = load_hf(tiny)
    two = load_hf(shard(tiny, tmp_path / "sharded"))
    ids = torch.tensor([[5, 6, 7]])
    a = one.prefill(one.initial_state(1), ids)[0]
    assert torch.equal(a, two.prefill(two.initial_state(1), ids)[0])


def test_a_shard_outside_the_directory_is_refused(tiny, tmp_path):
    directory = shard(tiny, tmp_path / "m")
    (tmp_path / "outside").mkdir()
    shutil.move(directory / "model-00002-of-00002.safetensors", tmp_path / "outside" / "x.safetensors")
    rename_shard(directory, "../outside/x.safetensors")
    with pytest.raises(
        DecodekitError, match=r"names shard '../outside/x.safetensors', outside the model"
    ) as e:
        load_hf(directory)
    assert "\n" not in str(e.value)
    rename_shard(directory, str(tmp_path / "outside" / "x.safetensors"))  # absolute
    with pytest.raises(DecodekitError, match="outside the model directory"):
        load_hf(directory)
    os.symlink(tmp_path / "outside" / "x.safetensors", directory / "link.safetensors")
    rename_shard(directory, "link.safetensors")  # a link inside, leading out
    with pytest.raises(
        DecodekitError, match=r"a link to .*outside/x.safetensors, outside the model directory"
    ):
        load_model(directory)


def test_a_fifo_shard_is_refused_without_blocking(tiny, tmp_path):
    """Run in a child with a timeout: a reader blocked on a FIFO inside safetensors holds the GIL,
    so neither a thread nor an alarm in this process could end a regression."""
    directory = shard(tiny, tmp_path / "m")
    (directory / "shards").mkdir()  # below the top level, which was already checked
    os.mkfifo(directory / "shards" / "sub.safetensors")
    rename_shard(directory, "shards/sub.safetensors")
    (tmp_path / "f.txt").write_text("the cat\n")
    try:
        run = decodekit_cli(["eval", "--model", str(directory), "--data", str(tmp_path / "f.txt")], tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("loading blocked on a FIFO shard")
    err = [x for x in run.stderr.splitlines() if x.strip()]
    one_line_error(run.returncode, err, "shards/sub.safetensors", "a FIFO (named pipe), not a regular file")


def test_dev_zero_as_a_shard_is_refused_before_reading(tiny, tmp_path):
    directory = shard(tiny, tmp_path / "m")
    rename_shard(directory, "/dev/zero")
    with pytest.raises(DecodekitError, match="names shard '/dev/zero', outside the model directory"):
        load_hf(directory)
    (directory / "model-00002-of-00002.safetensors").unlink()
    (directory / "shards").mkdir()
    os.symlink("/dev/zero", directory / "shards" / "x.safetensors")
    rename_shard(directory, "shards/x.safetensors")
    with pytest.raises(DecodekitError, match="a link to /dev/zero, outside the model directory"):
        load_hf(directory)
    os.symlink("/dev/zero", directory / "model-00002-of-00002.safetensors")  # at the top level
    with pytest.raises(DecodekitError, match="model-00002-of-00002.safetensors is a character device"):
        load_hf(directory)
    os.unlink(directory / "model-00002-of-00002.safetensors")
    rename_shard(directory, "model-00002-of-00002.safetensors")
    with pytest.raises(
        DecodekitError, match="names shard 'model-00002-of-00002.safetensors', which is missing"
    ):
        load_hf(directory)


# 35.7: NaN or infinite weights


def poison(directory: Path, value: float) -> Path:
    tensors = load_file(str(directory / "model.safetensors"))
    tensors[POISONED][0, :3] = value
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


@pytest.mark.parametrize("value,count", [(float("nan"), "3 NaN"), (float("inf"), "3 infinite")])
def test_non_finite_weights_are_refused_naming_the_tensor(tiny, tmp_path, capsys, value, count):
    """eval printed `perplexity inf` and score `nan`, both with exit status 0."""
    directory = poison(copy(tiny, tmp_path / "m"), value)
    with pytest.raises(DecodekitError, match=f"tensor '{POISONED}' has {count} values") as e:
        load_model(directory)
    assert "\n" not in str(e.value)
    (tmp_path / "t.txt").write_text("the cat sat\n")
    for args in (["eval", "--data", str(tmp_path / "t.txt")], ["score", str(tmp_path / "t.txt")]):
        code, err, _ = cli([*args, "--model", str(directory)], capsys)
        one_line_error(code, err, POISONED, count)


# 36.1: hub names from the local Hugging Face cache


def cache_model(cache: Path, name: str, source: Path, rev: str = "0123456789abcdef" * 2 + "01234567") -> Path:
    """``source`` laid out as huggingface_hub caches a download of ``name``: blobs, a snapshot of
    links into them, refs/main. Returns the snapshot directory."""
    repo = cache / ("models--" + name.replace("/", "--"))
    snapshot = repo / "snapshots" / rev
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for i, file in enumerate(sorted(source.iterdir())):
        blob = repo / "blobs" / f"blob{i:04d}"
        shutil.copyfile(file, blob)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / file.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    return snapshot


def test_a_hub_name_loads_the_cached_snapshot(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cache_model(tmp_path / "hub", "org/tiny", tiny)
    want = load_hf(tiny)
    ids = torch.tensor([[5, 6, 7]])
    expected = want.prefill(want.initial_state(1), ids)[0]
    for lm in (load_model("org/tiny"), load_hf("org/tiny"), load_model("org/tiny", kind="hf")):
        assert isinstance(lm, HuggingFaceLM)
        assert torch.equal(lm.prefill(lm.initial_state(1), ids)[0], expected)
    (tmp_path / "t.txt").write_text("the cat sat\n")
    code, err, out = cli(["eval", "--model", "org/tiny", "--data", str(tmp_path / "t.txt"), "--json"], capsys)
    assert code == 0 and json.loads(out)["tokens"] > 0, err


def test_hf_home_and_a_sharded_snapshot_without_refs(tiny, tmp_path, monkeypatch):
    """HF_HOME/hub when HF_HUB_CACHE is unset; shards linked into the blobs are inside the cache's
    repository, so they load; without refs/main the only snapshot is taken."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    sharded = shard(tiny, tmp_path / "sharded")
    snapshot = cache_model(tmp_path / "home" / "hub", "tiny", sharded)
    (snapshot.parents[1] / "refs" / "main").unlink()
    lm = load_model("tiny")
    assert isinstance(lm, HuggingFaceLM) and lm.vocab is not None


def test_a_cached_snapshot_gets_the_same_checks(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    marker = tmp_path / "marker"
    cache_model(tmp_path / "hub", "org/evil", evil_dir(tmp_path / "evil", marker))
    with pytest.raises(DecodekitError, match="auto_map"):
        load_model("org/evil")
    assert not marker.exists()
    cache_model(tmp_path / "hub", "org/nan", poison(copy(tiny, tmp_path / "nan"), float("nan")))
    with pytest.raises(DecodekitError, match=f"tensor '{POISONED}' has 3 NaN values"):
        load_hf("org/nan")
    outside = cache_model(tmp_path / "hub", "org/out", shard(tiny, tmp_path / "out"))
    link = outside / "model-00002-of-00002.safetensors"
    os.unlink(link)
    os.symlink(tmp_path / "out" / "model-00002-of-00002.safetensors", link)  # out of the cache's repo
    with pytest.raises(DecodekitError, match="outside the model directory"):
        load_model("org/out")


def test_a_name_not_in_the_cache_says_so_with_the_recipe(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    recipe = (
        "AutoModelForCausalLM.from_pretrained('openai-community/gpt2').save_pretrained('gpt2-local'); "
        "AutoTokenizer.from_pretrained('openai-community/gpt2').save_pretrained('gpt2-local')"
    )
    for load in (load_model, load_hf):
        with pytest.raises(DecodekitError) as e:
            load("openai-community/gpt2")
        message = str(e.value)
        assert "\n" not in message and "not in the Hugging Face cache" in message, message
        assert str(tmp_path / "hub") in message and recipe in message and "--model gpt2-local" in message
    code, err, _ = cli(["generate", "hello", "--model", "gpt2"], capsys)
    one_line_error(
        code, err, "gpt2 is not in the Hugging Face cache", "never downloads", "--model gpt2-local"
    )
    code, err, _ = cli(["generate", "hello", "--model", "./no/such/dir"], capsys)
    one_line_error(code, err, "model not found: ./no/such/dir")
    assert "Hugging Face" not in err[0]


def test_a_crafted_refs_main_is_refused(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = cache_model(tmp_path / "hub", "org/tiny", tiny)
    (snapshot.parents[1] / "refs" / "main").write_text("../../../../etc")
    with pytest.raises(DecodekitError, match="refs/main names no snapshot"):
        load_model("org/tiny")
