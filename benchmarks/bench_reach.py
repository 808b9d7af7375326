"""Reach: patterns whose automaton is too large to build whole, side by side (decodekit's derivative engine).

Over the 50,000-token byte-level BPE of ``bench_structured`` (its vocabulary, engines and timing
helpers, reused), one child process per (engine, pattern), CPU, one thread:

1. compile: pattern -> first mask, minimum CPU time over ``--repeats`` (decodekit's automaton
   cache cleared each time, its vocabulary trie kept);
2. per token along a valid walk (the tokenizer's encoding of a matching text, at most ``--walk``
   tokens): ``cold``, the median CPU time of a mask on the first pass after a fresh compile
   (every state discovered then), and ``warm``, the median over ``--repeats`` passes (the
   ``bench_structured`` measure: mask, and mask + apply to a [1, V] float32 tensor);
3. the peak RSS increase of the child over its prepared vocabulary (VmHWM after ``clear_refs``).

The ISO-date pattern is the yardstick for the per-token ratio (issue 25: within 2x of it).
decodekit compiles with ``lazy="masked"`` (what the masked searches use); ``engine`` in the
JSON says which engine the ladder chose.

    /work/benchenv/bin/python benchmarks/bench_reach.py [--repeats 5] [--walk 64] [--json FILE]
        [--engines decodekit xgrammar llguidance] [--patterns ...] [--data DIR] [--cache DIR]
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_automaton import PATTERNS  # noqa: E402
from bench_structured import (  # noqa: E402
    _status_kb,
    add_child_options,
    available_engines,
    bench_compile,
    bench_tokens,
    check_walk,
    child_result,
    child_setup,
    load,
    versions,
)

_AB = "abbabaabbbababbaabab" * 20
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # 70
_WORDS = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES][::34][:10_000]
REACH = {  # name -> (pattern, a matching text or a prefix of one)
    "date": (PATTERNS["date"], "2024-05-17"),
    "ab18": (r"(a|b)*a(a|b){18}", _AB),
    "ab24": (r"(a|b)*a(a|b){24}", _AB),
    "ab30": (r"(a|b)*a(a|b){30}", _AB),
    "dot2000": (r".{2000}", ("the stock market rose sharply today while the bond market fell " * 40)[:2000]),
    "a10000": (r"a{10000}", "a" * 10000),
    "words50": (
        r"(?:[a-z]+ ){50}",
        " ".join(("the cat sat on the mat and the dog ran far away " * 6).split()[:50]) + " ",
    ),
    "words10k": ("(?:" + "|".join(_WORDS) + ")", _WORDS[7_777]),  # an alternation of 10,000 words
}
ENGINES = ("decodekit", "xgrammar", "llguidance")


def cold_pass(engine, handle, walk: list[int]) -> float:
    """Median CPU seconds of a mask on the first pass over ``walk`` (states found on the way)."""
    c, times = engine.start(handle), []
    gc.disable()
    for t in walk:
        c0 = time.process_time()
        engine.mask(c)
        times.append(time.process_time() - c0)
        engine.advance(c, t)
    gc.enable()
    return statistics.median(times) if times else float("nan")


def child(args) -> None:
    """One engine on one pattern; prints one ``RESULT {json}`` line."""
    raw, tokens, engines, engine, base, _ = child_setup(args, args.memory)
    pattern, text = REACH[args.child_pattern]
    out = {"engine": engine.name, "pattern": pattern}
    comp = bench_compile(engines, pattern, args.repeats, describe=False)[engine.name]
    if "error" in comp:
        out["error"] = comp["error"]
    else:
        handle = comp.pop("handle")
        out["compile"] = comp
        out["engine_used"] = type(handle).__name__ if engine.name == "decodekit" else engine.name
        walk = raw.encode(text, add_special_tokens=False).ids[: args.walk]
        out["check"] = check_walk(engines, {engine.name: handle}, walk)[engine.name]
        if out["check"]["ok"]:
            fresh = bench_compile(engines, pattern, 1, describe=False)[engine.name]["handle"]
            out["cold_mask_us"] = 1e6 * cold_pass(engine, fresh, walk)
            out["tokens"] = bench_tokens(engines, {engine.name: handle}, walk, args.repeats, len(tokens))[
                engine.name
            ]
    out["peak_mb"] = (_status_kb("VmHWM") - base) / 1024
    print("RESULT " + json.dumps(out), flush=True)


def run(args, names: list[str]) -> list[dict]:
    rows = []
    for pname in args.patterns:
        row = {"name": pname, "pattern": REACH[pname][0], "engines": {}}
        for n in names:
            cmd = [sys.executable, __file__, "--child-engine", n, "--child-pattern", pname]
            cmd += ["--repeats", str(args.repeats), "--walk", str(args.walk), "--memory", str(args.memory)]
            cmd += ["--data", str(args.data), "--cache", str(args.cache)]
            row["engines"][n] = child_result(cmd, args.timeout)
        rows.append(row)
        print_row(row, names, rows[0] if rows[0]["name"] == "date" else None)
    return rows


def print_row(row: dict, names: list[str], date: dict | None) -> None:
    cells = []
    for n in names:
        r = row["engines"].get(n, {})
        if "error" in r:
            cells.append(f"refused/error: {' '.join(r['error'].split())[:100]}")
            continue
        tk = r.get("tokens", {})
        warm = tk.get("mask", {}).get("cpu_us")
        apply = tk.get("apply", {}).get("cpu_us")
        cold = r.get("cold_mask_us")
        if warm is None:
            cells.append(f"{1e3 * r['compile']['cpu']:.1f} / walk refused / {r['peak_mb']:.0f}")
            continue
        ratio = ""
        ref = date["engines"].get(n, {}).get("tokens", {}).get("mask", {}).get("cpu_us") if date else None
        if ref:
            ratio = f" ({cold / ref:.1f}x / {warm / ref:.1f}x)"
        compile_ms = 1e3 * r["compile"]["cpu"]
        cells.append(f"{compile_ms:.1f} / {cold:.0f} / {warm:.1f} / {apply:.1f}{ratio} / {r['peak_mb']:.0f}")
    pattern = row["pattern"]
    label = f"`{pattern}`" if len(pattern) <= 60 else f"{row['name']} ({len(pattern):,} characters)"
    print(f"| {label.replace('|', chr(92) + '|')} | {' | '.join(cells)} |", flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"), help="trained tokenizers")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--walk", type=int, default=64)
    ap.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    ap.add_argument("--patterns", nargs="+", choices=list(REACH), default=list(REACH))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per child process")
    ap.add_argument("--memory", type=int, default=4096, help="MB of address space a child may add")
    add_child_options(ap)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child_engine:
        return child(args)
    names = available_engines(args.engines)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{started}, load average {load()} ({os.cpu_count()} CPUs)")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()))
    print("\ncompile ms (CPU min) / mask µs cold (first pass) / mask µs warm / mask + apply µs warm")
    print("(CPU medians; cold and warm x the engine's warm mask on the date) / peak RSS increase MB\n")
    print(f"| pattern | {' | '.join(names)} |")
    print("|---" * (1 + len(names)) + "|")
    rows = run(args, names)
    print(f"\nload average at the end: {load()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"started": started, "versions": versions(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
