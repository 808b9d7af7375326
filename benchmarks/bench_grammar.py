"""Grammar-constrained masks side by side: decodekit vs llguidance and xgrammar (issue 38).

Over the 50,000-token byte-level BPE of ``bench_byte_patterns.byte_bpe`` (trained once on the
shared corpora, cached), for each grammar of ``<data>/grammars`` named: compile to the first mask
(CPU ms, median over ``--repeats`` after one untimed compile: what a process pays once, as
reading lark's ``common.lark``, is not a grammar's; decodekit's caches cleared between repeats but
the vocabulary's trie, as the peers keep their tokenizer info), then the mask at every position of a
document's canonical tokenization, first visit (a fresh compile: each position new, as in
generation), CPU time per fill: median and 99th percentile, and the ratios; then of a second
document on the same compiled grammar (warm: the grammar's tables and the lexer's states made,
the positions new). Then ``--samples``
masked samples (uniform over the allowed tokens, ``--max-length`` tokens) checked with lark
(``lexer="dynamic_complete"``): every one must parse.

    python benchmarks/bench_grammar.py --repeats 3 --samples 200
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RECORD = (
    {
        "name": "Alice Smith",
        "age": 42,
        "tags": ["a", "bb", {"x": [1, 2.5, -3e4]}],
        "ok": True,
        "none": None,
        "address": {"street": "12 Rue de la Paix", "city": "Zürich", "zip": "8001"},
        "nested": {"deep": {"deeper": [[], {}, "text with spaces and ünïcödé"]}},
        "scores": [98.5, 87, 77.25, 100, 64],
    },
)
SECOND = {  # another document, walked after the first on the same compiled grammar
    "title": "Another record",
    "items": [{"id": 7, "label": "x y z", "vals": [1, 2, 3]}, {"id": 8, "label": "ünï", "vals": []}],
    "flag": False,
    "meta": {"k": "v", "n": None, "list": [[1, [2, [3]]], {"q": "r"}]},
}
DOCUMENTS = {  # as each grammar spells JSON: json.lark wants a space after ':' and none before ','
    "json.gbnf": json.dumps(RECORD[0], indent=1, ensure_ascii=False),
    "json.lark": json.dumps(RECORD[0], separators=(",", ": "), ensure_ascii=False),
}
SECOND_DOCUMENTS = {
    "json.gbnf": json.dumps(SECOND, indent=1, ensure_ascii=False),
    "json.lark": json.dumps(SECOND, separators=(",", ": "), ensure_ascii=False),
}
# llama.cpp's c.gbnf as it reads C: no space after "(" or "{", one before a call's "(", a
# parenthesised expression spaced inside; xgrammar reads it, so all three engines meet here
DOCUMENTS["c.gbnf"] = (
    "int gcd(int a){int b = 12;while(b!=0){int t = b;b = a-( a/b )*b;a = t;}return a;}"
    "float mean(int n){float s = 0;for(int i = 0; i<n; i = i+1){s = s+value(i);}return s/n;}"
    "int main(){int x = gcd(48);// the entry point\n"
    "if(x>=2){print (x, mean(x));}else{print (0);}/* done */return 0;}"
)
SECOND_DOCUMENTS["c.gbnf"] = (
    "char upper(char c){if(c>=97){return c-32;}return c;}"
    "int sum(int n){int s = 0;int i = 1;while(i<=n){s = s+i*i;i = i+1;}return s;}"
    "int main(){int k = sum(10);for(k = 0; k<3; k = k+1){emit (upper(k), -k);}return ( k+1 )*2;}"
)


def cpu_ms(f):
    t = time.process_time_ns()
    out = f()
    return (time.process_time_ns() - t) / 1e6, out


class Decodekit:
    name = "decodekit"

    def __init__(self, tokens, eos):
        self.tokens, self.eos = tokens, eos
        self.bitmask = torch.zeros(1, (len(tokens) + 31) // 32, dtype=torch.int32)

    def compile(self, text, syntax):
        from decodekit import Grammar
        from decodekit.constraints import clear_cache, compile_regex

        clear_cache(vocabularies=False)
        auto = compile_regex(Grammar(text, syntax), self.tokens, self.eos)
        auto.fill_bitmask(self.bitmask, torch.tensor([auto.initial]))
        return auto

    def walk(self, auto, ids):
        times, state = [], auto.initial
        for t in ids:
            state = auto.walk([t], state)
            if state < 0:
                raise ValueError(f"decodekit rejects token {self.tokens[t]!r}")
            ms, _ = cpu_ms(lambda s=state: auto.fill_bitmask(self.bitmask, torch.tensor([s])))
            times.append(ms)
        return times


class Llguidance:
    name = "llguidance"

    def __init__(self, tokens, eos, encode):
        from bench_structured import LlguidanceEngine

        self.engine = LlguidanceEngine(encode, compiled_kernels=False)
        self.engine.prepare(tokens, eos)

    def compile(self, text, syntax):
        ll = self.engine.ll
        grammar = ll.LLMatcher.grammar_from_lark(text) if syntax == "lark" else ll.grammar_from("gbnf", text)
        self.engine.compile("", grammar)
        return grammar

    def walk(self, grammar, ids):
        m, times = self.engine.start(grammar), []
        for t in ids:
            if not self.engine.advance(m, t):
                raise ValueError("llguidance rejects the document")
            ms, _ = cpu_ms(lambda: self.engine.mask(m))
            times.append(ms)
        return times


class Xgrammar:
    name = "xgrammar"

    def __init__(self, tokens, eos, hf_tokenizer):
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=len(tokens))
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, len(tokens))

    def compile(self, text, syntax):
        if syntax == "lark":
            raise ValueError("xgrammar reads EBNF/GBNF, not Lark")
        compiled = self.compiler.compile_grammar(text)
        m = self.xgr.GrammarMatcher(compiled)
        m.fill_next_token_bitmask(self.bitmask)
        return compiled

    def walk(self, compiled, ids):
        m, times = self.xgr.GrammarMatcher(compiled), []
        for t in ids:
            if not m.accept_token(t):
                raise ValueError("xgrammar rejects the document")
            ms, _ = cpu_ms(lambda: m.fill_next_token_bitmask(self.bitmask))
            times.append(ms)
        return times


def sample_check(tokens, eos, text, syntax, n, max_length, seed=0, pattern=None, judge=None):
    """(samples, failures, incomplete): masked sampling with decodekit, each text judged by lark
    (and by ``regex.fullmatch`` of ``judge``, a regex of the language of ``pattern``, the regex or
    Pattern the grammar is intersected with; ``judge`` defaults to ``pattern``)."""
    import regex

    from decodekit import Grammar
    from decodekit.constraints import compile_regex
    from tests.support.grammars import lark_oracle

    grammar = Grammar(text, syntax)
    parses = lark_oracle(grammar.cfg)
    judge = pattern if judge is None else judge
    member = parses if pattern is None else lambda s: parses(s) and regex.fullmatch(judge, s) is not None
    auto = compile_regex(grammar if pattern is None else grammar & pattern, tokens, eos)
    rng = random.Random(seed)
    failures = incomplete = 0
    for _ in range(n):
        state, out = auto.initial, []
        for step in range(max_length):
            choices = auto.allowed(torch.tensor([state]), max_length - step)[0].nonzero()[:, 0].tolist()
            t = rng.choice(choices)
            if t == eos:
                break
            out.append(t)
            state = auto.walk([t], state)
        else:
            incomplete += not auto.bytes.accepting(state)
        failures += not member(b"".join(tokens[t] for t in out).decode("utf-8"))
    return n, failures, incomplete


REACH = {  # name -> (grammar, syntax, document): masks must not grow with the nesting or the length
    "llama.cpp#4218 ambiguity": (
        'root ::= [0-9] ("a"? "a"? "a"? "a"? "a"? [0-9])*\n',
        "gbnf",
        "1" + "aa2a3aaaa4" * 300,
    ),
    "10,000 nested arrays": (
        'start: "[" [start ("," start)*] "]"\n',
        "lark",
        "[" * 10_000 + "]" * 10_000,
    ),
    "right-recursive list of 5,000": (
        'start: ITEM "," start | ITEM\nITEM: /[a-z]+/\n',
        "lark",
        ",".join(["ab"] * 5_000),
    ),
}


def reach(tokens, eos, encode) -> list[str]:
    """Per reach grammar: the first-visit mask's median CPU time over the document's first and last
    200 tokens (decodekit), and the states it built."""
    from decodekit import Grammar
    from decodekit.constraints import clear_cache, compile_regex

    rows, bitmask = [], torch.zeros(1, (len(tokens) + 31) // 32, dtype=torch.int32)
    for name, (text, syntax, document) in REACH.items():
        clear_cache(vocabularies=False)
        auto = compile_regex(Grammar(text, syntax), tokens, eos)
        ids, state, times = encode(document), auto.initial, []
        for t in ids:
            state = auto.walk([t], state)
            ms, _ = cpu_ms(lambda a=auto, s=state: a.fill_bitmask(bitmask, torch.tensor([s])))
            times.append(ms)
        assert auto.bytes.accepting(state), name
        first, last = np.median(times[:200]) * 1e3, np.median(times[-200:]) * 1e3
        rows.append(f"| {name} | {len(ids):,} | {first:.0f} | {last:.0f} | {auto.bytes.size:,} |")
    return rows


AND_PATTERNS = {  # grammar & Pattern (decodekit only: no peer takes the intersection), as
    # (the Pattern's text and whether it is complemented, the judge's regex, the document's rewriting)
    "one line": ((r"[^\n]*", False), r"[^\n]*", lambda doc: json.dumps(json.loads(doc), ensure_ascii=False)),
    "~ contains 'secret'": (("(?s:.*secret.*)", True), r"(?!(?s:.*)secret)(?s:.*)", None),
}


def and_pattern(tokens, eos, encode, data: Path, grammars, repeats: int, samples: int, max_length: int):
    """Per grammar with a document and per :data:`AND_PATTERNS` entry: read and compile to the
    first mask (CPU ms, median over ``repeats``) and the masks at every position of the document (written so
    that it matches: compact JSON for "one line"), median and p99, beside the grammar alone in the
    same run; then ``samples`` masked samples judged by lark and ``regex.fullmatch``."""
    from decodekit import Grammar, Pattern
    from decodekit.constraints import clear_cache, compile_regex

    bitmask = torch.zeros(1, (len(tokens) + 31) // 32, dtype=torch.int32)
    rows = []
    for gname in grammars:
        if gname not in DOCUMENTS:
            continue
        text = (data / "grammars" / gname).read_text()
        syntax = "lark" if gname.endswith(".lark") else "gbnf"
        for label, (spec, judge, rewrite) in {"(grammar alone)": (None, None, None), **AND_PATTERNS}.items():
            if rewrite is not None and not gname.startswith("json"):
                continue  # a rewriting that only JSON has
            doc = DOCUMENTS[gname] if rewrite is None else rewrite(DOCUMENTS[gname])
            pattern = None if spec is None else ~Pattern(spec[0]) if spec[1] else Pattern(spec[0])

            def compile_once(p=pattern, text=text, syntax=syntax):  # reading the grammar included
                clear_cache(vocabularies=False)
                grammar = Grammar(text, syntax)
                auto = compile_regex(grammar if p is None else grammar & p, tokens, eos)
                auto.fill_bitmask(bitmask, torch.tensor([auto.initial]))
                return auto

            compile_once()  # once per process is not this grammar's (as above)
            gc.collect()
            compiles = [cpu_ms(compile_once)[0] for _ in range(repeats)]
            auto, times = compile_once(), []
            state = auto.initial
            for t in encode(doc):
                state = auto.walk([t], state)
                if state < 0:
                    break
                ms, _ = cpu_ms(lambda a=auto, s=state: a.fill_bitmask(bitmask, torch.tensor([s])))
                times.append(ms)
            if state < 0:
                rows.append(f"| {gname} | {label} | the document does not match | | | |")
                continue
            median, p99 = np.median(times) * 1e3, np.percentile(times, 99) * 1e3
            if pattern is None:
                alone = (np.median(compiles), median, p99)
                shown = "1x"
            else:
                ratios = (np.median(compiles) / alone[0], median / alone[1], p99 / alone[2])
                shown = " / ".join(f"{r:.1f}x" for r in ratios)
            checked = ""
            if samples and pattern is not None:
                n, bad, cut = sample_check(
                    tokens, eos, text, syntax, samples, max_length, pattern=pattern, judge=judge
                )
                checked = f"{n} samples: {bad} rejected, {cut} cut"
            compiled = np.median(compiles)
            rows.append(
                f"| {gname} | {label} | {compiled:.0f} | {median:,.0f} | {p99:,.0f} | {shown} | {checked} |"
            )
    return rows


def beams(hf, tokens, data: Path, grammar_name: str, prompts: int, max_new_tokens: int, num_beams: int):
    """Inside transformers' ``model.generate(num_beams=...)`` on a tiny random GPT-2 over the
    benchmark's tokenizer: decodekit's processor and xgrammar's (``xgrammar.contrib.hf``) on the
    same grammar, each returned sequence judged by lark (``dynamic_complete``): a complete
    sentence, or not (cut at ``max_new_tokens``, or unparsable). Returns table rows."""
    import transformers

    from decodekit import ConstraintLogitsProcessor, Grammar
    from tests.support.grammars import lark_oracle

    text = (data / "grammars" / grammar_name).read_text()
    grammar = Grammar(text, "gbnf")
    member = lark_oracle(grammar.cfg)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tokens),
        n_positions=256,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    makers = {"decodekit": lambda: ConstraintLogitsProcessor(grammar, hf, max_new_tokens=max_new_tokens)}
    try:
        import xgrammar as xgr
        import xgrammar.contrib.hf as xhf

        info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=len(tokens))
        compiled = xgr.GrammarCompiler(info, max_threads=1).compile_grammar(text)
        makers["xgrammar"] = lambda: xhf.LogitsProcessor(compiled)
    except Exception as e:  # noqa: BLE001 (a peer's failure is a row, not a crash)
        print(f"xgrammar: n/a ({str(e)[:120]})")
    rows = []
    for name, make in makers.items():
        complete = total = failed = 0
        cpu = 0.0
        for i in range(prompts):
            inputs = hf([f"x{i} ="], return_tensors="pt")
            t = time.process_time()
            try:
                out = model.generate(
                    **inputs, logits_processor=transformers.LogitsProcessorList([make()]),
                    max_new_tokens=max_new_tokens, num_beams=num_beams, num_return_sequences=num_beams,
                    do_sample=False, pad_token_id=0,
                )  # fmt: skip
            except Exception as e:  # noqa: BLE001
                failed += 1
                print(f"{name}: generate failed ({type(e).__name__}: {str(e)[:100]})")
                continue
            cpu += time.process_time() - t
            for row in out[:, inputs["input_ids"].shape[1] :]:
                ids = [t for t in row.tolist() if t != 0]
                total += 1
                complete += member(hf.decode(ids))
        per_prompt = cpu / max(prompts, 1)
        rows.append(
            f"| {grammar_name} | {name} | {total} | {total - complete} | {failed} | {per_prompt:.2f} |"
        )
    return rows


HOSTILE_CHILD = r"""
import json, resource, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import tokenizers, torch, transformers
from decodekit.models.hf import HFVocab
from decodekit import Grammar
from decodekit.constraints import compile_regex
from decodekit.errors import ConstraintError
from tests.support.grammars import HOSTILE
raw = tokenizers.Tokenizer.from_file(sys.argv[3])
tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|endoftext|>")
vocab = HFVocab(tok, len(tok))
tokens, eos = vocab.surface_bytes(), vocab.eos_id
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.process_time()
try:
    auto = compile_regex(Grammar(HOSTILE[sys.argv[4]][0]), tokens, eos)
    auto.allowed(torch.tensor([auto.initial]))
    outcome = "compiled, first mask"
except ConstraintError as e:
    outcome = "refused: " + str(e)[:90]
cpu = time.process_time() - t
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"cpu": cpu, "mib": grown / 1024, "outcome": outcome}))
"""


def hostile(cache_file: Path, timeout: float) -> list[str]:
    """Each hostile grammar of tests/support/grammars.py read and compiled to its first mask over
    the 50,000-token vocabulary, in a fresh process each: CPU seconds, peak memory grown (MiB,
    after the vocabulary is loaded) and the outcome; a case past ``timeout`` seconds says so."""
    import subprocess

    from tests.support.grammars import HOSTILE

    root = Path(__file__).resolve().parents[1]
    rows = []
    for name in HOSTILE:
        args = [
            sys.executable,
            "-c",
            HOSTILE_CHILD,
            str(root),
            str(root / "benchmarks"),
            str(cache_file),
            name,
        ]
        try:
            out = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(f"| {name} | {got['cpu']:.2f} | {got['mib']:.0f} | {got['outcome']} |")
        except subprocess.TimeoutExpired:
            rows.append(f"| {name} | > {timeout:.0f} (wall) | | not finished |")
        except (IndexError, ValueError):
            rows.append(f"| {name} | | | failed: {(out.stderr.strip().splitlines() or [''])[-1][:90]} |")
    return rows


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"), help="trained tokenizers")
    ap.add_argument("--grammars", nargs="*", default=["json.gbnf", "json.lark", "c.gbnf"])
    ap.add_argument("--engines", nargs="+", default=["decodekit", "llguidance", "xgrammar"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--max-length", type=int, default=48)
    ap.add_argument("--reach", action="store_true", help="also the reach grammars (decodekit only)")
    ap.add_argument("--hostile", action="store_true", help="also the hostile grammars (decodekit only)")
    ap.add_argument("--hostile-timeout", type=float, default=300.0)
    ap.add_argument(
        "--and-pattern",
        action="store_true",
        help="also each grammar & a regex (decodekit alone, beside the grammar)",
    )
    ap.add_argument("--beams", type=int, default=0, help="prompts for the num_beams=4 run inside generate")
    ap.add_argument("--beams-grammar", default="arithmetic.gbnf")
    ap.add_argument("--beams-new-tokens", type=int, default=16)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    from bench_byte_patterns import byte_bpe

    raw, hf, tokens, eos = byte_bpe(args.data, 50_000, cache=args.cache, verbose=False)
    encode = lambda s: raw.encode(s, add_special_tokens=False).ids  # noqa: E731
    makers = {
        "decodekit": lambda: Decodekit(tokens, eos),
        "llguidance": lambda: Llguidance(tokens, eos, encode),
        "xgrammar": lambda: Xgrammar(tokens, eos, hf),
    }
    engines = {}
    for name in args.engines:
        try:
            engines[name] = makers[name]()
        except ImportError as e:
            print(f"{name}: not installed ({e})")
    print(f"load {Path('/proc/loadavg').read_text().split()[:3]}, {len(tokens):,} tokens")
    rows = []
    for gname in args.grammars:
        text = (args.data / "grammars" / gname).read_text()
        syntax = "lark" if gname.endswith(".lark") else "gbnf"
        ids = encode(DOCUMENTS[gname]) if gname in DOCUMENTS else []
        figures = {}
        for name, engine in engines.items() if ids else ():  # no document: the samples only
            try:
                compile_once = lambda e=engine, t=text, s=syntax: e.compile(t, s)  # noqa: E731
                compile_once()  # once per process (imports, lark's own grammars) is not this grammar's
                gc.collect()  # not billed to the first compile: what loading the vocabulary left (5-9 ms)
                compiles = [cpu_ms(compile_once)[0] for _ in range(args.repeats)]
                handle = engine.compile(text, syntax)
                masks = np.array(engine.walk(handle, ids))
                second = np.array(engine.walk(handle, encode(SECOND_DOCUMENTS[gname])))
            except (ValueError, RuntimeError) as e:
                print(f"{gname} {name}: n/a ({str(e)[:120]})")
                continue
            figures[name] = (
                np.median(compiles),
                *(f(x) for x in (masks, second) for f in (np.median, lambda x: np.percentile(x, 99))),
            )
        for name, got in figures.items():
            ratios = [
                " / ".join(f"{a / b:.1f}x" for a, b in zip(got, figures[p])) + f" vs {p}"
                for p in figures
                if p != name and name == "decodekit"
            ]
            c, *masks_us = got
            shown = " | ".join(f"{m * 1e3:,.0f}" for m in masks_us)
            rows.append(f"| {gname} | {name} | {c:.1f} | {shown} | {'; '.join(ratios)} |")
        if args.samples and "decodekit" in engines:
            n, bad, cut = sample_check(tokens, eos, text, syntax, args.samples, args.max_length)
            said = f"{gname}: {n} masked samples (max_length {args.max_length}): "
            print(f"{said}{bad} not parsed by lark, {cut} cut")
    if rows:
        print(
            "\nmasks at every position of a document on a fresh compile (decodekit: every position new), "
            "then of a second document on the same compiled grammar (warm: decodekit's positions new, "
            "its rows shared where the parses agree over a token's bytes)\n"
        )
        print(
            "| grammar | engine | compile+first mask (ms) | first doc median (µs) | p99 (µs) "
            "| second doc median (µs) | p99 (µs) | decodekit / peer (compile / medians and p99s) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))
    if args.beams:
        print(
            f"\nnum_beams=4, num_return_sequences=4, max_new_tokens={args.beams_new_tokens}, random GPT-2\n"
        )
        print(
            "| grammar | processor | sequences | not a complete sentence | generate failed | CPU s / prompt |"
        )
        print("|---|---|---|---|---|---|")
        rows = beams(hf, tokens, args.data, args.beams_grammar, args.beams, args.beams_new_tokens, 4)
        print("\n".join(rows))
    if args.hostile:
        print("\n| hostile grammar | CPU s (read, compile, first mask) | peak MiB grown | outcome |")
        print("|---|---|---|---|")
        trained = max(args.cache.glob("byte-bpe-50000-*.json"), key=lambda f: f.stat().st_mtime)
        print("\n".join(hostile(trained, args.hostile_timeout)))
    if args.and_pattern:
        print(
            "\n| grammar | & pattern | compile+first mask (ms) | mask median (µs) | p99 (µs) "
            "| / grammar alone (compile / median / p99) | masked samples |"
        )
        print("|---|---|---|---|---|---|---|")
        print(
            "\n".join(
                and_pattern(
                    tokens, eos, encode, args.data, args.grammars, args.repeats, args.samples, args.max_length
                )
            )
        )
    if args.reach:
        print("\n| reach | tokens | mask median, first 200 (µs) | last 200 (µs) | states |")
        print("|---|---|---|---|---|")
        print("\n".join(reach(tokens, eos, encode)))


if __name__ == "__main__":
    main()
