"""generate's user-facing conveniences: transformers' option names, warnings for options the
strategy ignores, prompts from standard input, capitalised prompts for a lower-case vocabulary."""

import json

import pytest
import regex
import torch

from decodekit.checkpoint import save_checkpoint
from decodekit.models.lstm import LSTMLM, LSTMConfig
from tests.support.cli import run, word_checkpoint

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return word_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", WORDS)


def hypotheses(result):
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_transformers_names_mean_the_same_search(model_dir):
    ours = run("generate", "the", "--model", model_dir, "--strategy", "beam", "--beam-size", "3",
               "--n-best", "2", "--max-length", "4", "--json")  # fmt: skip
    theirs = run("generate", "the", "--model", model_dir, "--num-beams", "3", "--num-return-sequences", "2",
                 "--max-new-tokens", "4", "--json")  # fmt: skip
    assert ours.exit_code == theirs.exit_code == 0, theirs.output
    assert hypotheses(ours) == hypotheses(theirs) and len(hypotheses(ours)) == 2
    sampled = run("generate", "the", "--model", model_dir, "--do-sample", "--num-return-sequences", "3",
                  "--seed", "1", "--max-new-tokens", "3", "--json")  # fmt: skip
    assert sampled.exit_code == 0 and len(hypotheses(sampled)) == 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategy", "greedy", "--do-sample"], "contradicts --do-sample"),
        (["--max-length", "3", "--max-new-tokens", "4"], "not both"),
        (["--num-return-sequences", "2"], "greedy search returns one sequence"),
    ],
)
def test_contradictory_transformers_names_are_usage_errors(model_dir, args, message, capsys):
    from decodekit.cli import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--model", model_dir, *args])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_options_the_strategy_ignores_are_warned_about(model_dir):
    r = run("generate", "the", "--model", model_dir, "--top-k", "5", "--n-best", "2", "--max-length", "3")
    assert r.exit_code == 0
    assert "Warning: --top-k is ignored: it applies to --strategy sample; this run uses greedy" in r.stderr
    assert "Warning: --n-best is ignored" in r.stderr
    quiet = run("generate", "the", "--model", model_dir, "--strategy", "sample", "--top-k", "5")
    assert "Warning" not in quiet.stderr
    zero = run("generate", "the", "--model", model_dir, "--strategy", "greedy", "--temperature", "0")
    assert zero.exit_code == 0 and "Warning" not in zero.stderr  # temperature 0 is what greedy does
    hot = run("generate", "the", "--model", model_dir, "--strategy", "greedy", "--temperature", "0.7")
    assert "Warning: --temperature is ignored" in hot.stderr


def test_prompt_from_standard_input(model_dir):
    args = ("--model", model_dir, "--max-length", "4", "--json")
    piped = run("generate", *args, input="the company\n")
    dash = run("generate", "-", *args, input="the company\n")
    typed = run("generate", "the company", *args)
    assert piped.exit_code == dash.exit_code == typed.exit_code == 0, piped.output
    assert hypotheses(piped) == hypotheses(dash) == hypotheses(typed)
    assert run("generate", *args, input="").exit_code == 2  # nothing piped, no prompt: usage error


def test_capitalised_prompt_is_lower_cased_with_a_warning(model_dir):
    capital = run("generate", "The Company", "--model", model_dir, "--max-length", "4", "--json")
    lower = run("generate", "the company", "--model", model_dir, "--max-length", "4", "--json")
    assert [h.pop("prompt") for h in hypotheses(capital)] == ["The Company"]  # echoed as given
    assert [{k: v for k, v in h.items() if k != "prompt"} for h in hypotheses(capital)] == [
        {k: v for k, v in h.items() if k != "prompt"} for h in hypotheses(lower)
    ]
    assert "lower-cased to match the vocabulary: 'The', 'Company'" in capital.stderr


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_unk_and_suppressed_tokens_are_never_generated(model_dir, strategy):
    args = ["generate", "the", "--model", model_dir, "--strategy", strategy, "--max-length", "8", "--json"]
    r = run(*args, "--suppress", "the", "--suppress", "said", "--n-best", "3", "--num-samples", "3")
    assert r.exit_code == 0, r.output
    for h in hypotheses(r):
        assert not {0, 2, 4} & set(h["tokens"])  # <unk>, "the", "said"
        assert sum(h["token_logprobs"]) == pytest.approx(h["logprob"], abs=1e-4)
        assert len(h["token_texts"]) == len(h["token_logprobs"])


def test_allow_unk_gives_the_model_its_unk_back(model_dir):
    from decodekit import GenerationConfig, generate, load_model

    model = load_model(model_dir)
    prompt = [model.vocab.index["the"]]
    default = run("generate", "the", "--model", model_dir, "--max-length", "6", "--json")
    allowed = run("generate", "the", "--model", model_dir, "--max-length", "6", "--json", "--allow-unk")
    want = generate(model, [prompt], GenerationConfig(max_length=6))[0]  # the library: <unk> allowed
    assert [h["tokens"] for h in hypotheses(allowed)] == [list(h.tokens) for h in want]
    assert all(0 not in h["tokens"] for h in hypotheses(default))


def test_suppressing_an_unknown_token_is_one_line(model_dir, capsys):
    from decodekit.cli import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--model", model_dir, "--suppress", "zebra"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "cannot suppress 'zebra'" in err and "\n" not in err


def test_dot_draws_the_search(model_dir, tmp_path):
    dot = tmp_path / "search.dot"
    r = run("generate", "the", "--model", model_dir, "--strategy", "beam", "--beam-size", "2",
            "--max-length", "3", "--dot", str(dot))  # fmt: skip
    assert r.exit_code == 0, r.output
    text = dot.read_text()
    assert text.startswith("digraph") and text.count("{") == text.count("}")
    batch = run("generate", "--input", str(dot), "--output", str(tmp_path / "o"), "--model", model_dir,
                "--dot", str(dot))  # fmt: skip
    assert batch.exit_code == 2 and "--dot" in batch.output


@pytest.fixture(scope="module")
def char_model_dir(tmp_path_factory):
    from decodekit.vocab import CharVocab

    torch.manual_seed(0)
    chars = sorted(set('{}[]":,-.0123456789abcdefghijklmnopqrstuvwxyz '))
    model = LSTMLM(LSTMConfig(embed=16, hidden=16, layers=1), CharVocab(["<unk>", "<eos>", *chars]))
    path = tmp_path_factory.mktemp("ckpt") / "chars"
    save_checkpoint(model.eval(), path)
    return str(path)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_json_schema_output_parses_and_validates(char_model_dir, tmp_path, strategy):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 99}, "ok": {"type": "boolean"}},
        "required": ["id", "ok"],
    }
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    r = run("generate", "", "--model", char_model_dir, "--json-schema", str(path), "--strategy", strategy,
            "--beam-size", "2", "--max-length", "30", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    for h in hypotheses(r):
        jsonschema.validate(json.loads(h["text"]), schema)


def test_json_schema_mistakes_are_one_line(char_model_dir, tmp_path, capsys):
    from decodekit.cli import main

    bad = tmp_path / "bad.json"
    for text, message in [
        ("{not json", "is not JSON"),
        ('{"type": "integer", "multipleOf": 3}', "/multipleOf is not supported"),
    ]:
        bad.write_text(text)
        with pytest.raises(SystemExit) as e:
            main(["generate", "", "--model", char_model_dir, "--json-schema", str(bad)])
        err = capsys.readouterr().err.strip()
        assert e.value.code == 2 and message in err and "\n" not in err
    with pytest.raises(SystemExit) as e:
        main(["generate", "", "--model", char_model_dir, "--json-schema", str(bad), "--constraint", "a"])
    assert e.value.code == 2 and "not both" in capsys.readouterr().err


def test_json_whitespace_reaches_the_schema_and_needs_it(char_model_dir, tmp_path, capsys):
    from decodekit.cli import main
    from decodekit.cli.generate_options import schema_regex

    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    spaced = '{"id": 5}'
    assert regex.fullmatch(schema_regex(str(path), "flexible"), spaced)
    assert not regex.fullmatch(schema_regex(str(path)), spaced)
    r = run("generate", "", "--model", char_model_dir, "--json-schema", str(path), "--json-whitespace",
            "flexible", "--max-length", "20", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    for h in hypotheses(r):
        jsonschema.validate(json.loads(h["text"]), schema)
    with pytest.raises(SystemExit) as e:
        main(["generate", "", "--model", char_model_dir, "--json-whitespace", "flexible"])
    assert e.value.code == 2 and "--json-whitespace applies to --json-schema only" in capsys.readouterr().err


def test_json_key_order_reaches_the_schema(char_model_dir, tmp_path, capsys):
    from decodekit.cli import main
    from decodekit.cli.generate_options import schema_regex

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}}
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    swapped = '{"b":true,"a":1}'
    assert regex.fullmatch(schema_regex(str(path), key_order="any"), swapped)
    assert not regex.fullmatch(schema_regex(str(path)), swapped)
    r = run("generate", "", "--model", char_model_dir, "--json-schema", str(path), "--json-key-order", "any",
            "--max-length", "20", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    for h in hypotheses(r):
        assert set(json.loads(h["text"])) <= {"a", "b"}
    with pytest.raises(SystemExit) as e:
        main(["generate", "", "--model", char_model_dir, "--json-key-order", "any"])
    assert e.value.code == 2 and "--json-key-order applies to --json-schema only" in capsys.readouterr().err
