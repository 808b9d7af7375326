"""The interpreter's floor under a small pattern's compile: decodekit's compile (pattern -> first
mask) beside xgrammar's and beside what Python's own regex engines spend only to compile the
pattern, in one process, side by side.

Per small pattern of ``bench_structured`` (its 50,000-token byte-level BPE, its engines, its
``_cold()`` before every compile), minimum CPU time over ``--repeats`` of:

* ``re.compile`` after ``re.purge()``: CPython's own parser and compiler, written in Python;
* ``regex.compile`` after ``regex.purge()``: the ``regex`` package decodekit agrees with;
* decodekit's ``parse`` alone (its syntax stage, which replaces ``regex.compile``'s check on its core
  syntax);
* decodekit's compile to the first mask, and xgrammar's (``bench_structured``'s adapters);

and, once, the Python-level and C-level calls of decodekit's compile (``sys.setprofile``), with the
first mask's allowed tokens. The contenders alternate within every repeat. Last, the first row's
walk of the trie alone (``lift.walk_one`` from the start state) with whole subtrees taken (the
default) and without (``CLOSE_AT`` out of reach), alternated, min.

    python benchmarks/bench_compile_floor.py [--repeats 30] [--patterns date number ...]
        [--data ../shared/data] [--cache runs/byte-bpe] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import regex
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_structured as structured  # noqa: E402

import decodekit.constraints.tokens.lift as lift  # noqa: E402
from decodekit.constraints import LazyTokenAutomaton, compile_regex  # noqa: E402
from decodekit.constraints.syntax.parser import parse  # noqa: E402

SMALL = ["email", "date", "number", "json-object", "ipv4", "uuid", "lower40", "sentence", "market"]


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def calls_of(fn) -> tuple[int, int]:
    """(Python calls, C calls) made while ``fn()`` runs."""
    counts = {"call": 0, "c_call": 0}

    def count(frame, event, arg):
        if event in counts:
            counts[event] += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return counts["call"], counts["c_call"]


def measure(engines: dict, name: str, repeats: int) -> dict:
    pattern = structured.STRUCTURED[name]
    theirs = structured.NO_WORD_BOUNDARY.get(name, pattern)  # xgrammar has no \b
    dk, xgr = engines["decodekit"], engines.get("xgrammar")

    def dk_parse():
        structured._cold()
        parse(pattern)

    contenders = {
        "re.compile": lambda: (re.purge(), re.compile(theirs)),
        "regex.compile": lambda: (regex.purge(), regex.compile(pattern)),
        "decodekit parse": dk_parse,
        "decodekit": lambda: dk.compile(pattern),
    }
    if xgr is not None:
        contenders["xgrammar"] = lambda: xgr.compile(theirs)
    times: dict[str, list[float]] = {k: [] for k in contenders}
    names = list(contenders)
    for r in range(repeats):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            times[k].append(_cpu(contenders[k]))
    row = {"name": name, "pattern": pattern, "ms": {k: 1e3 * min(v) for k, v in times.items()}}
    row["calls"] = calls_of(lambda: dk.compile(pattern))
    bits = dk.bitmask.numpy().view(np.uint8)
    row["allowed"] = int(np.unpackbits(bits, bitorder="little")[: len(dk.tokens)].sum())
    return row


def walk_times(tokens, eos: int, name: str, repeats: int) -> dict | None:
    """The first row's walk alone, ms CPU (min): with whole subtrees taken and without."""
    a = compile_regex(structured.STRUCTURED[name], tokens, eos, "", lazy="masked")
    if not isinstance(a, LazyTokenAutomaton):
        return None
    sh = a._shared
    args = (int(sh.start[0]), sh.enc, sh.lut, sh.flat, sh.dead, sh.loops)
    _ = sh.enc.subtrees  # made once per vocabulary, not timed
    default, times = lift.CLOSE_AT, {"with": [], "without": []}
    try:
        for r in range(repeats):
            for kind in ("with", "without") if r % 2 else ("without", "with"):
                lift.CLOSE_AT = default if kind == "with" else 1 << 62
                times[kind].append(_cpu(lambda: lift.walk_one(*args)))
    finally:
        lift.CLOSE_AT = default
    return {k: 1e3 * min(v) for k, v in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"), help="trained tokenizers")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--patterns", nargs="+", choices=SMALL, default=SMALL)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    names = structured.available_engines(["decodekit", "xgrammar"])
    raw, _, tokens, eos = structured.load_vocabulary(args)
    engines = structured.make_engines(names, tokens, eos, structured._encoder(raw))
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {structured.load()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in structured.versions().items()))
    rows = [measure(engines, n, args.repeats) for n in args.patterns]
    cols = ["xgrammar", "re.compile", "regex.compile", "decodekit parse", "decodekit"]
    cols = [c for c in cols if c in rows[0]["ms"]]
    print("\n### Compile, ms CPU (min), and decodekit's calls\n")
    head = cols + ["decodekit / xgrammar", "re.compile / xgrammar", "Python / C calls", "allowed"]
    print("| pattern | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    for row in rows:
        ms = row["ms"]
        cells = [f"{ms[c]:.3f}" for c in cols]
        x = ms.get("xgrammar")
        cells.append(f"{ms['decodekit'] / x:.2f}" if x else "-")
        cells.append(f"{ms['re.compile'] / x:.2f}" if x else "-")
        cells.append(f"{row['calls'][0]:,} / {row['calls'][1]:,}")
        cells.append(f"{row['allowed']:,}")
        print(f"| {row['name']} | " + " | ".join(cells) + " |")
    print("\n### The first row's walk, ms CPU (min): whole subtrees taken / not\n")
    print("| pattern | with | without | with / without |\n|---|---|---|---|")
    for row in rows:
        walk = row["walk"] = walk_times(tokens, eos, row["name"], args.repeats)
        if walk:
            ratio = walk["with"] / walk["without"]
            print(f"| {row['name']} | {walk['with']:.3f} | {walk['without']:.3f} | {ratio:.2f} |")
    print(f"\nload average at the end: {structured.load()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
