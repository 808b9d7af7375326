"""``decodekit train``: train a bundled model (LSTM, Elman RNN, Bengio MLP) on a corpus."""

from __future__ import annotations

import json
from pathlib import Path

import click

from decodekit.cli import cli
from decodekit.cli.common import DEVICE_HELP, UsageError, os_error_message, resolve_device

_HELP_DATA = (
    "Corpus: a directory with ptb.{train,valid,test}.txt or {train,valid,test}.txt (one sentence per line, "
    "<eos> appended per line); NLTK's Brown corpus (brown.zip or its directory; Bengio et al.'s split); or "
    "one text file (lines split 90/5/5 %)."
)


def _model_config(kind: str, opts: dict):
    from decodekit import model_config as make_config

    if kind == "mlp":
        recurrent = [o for o in ("layers", "tie") if opts[o] is not None]
        if recurrent:
            raise UsageError(f"--{recurrent[0]} applies to --model lstm/rnn; --model mlp has no such setting")
        order = None if opts["context"] is None else opts["context"] + 1
        return make_config(
            "mlp",
            order=order,
            embed=opts["embed"],
            hidden=opts["hidden"],
            direct=opts["direct"],
            dropout=opts["dropout"],
            init_range=opts["init_range"],
        )
    for name in ("context", "direct"):
        if opts[name] is not None:
            raise UsageError(f"--{name} applies to --model mlp only")
    if kind == "stack-lstm":
        return _stack_config(opts)
    stack_opts = [
        o for o in ("stack", "stack_states", "stack_symbols", "window", "stack_depth") if opts[o] is not None
    ]
    if stack_opts:
        raise UsageError(f"--{stack_opts[0].replace('_', '-')} applies to --model stack-lstm only")
    return make_config(
        kind,
        layers=opts["layers"],
        embed=opts["embed"],
        hidden=opts["hidden"],
        dropout=opts["dropout"],
        tie=opts["tie"],
        init_range=opts["init_range"],
    )


def _stack_config(opts: dict):
    """``stack-lstm``. The state is carried across BPTT chunks, so the stack must be bounded."""
    from decodekit import model_config as make_config

    for name in ("layers", "dropout", "tie"):
        if opts[name] not in (None, False):
            raise UsageError(f"--{name} does not apply to --model stack-lstm (one LSTM layer)")
    stack = opts["stack"] or "rns"
    if stack in ("ns", "rns") and opts["window"] is None:
        raise UsageError(
            "--stack ns/rns needs --window D (memory-limited; e.g. 35): the state is carried across chunks"
        )
    if stack in ("superposition", "stratification") and opts["stack_depth"] is None:
        raise UsageError(f"--stack {stack} needs --stack-depth (e.g. 10): the state is carried across chunks")
    return make_config(
        "stack-lstm", stack=stack, embed=opts["embed"], hidden=opts["hidden"],
        stack_states=opts["stack_states"], stack_symbols=opts["stack_symbols"], window=opts["window"],
        depth=opts["stack_depth"], init_range=opts["init_range"],
    )  # fmt: skip


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

    stats = load_embeddings(model, path, freeze=freeze)
    click.echo(
        f"embeddings: {stats.found} of {stats.found + stats.missing} vocabulary words from {path} "
        f"({stats.file_words} vectors, dim {stats.dim}){'; frozen' if freeze else ''}",
        err=True,
    )


@cli.command("train")
@click.option("--data", "data", required=True, type=click.Path(exists=True), help=_HELP_DATA)
@click.option(
    "--model",
    "kind",
    type=click.Choice(["lstm", "rnn", "mlp", "stack-lstm"]),
    default="lstm",
    show_default=True,
)
@click.option("--stack", type=click.Choice(["superposition", "stratification", "ns", "rns"]),
              help="stack-lstm: the stack (default rns).")  # fmt: skip
@click.option("--stack-states", type=int, help="stack-lstm ns/rns: PDA states |Q| (default 2).")
@click.option("--stack-symbols", type=int, help="stack-lstm ns/rns: stack alphabet |Gamma| (default 3).")
@click.option("--window", type=int, help="stack-lstm ns/rns: memory limit D (required; paper's PTB: 35).")
@click.option(
    "--stack-depth", type=int, help="stack-lstm superposition/stratification: cells kept (required)."
)
@click.option("--layers", type=int, help="Recurrent layers (lstm/rnn; default lstm 2, rnn 1).")
@click.option("--hidden", type=int, help="Hidden units (default 200; mlp: h, default 100, 0 = none).")
@click.option("--embed", type=int, help="Embedding size (default 200; mlp: m, default 30).")
@click.option("--dropout", type=float, help="Dropout on non-recurrent connections (default 0).")
@click.option("--tie/--no-tie", default=None, help="Tie input and output embeddings (needs embed == hidden).")
@click.option("--context", type=int, help="mlp: previous words seen, n - 1 (default 4, i.e. n = 5).")
@click.option(
    "--direct/--no-direct", default=None, help="mlp: direct input->output connections (default on)."
)
@click.option("--init-range", type=float, help="Uniform init range r: U(-r, r) (default 0.1).")
@click.option("--bptt", type=int, default=20, show_default=True, help="Truncated-BPTT chunk length T.")
@click.option("--batch-size", type=int, default=20, show_default=True, help="Parallel streams B.")
@click.option("--epochs", type=int, default=13, show_default=True)
@click.option("--lr", type=float, default=1.0, show_default=True)
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default="sgd", show_default=True)
@click.option("--weight-decay", type=float, default=0.0, show_default=True)
@click.option("--clip", type=float, default=5.0, show_default=True, help="Max global gradient norm (0: off).")
@click.option(
    "--schedule",
    type=click.Choice(["fixed", "plateau", "newbob", "constant", "search-then-converge", "darken-moody"]),
    default="fixed",
    show_default=True,
    help="fixed: Zaremba's decay from --decay-start on; plateau: decay after --patience bad epochs; "
    "newbob: decay every epoch from the first bad one on (RNNLM); "
    "search-then-converge: lr / psi^max(0, epoch - tau); darken-moody: lr / (1 + (epoch - 1) / tau).",
)
@click.option("--tau", type=float, default=7.0, show_default=True, help="Search period in epochs.")
@click.option("--psi", type=float, default=2.0, show_default=True, help="search-then-converge divisor.")
@click.option(
    "--loss",
    type=click.Choice(["softmax", "nce", "sampled-softmax"]),
    default="softmax",
    show_default=True,
    help="Training loss; validation and test always use the full softmax.",
)
@click.option("--noise-samples", type=int, default=600, show_default=True, help="k noise words per update.")
@click.option("--noise-alpha", type=float, default=1.0, show_default=True, help="Noise: unigram^alpha.")
@click.option(
    "--noise-smoothing",
    type=float,
    default=0.0,
    show_default=True,
    help="Pseudo-count added to every word's count (gives unseen words noise mass).",
)
@click.option(
    "--nce-bias-init/--no-nce-bias-init",
    default=True,
    show_default=True,
    help="nce: start from output biases -log V (self-normalised).",
)
@click.option("--learn-log-z", is_flag=True, help="nce: learn log Z as one scalar (default: log Z = 0).")
@click.option(
    "--embeddings",
    type=click.Path(exists=True, dir_okay=False),
    help="Initialise input embeddings from a word2vec text file.",
)
@click.option("--freeze-embeddings", is_flag=True, help="Keep the --embeddings vectors fixed.")
@click.option("--decay", type=float, default=0.5, show_default=True, help="Learning-rate decay factor.")
@click.option("--decay-start", type=int, default=6, show_default=True, help="fixed: first decayed epoch.")
@click.option(
    "--patience", type=int, default=1, show_default=True, help="plateau: bad epochs before a decay."
)
@click.option(
    "--threshold",
    type=float,
    default=0.0,
    show_default=True,
    help="plateau, newbob: an epoch counts as bad unless it improves the best validation perplexity by this "
    "fraction (e.g. 0.01).",
)
@click.option(
    "--early-stop",
    type=int,
    default=0,
    show_default=True,
    help="Stop after this many epochs without a new best validation perplexity (0: never).",
)
@click.option("--min-lr", type=float, default=0.0, show_default=True, help="Stop when the rate falls below.")
@click.option("--mean-loss", is_flag=True, help="Average the loss over all B*T tokens (default: sum over T).")
@click.option("--min-count", type=int, help="Vocabulary: minimum training count (default 1; Brown: 4).")
@click.option("--chars", is_flag=True, help="Character-level vocabulary (text corpora).")
@click.option("--max-vocab", type=int, help="Vocabulary: maximum size.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True, help=DEVICE_HELP)
@click.option("--threads", type=int, help="torch CPU threads (default: torch's choice).")
@click.option(
    "--amp",
    type=click.Choice(["off", "bf16"]),
    default="off",
    show_default=True,
    help="bf16: training forward pass under bfloat16 autocast (CUDA; allowed on CPU, rarely faster).",
)
@click.option(
    "--save-every", type=int, default=0, show_default=True, help="Also save resume state every N updates."
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
    from decodekit.locking import exclusive
    from decodekit.training import RESUME, reconcile, run_files

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
    from decodekit.cli.common import rerun_command
    from decodekit.training import TrainConfig, TrainingInterrupted, evaluate, train, write_metrics

    if opts["threads"]:
        torch.set_num_threads(opts["threads"])
    config = _model_config(kind, opts)
    # the options named like TrainConfig's fields set them; --mean-loss is the one negated
    train_config = TrainConfig.from_dict(opts | {"sum_over_time": not opts["mean_loss"]})
    parallel, device = _parallel(resolve_device(opts["device"]), train_config.batch_size)
    resume = _take_out(stack, out, resume, overwrite, parallel)
    corpus = load_data(data, min_count=opts["min_count"], max_size=opts["max_vocab"], chars=opts["chars"])
    torch.manual_seed(train_config.seed)
    model = create_model(config, corpus.vocab).to(device)
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
