"""Forward + backward time per batch and peak memory of the stack RNNs (issue 6).

Each configuration runs in a fresh child process (``--child``) so that its peak resident set
size is its own: we report ``ru_maxrss`` after the timed passes minus ``ru_maxrss`` before them
(model and inputs built, nothing run) -- i.e. the peak extra CPU memory of one training pass.
Time: CPU seconds (``time.process_time``, one thread: robust to other processes sharing the cores),
the fastest of ``--reps`` passes (forward, then ``backward`` of the summed logits). The time
ratios of the memory-limited variant come from one process running the lengths interleaved.

    python benchmarks/bench_stack_speed.py                       # the table of docs/benchmarks.md
    python benchmarks/bench_stack_speed.py --lengths 40 --limited-lengths 40 80 --reps 1
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _model(stack: str, window: int | None, max_length: int, args: argparse.Namespace):
    import torch

    from decodekit.models.stack import StackLSTM, StackLSTMConfig
    from decodekit.vocab import CharVocab

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab = CharVocab(["<eos>", "0", "1", "#"], unk=None)
    stack, _, recompute = stack.partition("+")
    config = StackLSTMConfig(
        stack=stack, recompute=recompute == "recompute", embed=args.hidden, hidden=args.hidden,
        stack_states=args.states, stack_symbols=args.symbols, window=window, stack_embed=args.hidden,
        max_length=max(max_length, 512), bottom=args.bottom,
    )  # fmt: skip
    return StackLSTM(config, vocab)


def _pass(model, x) -> tuple[float, float]:
    """One forward + backward; returns CPU seconds of each (process time: robust to other users)."""
    model.zero_grad()
    t0 = time.process_time()
    logits, _ = model(x)
    t1 = time.process_time()
    logits.sum().backward()
    return t1 - t0, time.process_time() - t1


def child(stack: str, window: int | None, lengths: list[int], args: argparse.Namespace) -> dict:
    """Interleaved passes over ``lengths`` (fastest of each); peak RSS growth (meaningful for one length)."""
    import torch

    model = _model(stack, window, max(lengths), args)
    xs = {n: torch.randint(0, 4, (args.batch, n)) for n in lengths}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best: dict = {}
    start = time.perf_counter()
    for _ in range(args.reps):
        for n in lengths:
            f, b = _pass(model, xs[n])
            if n not in best or f + b < sum(best[n]):
                best[n] = (f, b)
        if time.perf_counter() - start > args.max_seconds:
            break
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"times": {n: best[n] for n in lengths}, "peak_mb": (peak - before) / 1024}


def run(stack: str, window: int | None, lengths: list[int], argv: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--child", stack, str(window or 0), ",".join(map(str, lengths)), *argv]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stacks", nargs="+", default=["ns", "rns"])
    p.add_argument("--lengths", nargs="*", type=int, default=[40, 80, 160], help="unlimited NS/RNS")
    p.add_argument("--window", type=int, default=35, help="D of the memory-limited runs")
    p.add_argument("--limited-lengths", nargs="*", type=int, default=[40, 80, 160, 320])
    p.add_argument("--others", nargs="*", default=["superposition", "stratification"], help="other stacks")
    p.add_argument("--recompute-lengths", nargs="*", type=int, default=[80, 160],
                   help="unlimited NS/RNS with StackLSTMConfig.recompute (checkpointing)")  # fmt: skip
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--states", type=int, default=2)
    p.add_argument("--symbols", type=int, default=3)
    p.add_argument("--hidden", type=int, default=20)
    p.add_argument(
        "--bottom", choices=["frozen", "replaceable"], default="frozen", help="NS/RNS stack bottom"
    )
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--max-seconds", type=float, default=60.0, help="stop repeating after this")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args, _ = p.parse_known_args()
    if args.child:
        stack, window = args.child[0], int(args.child[1]) or None
        print(json.dumps(child(stack, window, [int(n) for n in args.child[2].split(",")], args)))
        return
    argv = sys.argv[1:]
    rows = [(s, None, n) for s in args.stacks for n in args.lengths]
    rows += [(s, args.window, n) for s in args.stacks for n in args.limited_lengths]
    rows += [(s, None, n) for s in args.others for n in args.lengths]
    rows += [(f"{s}+recompute", None, n) for s in args.stacks for n in args.recompute_lengths]
    print(f"batch {args.batch}, |Q|={args.states}, |Gamma|={args.symbols}, hidden {args.hidden}, "
          f"bottom {args.bottom}, {args.threads} thread(s); CPU s, best of {args.reps}; "
          f"peak MB = RSS growth")  # fmt: skip
    print(f"{'stack':<20}{'D':>5}{'n':>6}{'fwd s':>9}{'bwd s':>9}{'total s':>9}{'peak MB':>10}")
    for stack, window, n in rows:
        r = run(stack, window, [n], argv)
        f, b = r["times"][str(n)]
        print(
            f"{stack:<15}{window or '-':>5}{n:>6}{f:>9.3f}{b:>9.3f}{f + b:>9.3f}{r['peak_mb']:>10.1f}",
            flush=True,
        )
    lens = args.limited_lengths
    if len(lens) < 2:
        return
    print(f"memory-limited D={args.window}, lengths interleaved in one process (CPU time ratios):")
    for stack in args.stacks:
        times = run(stack, args.window, lens, argv)["times"]
        total = {int(n): sum(v) for n, v in times.items()}
        ratios = ", ".join(f"t({b})/t({a}) = {total[b] / total[a]:.2f}" for a, b in zip(lens, lens[1:]))
        print(f"  {stack}: {ratios}", flush=True)


if __name__ == "__main__":
    main()
