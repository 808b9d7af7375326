"""Pictures of training runs: perplexity and learning rate per epoch from ``metrics.jsonl``.

matplotlib is an optional extra (``pip install 'decodekit[plot]'``); nothing here imports torch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from decodekit.errors import DecodekitError
from decodekit.util.files import atomic_write, writable_target

METRICS = "metrics.jsonl"  # the file decodekit.training.rundir writes (one JSON object per epoch)
FORMATS = (".png", ".svg", ".pdf")


@dataclass(frozen=True)
class RunCurves:
    """One run's per-epoch figures (lists of equal length), and its test perplexity if measured."""

    name: str
    epochs: list[int]
    train_ppl: list[float]
    valid_ppl: list[float]
    lr: list[float]
    test_ppl: float | None


def read_run(run_dir: str | Path) -> RunCurves:
    """The curves of one ``decodekit train`` run directory (DecodekitError if it has none)."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        raise DecodekitError(f"{path} not found: give the directory a training run wrote")
    epochs, test = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DecodekitError(f"{path}:{number}: not JSON ({e.msg})") from None
        if "epoch" in record:
            epochs.append(record)
        elif record.get("event") == "test":
            test = record.get("test_ppl")
    if not epochs:
        raise DecodekitError(f"{path} has no finished epoch yet")

    def column(key: str) -> list[float]:
        return [float(r.get(key, math.nan)) for r in epochs]

    return RunCurves(
        name=Path(run_dir).resolve().name,
        epochs=[int(r["epoch"]) for r in epochs],
        train_ppl=column("train_ppl"),
        valid_ppl=column("valid_ppl"),
        lr=column("lr"),
        test_ppl=test,
    )


def plot_runs(run_dirs: list[str | Path], out: str | Path, *, title: str | None = None) -> Path:
    """Draw the runs on one figure and write it to ``out`` (.png, .svg or .pdf).

    Top panel: training (dashed) and validation (solid) perplexity per epoch, log scale, one
    colour per run, the test perplexity in the legend when the run has one. Bottom panel: the
    learning rate of each epoch (log scale). Returns the written path."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise DecodekitError(f"cannot write {out.name!r}: the output must end in {', '.join(FORMATS)}")
    writable_target(out, "the figure")  # a device or FIFO is refused before anything is drawn
    runs = [read_run(d) for d in run_dirs]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DecodekitError("plotting needs matplotlib: pip install 'decodekit[plot]'") from None

    fig, (ppl, lr) = plt.subplots(2, 1, figsize=(7, 6), sharex=True, height_ratios=(3, 1))
    for i, run in enumerate(runs):
        colour = f"C{i % 10}"
        label = run.name if run.test_ppl is None else f"{run.name} (test {run.test_ppl:.2f})"
        ppl.plot(run.epochs, run.valid_ppl, "-o", color=colour, markersize=3, label=f"{label} valid")
        ppl.plot(run.epochs, run.train_ppl, "--", color=colour, label=f"{run.name} train")
        lr.step(run.epochs, run.lr, where="mid", color=colour)
    ppl.set_yscale("log")
    ppl.set_ylabel("perplexity")
    ppl.grid(True, which="both", alpha=0.3)
    ppl.legend(fontsize="small")
    ppl.set_title(title or ", ".join(r.name for r in runs))
    lr.set_yscale("log")
    lr.set_ylabel("learning rate")
    lr.set_xlabel("epoch")
    lr.grid(True, alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    try:  # atomically: a symlink's target is replaced, a kill leaves the old figure
        atomic_write(out, lambda tmp: fig.savefig(tmp, format=out.suffix[1:].lower()), "the figure")
    finally:
        plt.close(fig)
    return out
