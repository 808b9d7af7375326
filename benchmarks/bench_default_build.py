"""compile_regex's default against the masked searches' compile and the former default (the eager
ladder, ``lazy="auto"``) on ``(a|b)*a(a|b){N}``, whose character DFA has 2^(N+1) states: compile
then a greedy search of 40 tokens, CPU time, each contender in its own process (nothing cached).

    python benchmarks/bench_default_build.py [--sizes 12 15] [--repeats 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = """
import sys, time, torch, decodekit
from decodekit.constraints import compile_regex
from tests.support.fakes import TableLM
TOKENS = ["a", "b", "ab", "ba", "<eos>"]  # every byte a token by itself, as in byte-level BPE
lazy, n = sys.argv[1], int(sys.argv[2])
compile_regex("ab", TOKENS, 4)  # imports and the compiler's tables warm
start = time.process_time()
options = {} if lazy == "default" else {"lazy": lazy}
automaton = compile_regex(rf"(a|b)*a(a|b){{{n}}}", TOKENS, 4, **options)
model = TableLM(torch.randn(5, 5, generator=torch.Generator().manual_seed(0)), bos_id=None, eos_id=4)
decodekit.greedy(model, [0], 40, constraint=automaton)
print(type(automaton).__name__, time.process_time() - start)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[12, 15])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| N | `lazy=` | automaton | compile + greedy, CPU s (min) | / masked |")
    print("|---|---|---|---|---|")
    for n in args.sizes:
        best = {}
        for _ in range(args.repeats):  # the contenders alternate
            for lazy in ("default", "masked", "auto"):
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, lazy, str(n)], capture_output=True, text=True
                )
                name, seconds = out.stdout.split()
                best[lazy] = (name, min(float(seconds), best.get(lazy, (name, float("inf")))[1]))
        for lazy, (name, seconds) in best.items():
            shown = "default" if lazy == "default" else lazy
            print(f"| {n} | {shown} | {name} | {seconds:.3f} | {seconds / best['masked'][1]:.2f} |")


if __name__ == "__main__":
    main()
