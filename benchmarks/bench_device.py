"""Decoding and training throughput on whatever device is present (CPU, or a CUDA GPU).

Decoding: tokens generated per second by greedy (64 prompts) and beam search (8 prompts x
beam 8) for 50 new tokens, EOS disabled, LSTM 2x200 over a 10k vocabulary (untrained: speed
does not depend on the weights). Training: tokens per second of the trainer (softmax loss,
batch 20, bptt 20, SGD, clip 5) on a synthetic 10k-vocabulary stream, optionally with bf16
autocast on CUDA. Prints the device name with the figures.

    python benchmarks/bench_device.py [--device auto] [--threads 1] [--updates 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

import decodekit
from decodekit.data import Corpus
from decodekit.models.registry import create_model, make_config
from decodekit.training import TrainConfig, train
from decodekit.vocab import WordVocab

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decoding import NoEOS  # noqa: E402


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def decode_rate(model, device, strategy: str, prompts: int, beam: int, steps: int) -> float:
    batch = [[2 + i % 50, 3] for i in range(prompts)]
    run = {
        "greedy": lambda: decodekit.greedy(model, batch, steps),
        "beam": lambda: decodekit.beam_search(model, batch, beam, steps),
    }[strategy]
    run()
    synchronize(device)
    t0 = time.perf_counter()
    run()
    synchronize(device)
    return prompts * steps / (time.perf_counter() - t0)


def train_rate(vocab, device, updates: int, bf16: bool) -> float:
    torch.manual_seed(0)
    stream = torch.randint(2, len(vocab), (20 * 20 * (updates + 2) + 1,))
    corpus = Corpus(vocab=vocab, train=stream, valid=stream[:2000], test=stream[:2000])
    model = create_model(make_config("lstm", embed=200, hidden=200, layers=2), vocab).to(device)
    config = TrainConfig(epochs=1)
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else torch.autocast("cpu", enabled=False)
    with ctx:
        train(model, corpus, config, progress=False, stop_after_updates=5)  # warm-up
        synchronize(device)
        t0 = time.perf_counter()
        train(model, corpus, config, progress=False, stop_after_updates=updates)
        synchronize(device)
    return updates * 20 * 20 / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--updates", type=int, default=100)
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {args.threads} thread(s)"
    vocab = WordVocab(["<unk>", "<eos>", *(f"w{i}" for i in range(9998))])
    model = NoEOS(create_model(make_config("lstm", embed=200, hidden=200, layers=2), vocab).to(device).eval())
    print(f"device: {name}; torch {torch.__version__}")
    print("| what | tokens/s |")
    print("|---|---|")
    print(f"| greedy, 64 prompts | {decode_rate(model, device, 'greedy', 64, 1, args.steps):,.0f} |")
    print(
        f"| beam 8, 8 prompts (tokens of the best hypotheses) | "
        f"{decode_rate(model, device, 'beam', 8, 8, args.steps):,.0f} |"
    )
    rate = train_rate(vocab, device, args.updates, False)
    print(f"| training, LSTM 2x200, batch 20 x bptt 20 | {rate:,.0f} |")
    if device.type == "cuda":
        print(f"| training, bf16 autocast | {train_rate(vocab, device, args.updates, True):,.0f} |")


if __name__ == "__main__":
    main()
