"""Cost of the searches of issue 39 over the plain search of the same width, side by side in one
run: diverse beam search over beam search (K rows), stochastic beam search over beam search (k + 1
rows, and k) and over sampling (k + 1 samples), minimum Bayes risk over sampling (n samples, the
ranking included).

The model is bench_decoding.py's untrained LSTM LM (10k vocabulary, 2x200) with EOS disabled, so
every search runs ``--steps`` steps and total time / steps is the time per step. Timings alternate
between the contenders and report medians of the process's CPU time (one thread).

    python benchmarks/bench_searches.py [--steps 20] [--repeats 7] [--batch 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # decodekit of this checkout

import torch  # noqa: E402
from bench_decoding import NoEOS, make_model  # noqa: E402

import decodekit  # noqa: E402
from decodekit import GenerationConfig  # noqa: E402

PAIRS = [  # (label, baseline options, contender options)
    ("diverse-beam K=8, G=2, penalty 1 / beam K=8",
     dict(strategy="beam", beam_size=8),
     dict(strategy="diverse-beam", beam_size=8, num_beam_groups=2, diversity_penalty=1.0)),
    ("diverse-beam K=8, G=8, penalty 1 / beam K=8",
     dict(strategy="beam", beam_size=8),
     dict(strategy="diverse-beam", beam_size=8, num_beam_groups=8, diversity_penalty=1.0)),
    ("diverse-beam K=8, G=1 / beam K=8",
     dict(strategy="beam", beam_size=8),
     dict(strategy="diverse-beam", beam_size=8)),
    ("stochastic-beam k=8 (9 rows) / beam K=9",
     dict(strategy="beam", beam_size=9),
     dict(strategy="stochastic-beam", beam_size=8, seed=0)),
    ("stochastic-beam k=8 (9 rows) / beam K=8",
     dict(strategy="beam", beam_size=8),
     dict(strategy="stochastic-beam", beam_size=8, seed=0)),
    ("stochastic-beam k=8 (9 rows) / sample n=9",
     dict(strategy="sample", num_samples=9, seed=0),
     dict(strategy="stochastic-beam", beam_size=8, seed=0)),
    ("mbr n=16 (f1) / sample n=16",
     dict(strategy="sample", num_samples=16, seed=0),
     dict(strategy="mbr", num_samples=16, seed=0)),
]  # fmt: skip


def cpu_seconds(model, prompts, options: dict, steps: int) -> float:
    config = GenerationConfig(max_length=steps, length_penalty=0.0, **options)
    start = time.process_time()
    decodekit.generate(model, prompts, config)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=10_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = NoEOS(make_model(args.vocab, 200))
    prompts = [[3 + b, 4] for b in range(args.batch)]
    print(f"V = {args.vocab:,}, {args.batch} prompts, {args.steps} steps, CPU time per step")
    print()
    print("| search / baseline | baseline ms/step | search ms/step | ratio |")
    print("|---|---:|---:|---:|")
    with torch.inference_mode():
        for label, base, contender in PAIRS:
            cpu_seconds(model, prompts, base, 2), cpu_seconds(model, prompts, contender, 2)  # warm up
            times: dict[str, list[float]] = {"base": [], "contender": []}
            for _ in range(args.repeats):
                times["base"].append(cpu_seconds(model, prompts, base, args.steps))
                times["contender"].append(cpu_seconds(model, prompts, contender, args.steps))
            b, c = (statistics.median(times[k]) / args.steps * 1e3 for k in ("base", "contender"))
            print(f"| {label} | {b:.2f} | {c:.2f} | {c / b:.2f}x |")


if __name__ == "__main__":
    main()
