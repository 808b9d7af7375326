"""Cost per step of issue 39's samplers, controls and log-probabilities over plain sampling
(and plain beam search for ``logprobs``) at the same width, measured side by side in one run.

Model: the bundled LSTM architecture, untrained (2x200, vocabulary 10,000), EOS disabled so
every run takes ``--steps`` steps; one prompt, ``--width`` samples (beams). Each contender is
``decodekit.generate`` with one option added; the contenders alternate in every repeat, and
the ratio is the median of its CPU times (one torch thread) over the median of the plain run's.
Goal (issue 39): each within 1.2x.

    python benchmarks/bench_sampling.py [--width 16] [--steps 50] [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's decodekit
from bench_decoding import NoEOS, make_model  # noqa: E402 (the decoding benchmark's model)

import decodekit  # noqa: E402

BAD_WORDS = [[10 + i, 20 + i] for i in range(10)]
CONTENDERS = {
    "sample": ("sample", {}),
    "typical_p=0.9": ("sample", {"typical_p": 0.9}),
    "epsilon_cutoff=3e-4": ("sample", {"epsilon_cutoff": 3e-4}),
    "eta_cutoff=3e-4": ("sample", {"eta_cutoff": 3e-4}),
    "presence_penalty=0.5, frequency_penalty=0.5": (
        "sample",
        {"presence_penalty": 0.5, "frequency_penalty": 0.5},
    ),
    "logit_bias (10 tokens)": ("sample", {"logit_bias": {i: -1.0 for i in range(30, 40)}}),
    "bad_words (10 two-token sequences)": ("sample", {"bad_words": BAD_WORDS}),
    "logprobs=5": ("sample", {"logprobs": 5}),
    "beam": ("beam", {}),
    "beam, logprobs=5": ("beam", {"logprobs": 5}),
}


def run_once(model, strategy: str, options: dict, width: int, steps: int) -> float:
    config = decodekit.GenerationConfig(
        strategy=strategy, max_length=steps, num_samples=width, beam_size=width, seed=0, **options
    )
    start = time.process_time()
    decodekit.generate(model, [[2, 3, 4]], config)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = NoEOS(make_model(10_000, 200))
    times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for strategy, options in CONTENDERS.values():  # warm-up
        run_once(model, strategy, options, args.width, 3)
    for _ in range(args.repeats):
        for name, (strategy, options) in CONTENDERS.items():
            times[name].append(run_once(model, strategy, options, args.width, args.steps))
    base = {s: statistics.median(times[s]) for s in ("sample", "beam")}
    print(f"width {args.width}, {args.steps} steps, median of {args.repeats} CPU times (1 thread)\n")
    print("| option | strategy | ms per step | over plain at the same width |")
    print("|---|---|---|---|")
    for name, (strategy, _) in CONTENDERS.items():
        median = statistics.median(times[name])
        print(f"| {name} | {strategy} | {1000 * median / args.steps:.2f} | {median / base[strategy]:.2f}x |")
    filters_side_by_side(args.width, args.repeats)


def filters_side_by_side(width: int, repeats: int) -> None:
    """Each cutoff alone on ``[width, 10,000]`` log-probabilities: decodekit's and transformers'
    warper (where installed), alternated, median CPU ms per call."""
    try:
        from transformers.generation import logits_process as theirs
    except ImportError:
        print("\n(transformers is not installed: no side-by-side of the filters)")
        return
    from decodekit.decoding import processors

    logprobs = torch.log_softmax(torch.randn(width, 10_000, generator=torch.Generator().manual_seed(0)), -1)
    pairs = {
        "typical_p=0.9": (lambda: processors.typical_p(logprobs, 0.9), theirs.TypicalLogitsWarper(0.9)),
        "epsilon_cutoff=3e-4": (
            lambda: processors.epsilon_cutoff(logprobs, 3e-4),
            theirs.EpsilonLogitsWarper(3e-4),
        ),
        "eta_cutoff=3e-4": (lambda: processors.eta_cutoff(logprobs, 3e-4), theirs.EtaLogitsWarper(3e-4)),
    }
    print(f"\n| filter alone on [{width}, 10,000] | decodekit ms | transformers ms |")
    print("|---|---|---|")
    for name, (ours, warper) in pairs.items():
        samples: dict[str, list[float]] = {"ours": [], "theirs": []}
        for _ in range(repeats * 5):
            for who, call in (("ours", ours), ("theirs", lambda w=warper: w(None, logprobs))):
                start = time.process_time()
                call()
                samples[who].append(time.process_time() - start)
        ms = {k: 1000 * statistics.median(v) for k, v in samples.items()}
        print(f"| {name} | {ms['ours']:.2f} | {ms['theirs']:.2f} |")


if __name__ == "__main__":
    main()
