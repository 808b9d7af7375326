"""JSON Schema as users write it: decodekit's front end on the official JSON-Schema-Test-Suite and
on JSONSchemaBench, beside llguidance and xgrammar.

(a) ``--suite``: the official suite (``tests/draft2020-12`` and ``tests/draft7``, the required
tests, not ``optional/``). For every group whose schema compiles, each instance in its canonical
compact spelling (``json.dumps(x, separators=(",", ":"), ensure_ascii=False)``, what the
automaton admits: compact, properties in the schema's order) is matched: decodekit by
``regex.fullmatch`` on ``json_schema(schema)``, a peer by its matcher consuming the tokens of the
text and then EOS. A **false accept** is an instance the suite calls invalid that is accepted
(decodekit's must be 0); valid instances not accepted are counted with why (the documented
subset: key order, spelling, a part not generated).

(b) ``--bench``: JSONSchemaBench (one JSON file per schema in each of its 10 subsets; absent
files skipped), a seeded random sample of ``--sample`` schemas per subset; each engine compiles
the schema over the GPT-2-sized byte-level BPE of ``bench_structured`` (schema -> first mask;
decodekit: ``json_schema`` -> ``compile_regex(lazy="masked")`` -> the first mask) in a worker
process per engine with a per-schema limit of ``--timeout`` seconds (a worker past it is killed
and restarted). Reports the share compiled per subset, compile time per schema (median and 95th
percentile of the compiled ones), and the most common refusal reasons.

    PYTHONPATH=. /work/benchenv/bin/python benchmarks/bench_json_schema.py \\
        --suite PATH/JSON-Schema-Test-Suite --bench PATH/jsonschemabench/data [--sample 150] [--seed 0]
        [--timeout 20] [--engines decodekit llguidance xgrammar] [--json runs/bench_json_schema.json]
        [--data ../shared/data] [--cache runs/byte-bpe]

Without the peers installed (a plain python), the decodekit columns alone.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")

import argparse
import collections
import json
import random
import re
import select
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's decodekit

DRAFTS = ("draft2020-12", "draft7")
SUBSETS = (
    "Glaiveai2K",
    "Github_trivial",
    "Github_easy",
    "Github_medium",
    "Github_hard",
    "Github_ultra",
    "Kubernetes",
    "Snowplow",
    "JsonSchemaStore",
    "WashingtonPost",
)


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def reason(message: str) -> str:
    """A refusal message without its pointer, names and numbers: what to count."""
    text = re.sub(r"^\S*: ", "", message.strip().splitlines()[0] if message.strip() else "error")
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"[0-9][0-9,.]*", "N", text)
    text = re.sub(r"(/[^\s:]*)+", "/…", text)
    return text[:110]


# ---------------------------------------------------------------------------------------------
# the worker: one engine, prepared once; reads requests (JSON lines) on stdin, answers on stdout


def worker(args) -> None:
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    from bench_structured import _encoder, load_vocabulary, make_engines

    raw, _, tokens, eos = load_vocabulary(args, verbose=False)
    encode = _encoder(raw)
    engine = make_engines([args.worker], tokens, eos, encode)[args.worker]
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        t0 = time.process_time()
        try:
            handle = engine.compile_schema(req["schema"])
            out = {"ok": True}
        except BaseException as e:  # ConstraintError, ValueError, a pyo3 PanicException
            if isinstance(e, KeyboardInterrupt):
                raise
            handle, out = (
                None,
                {"ok": False, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"},
            )
        out["seconds"] = time.process_time() - t0
        if handle is not None and req.get("texts"):
            out["accepted"] = [_accepts(engine, handle, encode(t), eos) for t in req["texts"]]
        print(json.dumps(out), flush=True)


def _accepts(engine, handle, ids: list[int], eos: int) -> bool:
    try:
        c = engine.start(handle)
        return all(engine.advance(c, t) for t in ids) and engine.advance(c, eos)
    except BaseException:  # noqa: BLE001 - a peer's matcher raising on a token is a refusal of it
        return False


class Worker:
    """A worker process for one engine, restarted after a timeout."""

    def __init__(self, name: str, args):
        self.name, self.args, self.proc = name, args, None

    def start(self) -> None:
        cmd = [sys.executable, __file__, "--worker", self.name, "--data", str(self.args.data)]
        cmd += ["--cache", str(self.args.cache)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self._read(600)
        if line is None or not json.loads(line).get("ready"):
            raise RuntimeError(f"{self.name} worker did not start")

    def _read(self, timeout: float):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline() if ready else None

    def ask(self, schema, texts=(), timeout: float = 20.0) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps({"schema": schema, "texts": list(texts)}) + "\n")
        self.proc.stdin.flush()
        line = self._read(timeout)
        if not line:
            self.stop()
            return {"ok": False, "error": f"timeout ({timeout:g} s)", "seconds": time.perf_counter() - t0}
        return json.loads(line)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def available(names) -> list[str]:
    out = []
    for n in names:
        if n == "decodekit":
            out.append(n)
            continue
        try:
            __import__(n)
            out.append(n)
        except ImportError:
            print(f"({n} is not installed here: its columns are left out)", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------
# (a) the official suite


def suite_groups(root: Path):
    for draft in DRAFTS:
        for path in sorted((root / "tests" / draft).glob("*.json")):
            for group in json.loads(path.read_text()):
                yield draft, path.stem, group


def run_suite(args, workers: dict) -> dict:
    import regex

    from decodekit.constraints import Pattern, check_pattern, json_schema
    from decodekit.constraints.grammar.cfg import CFG
    from decodekit.errors import ConstraintError

    rows = {n: collections.Counter() for n in ["decodekit", *workers]}
    why_valid_rejected: collections.Counter = collections.Counter()
    refusals: collections.Counter = collections.Counter()
    false_accepts: dict[str, list] = collections.defaultdict(list)
    for draft, name, group in suite_groups(args.suite):
        schema = group["schema"]
        if isinstance(schema, dict) and draft == "draft7" and "$schema" not in schema:
            schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
        texts = [compact(t["data"]) for t in group["tests"]]
        verdicts = [t["valid"] for t in group["tests"]]
        r = rows["decodekit"]
        r["groups"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pattern = json_schema(schema)
                expression = isinstance(pattern, (Pattern, CFG))  # CFG: a recursive schema's grammar
                compiled = _PatternMatcher(pattern, texts) if expression else None
                if compiled is None:
                    check_pattern(pattern)
                    compiled = regex.compile(pattern)
        except ConstraintError as e:
            refusals[reason(str(e))] += 1
            compiled = None
        if compiled is not None:
            r["compiled"] += 1
            for text, ok, test in zip(texts, verdicts, group["tests"]):
                hit = compiled.fullmatch(text) is not None
                r["valid" if ok else "invalid"] += 1
                if hit and ok:
                    r["valid accepted"] += 1
                elif hit and not ok:
                    r["false accepts"] += 1
                    false_accepts["decodekit"].append(
                        f"{draft}/{name}: {group['description']}: {test['description']}"
                    )
                elif ok:
                    why_valid_rejected[_why(schema, test["data"])] += 1
        for n, w in workers.items():
            res = w.ask(group["schema"], texts, args.timeout)
            rw = rows[n]
            rw["groups"] += 1
            if res.get("ok"):
                rw["compiled"] += 1
                for hit, ok, test in zip(res.get("accepted", []), verdicts, group["tests"]):
                    rw["valid" if ok else "invalid"] += 1
                    if hit and ok:
                        rw["valid accepted"] += 1
                    elif hit and not ok:
                        rw["false accepts"] += 1
                        false_accepts[n].append(
                            f"{draft}/{name}: {group['description']}: {test['description']}"
                        )
    return {
        "rows": {n: dict(c) for n, c in rows.items()},
        "valid not accepted (decodekit), why": why_valid_rejected.most_common(),
        "refusals (decodekit)": refusals.most_common(15),
        "false accepts": {n: v[:30] for n, v in false_accepts.items()},
    }


class _PatternMatcher:
    """``fullmatch`` for a Pattern expression or a grammar: its automaton over a character
    vocabulary (printable ASCII and every character of the texts), walked character by character."""

    def __init__(self, pattern, texts: list[str]):
        from decodekit.constraints import compile_regex

        self.chars = sorted({chr(c) for c in range(32, 127)} | {c for t in texts for c in t})
        self.ids = {c: i for i, c in enumerate(self.chars)}
        self.auto = compile_regex(pattern, self.chars, lazy="masked")

    def fullmatch(self, text: str):
        return True if self.auto.accepts([self.ids[c] for c in text]) else None


def _why(schema, value) -> str:
    """Why a valid instance is outside what the regex writes (the documented subset)."""
    if isinstance(value, dict) and len(value) > 1:
        return "an object: other key order or properties not written (extra, or beyond the subset)"
    if isinstance(value, dict) and value:
        return "an object: a property not written (extra, or beyond the subset)"
    if isinstance(value, float) or (
        isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18
    ):
        return "a number outside the written forms (exponent, over 6 fraction digits or 18 digits)"
    if isinstance(value, list) and len(value) > 1:
        return "an array: items beyond the subset (uniqueItems, contains, depth of free values)"
    if isinstance(value, str) and any(ord(c) >= 0x10000 or c in "\x7f" for c in value):
        return "a string with characters a pattern's translation leaves out (outside the BMP)"
    return (
        "a part of the schema read narrower (if/else, a recursion cut, a pattern's translation, free depth)"
    )


# ---------------------------------------------------------------------------------------------
# (b) JSONSchemaBench


def bench_sample(root: Path, n: int, seed: int, subsets=SUBSETS) -> dict[str, list[Path]]:
    """``n`` schemas of each subset, drawn with a seed of their own (a subset's sample is the same
    whichever others are drawn)."""
    out = {}
    for subset in subsets:
        files = sorted(p for p in (root / subset).glob("*.json") if p.is_file())
        rng = random.Random(f"{seed}|{subset}")
        out[subset] = sorted(rng.sample(files, min(n, len(files)))) if files else []
    return out


def run_bench(args, workers: dict) -> dict:
    from decodekit.constraints import json_schema
    from decodekit.errors import ConstraintError

    sample = bench_sample(args.bench, args.sample, args.seed, args.subsets)
    results: dict = {}
    for subset, paths in sample.items():
        per = results[subset] = {
            "schemas": 0,
            "front end": 0,
            "refused": {},
            "engines": {n: [] for n in workers},
        }
        for path in paths:
            try:
                schema = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            per["schemas"] += 1
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    json_schema(schema)
                per["front end"] += 1
            except ConstraintError as e:
                per["refused"][path.name] = " ".join(str(e).split())[:300]
            except RecursionError:
                per["refused"][path.name] = "RecursionError"
            for n, w in workers.items():
                res = w.ask(schema, (), args.timeout)
                per["engines"][n].append({"file": path.name, **res})
        line = ", ".join(
            f"{n} {sum(r['ok'] for r in rs)}/{per['schemas']}" for n, rs in per["engines"].items()
        )
        print(
            f"  {subset}: front end {per['front end']}/{per['schemas']}; {line}", file=sys.stderr, flush=True
        )
    return results


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def report(args, suite: dict | None, bench: dict | None, names: list[str]) -> None:
    if suite is not None:
        print("\n### Official JSON-Schema-Test-Suite (draft 2020-12 and draft 7, required tests)\n")
        print(
            "| engine | groups compiled | valid instances accepted | invalid instances accepted "
            "(false accepts) |"
        )
        print("|---|---|---|---|")
        for n, r in suite["rows"].items():
            print(
                f"| {n} | {r.get('compiled', 0)} / {r.get('groups', 0)} | {r.get('valid accepted', 0)} / "
                f"{r.get('valid', 0)} | {r.get('false accepts', 0)} / {r.get('invalid', 0)} |"
            )
        print("\nValid instances decodekit does not accept, by why:\n")
        for why, k in suite["valid not accepted (decodekit), why"]:
            print(f"* {k}: {why}")
        print("\nMost common decodekit refusals on the suite:\n")
        for why, k in suite["refusals (decodekit)"][:10]:
            print(f"* {k}: {why}")
    if bench is not None:
        print(
            f"\n### JSONSchemaBench, {args.sample} schemas per subset (seed {args.seed}), "
            "compiled over the 50k BPE\n"
        )
        head = " | ".join(names)
        print(f"| subset | schemas | decodekit front end | {head} |")
        print("|---|---|---|" + "---|" * len(names))
        totals = collections.Counter()
        for subset, per in bench.items():
            cells = []
            for n in names:
                rs = per["engines"][n]
                ok = sum(r["ok"] for r in rs)
                totals[n] += ok
                cells.append(f"{100 * ok / max(len(rs), 1):.0f} %")
            totals["schemas"] += per["schemas"]
            totals["front end"] += per["front end"]
            front = 100 * per["front end"] / max(per["schemas"], 1)
            print(f"| {subset} | {per['schemas']} | {front:.0f} % | " + " | ".join(cells) + " |")
        cells = [f"{100 * totals[n] / max(totals['schemas'], 1):.0f} %" for n in names]
        front = 100 * totals["front end"] / max(totals["schemas"], 1)
        print(f"| all | {totals['schemas']} | {front:.0f} % | " + " | ".join(cells) + " |")
        print(
            "\nCompile time per compiled schema (CPU s, worker process; the vocabulary prepared "
            "beforehand):\n"
        )
        print("| engine | median | 95th percentile | timeouts |")
        print("|---|---|---|---|")
        for n in names:
            rs = [r for per in bench.values() for r in per["engines"][n]]
            times = [r["seconds"] for r in rs if r["ok"]]
            timeouts = sum(1 for r in rs if str(r.get("error", "")).startswith("timeout"))
            med = statistics.median(times) if times else float("nan")
            print(f"| {n} | {med:.3f} | {pct(times, 0.95):.3f} | {timeouts} |")
        if "decodekit" in names:
            stages = collections.Counter()
            for per in bench.values():
                for r in per["engines"]["decodekit"]:
                    if r["ok"]:
                        continue
                    if r["file"] in per.get("refused", {}):
                        stages["front end (json_schema refused)"] += 1
                    elif str(r.get("error", "")).startswith("timeout"):
                        stages["compile: timeout"] += 1
                    else:
                        stages[f"compile: {r.get('error', '')[:40]}"] += 1
            print("\ndecodekit schemas not compiled, by stage:\n")
            for why, k in stages.most_common(10):
                print(f"* {k}: {why}")
            print("\nEach front-end refusal (one line: the JSON pointer and the reason):\n")
            for subset, per in bench.items():
                for name, message in sorted(per.get("refused", {}).items()):
                    print(f"* {subset}/{name}: {message}")
        for n in names:
            errors = collections.Counter(
                reason(r["error"]) for per in bench.values() for r in per["engines"][n] if not r["ok"]
            )
            print(f"\nMost common {n} refusals:\n")
            for why, k in errors.most_common(10):
                print(f"* {k}: {why}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", type=Path, help="the JSON-Schema-Test-Suite checkout")
    ap.add_argument("--bench", type=Path, help="JSONSchemaBench's data directory (its 10 subsets)")
    ap.add_argument("--sample", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subsets", nargs="+", choices=SUBSETS, default=SUBSETS, help="default: all ten")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per schema and engine")
    ap.add_argument(
        "--engines",
        nargs="*",
        default=["decodekit", "llguidance", "xgrammar"],
        help="none: the front end only",
    )
    ap.add_argument("--suite-peers", action="store_true", help="run the peers on the suite too")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    names = available(args.engines)
    out: dict = {"argv": sys.argv, "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    suite = bench = None
    if args.suite:
        peers = {n: Worker(n, args) for n in names if n != "decodekit"} if args.suite_peers else {}
        suite = run_suite(args, peers)
        for w in peers.values():
            w.stop()
        out["suite"] = suite
    if args.bench:
        workers = {n: Worker(n, args) for n in names}
        try:
            bench = run_bench(args, workers)
        finally:
            for w in workers.values():
                w.stop()
        out["bench"] = bench
    report(args, suite, bench, names)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
