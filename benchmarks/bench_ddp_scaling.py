"""Training throughput scaling with DistributedDataParallel on CPU (issue 8): 1 process of one
thread against N processes of one thread each (gloo), same global batch.

LSTM 2x200 (Zaremba small, 10k vocabulary), PTB, global batch 20 (N processes: 20/N streams
each), bptt 20, SGD, clip 5. Each measurement starts the processes the way torchrun does
(``torch.multiprocessing`` with ``RANK`` / ``WORLD_SIZE`` / ``MASTER_*`` set, gloo), trains
``--warmup`` updates untimed, then times ``decodekit.training.train`` for ``--updates`` updates
from a barrier to the end of the call. The configurations alternate ``--rounds`` times so that
load from other users of the machine affects them alike; the load average is printed beside.

    python benchmarks/bench_ddp_scaling.py --data ../shared/data --updates 100 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from decodekit.data import load_corpus
from decodekit.models.registry import create_model, make_config
from decodekit.training import TrainConfig, train
from decodekit.training.ddp import DataParallel


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(corpus, config: TrainConfig, updates: int, parallel) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all its threads) of ``updates`` updates."""
    torch.manual_seed(0)
    model = create_model(make_config("lstm", layers=2, hidden=200, embed=200), corpus.vocab)
    if parallel is not None:
        dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    train(model, corpus, config, progress=False, stop_after_updates=updates, parallel=parallel)
    return time.perf_counter() - t0, time.process_time() - c0


def _worker(rank: int, size: int, port: int, args: argparse.Namespace, results) -> None:
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "RANK": rank, "LOCAL_RANK": rank}
    os.environ.update({k: str(v) for k, v in {**env, "WORLD_SIZE": size}.items()})
    torch.set_num_threads(1)
    corpus = load_corpus(Path(args.data) / "ptb")
    parallel = DataParallel.from_env(torch.device("cpu"))[0] if size > 1 else None
    config = TrainConfig(batch_size=args.batch_size, bptt=args.bptt, lr=1.0, clip=5.0)
    _run(corpus, config, args.warmup, parallel)
    wall, cpu = _run(corpus, config, args.updates, parallel)
    tokens = args.updates * config.batch_size * config.bptt
    results.put((tokens / wall, tokens / cpu))
    if parallel is not None:
        parallel.close()


def measure(size: int, args: argparse.Namespace) -> tuple[float, float]:
    """``size`` processes (1: plain single-process training): (global tokens per wall second,
    global tokens per CPU second of the busiest process). The second is what the run would reach
    if every process had a core of its own and never waited for the others: on a loaded machine
    it separates the cost of the data-parallel work itself from the lack of free cores."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    wargs = (size, _free_port(), args, results)
    mp.start_processes(_worker, args=wargs, nprocs=size, join=True, start_method="spawn")
    per_rank = [results.get() for _ in range(size)]
    return min(w for w, _ in per_rank), min(c for _, c in per_rank)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--updates", type=int, default=100, help="timed updates per measurement")
    ap.add_argument("--warmup", type=int, default=10, help="untimed updates before")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=20, help="global batch (parallel streams)")
    ap.add_argument("--bptt", type=int, default=20)
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2], help="world sizes to compare")
    args = ap.parse_args()
    runs: dict[int, list[tuple[float, float]]] = {n: [] for n in args.procs}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for n in args.procs:
            runs[n].append(measure(n, args))
            loads.append(os.getloadavg()[0])
    base = [statistics.median(r[i] for r in runs[args.procs[0]]) for i in (0, 1)]
    print(
        f"LSTM 2x200, PTB, global batch {args.batch_size}, bptt {args.bptt}, 1 thread per process, gloo; "
        f"{args.updates} timed updates x {args.rounds} rounds; {os.cpu_count()} CPUs; "
        f"1-min load average during the runs: {min(loads):.2f} .. {max(loads):.2f}"
    )
    head = ("processes", 10), ("tokens/s", 10), ("speed-up", 10), ("tokens/CPU-s", 14), ("speed-up", 10)
    print("".join(f"{name:>{w}}" for name, w in head) + "   rounds (wall)")
    for n, values in runs.items():
        wall, cpu = (statistics.median(v[i] for v in values) for i in (0, 1))
        rounds = [round(v[0]) for v in values]
        print(f"{n:>10}{wall:>10.0f}{wall / base[0]:>10.2f}{cpu:>14.0f}{cpu / base[1]:>10.2f}   {rounds}")
    print("tokens/s: global training tokens per wall second (median over rounds); tokens/CPU-s: per")
    print("CPU second of the busiest process (all its threads), the rate with a free core per process")


if __name__ == "__main__":
    main()
