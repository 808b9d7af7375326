"""The parse stage on large JSON Schemas: decodekit checkouts side by side, schema by schema.

For each schema (by default the JSONSchemaBench schemas whose compile timed out at 10 s before
the parser decided validity itself), each checkout in ``--trees`` compiles it in its own worker
process (``PYTHONPATH`` set to the checkout), the checkouts alternating schema by schema: CPU
time of ``json_schema`` + ``compile_regex(..., lazy="masked")`` to the first mask, cold (as
``bench_structured``'s ``DecodekitEngine.compile_schema``: decodekit's caches and regex's
cleared, the vocabulary's trie kept), over the same 50k byte-level BPE; and of ``parse`` alone
on the schema's regex texts (one, or the distinct regexes of a combined ``Pattern``), cold. A
worker past ``--timeout`` seconds (wall) is killed and restarted. Markdown table to stdout.

    python benchmarks/bench_parse.py --bench PATH/jsonschemabench/data --trees MAIN_CHECKOUT NEW_CHECKOUT
        [--schemas Kubernetes/kb_84_Normalized.json ...] [--timeout 60] [--data ../shared/data]
        [--cache runs/byte-bpe]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

LISTED = [
    *(f"Kubernetes/kb_{n}_Normalized.json" for n in (84, 696, 897, 955, 1072, 934)),
    "Snowplow/sp_125_Normalized.json", "Snowplow/sp_343_Normalized.json", "Github_ultra/o44208.json",
    "Github_ultra/o47109.json", "JsonSchemaStore/ize-spec.json", "JsonSchemaStore/lazygit.json",
    "JsonSchemaStore/micro-syntax.json",
]  # fmt: skip


def worker(args) -> None:
    """Reads schema paths from stdin, answers one JSON line each."""
    sys.path.insert(0, str(Path(__file__).parent))
    import regex
    import torch

    torch.set_num_threads(1)
    from bench_structured import DecodekitEngine, load_vocabulary

    from decodekit.constraints import clear_cache, json_schema
    from decodekit.constraints.syntax.parser import parse

    _, _, tokens, eos = load_vocabulary(args, verbose=False)
    engine = DecodekitEngine()
    engine.prepare(tokens, eos)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        schema = json.loads(Path(line.strip()).read_text())
        out: dict = {}
        try:
            made = json_schema(schema)  # a regex, or a Pattern of several (and, or, not)
            texts = [made] if isinstance(made, str) else list(dict.fromkeys(made.regexes()))  # distinct
            out["chars"] = sum(map(len, texts))
            clear_cache(vocabularies=False)
            regex.purge()
            t0 = time.process_time()
            for text in texts:
                parse(text)
            out["parse"] = time.process_time() - t0
            t0 = time.process_time()
            engine.compile_schema(schema)
            out["compile"] = time.process_time() - t0
        except Exception as e:  # a refusal: reported, not timed
            out["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"
        print(json.dumps(out), flush=True)


class Worker:
    def __init__(self, tree: Path, args):
        self.tree, self.args = tree, args
        self.start()

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(self.tree))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker"]
        cmd += ["--data", str(self.args.data), "--cache", str(self.args.cache)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        json.loads(self.proc.stdout.readline())

    def ask(self, path: Path) -> dict:
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.args.timeout)
        if ready:
            return json.loads(self.proc.stdout.readline())
        self.proc.kill()
        self.proc.wait()
        self.start()
        return {"error": f"timeout ({self.args.timeout:g} s wall)"}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", type=Path, help="JSONSchemaBench's data directory")
    ap.add_argument("--trees", type=Path, nargs="+", help="decodekit checkouts to compare")
    ap.add_argument("--schemas", nargs="+", default=LISTED, help="paths under --bench")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds (wall) per schema and checkout")
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    workers = [Worker(t, args) for t in args.trees]
    names = [t.name for t in args.trees]
    head = " | ".join(f"{n}: parse s | {n}: compile s" for n in names)
    print(f"| schema | regex chars | {head} |")
    print("|---|---|" + "---|---|" * len(names))
    for rel in args.schemas:
        results = [w.ask(args.bench / rel) for w in workers]
        chars = next((f"{r['chars']:,}" for r in results if "chars" in r), "")
        cells = []
        for r in results:
            if "compile" in r:
                cells += [f"{r['parse']:.3f}", f"{r['compile']:.2f}"]
            else:
                cells += [f"{r.get('parse', float('nan')):.3f}" if "parse" in r else "", r["error"][:60]]
        print(f"| {rel} | {chars} | " + " | ".join(cells) + " |", flush=True)
    for w in workers:
        w.proc.kill()


if __name__ == "__main__":
    main()
