"""Reproductions of the bundled models' published perplexities, and shipping the default model.

    python benchmarks/bundled_models.py command lstm-small       # print the exact `decodekit train` command
    python benchmarks/bundled_models.py run lstm-small           # run it (hours on 2 CPU cores)
    python benchmarks/bundled_models.py table runs/ptb-lstm-small runs/ptb-rnn ...
    python benchmarks/bundled_models.py ship runs/ptb-lstm-small --force  # fp16 copy into the package

Recipes (targets: the seeds' published test perplexities, see ../shared/references/README.md):

* lstm-small: Zaremba et al. (2014) "small": 2x200 LSTM, init 0.1, no dropout, bptt 20, batch 20,
  SGD lr 1 halved every epoch from epoch 6 (their code), clip 5, 13 epochs. Paper: 120.7 valid / 114.5 test.
* rnn: Elman tanh RNN, 1x400, tied embeddings, dropout 0.35, SGD lr 0.25 (sum over time), halved whenever
  an epoch improves validation perplexity by less than 1 %, 22 epochs. Mikolov's RNNLM: 124.7 test.
* mlp-brown: Bengio et al. (2003) n=5, h=100, m=30, direct connections, on Brown. Paper MLP1..MLP9: 268-310;
  the best (MLP10, mixed with a trigram) 252.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from markdown_tables import markdown_table

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("../shared/data")  # relative to the repository root, where commands run

COMMON = "--bptt 20 --seed 0 --threads 1 --device cpu"
RECIPES = {
    "lstm-small": (
        "ptb",
        "runs/ptb-lstm-small",
        "--model lstm --layers 2 --hidden 200 --embed 200 --init-range 0.1 --batch-size 20 --epochs 13 "
        "--lr 1 --schedule fixed --decay 0.5 --decay-start 6 --dropout 0 --clip 5",
    ),
    "rnn": (
        "ptb",
        "runs/ptb-rnn400-tied",
        "--model rnn --layers 1 --hidden 400 --embed 400 --tie --dropout 0.35 --init-range 0.1 "
        "--batch-size 20 --epochs 22 --lr 0.25 --clip 5 --schedule plateau --decay 0.5 --patience 1 "
        "--threshold 0.01 --no-progress",
    ),
    "mlp-brown": (
        "brown/brown.zip",
        "runs/brown-mlp",
        "--model mlp --context 4 --hidden 100 --embed 30 --direct --init-range 0.05 --batch-size 64 "
        "--epochs 10 --optimizer adam --lr 0.001 --mean-loss --schedule plateau --decay 0.5 --patience 1 "
        "--dropout 0 --clip 5",
    ),
}


def command(name: str, data: Path, out: str | None = None) -> list[str]:
    sub, default_out, args = RECIPES[name]
    args = f"{args} {COMMON}"
    return ["decodekit", "train", "--data", str(data / sub), *shlex.split(args), "--out", out or default_out]


def table(dirs: list[str], markdown: bool = False) -> None:
    """One line per run directory (its metrics.jsonl): epochs, best valid ppl, test ppl, tokens per
    second, hours; ``markdown``: as docs/benchmarks.md's table."""
    header = ("run", "epochs", "best valid", "test", "train tok/s", "hours")
    if not markdown:
        print(f"{header[0]:<28}{header[1]:>7}{header[2]:>12}{header[3]:>10}{header[4]:>13}{header[5]:>8}")
    rows = []
    for d in dirs:
        lines = [json.loads(x) for x in Path(d, "metrics.jsonl").read_text().splitlines() if x.strip()]
        epochs = [r for r in lines if "epoch" in r]
        test = [r for r in lines if r.get("event") == "test"]
        best = min(r["valid_ppl"] for r in epochs) if epochs else float("nan")
        tps = sum(r["train_tokens_per_s"] for r in epochs) / max(len(epochs), 1)
        hours = sum(r["train_seconds"] + r["valid_seconds"] for r in epochs) / 3600
        t = f"{test[-1]['test_ppl']:.2f}" if test else "-"
        rows.append((Path(d).name, len(epochs), f"{best:.2f}", t, f"{tps:.0f}", f"{hours:.2f}"))
        if not markdown:
            print(f"{Path(d).name:<28}{len(epochs):>7}{best:>12.2f}{t:>10}{tps:>13.0f}{hours:>8.2f}")
    if markdown:
        print(markdown_table(header, rows))


def fail(message: str) -> None:
    """One line on stderr, exit status 2 (as the decodekit CLI does for user mistakes)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def ship(src: str, name: str = "ptb-lstm", *, dest: Path | None = None, force: bool = False) -> None:
    """Copy the checkpoint in ``src`` as fp16 into ``dest`` (default decodekit/pretrained/<name>/),
    recording its figures. An existing model is replaced only with ``force``, and only once the new
    copy is complete (written beside it, then renamed over it)."""
    import torch

    from decodekit.checkpoint import load_checkpoint, read_config, save_checkpoint

    dst = dest or ROOT / "decodekit" / "pretrained" / name
    if dst.exists() and not force:
        fail(f"{dst} exists; add --force to replace the shipped model")
    metrics = Path(src, "metrics.jsonl")
    if not metrics.is_file():
        fail(f"{metrics} not found: give a finished `decodekit train` run directory")
    info = read_config(src)
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    test = [r for r in lines if r.get("event") == "test"]
    model = load_checkpoint(src)
    extra = {
        "trained_by": "benchmarks/bundled_models.py (see README, 'The default model')",
        "train_config": info.get("train_config"),
        "epoch": info.get("epoch"),
        "valid_ppl": info.get("valid_ppl"),
        "test_ppl_fp32": test[-1]["test_ppl"] if test else None,
    }
    fresh = dst.with_name(dst.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    save_checkpoint(model, fresh, dtype=torch.float16, extra=extra)
    old = dst.with_name(dst.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if dst.exists():
        dst.rename(old)
    fresh.rename(dst)
    shutil.rmtree(old, ignore_errors=True)
    size = sum(p.stat().st_size for p in dst.iterdir())
    print(f"wrote {dst} ({size / 2**20:.2f} MiB)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["command", "run", "table", "ship"])
    ap.add_argument("targets", nargs="+", help="recipe names (command/run) or run directories (table/ship)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data directory")
    ap.add_argument("--force", action="store_true", help="ship: replace the model already in the package")
    ap.add_argument("--dest", type=Path, help="ship: write here instead of decodekit/pretrained/ptb-lstm")
    ap.add_argument("--markdown", action="store_true", help="table: as docs/benchmarks.md's table")
    args = ap.parse_args(argv)
    if args.action in ("command", "run"):
        unknown = [t for t in args.targets if t not in RECIPES]
        if unknown:
            ap.error(f"unknown recipe {unknown[0]!r}; choose from {', '.join(RECIPES)}")
    try:
        if args.action == "table":
            return table(args.targets, markdown=args.markdown)
        if args.action == "ship":
            return ship(args.targets[0], dest=args.dest, force=args.force)
        for name in args.targets:
            cmd = command(name, args.data)
            print(shlex.join(cmd), flush=True)
            if args.action == "run":
                subprocess.run(cmd, check=True, cwd=ROOT, stdout=sys.stdout)
    except KeyboardInterrupt:
        fail("interrupted (run it again: `decodekit train` resumes where it stopped)")
    except subprocess.CalledProcessError as e:
        fail(f"{shlex.join(e.cmd)} exited with {e.returncode}")
    except (OSError, ValueError) as e:  # decodekit's own errors derive from ValueError
        fail(str(e))


if __name__ == "__main__":
    main()
