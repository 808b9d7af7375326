"""Search-then-converge and Darken-Moody schedule values; word2vec text embedding files."""

from __future__ import annotations

import pytest
import torch

from decodekit.models.registry import create_model, make_config
from decodekit.training.embeddings import load_embeddings, read_word2vec_text
from decodekit.training.schedules import DarkenMoody, SearchThenConverge, make_schedule
from decodekit.vocab import WordVocab


def test_search_then_converge_values_are_exact():
    """lr_e = lr0 / psi^max(0, e - tau): the paper's small (7, 2), medium (25, 1.2), large (12, 1.15)."""
    s = make_schedule("search-then-converge", 1.0, tau=7, psi=2.0)
    assert [s.lr(e, 0) for e in range(1, 13)] == [1.0] * 7 + [0.5, 0.25, 0.125, 0.0625, 0.03125]
    medium = SearchThenConverge(1.0, tau=25, psi=1.2)
    assert [medium.lr(e, 0) for e in (1, 25)] == [1.0, 1.0]
    assert medium.lr(26, 0) == 1 / 1.2 and medium.lr(39, 0) == 1 / 1.2**14
    large = SearchThenConverge(0.5, tau=12, psi=1.15)
    assert large.lr(12, 999) == 0.5 and large.lr(55, 0) == 0.5 / 1.15**43
    assert s.state_dict() == {} and s.lr(8, 0) == SearchThenConverge(1.0, tau=7, psi=2).lr(8, 12345)


def test_darken_moody_values_are_exact():
    """lr_e = lr0 / (1 + (e - 1) / tau)."""
    s = make_schedule("darken-moody", 2.0, tau=4)
    assert [s.lr(e, 0) for e in range(1, 6)] == [2.0, 2.0 / 1.25, 2.0 / 1.5, 2.0 / 1.75, 1.0]
    assert DarkenMoody(1.0, tau=1).lr(11, 0) == 1 / 11


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("search-then-converge", {"tau": -1}, "tau >= 0 and psi >= 1, got tau=-1"),
        ("search-then-converge", {"psi": 0.9}, "psi >= 1, got tau=7, psi=0.9"),
        ("darken-moody", {"tau": 0}, "tau > 0, got tau=0"),
    ],
)
def test_schedule_bad_options(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_schedule(name, 1.0, **kwargs)


VOCAB = WordVocab(["<unk>", "<eos>", "the", "cat", "sat"])


def model(embed: int = 3, **kw):
    torch.manual_seed(0)
    return create_model(make_config("lstm", embed=embed, hidden=3, layers=1, **kw), VOCAB)


def write(tmp_path, text: str, name: str = "v.txt"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_word2vec_text_file_is_loaded_into_the_vocabulary_rows(tmp_path):
    p = write(tmp_path, "4 3\ncat 1 2 3\ndog 9 9 9\nthe -0.5 0.25 1e-2\n<eos> 0 0 0\n")
    words, vectors, total = read_word2vec_text(p)
    assert words == ["cat", "dog", "the", "<eos>"] and total == 4
    torch.testing.assert_close(vectors[2], torch.tensor([-0.5, 0.25, 0.01]))
    m = model()
    before = m.embedding.weight.detach().clone()
    stats = load_embeddings(m, p)
    assert (stats.found, stats.missing, stats.file_words, stats.dim) == (3, 2, 4, 3)
    assert stats.missing_examples == ("<unk>", "sat")
    w = m.embedding.weight.detach()
    assert torch.equal(w[VOCAB.index["cat"]], torch.tensor([1.0, 2, 3]))
    assert torch.equal(w[VOCAB.index["the"]], torch.tensor([-0.5, 0.25, 0.01]))
    assert torch.equal(w[VOCAB.index["<eos>"]], torch.zeros(3))
    for t in ("<unk>", "sat"):  # not in the file: initial values kept
        assert torch.equal(w[VOCAB.index[t]], before[VOCAB.index[t]])
    assert m.embedding.weight.requires_grad
    load_embeddings(m, p, freeze=True)
    assert not m.embedding.weight.requires_grad


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty embedding file"),
        ("cat 1 2 3\n", r"line 1 must be the word2vec header '<count> <dim>'"),
        ("1 0\ncat\n", "need count >= 0, dim >= 1"),
        ("2 3\ncat 1 2 3\nthe 1 2\n", "line 3: expected a word and 3 numbers, got 2 fields"),
        ("1 3\ncat 1 x 3\n", "line 2: non-numeric value in the vector of 'cat'"),
        ("2 3\ncat 1 2 3\ncat 1 2 3\n", "line 3: word 'cat' appears twice"),
        ("3 3\ncat 1 2 3\nthe 1 2 3\n", "header says 3 vectors but the file has 2"),
        ("1 3\ncat 1 nan 3\n", "NaN or infinity"),
        ("1 3\ndog 1 2 3\n", "none of the 1 words is in the model's vocabulary"),
        ("1 4\ncat 1 2 3 4\n", "vectors have dimension 4, but the model's embedding has 3"),
    ],
)
def test_bad_embedding_files_raise(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        load_embeddings(model(), write(tmp_path, text))


def test_embedding_errors_missing_binary_tied(tmp_path):
    with pytest.raises(ValueError, match="embedding file not found"):
        load_embeddings(model(), tmp_path / "nope.txt")
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"1 3\ncat \xff\xfe\x00\x01")
    with pytest.raises(ValueError, match="not UTF-8 text"):
        load_embeddings(model(), binary)
    tied = model(tie=True)
    p = write(tmp_path, "1 3\ncat 1 2 3\n")
    with pytest.raises(ValueError, match="cannot freeze embeddings tied to the output layer"):
        load_embeddings(tied, p, freeze=True)
    load_embeddings(tied, p)  # tied but not frozen: fine, the head row moves with it
    assert torch.equal(tied.head.weight[VOCAB.index["cat"]].detach(), torch.tensor([1.0, 2, 3]))
