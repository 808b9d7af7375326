"""The binary cache :func:`decodekit.models.arpa_cache.load_arpa` keeps beside an ARPA file (KenLM's
``build_binary``): used when it matches the file, rebuilt when stale or damaged, skipped when the
directory is read-only or full."""

from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch

from decodekit import load_model
from decodekit.models.arpa import read_arpa, write_arpa
from decodekit.models.arpa_cache import cache_path, load_arpa
from decodekit.models.kneser_ney import train_kneser_ney_on_sentences
from tests.support.disk import fill, in_child, public_dir, read_only, small_disk

SENTENCES = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "the cat ran"]


@pytest.fixture
def arpa(tmp_path):
    lm = train_kneser_ney_on_sentences(
        [s.split() for s in SENTENCES], order=3, discounts=[(0.5, 1.0, 1.5)] * 3
    )
    path = tmp_path / "kn3.arpa"
    write_arpa(lm, path)
    return path


def logprobs(model) -> torch.Tensor:
    """The next-token distribution after every two-token history [V*V, V]."""
    V = model.vocab_size
    hist = torch.cartesian_prod(torch.arange(V), torch.arange(V))  # [V*V, 2]
    return model.next_logprobs(hist)


def test_second_load_reads_the_cache_and_gives_the_same_logprobs(arpa, monkeypatch):
    first = load_arpa(arpa)
    assert cache_path(arpa).is_file() and cache_path(arpa).name == "kn3.arpa.decodekit.safetensors"
    monkeypatch.setattr("decodekit.models.arpa_cache.read_arpa", lambda *a, **k: pytest.fail("read again"))
    second = load_arpa(arpa)
    assert second.vocab == first.vocab and second.eos_id == first.eos_id
    assert torch.equal(logprobs(second), logprobs(first))
    assert torch.equal(logprobs(second), logprobs(read_arpa(arpa)))


def test_a_modified_arpa_file_invalidates_the_cache(arpa):
    load_arpa(arpa)
    text = arpa.read_text()
    st = os.stat(arpa)
    changed = text.replace("-0.", "-1.", 1)  # same size, same mtime: only the hash tells
    assert len(changed) == len(text) and changed != text
    arpa.write_text(changed)
    os.utime(arpa, ns=(st.st_atime_ns, st.st_mtime_ns))
    got = load_arpa(arpa)
    assert torch.equal(logprobs(got), logprobs(read_arpa(arpa)))
    assert not torch.equal(logprobs(got), logprobs(read_arpa_text(text, arpa.parent)))


def read_arpa_text(text: str, where) -> object:
    path = where / "other.arpa"
    path.write_text(text)
    return read_arpa(path)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_cache_is_rebuilt(arpa, damage, monkeypatch):
    want = logprobs(load_arpa(arpa))
    binary = cache_path(arpa)
    data = binary.read_bytes()
    damaged = {"truncate": data[: len(data) // 2], "garbage": os.urandom(len(data)), "empty": b""}
    binary.write_bytes(damaged[damage])
    got = load_arpa(arpa)
    assert torch.equal(logprobs(got), want)
    monkeypatch.setattr("decodekit.models.arpa_cache.read_arpa", lambda *a, **k: pytest.fail("not rebuilt"))
    assert torch.equal(logprobs(load_arpa(arpa)), want)  # written again


def test_a_cache_with_inconsistent_tables_is_rebuilt(arpa):
    from safetensors import safe_open
    from safetensors.torch import save_file

    load_arpa(arpa)
    binary = cache_path(arpa)
    with safe_open(str(binary), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    tensors["keys.1"] = tensors["keys.1"].flip(0)  # unsorted keys
    save_file(tensors, str(binary), metadata=meta)
    assert torch.equal(logprobs(load_arpa(arpa)), logprobs(read_arpa(arpa)))


@pytest.mark.parametrize("failure", ["read-only", "full"])
def test_a_cache_that_cannot_be_written_is_one_warning(failure, tmp_path):
    """The write really fails: a read-only bind mount (or, without mount permission, a directory
    this process may not write: as root, a child running as nobody), or a full tmpfs."""
    with public_dir() as home, small_disk(tmp_path / "disk") as disk:
        if failure == "read-only":
            arpa = home / "kn3.arpa"
            write_arpa(_kn3(), arpa)
            with read_only(home) as uid:
                code, err = in_child(lambda: _load_without_cache(arpa), uid)
            reasons = ("Read-only file system", "Permission denied")
        else:
            if disk is None:
                pytest.skip("mounting a small tmpfs is not permitted here")
            arpa = disk / "kn3.arpa"
            write_arpa(_kn3(), arpa)
            fill(disk)
            code, err = in_child(lambda: _load_without_cache(arpa))
            reasons = ("No space left on device",)
    assert code == 0, err
    binary = cache_path(arpa)
    assert any(
        err.strip() == f"cannot write the ARPA cache {binary} ({r}); the next load reads the text again"
        for r in reasons
    ), err


def _kn3():
    return train_kneser_ney_on_sentences(
        [s.split() for s in SENTENCES], order=3, discounts=[(0.5, 1.0, 1.5)] * 3
    )


def _load_without_cache(arpa) -> int:
    """(In a child.) Load ``arpa`` through the cache, print the warnings on stderr; 0 when the model
    is the text's and no cache was left."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = load_arpa(arpa)
    print("\n".join(str(w.message) for w in caught), file=sys.stderr)
    same = torch.equal(logprobs(got), logprobs(read_arpa(arpa)))
    return 0 if same and not cache_path(arpa).exists() else 1


def test_an_unwritable_cache_is_one_warning(arpa, monkeypatch):
    def refuse(path, write, *what):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("decodekit.models.arpa_cache.atomic_write", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = load_arpa(arpa)
    binary = cache_path(arpa)
    want = f"cannot write the ARPA cache {binary} (Permission denied); the next load reads the text again"
    assert [str(w.message) for w in caught] == [want]
    assert torch.equal(logprobs(got), logprobs(read_arpa(arpa)))


def test_load_model_goes_through_the_cache(arpa):
    model = load_model(str(arpa))
    assert cache_path(arpa).is_file()
    assert torch.equal(logprobs(load_model(str(arpa))), logprobs(model))
