"""``decodekit train``: train a bundled model (LSTM, Elman RNN, Bengio MLP, stack LSTM) on a corpus.

The model choices are the kinds of ``decodekit.models.CONFIGS``, and each field of their configs
and of ``TrainConfig`` is an option (:mod:`decodekit.cli.train_options`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from decodekit.cli.common import DEVICE_HELP, UsageError, os_error_message, resolve_device
from decodekit.cli.train_options import model_config, model_options, options, train_options
from decodekit.models import CONFIGS

_HELP_DATA = (
    "Corpus: a directory with ptb.{train,valid,test}.txt or {train,valid,test}.txt (one sentence per line, "
    "<eos> appended per line); NLTK's Brown corpus (brown.zip or its directory; Bengio et al.'s split); or "
    "one text file (lines split 90/5/5 %)."
)


def _parallel(device, batch_size: int):
    """Under torchrun: (ddp.DataParallel, this rank's device); otherwise (None, device)."""
    from decodekit.training import DataParallel, local_rows

    parallel, device = DataParallel.from_env(device)
    if parallel is not None:
        try:
            local_rows(batch_size, parallel.rank, parallel.size)
        except ValueError as e:
            parallel.close()
            raise UsageError(f"--batch-size: {e}") from None
    return parallel, device


def _load_embeddings(model, path: str, freeze: bool) -> None:
    from decodekit.training import load_embeddings

    try:
        stats = load_embeddings(model, path, freeze=freeze)
    except ValueError as e:  # the library names the config field; the command line has the flag
        raise UsageError(str(e).replace("tie=True", "--tie")) from None
    click.echo(
        f"embeddings: {stats.found} of {stats.found + stats.missing} vocabulary words from {path} "
        f"({stats.file_words} vectors, dim {stats.dim}){'; frozen' if freeze else ''}",
        err=True,
    )


@click.command("train")
@click.option("--data", "data", required=True, type=click.Path(exists=True), help=_HELP_DATA)
@click.option("--model", "kind", type=click.Choice(list(CONFIGS)), default="lstm", show_default=True)
@options(model_options())
@options(train_options())
@click.option("--min-count", type=int, help="Vocabulary: minimum training count (default 1; Brown: 4).")
@click.option("--chars", is_flag=True, help="Character-level vocabulary (text corpora).")
@click.option("--max-vocab", type=int, help="Vocabulary: maximum size.")
@click.option(
    "--embeddings",
    type=click.Path(exists=True, dir_okay=False),
    help="Initialise input embeddings from a word2vec text file.",
)
@click.option("--freeze-embeddings", is_flag=True, help="Keep the --embeddings vectors fixed.")
@click.option("--device", default="auto", show_default=True, help=DEVICE_HELP)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="torch CPU threads (default: 1 for a model under 20M parameters, the fastest there; else torch's).",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output checkpoint directory.")
@click.option(
    "--resume", is_flag=True, help="Continue the run in --out exactly where it stopped (or start it)."
)
@click.option("--overwrite", is_flag=True, help="Delete an earlier run's files in --out and start again.")
@click.option(
    "--progress/--no-progress",
    default=True,
    help="A progress bar on stderr while an epoch runs (only when stderr is a terminal). One line "
    "per epoch is printed on stderr either way.",
)
def train_command(data: str, kind: str, out: str, resume: bool, overwrite: bool, **opts) -> None:
    """Train a language model with truncated BPTT; write the best checkpoint to --out.

    After training, the best model (by validation perplexity) is evaluated on the test split and a
    JSON summary is printed. --out is locked while the run lasts. Ctrl-C saves the state and prints
    the command that continues the run (the same one with --resume).
    """
    import contextlib

    if resume and overwrite:
        raise UsageError("--resume and --overwrite are exclusive")
    with contextlib.ExitStack() as stack:
        _train(stack, data, kind, out, resume, overwrite, opts)


def _take_out(stack, out: str, resume: bool, overwrite: bool, parallel) -> bool:
    """Lock --out (rank 0; every rank learns whether that worked) and decide what to do with what
    it holds. Returns ``resume``, False when --resume finds nothing to resume."""
    from decodekit.training import RESUME, reconcile, run_files
    from decodekit.util.locking import exclusive

    error, is_main = None, parallel is None or parallel.is_main
    if is_main:
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            stack.enter_context(exclusive(out, "--out"))
            reconcile(Path(out))  # temporary files and a stale config.json left by a kill
            existing = run_files(Path(out))
            if existing and not resume and not overwrite:
                error = (
                    f"{out} already holds a training run ({', '.join(existing)}); pass --resume to "
                    "continue it, --overwrite to start again, or pick another --out"
                )
            elif resume and existing and RESUME not in existing:
                error = f"{out} holds {', '.join(existing)} but no {RESUME} to resume; pass --overwrite"
            elif resume and not existing:
                click.echo(f"nothing to resume in {out}: starting a new run", err=True)
                resume = False
        except (ValueError, OSError) as e:  # LockedError, a FIFO among the run files, a read-only disk
            error = os_error_message(e) if isinstance(e, OSError) else str(e)
    if parallel is not None:  # rank 0's outcome for all: -1 (error) or whether to resume
        outcome = parallel.broadcast(-1.0 if error is not None else float(resume))
        if outcome < 0:
            parallel.close()
            if not is_main:
                raise SystemExit(2)  # rank 0 says why
        resume = outcome > 0
    if error is not None:
        raise UsageError(error)
    return resume


def _train(stack, data: str, kind: str, out: str, resume: bool, overwrite: bool, opts: dict) -> None:
    import torch

    from decodekit import create_model, load_checkpoint, load_data
    from decodekit.cli.common import rerun_command, set_threads
    from decodekit.training import TrainConfig, TrainingInterrupted, evaluate, train, write_metrics

    config = model_config(kind, opts)
    # the options named like TrainConfig's fields set them; --mean-loss is the one negated
    train_config = TrainConfig.from_dict(opts | {"sum_over_time": not opts["mean_loss"]})
    parallel, device = _parallel(resolve_device(opts["device"]), train_config.batch_size)
    resume = _take_out(stack, out, resume, overwrite, parallel)
    corpus = load_data(data, min_count=opts["min_count"], max_size=opts["max_vocab"], chars=opts["chars"])
    torch.manual_seed(train_config.seed)
    model = create_model(config, corpus.vocab).to(device)
    set_threads(opts["threads"], model)  # as eval / score / generate: one thread for a small model
    if opts["embeddings"]:
        _load_embeddings(model, opts["embeddings"], opts["freeze_embeddings"])
    elif opts["freeze_embeddings"]:
        raise UsageError("--freeze-embeddings needs --embeddings FILE")
    try:
        result = train(
            model, corpus, train_config, out=out, resume=resume, overwrite=overwrite,
            progress=True, bar=opts["progress"], parallel=parallel,
        )  # fmt: skip
    except TrainingInterrupted as e:
        if parallel is None or parallel.is_main:
            click.echo(
                f"Interrupted: the training state after update {e.update} (epoch {e.epoch}) is saved in "
                f"{e.path}; continue with: {rerun_command('--resume', drop=('--overwrite',))}",
                err=True,
            )
        if parallel is not None:  # the ranks stopped together: leave the group, then the process
            parallel.close()  # without the interpreter's teardown: a thread of torch's distributed
            sys.stdout.flush()  # runtime still joinable there aborts it ("terminate called without
            sys.stderr.flush()  # an active exception", status 134), even after the group is left
            os._exit(128 + e.signum)
        raise SystemExit(128 + e.signum) from None  # 130 for Ctrl-C, 143 for SIGTERM
    if parallel is not None:
        parallel.close()
        if not parallel.is_main:
            return  # rank 0 alone tests the best model and writes the summary
    best = load_checkpoint(out, device=device)
    test = evaluate(best, corpus.test)
    summary = {
        "event": "test",
        "best_valid_ppl": result.best_valid_ppl,
        "test_ppl": test.ppl,
        "test_tokens": test.tokens,
        "stopped": result.stopped,
        "epochs": len(result.epochs),
    }
    write_metrics(Path(out), result.epochs, test=summary)  # every epoch and the test line, once
    click.echo(json.dumps(summary))
