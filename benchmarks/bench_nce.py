"""Training-step throughput: NCE (k noise samples) vs the full softmax, side by side.

The trainer's own update (decodekit.training.loop: features, loss, backward, clipping, SGD step)
on an LSTM LM (default 2 x 200, Zaremba's "small"), batch 20 x bptt 20, for several vocabulary
sizes. V = 10k uses the real PTB training stream when ``--data`` has it (else a synthetic Zipf
stream); larger V use synthetic Zipf(1) streams (timing only). Softmax and NCE updates alternate
in blocks of ``--block`` steps so that load on the shared CPU hits both alike; the table shows
the median time per update and tokens/s (B*T / time).

    python benchmarks/bench_nce.py --threads 1 --steps 30
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from decodekit.data import Corpus, load_data
from decodekit.models.registry import create_model, make_config
from decodekit.training import TrainConfig
from decodekit.training.allocator import reuse_freed_memory
from decodekit.training.loop import _Run
from decodekit.training.losses import softmax_cross_entropy
from decodekit.training.noise import NoiseDistribution
from decodekit.training.sampled import NCELoss
from decodekit.vocab import WordVocab


def zipf_stream(vocab_size: int, length: int, seed: int) -> torch.Tensor:
    """[length] ids with P(rank r) proportional to 1/r (r = 1..V)."""
    g = torch.Generator().manual_seed(seed)
    p = 1.0 / torch.arange(1, vocab_size + 1, dtype=torch.float64)
    return torch.multinomial(p / p.sum(), length, replacement=True, generator=g)


def corpus_for(vocab_size: int, data: Path, tokens: int) -> tuple[Corpus, torch.Tensor, str]:
    """The first ``tokens`` training tokens and the noise unigram^alpha of the whole training
    stream (PTB) or of the Zipf law itself (synthetic)."""
    ptb = data / "ptb"
    if vocab_size == 10_000 and (ptb / "ptb.train.txt").is_file():
        c = load_data(str(ptb))
        counts = torch.bincount(c.train, minlength=len(c.vocab))
        return Corpus(c.vocab, c.train[:tokens], c.valid[:1000], c.test[:1000]), counts, "PTB"
    vocab = WordVocab([f"w{i}" for i in range(vocab_size - 2)] + ["<unk>", "<eos>"])
    counts = 1.0 / torch.arange(1, vocab_size + 1, dtype=torch.float64)
    corpus = Corpus(vocab, zipf_stream(vocab_size, tokens, 0), zipf_stream(vocab_size, 1000, 1), None)
    return corpus, counts, "zipf"


def time_updates(run: _Run, batches: list, n: int) -> list[float]:
    times = []
    for i in range(n):
        x, y = batches[i % len(batches)]
        t0 = time.perf_counter()
        run.update(x, y, 1.0)
        times.append(time.perf_counter() - t0)
    return times


def bench_vocab(args: argparse.Namespace, vocab_size: int) -> dict:
    b, t = args.batch_size, args.bptt
    corpus, counts, source = corpus_for(
        vocab_size, Path(args.data), b * t * (args.steps + args.warmup + 1) + 1
    )
    noise = NoiseDistribution.from_counts(counts, args.alpha)
    config = TrainConfig(batch_size=b, bptt=t, lr=1.0, clip=5.0, noise_samples=args.k, noise_alpha=args.alpha)
    runs, losses = {}, {}
    for name in ("softmax", "nce"):
        torch.manual_seed(0)
        model = create_model(
            make_config("lstm", layers=args.layers, hidden=args.hidden, embed=args.hidden), corpus.vocab
        )
        losses[name] = softmax_cross_entropy if name == "softmax" else NCELoss(noise, args.k)
        runs[name] = _Run(model, corpus, config, None, losses[name])
        runs[name].hidden = model.initial_state(b)
    data = runs["softmax"].data  # [B, L]
    batches = [(data[:, i : i + t], data[:, i + 1 : i + 1 + t]) for i in range(0, data.shape[1] - t - 1, t)]
    times: dict[str, list[float]] = {"softmax": [], "nce": []}
    for name in times:  # warm-up
        time_updates(runs[name], batches, args.warmup)
    done = 0
    while done < args.steps:
        n = min(args.block, args.steps - done)
        for name in times:
            times[name] += time_updates(runs[name], batches, n)
        done += n
    med = {name: statistics.median(v) for name, v in times.items()}
    return {
        "V": vocab_size,
        "source": source,
        "softmax_ms": 1e3 * med["softmax"],
        "nce_ms": 1e3 * med["nce"],
        "softmax_tok_s": b * t / med["softmax"],
        "nce_tok_s": b * t / med["nce"],
        "speedup": med["softmax"] / med["nce"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
    p.add_argument("--vocab-sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    p.add_argument("--k", type=int, default=600, help="NCE noise samples")
    p.add_argument("--alpha", type=float, default=1.0, help="noise = unigram^alpha")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=20)
    p.add_argument("--bptt", type=int, default=20)
    p.add_argument("--steps", type=int, default=30, help="timed updates per loss and vocabulary")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--block", type=int, default=5, help="updates per alternation block")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    reuse_freed_memory()  # as train() does on CPU
    torch.set_num_threads(args.threads)
    print(
        f"LSTM {args.layers}x{args.hidden}, batch {args.batch_size} x bptt {args.bptt}, NCE k={args.k}, "
        f"alpha={args.alpha}, {args.threads} thread(s), {args.steps} timed updates each (median)"
    )
    print(
        f"{'V':>7} {'data':>5} {'softmax ms':>11} {'NCE ms':>8} "
        f"{'softmax tok/s':>14} {'NCE tok/s':>10} {'ratio':>6}"
    )
    for v in args.vocab_sizes:
        r = bench_vocab(args, v)
        print(
            f"{r['V']:>7} {r['source']:>5} {r['softmax_ms']:>11.1f} {r['nce_ms']:>8.1f} "
            f"{r['softmax_tok_s']:>14.0f} {r['nce_tok_s']:>10.0f} {r['speedup']:>5.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
