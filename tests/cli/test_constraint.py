"""``decodekit constraint``: sizes, JSON, Graphviz, one-line errors."""

import json

import pytest
import torch
from click.testing import CliRunner

import decodekit
from decodekit.checkpoint import save_checkpoint
from decodekit.cli import _register, cli, main
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.manual_seed(0)
    model = LSTMLM(LSTMConfig(embed=8, hidden=8, layers=1), WordVocab(["<unk>", "<eos>", *WORDS]))
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_checkpoint(model.eval(), path)
    return str(path)


def run(*args):
    _register()
    return CliRunner().invoke(cli, list(args))


def run_main(argv, capsys) -> tuple[int, str]:
    """Through the real entry point, which turns library errors into one line and exit 2."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


def test_sizes_and_json(model_dir):
    r = run("constraint", r"the (company|market) (rose|fell)", "--model", model_dir)
    assert r.exit_code == 0, r.output
    assert "shortest match     3 token(s)" in r.output and "9 tokens, separator ' '" in r.output
    r = run("constraint", r".*\bprofit\b.*", "--model", model_dir, "--json")
    info = json.loads(r.output)
    # states: start, "no profit yet" and "profit seen" (accepting); EOS and <unk> never move
    assert info["states"] == 2 and info["accepting_states"] == 1 and info["shortest"] == 1
    assert info["transitions"] == 2 * 7 and info["live_states"] >= info["states"]
    assert info["byte_states"] >= info["char_states"] >= 2  # \b over Unicode: more bytes states


def test_dot(model_dir):
    r = run("constraint", "the (company|market)", "--model", model_dir, "--dot")
    assert r.exit_code == 0, r.output
    out = r.output
    assert out.startswith("digraph token_automaton {") and out.rstrip().endswith("}")
    assert '0 -> 1 [label="\\"the\\""];' in out
    assert '1 -> 2 [label="\\"company\\", \\"market\\""];' in out
    assert "2 [shape=doublecircle" in out
    r = run("constraint", ".*", "--model", model_dir, "--dot")
    assert '0 -> 0 [label="\\"the\\", \\"company\\", \\"said\\", ... (7 tokens)"];' in r.output


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("a(b", "invalid regex 'a(b': missing ) at position 3"),
        (r"(a)\1", "unsupported regex feature"),
        ("the (dog|cat)", "no token sequence of this vocabulary"),
        ("a^b", "anchor"),
    ],
)
def test_errors_are_one_line(model_dir, pattern, message, capsys):
    code, err = run_main(["constraint", pattern, "--model", model_dir], capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_model_without_vocab(monkeypatch, capsys):
    class NoVocab:
        vocab_size, bos_id, eos_id = 3, 0, 0

    monkeypatch.setattr(decodekit, "load_model", lambda spec=None, device=None: NoVocab())
    code, err = run_main(["constraint", "a"], capsys)
    assert code == 2 and "has none" in err
