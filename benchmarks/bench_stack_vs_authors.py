"""decodekit's NS/RNS stacks against the authors' code (bdusell/nondeterministic-stack-rnn, tag
``iclr2022``), side by side in one process (issue 18).

The stack alone: identical random action logits [B, n, |Q||Gamma|(2|Q||Gamma| + |Q|)] (both codes
lay the actions out the same way: row (q, x), then push (r, y), replace (r, y), pop r; NS takes a
log-softmax per row, RNS the raw logits) drive n stack updates, the n readings r_1..r_n are
contracted with fixed random weights, and ``backward`` runs to the logits. decodekit: its
``NondeterministicStack`` (frozen bottom, the default) with the action layer replaced by the
identity. Authors: ``NondeterministicStack`` / ``LimitedNondeterministicStack`` from
``src/nsrnn/models/`` (log semiring, torch-semiring-einsum with ``--block-size``), with the logits
turned into actions by their own ``operation_log_scores`` (action layer = identity).

Time: CPU seconds (``time.process_time``, ``torch.set_num_threads(1)``) of forward + backward,
the median of ``--reps`` passes; the two codes alternate pass by pass (which goes first alternates
with the repetition) so that a load change on a shared machine hits both. Every timed pair also
checks that the two readings and logit gradients agree (max abs difference, in the timed dtype).
Peak memory (``--memory``): each (configuration, code) in a fresh child process, one pass, the
growth of the resident-set high-water mark (VmHWM, reset through /proc/self/clear_refs just
before the pass; ru_maxrss growth where that is not possible).

    python benchmarks/bench_stack_vs_authors.py --authors-src /tmp/authors/src       # the docs table
    python benchmarks/bench_stack_vs_authors.py --authors-src SRC --configs ns:2:3:-:12 --reps 1

Needs torch-semiring-einsum (``pip install torch-semiring-einsum``; it imports pynvml) and the
authors' ``src/`` (``git archive iclr2022 | tar -x``). Their files are used unmodified.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace

import torch

DEFAULT_CONFIGS = [
    *("ns:2:3:-:40", "ns:2:3:-:80", "rns:2:3:-:40", "rns:2:3:-:80"),  # marked/unmarked reversal, Dyck
    *("ns:3:3:-:40", "rns:3:3:-:40"),  # padded reversal, hardest CFL
    *("ns:2:3:35:160", "rns:2:3:35:160"),  # the memory-limited variant (the paper: PTB) at the CFL sizes
]


@dataclass(frozen=True)
class Config:
    """kind ``ns``/``rns``, |Q|, |Gamma|, window D (None: unlimited), sequence length n."""

    kind: str
    states: int
    symbols: int
    window: int | None
    length: int

    @staticmethod
    def parse(text: str) -> Config:
        kind, q, s, d, n = text.split(":")
        if kind not in ("ns", "rns"):
            raise ValueError(f"config {text!r}: kind must be ns or rns, got {kind!r}")
        return Config(kind, int(q), int(s), None if d in ("-", "", "0") else int(d), int(n))

    def __str__(self) -> str:
        return f"{self.kind}:{self.states}:{self.symbols}:{self.window or '-'}:{self.length}"

    @property
    def num_logits(self) -> int:
        q, s = self.states, self.symbols
        return q * s * (2 * q * s + q)


def inputs(cfg: Config, batch: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits [B, n, |Q||Gamma|(2|Q||Gamma|+|Q|)], reading weights [B, n, reading size])."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, cfg.length, cfg.num_logits, generator=g, dtype=dtype)
    size = cfg.states * cfg.symbols if cfg.kind == "rns" else cfg.symbols
    return logits, torch.randn(batch, cfg.length, size, generator=g, dtype=dtype)


def decodekit_readings(cfg: Config, logits: torch.Tensor) -> torch.Tensor:
    """r_1..r_n [B, n, reading size] of decodekit's stack driven by ``logits``."""
    from decodekit.models.stack.nondeterministic import NondeterministicStack

    stack = NondeterministicStack(
        cfg.num_logits, cfg.states, cfg.symbols, cfg.kind == "rns", cfg.window, max_length=cfg.length
    )
    stack.actions = torch.nn.Identity()  # the logits are the action layer's output
    state, _ = stack.initial(logits.shape[0], logits)
    readings = []
    for t in range(cfg.length):
        state, r = stack(state, logits[:, t])
        readings.append(r)
    return torch.stack(readings, dim=1)


def authors_readings(cfg: Config, logits: torch.Tensor, block_size: int) -> torch.Tensor:
    """r_1..r_n [B, n, reading size] of the authors' stack driven by ``logits``."""
    from nsrnn.models.limited_nondeterministic_stack import (
        LimitedNondeterministicStack,
        LimitedNondeterministicStackRNN,
    )
    from nsrnn.models.nondeterministic_stack import NondeterministicStack, NondeterministicStackRNN
    from nsrnn.semiring import log

    b, q, s = logits.shape[0], cfg.states, cfg.symbols
    rns = cfg.kind == "rns"
    # The attributes their methods read; the action layer is the identity, as for decodekit.
    rnn = SimpleNamespace(
        operation_layer=torch.nn.Identity(), num_states=q, stack_alphabet_size=s, num_op_rows=q * s,
        num_op_cols=2 * q * s + q, normalize_operations=not rns, window_size=cfg.window,
        device=logits.device, InitialStackState=LimitedNondeterministicStackRNN.InitialStackState,
    )  # fmt: skip
    common = dict(
        num_states=q, stack_alphabet_size=s, sequence_length=cfg.length, normalize_reading=True,
        include_states_in_reading=rns, block_size=block_size, dtype=logits.dtype, device=logits.device,
        semiring=log,
    )  # fmt: skip
    if cfg.window is None:
        stack = NondeterministicStack(batch_size=b, **common)
    else:
        initial = LimitedNondeterministicStackRNN.initial_stack_state(rnn, b, log)
        stack = LimitedNondeterministicStack(window_size=cfg.window, initial_state=initial, **common)
    readings = []
    for t in range(cfg.length):
        stack.update(*NondeterministicStackRNN.operation_log_scores(rnn, logits[:, t]))
        readings.append(stack.reading())
    return torch.stack(readings, dim=1)


def one_pass(code: str, cfg: Config, logits: torch.Tensor, weights: torch.Tensor, block_size: int):
    """Forward + backward; returns (CPU seconds, readings, logit gradient)."""
    x = logits.detach().clone().requires_grad_(True)
    t0 = time.process_time()
    readings = decodekit_readings(cfg, x) if code == "decodekit" else authors_readings(cfg, x, block_size)
    (readings * weights).sum().backward()
    return time.process_time() - t0, readings.detach(), x.grad


def peak_child(code: str, cfg: Config, args: argparse.Namespace) -> dict:
    """One pass in this (fresh) process; growth of the resident-set high-water mark in MB."""
    logits, weights = inputs(cfg, args.batch, getattr(torch, args.dtype))
    warm = Config(cfg.kind, cfg.states, cfg.symbols, cfg.window, 2)
    one_pass(code, warm, logits[:, :2], weights[:, :2], args.block_size)  # imports, lazy init

    def status(key: str) -> float:
        with open("/proc/self/status") as f:
            return next(float(line.split()[1]) for line in f if line.startswith(key + ":")) / 1024

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        before, how = status("VmRSS"), "VmHWM"
    except OSError:
        before, how = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "ru_maxrss"
    seconds, _, _ = one_pass(code, cfg, logits, weights, args.block_size)
    peak = status("VmHWM") if how == "VmHWM" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"peak_mb": peak - before, "how": how, "seconds": seconds}


def measure_peak(code: str, cfg: Config, argv: list[str]) -> dict:
    cmd = [sys.executable, __file__, *argv, "--child", code, str(cfg)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def versions(authors_src: str, commit: str | None) -> dict:
    import torch_semiring_einsum

    if commit is None:  # a git checkout; an extracted archive: pass --authors-commit
        commit = subprocess.run(
            ["git", "-C", authors_src, "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    tse = getattr(torch_semiring_einsum, "__version__", None)
    if tse is None:
        from importlib.metadata import version

        tse = version("torch-semiring-einsum")
    return {"torch": torch.__version__, "torch_semiring_einsum": tse, "authors_git": commit or None}


CODES = ("decodekit", "authors")


def time_alternating(configs: list[Config], args: argparse.Namespace) -> tuple[dict, dict]:
    """CPU seconds of every pass {(config, code): [s]}, max |difference| {config: [readings, grads]}."""
    times: dict = {(c, code): [] for c in configs for code in CODES}
    diffs: dict = {c: [0.0, 0.0] for c in configs}
    start = time.perf_counter()
    for rep in range(args.reps):
        for cfg in configs:
            logits, weights = inputs(cfg, args.batch, getattr(torch, args.dtype), seed=rep)
            results = {}
            for code in CODES if rep % 2 == 0 else CODES[::-1]:
                results[code] = one_pass(code, cfg, logits, weights, args.block_size)
                times[cfg, code].append(results[code][0])
            (_, ra, ga), (_, rb, gb) = results["decodekit"], results["authors"]
            diffs[cfg][0] = max(diffs[cfg][0], (ra - rb).abs().max().item())
            diffs[cfg][1] = max(diffs[cfg][1], (ga - gb).abs().max().item())
            print(
                f"  rep {rep} {cfg}: decodekit {times[cfg, 'decodekit'][-1]:.3f} s, authors "
                f"{times[cfg, 'authors'][-1]:.3f} s ({time.perf_counter() - start:.0f} s)", flush=True,
            )  # fmt: skip
    return times, diffs


def table(configs: list[Config], times: dict, diffs: dict, peaks: dict) -> list[dict]:
    """Print the markdown table; return its rows."""
    rows = []
    print(
        "\n| stack | \\|Q\\| | \\|Γ\\| | D | n | decodekit CPU s | authors CPU s | authors / decodekit "
        "| decodekit peak MB | authors peak MB | max \\|Δ reading\\| | max \\|Δ grad\\| |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in configs:
        dk, au = (statistics.median(times[c, code]) for code in CODES)
        pk = [peaks[c, code]["peak_mb"] if peaks else None for code in CODES]
        rows.append(
            dict(config=str(c), decodekit_s=dk, authors_s=au, ratio=au / dk, decodekit_peak_mb=pk[0],
                 authors_peak_mb=pk[1], max_reading_diff=diffs[c][0], max_grad_diff=diffs[c][1],
                 decodekit_times=times[c, "decodekit"], authors_times=times[c, "authors"],
                 peak_how=peaks[c, "authors"]["how"] if peaks else None)
        )  # fmt: skip
        mem = " | ".join(f"{m:.0f}" if m is not None else "–" for m in pk)
        print(
            f"| {c.kind.upper()} | {c.states} | {c.symbols} | {c.window or '–'} | {c.length} | {dk:.3f} | "
            f"{au:.3f} | **{au / dk:.1f}×** | {mem} | {diffs[c][0]:.1e} | {diffs[c][1]:.1e} |"
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--authors-src", required=True, help="the authors' src/ (tag iclr2022)")
    p.add_argument("--authors-commit", help="recorded with the results (`git rev-list -n1 iclr2022`)")
    p.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="kind:|Q|:|Gamma|:D or -:n")
    p.add_argument("--lengths", nargs="*", type=int, help="replace every config's n by these")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--block-size", type=int, default=32, help="the authors' semiring einsum block size")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    sys.path.insert(0, args.authors_src)
    torch.set_num_threads(1)
    configs = [Config.parse(c) for c in args.configs]
    if args.lengths:
        configs = [Config(c.kind, c.states, c.symbols, c.window, n) for c in configs for n in args.lengths]
        configs = list(dict.fromkeys(configs))
    if args.child:
        print(json.dumps(peak_child(args.child[0], Config.parse(args.child[1]), args)))
        return
    argv = [a for a in sys.argv[1:] if a not in ("--json", args.json)]
    info = versions(args.authors_src, args.authors_commit)
    print(f"batch {args.batch}, {args.dtype}, block size {args.block_size}, 1 thread; {info}", flush=True)
    times, diffs = time_alternating(configs, args)
    peaks = {(c, code): measure_peak(code, c, argv) for c in configs for code in CODES} if args.memory else {}
    rows = table(configs, times, diffs, peaks)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": info, "args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
