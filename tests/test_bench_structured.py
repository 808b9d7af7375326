"""Smoke test of benchmarks/bench_structured.py on a toy byte vocabulary, with whichever peers
(xgrammar, llguidance, outlines-core) are installed; missing ones are skipped."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
bench = pytest.importorskip("bench_structured")

DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
EXTRA = [b"20", b"24", b"2024", b"-0", b"05", b"ab", b"ba", b"aab"]
TOKENS = tuple([bytes([b]) for b in range(256)] + EXTRA + [None])  # EOS last
EOS = len(TOKENS) - 1
IDS = {t: i for i, t in enumerate(TOKENS) if t is not None}


def encode(text) -> list[int]:
    """Greedy longest match (what the llguidance wrapper needs to tokenize text)."""
    data, out, i = text.encode() if isinstance(text, str) else text, [], 0
    while i < len(data):
        k = max(k for k in range(1, 5) if data[i : i + k] in IDS)
        out.append(IDS[data[i : i + k]])
        i += k
    return out


@pytest.fixture(scope="module")
def engines():
    # the peers' apply kernel uncompiled: torch.compile takes seconds
    return bench.make_engines(bench.available_engines(), TOKENS, EOS, encode, compiled_kernels=False)


def test_compile_walk_and_tokens(engines, capsys):
    walk = encode("2024-05-17")
    assert walk[0] == IDS[b"2024"] and IDS[b"-0"] in walk
    compiled = bench.bench_compile(engines, DATE, repeats=2)
    assert all("error" not in r and r["wall"] > 0 and r["runs"] == 2 for r in compiled.values()), compiled
    handles = {n: r.pop("handle") for n, r in compiled.items()}
    check = bench.check_walk(engines, handles, walk)
    for name, c in check.items():  # every engine allows and accepts the walk, with decodekit's masks
        assert c["ok"] and c["agree"] == len(walk) and c["max_differ"] == 0, (name, c)
    times = bench.bench_tokens(engines, handles, walk, repeats=1, vocab=len(TOKENS))
    assert set(times) == set(engines)
    for t in times.values():
        assert t["mask"]["calls"] == t["apply"]["calls"] == len(walk)
        assert t["mask"]["cpu_us"] >= 0 and t["apply"]["wall_us"] > 0
    assert "mask_no_length" in times["decodekit"]
    row = {
        "name": "date",
        "pattern": DATE,
        "compile": compiled,
        "walk": walk,
        "check": check,
        "tokens": times,
    }
    bench.print_compile_table([row], list(engines))
    bench.print_token_table([row], list(engines))
    out = capsys.readouterr().out
    assert f"| date | {len(walk)} |" in out and "|  |" not in out
    assert ("dk/" in out) == (len(engines) > 1)  # ratios to the peers installed, if any


def test_refusals_are_recorded(engines):
    # decodekit takes word boundaries; an engine that refuses a pattern is recorded, not raised
    compiled = bench.bench_compile(engines, r".*\bab\b.*", repeats=1)
    assert "error" not in compiled["decodekit"]
    assert all(("error" in r) != ("wall" in r) for r in compiled.values())
    bad = bench.bench_compile(engines, "(unclosed", repeats=1)
    assert all("error" in r for r in bad.values())


def test_beam_processor_follows_reordered_rows():
    xgr = pytest.importorskip("xgrammar")
    info = xgr.TokenizerInfo(
        [t if t is not None else b"" for t in TOKENS], xgr.VocabType.RAW, stop_token_ids=[EOS]
    )
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_regex("(ab|ba)+")
    proc = bench.BeamGrammarProcessor(compiled, prompt_len=1, vocab=len(TOKENS))
    a, b = IDS[b"a"], IDS[b"b"]

    def allowed(ids):
        scores = torch.zeros(len(ids), len(TOKENS))
        return proc(torch.tensor(ids), scores) > float("-inf")

    first = allowed([[7], [7]])
    assert first[0, a] and first[0, b] and not first[0, EOS]
    # row 0 continues with "b" after "a", row 1 with "a" after "b": each must now close its pair
    second = allowed([[7, a], [7, b]])
    assert second[0, b] and not second[0, a] and second[1, a] and not second[1, b]
    # rows swap parents: "b a" and "a b" may end (EOS) or go on
    third = allowed([[7, b, a], [7, a, b]])
    assert third[0, EOS] and third[1, EOS] and third[1, a] and third[0, IDS[b"ba"]]
    # "ba" + "ba" matches; "ab" + "aab" cannot: a dead row gets nothing
    dead = allowed([[7, b, a, IDS[b"ba"]], [7, a, b, IDS[b"aab"]]])
    assert dead[0, EOS] and not dead[1].any()


SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
        "k": {"enum": ["ab", "ba"]},
        "xs": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3},
    },
    "required": ["n", "k", "xs"],
    "additionalProperties": False,
}


def test_json_schema_rows(engines):
    doc = {"n": 42, "k": "ba", "xs": [1, 2]}
    compiled = bench.bench_compile(engines, SCHEMA, repeats=1, how="schema")
    assert all("error" not in r for r in compiled.values()), compiled
    handles = {n: r.pop("handle") for n, r in compiled.items()}
    walk = encode('{"n":42,"k":"ba","xs":[1,2]}')
    assert all(c["ok"] for c in bench.check_walk(engines, handles, walk).values())
    forms = bench.json_forms(engines, handles, doc, encode)
    for name, f in forms.items():  # every engine set to compact JSON, properties in the schema's order
        assert f == {"compact": True, "spaced": False, "indented": False, "reordered": False}, (name, f)


def test_several_constraints_decodekit_only(engines):
    words = [r".*\bab\b.*", r".*\bba\b.*"]
    compiled = bench.bench_compile(engines, words, repeats=1, how="all")
    assert "error" not in compiled["decodekit"]
    assert all(r["error"].startswith("no equivalent") for n, r in compiled.items() if n != "decodekit")
    one = bench.any_order(["ab", "ba"])  # the peers' one-regex form: the same language here
    for text in ["ab ba", "x ba, ab", "ba ab y"]:
        assert bench.matches("all", words, text) and bench.matches("regex", one, text), text
    for text in ["abba", "ab ab", "ba", "aba ba"]:
        assert not bench.matches("all", words, text) and not bench.matches("regex", one, text), text
