"""Speculative sampling keeps the target's distribution: 10^5 draws against exhaustive enumeration
(the cheap version, 1,500 draws, is tests/decoding/test_speculative.py).

A tiny target whose next-token distribution depends on the whole history (a hash seeds each
row), V = 4 (EOS = 1), at most ``--max-length`` tokens; a different model of the same kind as the
draft, and prompt lookup. For each: the chi-square statistic over the outputs against its degrees
of freedom, the largest |z| of one output's count and the total variation distance. Prints a
Markdown table.

    python benchmarks/check_speculative_sampling.py --draws 100000
"""

from __future__ import annotations

import argparse
import collections
import itertools
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's decodekit
import decodekit  # noqa: E402
from decodekit.decoding.speculative import LookupDraft, ModelDraft, speculative_generate

V, EOS = 4, 1


class HashLM:
    """log p(. | history) = log_softmax(sharpness * N(0, 1) draws seeded by a hash of the history).
    State: the hash [N] int64."""

    def __init__(self, seed: int, sharpness: float) -> None:
        self.vocab_size, self.bos_id, self.eos_id = V, EOS, EOS
        self.seed, self.sharpness = seed, sharpness

    def initial_state(self, batch_size: int) -> torch.Tensor:
        return torch.zeros(batch_size, dtype=torch.long)

    def step(self, state: torch.Tensor, tokens: torch.Tensor):
        h = (state * 1_000_003 + tokens + 1) % (2**61 - 1)
        rows = []
        for x in h.tolist():
            g = torch.Generator().manual_seed((x * 7919 + self.seed) % 2**62)
            rows.append(
                torch.log_softmax(self.sharpness * torch.randn(V, generator=g, dtype=torch.float64), -1)
            )
        return torch.stack(rows).float(), h


def exact(model, prompt, max_length, temperature):
    """Every output (tokens, finished) and its probability under tempered sampling."""
    out = {}
    content = [v for v in range(V) if v != EOS]
    for n in range(max_length + 1):
        for seq in itertools.product(content, repeat=n):
            state, prob = model.initial_state(1), 1.0
            for x in [EOS, *prompt]:
                lp, state = model.step(state, torch.tensor([x]))
            for x in seq:
                prob *= float(torch.softmax(lp[0].double() / temperature, 0)[x])
                lp, state = model.step(state, torch.tensor([x]))
            if n < max_length:
                out[(seq, True)] = prob * float(torch.softmax(lp[0].double() / temperature, 0)[EOS])
            else:
                out[(seq, False)] = prob
    return out


def check(name, target, draft, prompt, draws, max_length, temperature, seed=0):
    probs = exact(target, prompt, max_length, temperature)
    config = decodekit.GenerationConfig(
        strategy="sample", max_length=max_length, temperature=temperature, num_samples=draws, seed=seed,
        num_assistant_tokens=2, prompt_lookup_num_tokens=None,
    )  # fmt: skip
    got, search = speculative_generate(target, [prompt], config, draft)
    counts = collections.Counter((tuple(h.tokens), h.finished) for h in got[0])
    assert set(counts) <= set(probs)
    chi2 = sum((counts.get(k, 0) - draws * p) ** 2 / (draws * p) for k, p in probs.items() if p > 0)
    z = max(abs(counts.get(k, 0) - draws * p) / math.sqrt(draws * p * (1 - p)) for k, p in probs.items())
    tv = 0.5 * sum(abs(counts.get(k, 0) / draws - p) for k, p in probs.items())
    accept = search.kept / max(search.drafted, 1)
    df = len(probs) - 1
    return f"| {name} | {draws:,} | {len(probs)} | {chi2:.1f} (df {df}) | {z:.2f} | {tv:.4f} | {accept:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=100_000)
    parser.add_argument("--max-length", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    target, other = HashLM(3, 1.0), HashLM(9, 2.0)
    print("| draft | draws | outputs | chi-square | max abs z | total variation | acceptance |")
    print("|---|---|---|---|---|---|---|")
    print(
        check(
            "another model, T=1", target, ModelDraft(other), [2], args.draws, args.max_length, 1.0, args.seed
        )
    )
    print(
        check(
            "another model, T=0.7",
            target,
            ModelDraft(other),
            [2],
            args.draws,
            args.max_length,
            0.7,
            args.seed,
        )
    )
    print(
        check(
            "prompt lookup, T=1",
            target,
            LookupDraft(),
            [2, 3, 2],
            args.draws,
            args.max_length,
            1.0,
            args.seed,
        )
    )


if __name__ == "__main__":
    main()
