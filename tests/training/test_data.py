"""Corpora, vocabularies from files, Brown loading and truncated-BPTT batching."""

from __future__ import annotations

import zipfile

import pytest
import torch

from decodekit.data import (
    batchify,
    bptt_batches,
    brown_words,
    encode_tokens,
    load_brown,
    load_corpus,
    load_data,
    num_bptt_batches,
    read_tokens,
)


def write_corpus(tmp_path, names=("train.txt", "valid.txt", "test.txt")):
    texts = ["a b c\nb c\n\nc a a\n", "a b\nz\n", "c b a\n"]
    for name, text in zip(names, texts):
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_batchify_and_bptt_exact():
    stream = torch.arange(23)
    data = batchify(stream, 3)  # 7 per row, the last 2 tokens dropped
    assert data.tolist() == [list(range(0, 7)), list(range(7, 14)), list(range(14, 21))]
    chunks = list(bptt_batches(data, 4))
    assert len(chunks) == num_bptt_batches(data, 4) == 2
    (x0, y0), (x1, y1) = chunks
    assert x0.tolist() == [[0, 1, 2, 3], [7, 8, 9, 10], [14, 15, 16, 17]]
    assert y0.tolist() == [[1, 2, 3, 4], [8, 9, 10, 11], [15, 16, 17, 18]]
    assert x1.tolist() == [[4, 5], [11, 12], [18, 19]] and y1.tolist() == [[5, 6], [12, 13], [19, 20]]
    # every input is followed by its target in the original stream, every target exactly once per row
    assert torch.cat([y0, y1], 1).tolist() == data[:, 1:].tolist()
    (x1b, _), *_ = list(bptt_batches(data, 4, start=1))
    assert torch.equal(x1b, x1)


def test_batching_errors():
    with pytest.raises(ValueError, match="too short for 5 parallel streams"):
        batchify(torch.arange(6), 5)
    with pytest.raises(ValueError, match="bptt must be >= 1"):
        list(bptt_batches(torch.zeros(2, 5, dtype=torch.long), 0))


def test_load_corpus_ptb_convention(tmp_path):
    corpus = load_corpus(write_corpus(tmp_path))
    v = corpus.vocab
    assert v.tokens[:2] == ["<unk>", "<eos>"] and v.tokens[2] in ("a", "c")  # by frequency
    assert v.decode(corpus.train.tolist()) == "a b c b c c a a"
    assert corpus.train.numel() == 11  # 8 words + 3 <eos> (the blank line is skipped)
    assert corpus.valid.tolist()[-2:] == [v.unk_id, v.eos_id]  # "z" is unknown


def test_ptb_file_names(tmp_path):
    corpus = load_corpus(write_corpus(tmp_path, ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt")))
    assert corpus.test.numel() == 4


def test_character_corpus_and_single_file(tmp_path):
    corpus = load_corpus(write_corpus(tmp_path), chars=True)
    assert corpus.vocab.kind == "char" and corpus.vocab.tokens == ["<unk>", "<eos>", " ", "a", "b", "c"]
    assert corpus.vocab.decode(corpus.train[:6].tolist()) == "a b c"
    assert corpus.train[5].item() == corpus.vocab.eos_id
    text = tmp_path / "all.txt"
    text.write_text("".join(f"line {i}\n" for i in range(40)), encoding="utf-8")
    single = load_data(text)  # 36 / 2 / 2 lines
    assert single.train.numel() == 36 * 3 and single.valid.numel() == 2 * 3 and single.test.numel() == 2 * 3
    assert single.vocab.decode(single.test.tolist()) == "line <unk> line <unk>"  # 38, 39 unseen
    assert load_data(text, chars=True).vocab.kind == "char"
    text.write_text("one\ntwo\n")
    with pytest.raises(ValueError, match="at least 3 non-empty lines"):
        load_data(text)


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="no valid file"):
        (tmp_path / "train.txt").write_text("a\n")
        load_corpus(tmp_path)
    (tmp_path / "valid.txt").write_text("   \n\n")
    (tmp_path / "test.txt").write_text("a\n")
    with pytest.raises(ValueError, match="data file is empty: .*valid.txt"):
        load_corpus(tmp_path)
    (tmp_path / "valid.txt").write_bytes(b"a b\nc \xff d\n")
    with pytest.raises(ValueError, match=r"valid.txt: line 2: invalid UTF-8 \(byte 0xff\)"):
        load_corpus(tmp_path)
    with pytest.raises(ValueError, match="data file not found"):
        read_tokens(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="data directory not found"):
        load_corpus(tmp_path / "nope")


def test_encode_unknown_without_unk():
    from decodekit.vocab import WordVocab

    v = WordVocab(["<eos>", "a"], unk=None)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        encode_tokens(["a", "b"], v)


def fake_brown(path):
    para = "\n\n\tThe/at cat/nn sat/vbd ./.\n\tA/at dog/nn ran/vbd ./.\n\n\n\tThe/at end/nn ./.\n"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("brown/ca02", para)
        z.writestr("brown/ca01", "\n\n\tcats/nns like/vb the/at mat/nn ./.\n")
        z.writestr("brown/README", "not a corpus file")
        z.writestr("brown/cats.txt", "ca01 news")
    return path


def test_brown_tags_stripped_split_and_min_count(tmp_path):
    path = fake_brown(tmp_path / "brown.zip")
    words = brown_words(path)
    assert words[:6] == ["cats", "like", "the", "mat", ".", "<eos>"]  # ca01 first, tags stripped
    assert words[6:16] == ["The", "cat", "sat", ".", "A", "dog", "ran", ".", "<eos>", "The"]
    corpus = load_brown(path, train_words=12, valid_words=3, min_count=2)
    assert corpus.train.numel() == 12 and corpus.valid.numel() == 3 and corpus.test.numel() == len(words) - 15
    assert set(corpus.vocab.tokens) == {"<unk>", "<eos>", "."}  # only "." and <eos> seen twice in train


def test_brown_directory_and_load_data(tmp_path):
    root = tmp_path / "corpus" / "brown"
    root.mkdir(parents=True)
    (root / "ca01").write_text("\n\n\tx/nn y/nn ./.\n")
    assert brown_words(tmp_path / "corpus") == ["x", "y", ".", "<eos>"]
    with pytest.raises(ValueError, match="fewer than train"):
        load_data(tmp_path / "corpus")


def test_eval_tokens_for_brown_directory_and_file(tmp_path):
    from decodekit.data import brown_split, eval_tokens

    path = fake_brown(tmp_path / "brown.zip")
    words = brown_words(path)
    assert brown_split(path, train_words=12, valid_words=3)[2] == words[15:]
    with pytest.raises(ValueError, match="fewer than train"):  # the Brown path: Bengio's 800k + 200k
        eval_tokens(path)
    (tmp_path / "d").mkdir()
    for split in ("train", "valid", "test"):
        (tmp_path / "d" / f"{split}.txt").write_text(f"{split} words\n")
    assert eval_tokens(tmp_path / "d")[0] == ["test", "words", "<eos>"]
    assert eval_tokens(tmp_path / "d" / "valid.txt")[0] == ["valid", "words", "<eos>"]
