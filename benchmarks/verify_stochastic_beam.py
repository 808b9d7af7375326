"""Stochastic beam search against the Gumbel-top-k theorem at 10^5 runs (the test,
tests/decoding/test_stochastic.py, runs 10^4): for each case, every k-subset's exact probability
under sampling without replacement (enumerated over all sequences of a tiny model) against its
frequency over ``--runs`` searches batched as one; prints a Markdown table with the largest
per-subset deviation in standard deviations and Pearson's chi-square (subsets expected fewer than
5 times pooled into one cell).

    python benchmarks/verify_stochastic_beam.py [--runs 100000]
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # decodekit and tests of this checkout

import torch  # noqa: E402

from decodekit import GenerationConfig, compile_regex, generate  # noqa: E402
from tests.decoding.test_stochastic import leaves, subset_probabilities  # noqa: E402
from tests.support.fakes import HistoryLM, TableLM, char_vocab  # noqa: E402


def cases():
    table = TableLM(torch.tensor([[0.0, 1.0, 0.5], [0.3, -0.5, 1.2], [1.0, 0.2, -1.0]]))
    yield "table V=3, max_length 3, k=2", table, [1], 3, 2, None, 1.0
    yield "table V=3, max_length 2, k=3", table, [1], 2, 3, None, 1.0
    vocab = char_vocab("ab")
    model = HistoryLM(len(vocab), seed=4, eos_id=vocab.eos_id, bos_id=vocab.eos_id, sharpness=1.0)
    automaton = compile_regex("a*b?a?", vocab.surfaces(), vocab.eos_id)
    yield "history V=4, 'a*b?a?', T=0.7, max_length 3, k=3", model, [2], 3, 3, automaton, 0.7


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    runs = parser.parse_args().runs
    print(f"{runs:,} runs per case")
    print()
    print("| case | sequences | k-subsets | largest deviation (sd) | chi-square (df) | p-value | CPU s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, model, prompt, length, k, automaton, temperature in cases():
        p = leaves(model, prompt, length, automaton, temperature)
        exact = subset_probabilities(p, k)
        config = GenerationConfig(
            strategy="stochastic-beam", beam_size=k, max_length=length, seed=2026,
            temperature=temperature, constraint=automaton,
        )  # fmt: skip
        start = time.process_time()
        results = generate(model, [prompt] * runs, config)
        cpu = time.process_time() - start
        freq = collections.Counter(frozenset((h.tokens, h.finished) for h in hyps) for hyps in results)
        assert set(freq) <= set(exact)
        worst = max(abs(freq[s] / runs - q) / math.sqrt(q * (1 - q) / runs) for s, q in exact.items())
        cells = [s for s, q in exact.items() if q * runs >= 5]  # the rarer ones pooled into one cell
        observed = [freq[s] for s in cells] + [runs - sum(freq[s] for s in cells)]
        expected = [runs * exact[s] for s in cells] + [runs * (1 - sum(exact[s] for s in cells))]
        chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected) if e > 0)
        df = sum(e > 0 for e in expected) - 1
        tail = survival(chi2, df)
        row = [label, len(p), len(exact), f"{worst:.2f}", f"{chi2:.1f} ({df})", f"{tail:.3f}", f"{cpu:.1f}"]
        print("| " + " | ".join(map(str, row)) + " |")


def survival(x: float, df: int) -> float:
    """P(chi-square(df) > x) by the Wilson-Hilferty normal approximation (good for df >= 5)."""
    z = ((x / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


if __name__ == "__main__":
    main()
