"""Context-free language modelling (DuSell & Chiang 2020, 2022) at small scale: train an LSTM and
stack LSTMs on PCFG tasks and report cross-entropy minus the exact lower bound (nats/symbol).

Each string w gets EOS appended; the model reads <eos> w and predicts w <eos> (every symbol and
the EOS are scored). Training batches share one length drawn uniformly from the valid lengths in
``--train-lengths``; validation likewise (lower bound with the uniform length prior); test: for
each valid length in ``--test-lengths`` (every ``--test-step``-th), ``--test-per-length`` strings,
lower bound with the length known (p(l) = 1), as in the paper's per-length test.
Adam, gradient clipping 5, U(-0.1, 0.1) init; the model with the best validation difference is
tested. Training stops at ``--budget`` CPU seconds (``time.process_time``) or ``--epochs``.

    python benchmarks/formal_languages.py --tasks marked-reversal --models lstm rns --budget 240
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch

from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.models.stack import StackLSTM, StackLSTMConfig
from decodekit.tasks import make_task

PDA_SIZES = {"padded-reversal": (3, 3), "hardest-cfl": (3, 3)}  # others: |Q| = 2, |Gamma| = 3


def build(kind: str, task, args: argparse.Namespace) -> torch.nn.Module:
    if kind == "lstm":
        config = LSTMConfig(embed=args.embed, hidden=args.hidden, layers=1, init_range=0.1)
        return LSTMLM(config, task.vocab)
    q, s = PDA_SIZES.get(task.name, (2, 3))
    config = StackLSTMConfig(
        stack=kind, embed=args.embed, hidden=args.hidden, stack_states=q, stack_symbols=s,
        stack_embed=args.stack_embed, window=args.window, max_length=task.max_length + 1, init_range=0.1,
    )  # fmt: skip
    return StackLSTM(config, task.vocab)


def nll(model: torch.nn.Module, batch: np.ndarray) -> tuple[torch.Tensor, int]:
    """Summed NLL (nats) of w <eos> given <eos> w, and the number of scored symbols. batch [B, l]."""
    w = torch.from_numpy(batch) + 1  # token id = terminal id + 1; 0 = <eos>
    eos = torch.zeros(w.shape[0], 1, dtype=torch.long)
    logits, _ = model(torch.cat([eos, w], 1))
    targets = torch.cat([w, eos], 1)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum")
    return loss, targets.numel()


@torch.no_grad()
def cross_entropy(model: torch.nn.Module, batches: list[np.ndarray]) -> float:
    total, count = 0.0, 0
    for b in batches:
        loss, n = nll(model, b)
        total, count = total + float(loss), count + n
    return total / count


def train(model, train_batches, valid, valid_lb, args, rng) -> dict:
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    start, updates, epoch = time.process_time(), 0, 0
    best = {"diff": float("inf"), "state": copy.deepcopy(model.state_dict()), "updates": 0}
    history = []
    while epoch < args.epochs and time.process_time() - start < args.budget:
        epoch += 1
        for i in rng.permutation(len(train_batches)):
            loss, n = nll(model, train_batches[i])
            opt.zero_grad()
            (loss / n).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            updates += 1
            out_of_time = time.process_time() - start >= args.budget
            if updates % args.eval_every == 0 or out_of_time:
                diff = cross_entropy(model, valid) - valid_lb
                history.append((updates, round(diff, 4)))
                if diff < best["diff"]:
                    best = {"diff": diff, "state": copy.deepcopy(model.state_dict()), "updates": updates}
            if out_of_time:
                break
    model.load_state_dict(best["state"])
    cpu = round(time.process_time() - start, 1)
    return {"updates": updates, "epochs": epoch, "cpu_s": cpu, "best_valid_diff": round(best["diff"], 4),
            "best_at_update": best["updates"], "history": history}  # fmt: skip


def run(task_name: str, kind: str, args: argparse.Namespace) -> dict:
    task = make_task(task_name, max_length=args.test_lengths[1])
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    lo, hi = args.train_lengths
    train_batches = task.sample_batches(args.train_strings, args.batch, lo, hi, rng)
    valid = task.sample_batches(args.valid_strings, args.batch, lo, hi, rng)
    valid_lb = task.lower_bound([list(r) for b in valid for r in b], len(task.valid_lengths(lo, hi)))
    model = build(kind, task, args)
    result = train(model, train_batches, valid, valid_lb, args, rng)
    test_rng = np.random.default_rng(0)
    per_length = {}
    for n in task.valid_lengths(*args.test_lengths)[:: args.test_step]:
        strings = [task.sampler.sample(n, test_rng) for _ in range(args.test_per_length)]
        batch = np.array(strings, dtype=np.int64).reshape(len(strings), n)
        per_length[n] = round(cross_entropy(model, [batch]) - task.lower_bound(strings, None), 4)
    longer = [v for n, v in per_length.items() if n > hi]
    return {"task": task_name, "model": kind, "params": sum(p.numel() for p in model.parameters()),
            "valid_lower_bound": round(valid_lb, 4), **result, "test_diff_by_length": per_length,
            "test_diff_longer": round(float(np.mean(longer)), 4) if longer else None}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["marked-reversal", "unmarked-reversal"])
    p.add_argument(
        "--models", nargs="+", default=["lstm", "rns"], help="lstm superposition stratification ns rns"
    )
    p.add_argument("--train-strings", type=int, default=10000)
    p.add_argument("--valid-strings", type=int, default=1000)
    p.add_argument("--train-lengths", nargs=2, type=int, default=[40, 80])
    p.add_argument("--test-lengths", nargs=2, type=int, default=[40, 100])
    p.add_argument("--test-step", type=int, default=1, help="test every k-th valid length")
    p.add_argument("--test-per-length", type=int, default=100)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--embed", type=int, default=20)
    p.add_argument("--hidden", type=int, default=20)
    p.add_argument("--stack-embed", type=int, default=20, help="superposition/stratification vector size")
    p.add_argument("--window", type=int, default=None, help="NS/RNS memory limit D (default unlimited)")
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--budget", type=float, default=240.0, help="CPU seconds of training per model")
    p.add_argument("--eval-every", type=int, default=200, help="updates between validations")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="append JSON lines here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'task':<20}{'model':<16}{'updates':>8}{'cpu s':>8}{'valid diff':>11}{'test diff l>train':>19}")
    for task_name in args.tasks:
        for kind in args.models:
            r = run(task_name, kind, args)
            test = r["test_diff_longer"]
            print(f"{task_name:<20}{kind:<16}{r['updates']:>8}{r['cpu_s']:>8}{r['best_valid_diff']:>11.4f}"
                  f"{test if test is not None else '-':>19}", flush=True)  # fmt: skip
            if args.out:
                with open(args.out, "a", encoding="utf-8") as f:
                    f.write(json.dumps({**r, "args": vars(args)}) + "\n")


if __name__ == "__main__":
    main()
