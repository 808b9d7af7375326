"""Masks for a batch of rows in different states, side by side (issue 37 item 7).

Over the 50,000-token byte-level BPE of the structured benchmark (``bench_byte_patterns.byte_bpe``),
for each pattern: ``--rows`` cursors, row i at position ``i mod n`` of the pattern's matching text
(``bench_structured.WALK_TEXT``, its canonical tokenization: n positions), each engine's cursors
advanced along the same tokens. Then, CPU time per call (median over ``--repeats`` rounds of
``--calls`` calls each, the engines alternated within a round):

* mask: the engine's batch fill of an int32 ``[rows, ceil(V / 32)]`` bitmask (decodekit
  ``fill_bitmask(bitmask, states, budget)``; xgrammar ``BatchGrammarMatcher``; llguidance
  ``fill_next_token_bitmask_par`` on a one-thread executor; outlines-core one guide per row);
* mask + apply: the same, then the engine's own kernel applied to ``[rows, V]`` float32 logits
  (decodekit ``mask``, in place).

Every engine's bitmask is compared with decodekit's ``allowed`` for the same rows first: where
their languages differ (a peer's JSON Schema reading, or its greedy lexer) the rows that differ
are counted in the table; the timing stands beside it.

    python benchmarks/bench_batch_masks.py --rows 1 32 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_structured import (  # noqa: E402
    FLAT_SCHEMA,
    NESTED_SCHEMA,
    SCHEMA_DOCS,
    STRUCTURED,
    WALK_TEXT,
    available_engines,
    make_engines,
)

DEFAULT_PATTERNS = ("email", "market", "sentence", "json-object", "schema-nested", "schema-flat")
SCHEMAS = {"schema-nested": NESTED_SCHEMA, "schema-flat": FLAT_SCHEMA}


def walk(raw, name: str) -> list[int]:
    """The canonical tokens of the pattern's matching text (the schemas: their document, compact)."""
    import json

    text = json.dumps(SCHEMA_DOCS[name], separators=(",", ":")) if name in SCHEMAS else WALK_TEXT[name]
    return raw.encode(text, add_special_tokens=False).ids


class Batch:
    """One engine's ``rows`` cursors and its batch mask / mask + apply calls."""

    def __init__(self, engine, handle, ids: list[int], rows: int, per_row: bool) -> None:
        self.engine, self.name, self.rows = engine, engine.name, rows
        n = len(ids)
        self.cursors = []
        for i in range(rows):
            c = engine.start(handle)
            for t in ids[: i % n]:
                if not engine.advance(c, t):
                    raise ValueError(f"{engine.name} rejects the walk at token {t}")
            self.cursors.append(c)
        words = (len(engine.tokens if hasattr(engine, "tokens") else range(engine.vocab)) + 31) // 32
        self.bitmask = torch.zeros(rows, words, dtype=torch.int32)
        if self.name == "decodekit":
            self.states = torch.cat([c["states"] for c in self.cursors])
            self.auto = self.cursors[0]["a"]
            # one budget for all rows (a search's step) or one per row (the logits processor's)
            self.budget = torch.full((rows,), engine.budget) if per_row else engine.budget
        elif self.name == "xgrammar":
            self.batch = engine.xgr.BatchGrammarMatcher(max_threads=1)
        elif self.name == "llguidance":
            self.executor = engine.ll.LLExecutor(num_threads=1)
            self.pairs = [(m, i) for i, m in enumerate(self.cursors)]

    def mask(self) -> None:
        if self.name == "decodekit":
            self.auto.fill_bitmask(self.bitmask, self.states, self.budget)
        elif self.name == "xgrammar":
            self.batch.batch_fill_next_token_bitmask(self.cursors, self.bitmask)
        elif self.name == "llguidance":
            self.engine.llt.fill_next_token_bitmask_par(self.executor, self.pairs, self.bitmask)
        else:  # outlines-core: one guide per row
            fill = self.engine.ock.fill_next_token_bitmask
            for i, g in enumerate(self.cursors):
                fill(g, self.bitmask[i : i + 1])

    def mask_apply(self, logits: torch.Tensor) -> None:
        if self.name == "decodekit":
            self.auto.mask(logits, self.states, self.budget, inplace=True)
            return
        self.mask()
        kernels = self.engine.xgr if self.name == "xgrammar" else self.engine.kernels
        kernels.apply_token_bitmask_inplace(logits, self.bitmask)

    def allowed(self, vocab: int) -> np.ndarray:
        """[rows, vocab] bool, the engine's bitmask unpacked."""
        self.mask()
        bits = np.unpackbits(self.bitmask.numpy().view(np.uint8), axis=1, bitorder="little")
        return bits[:, :vocab].astype(bool)


def cpu_us(f, calls: int) -> float:
    t = time.process_time()
    for _ in range(calls):
        f()
    return (time.process_time() - t) / calls * 1e6


def run_pattern(engines: dict, raw, name: str, rows: int, repeats: int, calls: int, per_row: bool) -> dict:
    ids = walk(raw, name)
    batches = {}
    for ename, engine in engines.items():
        try:
            if name in SCHEMAS:
                handle = engine.compile_schema(SCHEMAS[name])
            else:
                handle = engine.compile(STRUCTURED[name])
            batches[ename] = Batch(engine, handle, ids, rows, per_row)
        except Exception as e:  # a peer that cannot compile or walk it: said, not timed
            print(f"{name} {ename}: n/a ({type(e).__name__}: {str(e)[:100]})")
    vocab = len(engines["decodekit"].tokens)
    reference = batches["decodekit"]
    expected = reference.auto.allowed(reference.states, reference.engine.budget).numpy()
    differ = {}  # the peers' languages differ from decodekit's in places (schemas): timed, said
    for ename, b in batches.items():
        differ[ename] = int((b.allowed(vocab) != expected).any(axis=1).sum())
    times = {k: ([], []) for k in batches}
    logits = torch.randn(rows, vocab)
    for b in batches.values():  # the peers' kernels compile for this shape on first use
        b.mask_apply(logits.clone())
    for _ in range(repeats):
        for ename, b in batches.items():
            times[ename][0].append(cpu_us(b.mask, calls))
            work = logits.clone()
            times[ename][1].append(cpu_us(lambda b=b, w=work: b.mask_apply(w), calls))
    return {k: (statistics.median(m), statistics.median(a), differ[k]) for k, (m, a) in times.items()}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"), help="trained tokenizers")
    ap.add_argument("--patterns", nargs="+", default=list(DEFAULT_PATTERNS))
    ap.add_argument("--engines", nargs="+", default=["decodekit", "xgrammar", "llguidance", "outlines-core"])
    ap.add_argument("--rows", nargs="+", type=int, default=[1, 32])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument(
        "--budgets",
        choices=["shared", "per-row"],
        default="shared",
        help="decodekit's length budgets: one int (a search's step) or a tensor per row (the processor's)",
    )
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    from bench_byte_patterns import byte_bpe

    raw, _, tokens, eos = byte_bpe(args.data, 50_000, cache=args.cache, verbose=False)
    encode = lambda s: raw.encode(s, add_special_tokens=False).ids  # noqa: E731
    names = [n for n in args.engines if n == "decodekit" or n in available_engines(args.engines)]
    engines = make_engines(names, tokens, eos, encode)
    print(f"load {Path('/proc/loadavg').read_text().split()[:3]}, {len(tokens):,} tokens, engines {names}")
    print(f"decodekit's budgets: {args.budgets}")
    print(
        "\n| pattern | rows | engine | mask µs/call | µs/row | mask + apply µs/call "
        "| dk / best peer (mask, + apply) |"
    )
    print("|---|---|---|---|---|---|---|")
    for rows in args.rows:
        for name in args.patterns:
            got = run_pattern(engines, raw, name, rows, args.repeats, args.calls, args.budgets == "per-row")
            peers = {k: v for k, v in got.items() if k != "decodekit"}
            for ename, (m, a, wrong) in got.items():
                ratio = f"masks differ from decodekit's on {wrong} of {rows} rows" if wrong else ""
                if ename == "decodekit" and peers:
                    best_m = min(v[0] for v in peers.values())
                    best_a = min(v[1] for v in peers.values())
                    ratio = f"{m / best_m:.2f}x, {a / best_a:.2f}x"
                print(f"| {name} | {rows} | {ename} | {m:,.1f} | {m / rows:,.1f} | {a:,.1f} | {ratio} |")


if __name__ == "__main__":
    main()
