"""Anderson-style search over the states it reaches vs the dense grid (one beam per state).

Over the 50,000-token byte-level BPE of ``bench_byte_patterns.byte_bpe`` (trained once, cached:
``--cache``, ``--data``), a stand-in model (``HashLM``: a random log-softmax table of 64 rows
picked by a hash of the history, so every variant sees the same distributions, and a step costs
a gather of [rows, V]), beam K = ``--beam``, ``--max-length`` tokens, CPU, one thread. Each
(pattern, variant) runs in its own process (peak RSS, ``ru_maxrss``, is per process):

* ``grid``: the dense grid on the whole automaton (``ANDERSON_GRID``: ``compile_regex`` whole,
  S x K rows at every step; what ``constrained_beam_search`` ran before, and still runs below
  ``beam.GRID_STATES`` states);
* ``visited``: the same automaton, one beam per state reached (``ANDERSON_VISITED``);
* ``default``: what the plan step (``decoding.prompts._for_states``) gives Anderson-style search
  for the pattern string: the whole automaton, or where that is refused for size the lazy one,
  one beam per state reached (then ``states`` reads "lazy"; ``compile`` includes the refusal).

Reported: compile (pattern -> automaton), search CPU time, steps, rows per step (mean, max),
time per step, peak RSS, and whether the three give the same hypotheses. Run:
``PYTHONPATH=. python benchmarks/bench_anderson.py``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

PATTERNS = [
    r"\d{3}-\d{4}",
    r"(?:yes|no|maybe), (?:red|green|blue)",
    r".*\bmarket\b.*",
    r"\d{3}-\d{4}|x{3000}",  # refused whole: 3,000 states x 50,000 tokens over the table limit
]
VARIANTS = ["grid", "visited", "default"]
# a pattern refused whole whose other branch cannot end within max_length: its results should be
# the grid's on the small pattern
PAIRS = {r"\d{3}-\d{4}|x{3000}": r"\d{3}-\d{4}"}


class BytesVocab:
    """The token bytes as a model's ``vocab`` (what the plan step compiles a pattern string against)."""

    def __init__(self, tokens, eos_id: int):
        self.tokens, self.eos_id, self.separator = tuple(tokens), eos_id, ""

    def __len__(self) -> int:
        return len(self.tokens)

    def surface_bytes(self):
        return self.tokens

    surfaces = surface_bytes


class HashLM:
    """Log-probabilities ``table[hash(history) % 64]`` ([64, V] random log-softmax), no EOS bias."""

    def __init__(self, vocab_size: int, eos_id: int, seed: int = 0, eos_bonus: float = 0.0):
        g = torch.Generator().manual_seed(seed)
        logits = 3.0 * torch.randn(64, vocab_size, generator=g)
        logits[:, eos_id] += eos_bonus
        self.table = logits.log_softmax(-1)
        self.vocab_size, self.eos_id, self.bos_id, self.vocab = vocab_size, eos_id, eos_id, None

    def initial_state(self, batch_size: int):
        return torch.zeros(batch_size, dtype=torch.long)

    def step(self, state, tokens):
        h = (state * 1_000_003 + tokens + 7) % 2_147_483_647
        return self.table[h % 64], h


def child(args) -> None:
    from bench_byte_patterns import byte_bpe

    from decodekit.constraints import compile_regex
    from decodekit.decoding.beam import ANDERSON, ANDERSON_GRID, ANDERSON_VISITED
    from decodekit.decoding.plan import _for_states
    from decodekit.decoding.search import Search, decode
    from decodekit.decoding.strategies import Settings

    torch.set_num_threads(1)
    _, _, tokens, eos = byte_bpe(args.data, 50_000, cache=args.cache, verbose=False)
    model = HashLM(len(tokens), eos, eos_bonus=args.eos_bonus)
    model.vocab = BytesVocab(tokens, eos)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"pattern": args.pattern, "variant": args.variant, "base_mb": base}
    t0 = time.process_time()
    try:
        if args.variant == "default":  # what the plan step gives Anderson-style search for the pattern
            automaton = _for_states(args.pattern, model, (), args.max_length)
        else:
            automaton = compile_regex(args.pattern, tokens, eos, "", lazy=False)
    except Exception as e:  # the size refusal of the whole automaton
        out["error"] = str(e).split(". ")[0][:120]
        print(json.dumps(out))
        return
    out["compile_s"] = time.process_time() - t0
    out["states"] = getattr(automaton, "num_states", None)
    strategy = {"grid": ANDERSON_GRID, "visited": ANDERSON_VISITED, "default": ANDERSON}[args.variant]
    settings = Settings(
        strategy, args.max_length, automaton, beam_size=args.beam, length_penalty=1.0, n_best=2
    )
    rows: list[int] = []
    t0 = time.process_time()
    with torch.inference_mode():
        search = Search(model, strategy, settings, automaton)
        hyps = decode(search, [[]], None, lambda sel: rows.append(sel.logprob.numel()))[0]
    out["search_s"] = time.process_time() - t0
    out.update(steps=len(rows), rows_mean=sum(rows) / max(len(rows), 1), rows_max=max(rows, default=0))
    out["per_step_ms"] = 1000 * out["search_s"] / max(len(rows), 1)
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["hyps"] = [[list(h.tokens), round(h.score, 5)] for h in hyps]
    print(json.dumps(out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"))
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=8)
    ap.add_argument("--eos-bonus", type=float, default=0.0, help="added to EOS's logit: searches end early")
    ap.add_argument("--patterns", nargs="+", default=PATTERNS)
    ap.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--pattern", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    print(f"K={args.beam}, max_length={args.max_length}, V=50,000 byte-level BPE, CPU, 1 thread")
    print(
        "| pattern | variant | states | compile s | search CPU s | steps | rows/step mean (max) | ms/step "
        "| peak RSS MB | same |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    found: dict[tuple[str, str], list] = {}
    for pattern in args.patterns:
        results = []
        for variant in args.variants:
            cmd = [sys.executable, __file__, "--child", "--pattern", pattern, "--variant", variant]
            cmd += ["--data", str(args.data), "--cache", str(args.cache)]
            cmd += [
                "--beam",
                str(args.beam),
                "--max-length",
                str(args.max_length),
                "--eos-bonus",
                str(args.eos_bonus),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                results.append({"variant": variant, "error": done.stderr.strip().splitlines()[-1][:120]})
            else:
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        ok = [r for r in results if "hyps" in r]
        found.update({(pattern, r["variant"]): r["hyps"] for r in ok})
        for r in results:
            same = "" if "hyps" not in r else "yes" if r["hyps"] == ok[0]["hyps"] else "NO"
            if "error" in r:
                print(f"| `{pattern}` | {r['variant']} | refused: {r['error']} | | | | | | | |")
                continue
            print(
                f"| `{pattern}` | {r['variant']} | {r['states'] or 'lazy'} | {r['compile_s']:.2f} | "
                f"{r['search_s']:.2f} | {r['steps']} | {r['rows_mean']:.0f} ({r['rows_max']}) | "
                f"{r['per_step_ms']:.1f} | {r['peak_mb']:.0f} (base {r['base_mb']:.0f}) | {same} |",
                flush=True,
            )

    for big, small in PAIRS.items():
        if (big, "default") in found and (small, "grid") in found:
            same = found[big, "default"] == found[small, "grid"]
            print(f"\n`{big}` over the states it reaches == the grid on `{small}`: {same}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
