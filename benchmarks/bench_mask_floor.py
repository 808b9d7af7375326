"""The warm mask right after a step, in each engine's own loop, beside its floor: decodekit's
``fill_bitmask`` and xgrammar's ``fill_next_token_bitmask``, and "floor", decodekit's benchmark
wrapper with ``fill_bitmask`` replaced by one copy of a row that stays in cache and checks nothing
(what is left of decodekit's figure when its own work is taken out).

``bench_structured``'s vocabulary, engines and walks; per pattern, ``--repeats`` passes over the
walk for each of the three in turn (their order alternating), the first pass of each a warm-up;
each call timed alone (``time.process_time`` before and after, as ``bench_structured`` times
them) right after the previous token was advanced; medians over positions and passes, µs.

    python benchmarks/bench_mask_floor.py [--repeats 8] [--patterns email date ...]
        [--data ../shared/data] [--cache runs/byte-bpe]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_structured as structured  # noqa: E402

SCHEMAS = {"schema-nested": structured.NESTED_SCHEMA, "schema-flat": structured.FLAT_SCHEMA}
PATTERNS = ["email", "date", "market", "number", "json-object", "ipv4", "uuid", *SCHEMAS]


def measure(engines: dict, raw, name: str, repeats: int) -> dict[str, float]:
    dk, xgr = engines["decodekit"], engines["xgrammar"]
    walk = structured.walk_for(raw, name, 64)
    if name in SCHEMAS:
        schema = SCHEMAS[name]
        handles = {"decodekit": dk.compile_schema(schema), "xgrammar": xgr.compile_schema(schema)}
    else:
        pattern = structured.STRUCTURED[name]
        theirs = structured.NO_WORD_BOUNDARY.get(name, pattern)
        handles = {"decodekit": dk.compile(pattern), "xgrammar": xgr.compile(theirs)}
    view = memoryview(dk.bitmask.numpy()).cast("B")
    row = bytes(len(view))

    def floor_fill(bitmask, states, remaining):
        view[:] = row
        return bitmask

    kinds = ["decodekit", "floor", "xgrammar"]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    cpu = time.process_time
    for r in range(repeats + 1):
        for kind in kinds[r % 3 :] + kinds[: r % 3]:
            engine = xgr if kind == "xgrammar" else dk
            cursor = engine.start(handles["xgrammar" if kind == "xgrammar" else "decodekit"])
            if kind == "floor":
                cursor["fill"] = floor_fill
            gc.disable()
            for t in walk:
                c0 = cpu()
                engine.mask(cursor)
                spent = cpu() - c0
                if r:
                    times[kind].append(spent)
                engine.advance(cursor, t)
            gc.enable()
    return {k: 1e6 * statistics.median(v) for k, v in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"), help="trained tokenizers")
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--patterns", nargs="+", choices=PATTERNS, default=PATTERNS)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if "xgrammar" not in structured.available_engines(["xgrammar"]):
        sys.exit("xgrammar is not installed (pip install -e '.[bench]')")
    raw, _, tokens, eos = structured.load_vocabulary(args)
    engines = structured.make_engines(["decodekit", "xgrammar"], tokens, eos, structured._encoder(raw))
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {structured.load()}")
    print("\n| pattern | decodekit µs | floor µs | xgrammar µs | decodekit / xgrammar | floor / xgrammar |")
    print("|---|---|---|---|---|---|")
    for name in args.patterns:
        m = measure(engines, raw, name, args.repeats)
        dk, floor, x = m["decodekit"], m["floor"], m["xgrammar"]
        print(f"| {name} | {dk:.2f} | {floor:.2f} | {x:.2f} | {dk / x:.2f} | {floor / x:.2f} |", flush=True)
    print(f"\nload average at the end: {structured.load()}")


if __name__ == "__main__":
    main()
