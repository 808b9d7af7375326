"""Context-free language modelling (DuSell & Chiang 2020, 2022): train an LSTM and stack LSTMs on
the PCFG tasks and report cross-entropy minus the exact lower bound (nats/symbol, EOS counted).

Defaults follow the paper's protocol (DuSell & Chiang 2022; the authors' code, tag ``iclr2022``,
as summarised in ../shared/references/README.md):

* data: 10,000 training strings in batches of 10, each batch one length drawn uniformly from the
  valid lengths in ``--train-lengths`` (40-80); 1,000 validation strings the same way (fresh per
  run, from the run's seed); test: ``--test-per-length`` (100) strings of every valid length in
  ``--test-lengths`` (40-100; every ``--test-step``-th), seed 0, lower bound with the length known;
* inputs (``--inputs paper``): w_1 is predicted from the zero initial state (logits = the output
  layer's bias), the model reads w_1..w_l and predicts w_2..w_l EOS; ``--inputs eos`` reads
  ``<eos> w`` instead (one more LSTM step and PDA transition, decodekit's language-model path);
* initialisation (``--init paper``): output layer Xavier-uniform with a zero bias, every other
  parameter U(-0.1, 0.1); ``--init uniform``: everything U(-0.1, 0.1);
* loss (``--loss sequence``): NLL summed over each sequence, averaged over the batch; Adam, gradient
  norm clipped at 5; validation after every epoch; the learning rate as the authors' code sets
  it (``ReduceLROnPlateau(mode="min", patience=5, factor=0.9)`` on the validation perplexity:
  x ``--decay`` once more than ``--patience`` epochs have not improved it by a relative 1e-4),
  early stop after ``--stop-patience`` (10) epochs without a strictly better one (their
  ``UpdatesWithoutImprovement``), at most ``--epochs`` (200); the best-validation model is tested;
* search: every ``--lr`` x ``--restarts`` seeds (the paper: 0.01 0.005 0.001 0.0005 x 5); the run with
  the lowest validation difference is reported per task and model (``best`` lines).

``--budget`` (seconds of ``--clock``, CPU time by default) is an extra cap per run; when it stops a
run mid-epoch the run is validated once more and the best model so far is tested. ``--eval-every``
adds validations inside epochs for the learning curve only (they neither select the model nor
drive the schedule). ``--log`` appends one JSON line per validation as the run goes.

    python benchmarks/formal_languages.py --tasks marked-reversal --models rns --device cuda \\
        --lr 0.01 0.005 0.001 0.0005 --restarts 5 --out runs/paper.jsonl          # the paper's search
    python benchmarks/formal_languages.py --tasks marked-reversal --models lstm rns --budget 600
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time

import numpy as np
import torch

from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.models.stack import StackLSTM, StackLSTMConfig
from decodekit.tasks import make_task

PDA_SIZES = {"padded-reversal": (3, 3), "hardest-cfl": (3, 3)}  # others: |Q| = 2, |Gamma| = 3


def build(kind: str, task, args: argparse.Namespace) -> torch.nn.Module:
    if kind == "lstm":
        model = LSTMLM(LSTMConfig(embed=args.embed, hidden=args.hidden, layers=1, init_range=0.1), task.vocab)
    else:
        q, s = PDA_SIZES.get(task.name, (2, 3))
        config = StackLSTMConfig(
            stack=kind, embed=args.embed, hidden=args.hidden, stack_states=q, stack_symbols=s,
            stack_embed=args.stack_embed, window=args.window, max_length=task.max_length + 1, init_range=0.1,
            bottom=args.bottom,
        )  # fmt: skip
        model = StackLSTM(config, task.vocab)
    if (
        args.init == "paper"
    ):  # the authors' code: Xavier-uniform output layer, zero bias, the rest U(-0.1, 0.1)
        torch.nn.init.xavier_uniform_(model.head.weight)
        torch.nn.init.zeros_(model.head.bias)
    return model


def sequence_logits(model: torch.nn.Module, w: torch.Tensor, inputs: str) -> torch.Tensor:
    """Logits [B, l + 1, V] of w_1..w_l EOS. ``paper``: w_1 from h_0 = 0 (the output layer applied
    to the zero initial state), then read w_1..w_l; ``eos``: read <eos> w_1..w_l."""
    if inputs == "eos":
        eos = torch.zeros(w.shape[0], 1, dtype=torch.long, device=w.device)
        return model(torch.cat([eos, w], 1))[0]
    head = model.head
    first = head(head.weight.new_zeros(w.shape[0], head.in_features))
    rest, _ = model(w)
    return torch.cat([first[:, None], rest], 1)


def nll(model: torch.nn.Module, batch: np.ndarray, args: argparse.Namespace) -> tuple[torch.Tensor, int]:
    """Summed NLL (nats) of w EOS, and the number of scored symbols. batch [B, l] of terminal ids."""
    w = torch.from_numpy(batch).to(args.device) + 1  # token id = terminal id + 1; 0 = <eos>
    logits = sequence_logits(model, w, args.inputs)
    targets = torch.cat([w, torch.zeros_like(w[:, :1])], 1)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum")
    return loss, targets.numel()


@torch.no_grad()
def cross_entropy(model: torch.nn.Module, batches: list[np.ndarray], args: argparse.Namespace) -> float:
    model.eval()
    total, count = 0.0, 0
    for b in batches:
        loss, n = nll(model, b, args)
        total, count = total + float(loss), count + n
    model.train()
    return total / count


class Clock:
    def __init__(self, kind: str) -> None:
        self.now = time.process_time if kind == "cpu" else time.perf_counter
        self.start = self.now()

    def elapsed(self) -> float:
        return self.now() - self.start


def train(model, train_batches, valid, valid_lb, lr, args, rng, log) -> dict:
    """The paper's protocol (see the module docstring); ``log(dict)`` records each validation."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    clock, updates, epoch = Clock(args.clock), 0, 0
    best = {"diff": float("inf"), "state": copy.deepcopy(model.state_dict()), "updates": 0, "epoch": 0}
    bad, history, stop = 0, [], None
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode="min", patience=args.patience, factor=args.decay
    )  # the authors' schedule (utils/train_util.py), stepped on the validation perplexity
    budget = float("inf") if args.budget is None else args.budget

    def validate(end_of_epoch: bool, train_loss: float, select: bool = True) -> bool:
        diff = cross_entropy(model, valid, args) - valid_lb
        if end_of_epoch:
            plateau.step(math.exp(diff + valid_lb))  # the validation perplexity, as their code
        improved = select and diff < best["diff"]
        if improved:
            best.update(diff=diff, state=copy.deepcopy(model.state_dict()), updates=updates, epoch=epoch)
        point = {"epoch": epoch, "updates": updates, "end_of_epoch": end_of_epoch, "lr": lr,
                 "train_nll_per_symbol": round(train_loss, 4), "valid_diff": round(diff, 4),
                 "seconds": round(clock.elapsed(), 1)}  # fmt: skip
        history.append(point)
        log(point)
        return improved

    model.train()
    while epoch < args.epochs:
        epoch += 1
        total, symbols = 0.0, 0
        for i in rng.permutation(len(train_batches)):
            batch = train_batches[i]
            loss, n = nll(model, batch, args)
            opt.zero_grad()
            (loss / (batch.shape[0] if args.loss == "sequence" else n)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            updates, total, symbols = updates + 1, total + loss.item(), symbols + n
            if clock.elapsed() >= budget:
                stop = "budget"
                break
            if args.eval_every and updates % args.eval_every == 0 and updates % len(train_batches):
                validate(False, total / symbols, select=False)  # the curve only
        if stop:
            validate(False, total / symbols)
            break
        improved = validate(True, total / symbols)
        lr = opt.param_groups[0]["lr"]
        bad = 0 if improved else bad + 1
        if bad >= args.stop_patience:
            stop = "early stopping"
            break
    model.load_state_dict(best["state"])
    return {"updates": updates, "epochs": epoch, "seconds": round(clock.elapsed(), 1), "clock": args.clock,
            "stopped_by": stop or "epochs", "best_valid_diff": round(best["diff"], 4),
            "best_at_update": best["updates"], "best_at_epoch": best["epoch"], "final_lr": lr,
            "history": [(h["updates"], h["valid_diff"]) for h in history]}  # fmt: skip


def test(model, task, args) -> dict:
    """Cross-entropy difference per test length (100 strings each by default, seed 0, p(l) = 1)."""
    test_rng, per_length = np.random.default_rng(0), {}
    for n in task.valid_lengths(*args.test_lengths)[:: args.test_step]:
        strings = [task.sampler.sample(n, test_rng) for _ in range(args.test_per_length)]
        batch = np.array(strings, dtype=np.int64).reshape(len(strings), n)
        pieces = [batch[i : i + args.test_batch] for i in range(0, len(batch), args.test_batch)]
        per_length[n] = round(cross_entropy(model, pieces, args) - task.lower_bound(strings, None), 4)
    return per_length


def run(task_name: str, kind: str, lr: float, seed: int, args: argparse.Namespace) -> dict:
    task = make_task(task_name, max_length=max(args.test_lengths[1], args.train_lengths[1]))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    lo, hi = args.train_lengths
    train_batches = task.sample_batches(args.train_strings, args.batch, lo, hi, rng)
    valid = task.sample_batches(args.valid_strings, args.batch, lo, hi, rng)
    valid_lb = task.lower_bound([list(r) for b in valid for r in b], len(task.valid_lengths(lo, hi)))
    model = build(kind, task, args).to(args.device)

    def log(point: dict) -> None:
        if args.log:
            with open(args.log, "a", encoding="utf-8") as f:
                f.write(
                    json.dumps({"task": task_name, "model": kind, "lr": lr, "seed": seed, **point}) + "\n"
                )
        if args.verbose:
            print(f"  {task_name} {kind} lr={lr} seed={seed}: {point}", flush=True)

    result = train(model, train_batches, valid, valid_lb, lr, args, rng, log)
    per_length = test(model, task, args)
    longer = [v for n, v in per_length.items() if n > hi]
    return {"task": task_name, "model": kind, "lr": lr, "seed": seed,
            "params": sum(p.numel() for p in model.parameters()), "valid_lower_bound": round(valid_lb, 4),
            **result, "test_diff_by_length": per_length,
            "test_diff_mean": round(float(np.mean(list(per_length.values()))), 4) if per_length else None,
            "test_diff_longer": round(float(np.mean(longer)), 4) if longer else None}  # fmt: skip


def parser() -> argparse.ArgumentParser:
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
    p.add_argument("--test-batch", type=int, default=100)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--embed", type=int, default=20)
    p.add_argument("--hidden", type=int, default=20)
    p.add_argument("--stack-embed", type=int, default=20, help="superposition/stratification vector size")
    p.add_argument("--window", type=int, default=None, help="NS/RNS memory limit D (default unlimited)")
    p.add_argument(
        "--bottom", choices=["frozen", "replaceable"], default="frozen", help="NS/RNS stack bottom"
    )
    p.add_argument("--inputs", choices=["paper", "eos"], default="paper")
    p.add_argument("--init", choices=["paper", "uniform"], default="paper")
    p.add_argument("--loss", choices=["sequence", "symbol"], default="sequence",
                   help="sequence: summed per sequence, batch mean; symbol: mean per symbol")  # fmt: skip
    p.add_argument("--lr", nargs="+", type=float, default=[0.005], help="Adam learning rate(s) to search")
    p.add_argument("--restarts", type=int, default=1, help="seeds per learning rate: --seed, --seed + 1, ...")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clip", type=float, default=5.0)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--decay", type=float, default=0.9, help="learning-rate factor on a plateau")
    p.add_argument("--patience", type=int, default=5, help="epochs without improvement before a decay")
    p.add_argument("--stop-patience", type=int, default=10, help="epochs without improvement before stopping")
    p.add_argument("--budget", type=float, default=None, help="extra cap: seconds of --clock per run")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--eval-every", type=int, default=0, help="extra validations every k updates (curve only)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="append one JSON line per run here")
    p.add_argument("--log", default=None, help="append one JSON line per validation here")
    p.add_argument("--verbose", action="store_true", help="print every validation")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"{'task':<20}{'model':<16}{'lr':>8}{'seed':>5}{'updates':>8}{'s':>8}{'valid diff':>11}"
          f"{'test diff':>10}{'l>train':>9}")  # fmt: skip
    for task_name in args.tasks:
        for kind in args.models:
            results = []
            for lr in args.lr:
                for seed in range(args.seed, args.seed + args.restarts):
                    r = run(task_name, kind, lr, seed, args)
                    results.append(r)
                    longer = r["test_diff_longer"]
                    print(f"{task_name:<20}{kind:<16}{lr:>8g}{seed:>5}{r['updates']:>8}{r['seconds']:>8}"
                          f"{r['best_valid_diff']:>11.4f}{r['test_diff_mean']:>10}"
                          f"{longer if longer is not None else '-':>9}", flush=True)  # fmt: skip
                    if args.out:
                        with open(args.out, "a", encoding="utf-8") as f:
                            f.write(json.dumps({**r, "args": vars(args)}) + "\n")
            if len(results) > 1:
                b = min(results, key=lambda r: r["best_valid_diff"])
                print(f"best {task_name} {kind}: lr {b['lr']:g} seed {b['seed']}, "
                      f"valid {b['best_valid_diff']:.4f}, test {b['test_diff_mean']} "
                      f"(longer {b['test_diff_longer']})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
