"""``decodekit train``: train a bundled model (LSTM, Elman RNN, Bengio MLP, stack LSTM) on a corpus.

The model choices are the kinds of ``decodekit.models.CONFIGS``, and each field of their configs and
of ``TrainConfig`` is an option (``--init-range`` sets ``init_range``): its type, default and
choices come from the dataclass, only its help text from here. Both are torch-free, so ``--help``
is too.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from decodekit.cli.common import DEVICE_HELP, UsageError, os_error_message, resolve_device
from decodekit.models import CONFIGS
from decodekit.training import TrainConfig

_HELP_DATA = (
    "Corpus: a directory with ptb.{train,valid,test}.txt or {train,valid,test}.txt (one sentence per line, "
    "<eos> appended per line); NLTK's Brown corpus (brown.zip or its directory; Bengio et al.'s split); or "
    "one text file (lines split 90/5/5 %)."
)

# model config fields the command line spells otherwise: field -> (option, field value - option value)
SPELLED: dict[str, tuple[str, int]] = {
    "order": ("context", 1),  # the words seen, n - 1
    "depth": ("stack_depth", 0),
}
# model config fields that are no option: train carries the state across chunks, so an ns/rns
# stack needs a window and its unwindowed length limit never applies
NOT_OPTIONS = {"max_length"}
# the help of each model config field (the kinds that have it and their defaults are added)
MODEL_HELP = {
    "embed": "Embedding size (mlp: m).",
    "hidden": "Hidden units (mlp: h, 0 = none).",
    "layers": "Recurrent layers.",
    "dropout": "Dropout on non-recurrent connections.",
    "tie": "Tie input and output embeddings (needs embed == hidden).",
    "init_range": "Uniform init range r: U(-r, r).",
    "order": "Previous words seen, n - 1.",
    "direct": "Direct input->output connections.",
    "stack": "The stack.",
    "stack_states": "ns/rns: PDA states |Q|.",
    "stack_symbols": "ns/rns: stack alphabet |Gamma|.",
    "window": "ns/rns: memory limit D (required; paper's PTB: 35).",
    "depth": "superposition/stratification: cells kept (required).",
    "stack_embed": "superposition/stratification: size m of a pushed vector.",
    "push_hidden": "superposition: push h_t itself (needs --stack-embed == --hidden).",
    "max_length": "ns/rns without a window: most steps per sequence.",
    "recompute": "Recompute the stack in the backward pass (less memory, more time).",
    "bottom": "ns/rns: the bottom symbol is never replaced (frozen) or may be (older checkpoints).",
}
# TrainConfig fields set by the negation of a flag: field -> flag
NEGATED = {"sum_over_time": "mean_loss"}
TRAIN_HELP = {
    "epochs": "Most passes over the training data.",
    "batch_size": "Parallel streams B.",
    "bptt": "Truncated-BPTT chunk length T.",
    "lr": "Initial learning rate.",
    "optimizer": "The optimiser.",
    "weight_decay": "L2 coefficient.",
    "clip": "Max global gradient norm (0: off).",
    "schedule": "fixed: Zaremba's decay from --decay-start on; plateau: decay after --patience bad epochs; "
    "newbob: decay every epoch from the first bad one on (RNNLM); "
    "search-then-converge: lr / psi^max(0, epoch - tau); darken-moody: lr / (1 + (epoch - 1) / tau).",
    "decay": "Learning-rate decay factor.",
    "decay_start": "fixed: first decayed epoch.",
    "patience": "plateau: bad epochs before a decay.",
    "threshold": "plateau, newbob: an epoch counts as bad unless it improves the best validation "
    "perplexity by this fraction (e.g. 0.01).",
    "early_stop": "Stop after this many epochs without a new best validation perplexity (0: never).",
    "min_lr": "Stop when the rate falls below.",
    "sum_over_time": "Average the loss over all B*T tokens (default: sum over T).",
    "seed": "torch seed (initial weights, dropout, noise samples).",
    "save_every": "Also save resume state every N updates.",
    "max_logits": "Refuse a B*T*V above this (the logits and their gradient are materialised).",
    "loss": "Training loss; validation and test always use the full softmax.",
    "noise_samples": "k noise words per update.",
    "noise_alpha": "Noise: unigram^alpha.",
    "learn_log_z": "nce: learn log Z as one scalar (default: log Z = 0).",
    "noise_smoothing": "Pseudo-count added to every word's count (gives unseen words noise mass).",
    "nce_bias_init": "nce: start from output biases -log V (self-normalised).",
    "tau": "Search period in epochs.",
    "psi": "search-then-converge divisor.",
    "amp": "bf16: training forward pass under bfloat16 autocast (CUDA; allowed on CPU, rarely faster).",
}
_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def _type(f: dataclasses.Field) -> Any:
    """A field's option type: its annotation's first member (``int | None`` -> int), a Choice for
    a field whose metadata lists its ``choices``."""
    if "choices" in f.metadata:
        return click.Choice(list(f.metadata["choices"]))
    return _TYPES[str(f.type).split("|")[0].strip()]


def _option(name: str, f: dataclasses.Field, help: str, default: Any, show: bool) -> Any:
    flag = "--" + name.replace("_", "-")
    kind = _type(f)
    if kind is bool and default:
        return click.option(f"{flag}/--no-{flag[2:]}", name, default=default, show_default=show, help=help)
    if kind is bool:
        return click.option(flag, name, is_flag=True, default=default, help=help)
    return click.option(flag, name, type=kind, default=default, show_default=show, help=help)


def _kinds(field: str) -> list[str]:
    """The model kinds whose config has ``field``."""
    return [k for k, cls in CONFIGS.items() if field in {f.name for f in dataclasses.fields(cls)}]


def _defaults(field: str) -> str:
    """``lstm 2, rnn 1``: each kind's default of ``field`` (kinds alike grouped: ``lstm/rnn 200``)."""
    groups: dict[str, list[str]] = {}
    for kind in _kinds(field):
        value = {f.name: f.default for f in dataclasses.fields(CONFIGS[kind])}[field]
        if field in SPELLED and value is not None:
            value -= SPELLED[field][1]
        groups.setdefault("off" if value is None else str(value).lower(), []).append(kind)
    return ", ".join(f"{'/'.join(kinds)} {value}" for value, kinds in groups.items())


def _model_options() -> list[Any]:
    """One option per field of the model configs (default None: the chosen kind's default)."""
    seen: dict[str, dataclasses.Field] = {}
    for cls in CONFIGS.values():
        for f in dataclasses.fields(cls):
            seen.setdefault(f.name, f)
    out = []
    for field, f in seen.items():
        if field in NOT_OPTIONS:
            continue
        name = SPELLED.get(field, (field,))[0]
        help = f"{MODEL_HELP.get(field, field.replace('_', ' ') + '.')} Default: {_defaults(field)}."
        if _type(f) is bool:  # --x/--no-x, None when not given
            flag = "--" + name.replace("_", "-")
            out.append(click.option(f"{flag}/--no-{flag[2:]}", name, default=None, help=help))
        else:
            out.append(click.option("--" + name.replace("_", "-"), name, type=_type(f), help=help))
    return out


def _train_options() -> list[Any]:
    """One option per TrainConfig field, its default shown."""
    out = []
    for f in dataclasses.fields(TrainConfig):
        help = TRAIN_HELP.get(f.name, f.name.replace("_", " ") + ".")
        if f.name in NEGATED:
            out.append(
                click.option(
                    "--" + NEGATED[f.name].replace("_", "-"), NEGATED[f.name], is_flag=True, help=help
                )
            )
        else:
            out.append(_option(f.name, f, help, f.default, show=True))
    return out


def _options(decorators: list[Any]) -> Any:
    def apply(command: Any) -> Any:
        for decorate in reversed(decorators):
            command = decorate(command)
        return command

    return apply


def _model_config(kind: str, opts: dict):
    """The config of ``--model kind`` from the options given; an option of another kind's config is
    refused (it would be silently ignored)."""
    from decodekit import model_config as make_config

    own = {f.name for f in dataclasses.fields(CONFIGS[kind])}
    fields = {}
    for cls in CONFIGS.values():
        for f in dataclasses.fields(cls):
            name, offset = SPELLED.get(f.name, (f.name, 0))
            if f.name in NOT_OPTIONS or opts.get(name) is None or f.name in fields:
                continue
            if f.name not in own:
                kinds = _kinds(f.name)
                only = " only" if len(kinds) == 1 else ""
                raise UsageError(f"--{name.replace('_', '-')} applies to --model {'/'.join(kinds)}{only}")
            fields[f.name] = opts[name] + offset if offset else opts[name]
    if kind == "stack-lstm":
        _check_stack(fields)
    return make_config(kind, **fields)


def _check_stack(fields: dict) -> None:
    """``stack-lstm``. The state is carried across BPTT chunks, so the stack must be bounded."""
    stack = (
        fields.get("stack") or {f.name: f.default for f in dataclasses.fields(CONFIGS["stack-lstm"])}["stack"]
    )
    if stack in ("ns", "rns") and fields.get("window") is None:
        raise UsageError(
            "--stack ns/rns needs --window D (memory-limited; e.g. 35): the state is carried across chunks"
        )
    if stack in ("superposition", "stratification") and fields.get("depth") is None:
        raise UsageError(f"--stack {stack} needs --stack-depth (e.g. 10): the state is carried across chunks")


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


@click.command("train")
@click.option("--data", "data", required=True, type=click.Path(exists=True), help=_HELP_DATA)
@click.option("--model", "kind", type=click.Choice(list(CONFIGS)), default="lstm", show_default=True)
@_options(_model_options())
@_options(_train_options())
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
@click.option("--threads", type=int, help="torch CPU threads (default: torch's choice).")
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
