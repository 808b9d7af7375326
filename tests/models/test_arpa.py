"""ARPA files: round trip of a trained Kneser-Ney model, back-off semantics of a hand-written
file (as KenLM / SRILM write them), and errors that name the offending line."""

from __future__ import annotations

import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decodekit.models.arpa import ArpaError, read_arpa, write_arpa
from decodekit.models.kneser_ney import train_kneser_ney_on_sentences
from decodekit.models.ngram import NgramLM
from decodekit.models.scoring import stream_logprobs
from decodekit.vocab import WordVocab

SENTENCES = [s.split() for s in ["a b c", "a b", "b c a a", "c", "a c b b c", "b a"]]

HAND = """Some tool banner before the data
\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-99\t<s>\t-0.3
-0.5\t</s>
-0.4\ta\t-0.2
-0.6\tb
-1.2\t<unk>

\\2-grams:
-0.1\t<s> a
-0.25\ta b
-0.35\ta </s>

\\end\\
"""


@pytest.fixture(scope="module")
def trained():
    return train_kneser_ney_on_sentences(
        SENTENCES, 3, discounts=[(0.5, 0.75, 1.0), (0.4, 0.8, 1.2), (0.3, 0.9, 1.4)]
    )


def all_histories(model, length):
    """Every history of ``length`` ids (eos included), as a [N, n-1] state."""
    V = model.vocab_size
    grid = torch.cartesian_prod(*[torch.arange(V)] * length).view(-1, length)
    pad = model.initial_state(grid.shape[0])
    return torch.cat([pad, grid], 1)[:, -(model.order - 1) :]


def test_round_trip_gives_the_same_logprobs(trained, tmp_path):
    path = tmp_path / "m.arpa"
    write_arpa(trained, path)
    back = read_arpa(path, vocab=trained.vocab)
    assert [len(k) for k in back.keys] == [len(k) for k in trained.keys]
    hist = all_histories(trained, 2)
    want = trained.next_logprobs(hist)
    got = back.next_logprobs(hist)
    assert torch.allclose(got, want, atol=1e-5)
    assert torch.allclose(got.double().exp().sum(1), torch.ones(len(hist), dtype=torch.double), atol=1e-5)
    # without a vocabulary: the unigrams in file order, </s> as decodekit's <eos>
    again = read_arpa(path)
    assert again.vocab.tokens[again.eos_id] == "<eos>" and sorted(again.vocab.tokens) == sorted(
        trained.vocab.tokens
    )


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcd"), max_size=6), min_size=1, max_size=6),
    st.integers(1, 4),
)
def test_round_trip_property(tmp_path_factory, sentences, order):
    vocab = WordVocab(["<unk>", "<eos>", "a", "b", "c", "d"])
    model = train_kneser_ney_on_sentences(sentences, order, vocab, discounts=[(0.5, 1.0, 1.5)] * order)
    path = tmp_path_factory.mktemp("rt") / "m.arpa"
    write_arpa(model, path)
    back = read_arpa(path, vocab=vocab)
    hist = torch.cartesian_prod(*[torch.arange(6)] * max(order - 1, 1)).view(-1, max(order - 1, 1))
    hist = hist[:, : order - 1]
    assert torch.allclose(back.next_logprobs(hist), model.next_logprobs(hist), atol=1e-5)


def test_written_file_is_valid_arpa(trained, tmp_path):
    path = tmp_path / "m.arpa"
    write_arpa(trained, path)
    lines = path.read_text().splitlines()
    assert lines[0] == "\\data\\" and lines[-1] == "\\end\\"
    counts = [int(m.group(1)) for line in lines if (m := re.match(r"ngram \d+=(\d+)$", line))]
    sections = {}
    for line in lines:
        if re.match(r"\\\d-grams:", line):
            current = sections.setdefault(int(line[1]), [])
        elif line and not line.startswith("\\") and not line.startswith("ngram"):
            current.append(line.split("\t"))
    assert counts == [len(sections[k]) for k in (1, 2, 3)]
    assert sections[1][[r[1] for r in sections[1]].index("<s>")][:2] == ["-99", "<s>"]
    for k, rows in sections.items():
        grams = [r[1].split() for r in rows]
        assert all(len(g) == k for g in grams)
        assert all("<s>" not in g[1:] and "</s>" not in g[:-1] for g in grams)
        assert all(float(r[0]) <= 0 for r in rows)
        ids = [[trained.vocab.index.get(w, trained.eos_id) for w in g] for g in grams]
        if k > 1:
            assert ids == sorted(ids)  # sections sorted by (context ids, word id)
        contexts = {tuple(g[:-1]) for g in grams}
        lower = sections.get(k - 1, [])
        # every context of a k-gram is a (k-1)-gram, and only contexts carry back-off weights
        assert contexts <= {tuple(r[1].split()) for r in lower} | ({()} if k == 1 else set())
        if k < 3:
            higher = {tuple(r[1].split()[:-1]) for r in sections[k + 1]}
            assert all((len(r) == 3) == (tuple(r[1].split()) in higher) for r in rows)


def test_backoff_semantics_of_a_hand_written_file(tmp_path):
    path = tmp_path / "hand.arpa"
    path.write_text(HAND)
    m = read_arpa(path)
    v = m.vocab
    assert v.tokens == ["<eos>", "a", "b", "<unk>"] and m.eos_id == 0 and v.unk_id == 3
    lp, state = m.step(m.initial_state(1), torch.tensor([m.bos_id]))  # context <s>
    ln10 = math.log(10)
    want = [-0.3 - 0.5, -0.1, -0.3 - 0.6, -0.3 - 1.2]  # seen <s> a; else bo(<s>) + unigram
    assert torch.allclose(lp[0], torch.tensor(want) * ln10, atol=1e-5)
    lp, state = m.step(state, torch.tensor([v.index["a"]]))  # context a: seen a b, a </s>; bo(a)
    want = [-0.35, -0.2 - 0.4, -0.25, -0.2 - 1.2]
    assert torch.allclose(lp[0], torch.tensor(want) * ln10, atol=1e-5)
    lp, _ = m.step(state, torch.tensor([v.index["b"]]))  # context b: no 2-grams, no back-off weight
    assert torch.allclose(lp[0], torch.tensor([-0.5, -0.4, -0.6, -1.2]) * ln10, atol=1e-5)
    ids = torch.tensor([1, 2, 0])  # a b </s>
    assert torch.allclose(stream_logprobs(m, ids), torch.tensor([-0.1, -0.25, -0.5]) * ln10, atol=1e-5)


def test_given_vocabulary_maps_s_and_end_to_its_eos(tmp_path):
    path = tmp_path / "hand.arpa"
    path.write_text(HAND)
    vocab = WordVocab(["<unk>", "<eos>", "b", "a"])
    m = read_arpa(path, vocab=vocab)
    assert m.eos_id == m.bos_id == 1
    assert math.isclose(float(stream_logprobs(m, torch.tensor([3]))[0]), -0.1 * math.log(10), rel_tol=1e-6)
    with pytest.raises(ArpaError, match="no unigram in the file"):
        read_arpa(path, vocab=WordVocab(["<unk>", "<eos>", "a", "b", "c"]))
    with pytest.raises(ArpaError, match=r":10: unigram 'b' is not in the given vocabulary"):
        read_arpa(path, vocab=WordVocab(["<unk>", "<eos>", "a"]))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("ngram 2=3", "ngram 2=4", r":13: the header says ngram 2=4 but the section has 3 lines"),
        ("-0.25\ta b", "-0.x\ta b", r":15: not a number: '-0.x'"),
        ("-0.25\ta b", "-0.25\ta", r":15: a 2-gram line needs a log10 probability, 2 words"),
        ("-0.25\ta b", "-0.25\ta b\t-0.1\t3", r":15: a 2-gram line needs"),
        ("-0.25\ta b", "-0.25\ta d", r":15: word 'd' is not a unigram"),
        ("-0.25\ta b", "-0.25\t<s> a", r":15: 2-gram '<s> a' repeats line 14"),
        ("-0.25\ta b", "-0.25\t</s> b", r":15: <s> may only come first and </s> only last"),
        ("\\end\\\n", "", r":18: expected '\\end\\' after the last section, got end of file"),
        ("\\2-grams:", "\\3-grams:", r":13: expected '\\2-grams:'"),
        ("ngram 2=3", "ngram 3=3", r":4: expected 'ngram 2=COUNT'"),
        ("\\data\\", "data", r":1: no \\data\\ header"),
        ("-0.6\tb", "-0.6\ta", r":10: unigram 'a' listed twice \(first at line 9\)"),
    ],
)
def test_malformed_files_name_the_line(tmp_path, old, new, message):
    assert old in HAND
    path = tmp_path / "bad.arpa"
    path.write_text(HAND.replace(old, new, 1))
    with pytest.raises(ArpaError, match=message) as info:
        read_arpa(path)
    assert str(info.value).startswith(str(path))


def test_missing_contexts_are_added_with_their_backoff_probability(tmp_path):
    # a pruned model: the 3-gram "b a b" and the 4-gram "b b a b" whose contexts are not listed
    text = HAND.replace("ngram 2=3", "ngram 2=3\nngram 3=1\nngram 4=1").replace(
        "\\end\\", "\\3-grams:\n-0.2\tb a b\n\n\\4-grams:\n-0.05\tb b a b\n\n\\end\\"
    )
    path = tmp_path / "gap.arpa"
    path.write_text(text)
    with pytest.warns(UserWarning, match=r"3 n-gram contexts are not listed"):
        m = read_arpa(path)
    assert [len(k) for k in m.keys] == [4, 5, 2, 1]  # + "b a", "b b" and "b b a"
    v, ln10 = m.vocab.index, math.log(10)
    hist = torch.tensor([[v["b"], v["b"], v["a"]], [v["b"], v["b"], v["a"]], [v["b"], v["b"], v["b"]]])
    got = m.logprob(hist, torch.tensor([v["b"], v["<eos>"], v["a"]]))
    # b b a -> b: the 4-gram; b b a -> </s>: back off (weights 1) to "a </s>"; b b b -> a: unigram
    assert torch.allclose(got, torch.tensor([-0.05, -0.35, -0.4]) * ln10, atol=1e-6)
    lp = m.next_logprobs(hist[:1])
    want = torch.tensor([-0.35, -0.2 - 0.4, -0.05, -0.2 - 1.2]) * ln10  # seen a </s>, a b; bo(a) else
    want[2] = -0.05 * ln10
    assert torch.allclose(lp[0], want, atol=1e-6)


def test_write_needs_a_vocabulary_and_plain_tokens(tmp_path, trained):
    bare = NgramLM(trained.keys, trained.logp, trained.logbo, trained.vocab_size, trained.eos_id)
    with pytest.raises(ValueError, match="needs a model with a vocabulary"):
        write_arpa(bare, tmp_path / "x.arpa")
    spaced = WordVocab(["<unk>", "<eos>", "a b", "c", "d"])
    m = train_kneser_ney_on_sentences([["c", "d"]], 2, spaced, discounts=[(0.5, 1, 1.5)] * 2)
    with pytest.raises(ValueError, match="cannot be written to ARPA: \\['a b'\\]"):
        write_arpa(m, tmp_path / "y.arpa")


def test_cli_eval_and_generate_read_arpa_files(trained, tmp_path):
    from click.testing import CliRunner

    from decodekit.cli import _register, cli

    _register()
    path = tmp_path / "m.arpa"
    write_arpa(trained, path)
    text = tmp_path / "test.txt"
    text.write_text("a b c\nb a\n")
    ids = [trained.vocab.index[w] for w in ["a", "b", "c", "<eos>", "b", "a", "<eos>"]]
    result = CliRunner().invoke(cli, ["eval", "--model", str(path), "--data", str(text), "--json"])
    assert result.exit_code == 0, result.output
    want = math.exp(-float(stream_logprobs(trained, torch.tensor(ids)).double().mean()))
    assert f'"perplexity": {want:.6}'[:20] in result.output
    result = CliRunner().invoke(cli, ["generate", "--model", str(path), "a", "--max-length", "4"])
    assert result.exit_code == 0, result.output


def test_kenlm_reads_written_files_and_agrees(trained, tmp_path):
    kenlm = pytest.importorskip("kenlm")
    path = tmp_path / "m.arpa"
    write_arpa(trained, path)
    km = kenlm.Model(str(path))
    for sentence in ["a b c", "c a", "b b b a", "a"]:
        words = sentence.split()
        ids = torch.tensor([trained.vocab.index[w] for w in words] + [trained.eos_id])
        ours = float(stream_logprobs(trained, ids).double().sum()) / math.log(10)
        assert km.score(sentence, bos=True, eos=True) == pytest.approx(ours, abs=1e-5)
