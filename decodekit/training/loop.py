"""The training loop (truncated BPTT) and streaming evaluation.

Each update runs the model over one chunk ``x [B, T]`` from the carried state, takes the loss
against ``y [B, T]`` (inputs shifted by one), clips the global gradient norm and steps the
optimiser; the final state is detached (the lecture notes' truncated BPTT: gradients stop at
the chunk boundary, the state flows on). After every epoch: validation perplexity, the
schedule, the best model as a checkpoint in ``out``, the resume state in
``out/resume.safetensors`` and then ``metrics.jsonl`` rewritten from the history that state holds
(:mod:`.rundir`), so a kill between any two writes loses nothing and repeats nothing. The
directory is locked for the whole run (:mod:`decodekit.util.locking`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from decodekit.checkpoint import save_checkpoint
from decodekit.data import Corpus, batchify, bptt_batches, num_bptt_batches
from decodekit.errors import CheckpointError, ConfigError
from decodekit.models.neural import NeuralLM
from decodekit.models.registry import config_to_dict
from decodekit.models.state import detach
from decodekit.training.allocator import reuse_freed_memory
from decodekit.training.config import TrainConfig
from decodekit.training.ddp import SingleProcess, autocast, check_amp
from decodekit.training.evaluate import evaluate
from decodekit.training.losses import Loss
from decodekit.training.resume import RESUME, load_training_state, save_training_state
from decodekit.training.rundir import take_directory, write_metrics
from decodekit.training.sampled import loss_for
from decodekit.training.schedules import schedule_for

PROGRESS_SECONDS = 60.0  # without a bar (stderr not a terminal): one progress line this often


class _DeferInterrupt:
    """Turn Ctrl-C (SIGINT) and SIGTERM (what schedulers and torchrun send) into a flag that the
    loop checks between updates (main thread only). ``signum``: the first signal seen."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self.signum = signal.SIGINT
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if not self.requested:
            self.signum = signal.Signals(signum)
        self.requested = True

    @property
    def sent(self) -> int:
        """The signal number if a stop was requested, else 0."""
        return int(self.signum) if self.requested else 0

    def __enter__(self) -> _DeferInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}


def make_optimizer(
    model: torch.nn.Module, config: TrainConfig, extra: list[torch.nn.Parameter] = ()
) -> torch.optim.Optimizer:
    """SGD or Adam over the model's parameters plus ``extra`` (e.g. NCE's learned log Z)."""
    params = list(model.parameters()) + list(extra)
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay)


def _check_sizes(model: NeuralLM, config: TrainConfig, corpus: Corpus) -> None:
    n = config.batch_size * config.bptt * model.vocab_size
    if n > config.max_logits:
        raise ConfigError(
            f"batch_size x bptt x vocab = {config.batch_size} x {config.bptt} x {model.vocab_size} = "
            f"{n:,} logits per update exceeds the limit {config.max_logits:,}; lower them"
        )
    if getattr(model, "vocab", None) is not None and model.vocab != corpus.vocab:
        raise ConfigError(
            f"the model's vocabulary ({model.vocab_size} tokens) is not the corpus vocabulary "
            f"({len(corpus.vocab)} tokens)"
        )


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped training after the state was saved: ``epoch`` and ``update`` (the
    epoch of the last update done), ``path`` (the resume state, None without an output directory)
    and ``signum`` (the signal) say where and why."""

    def __init__(self, epoch: int, update: int, path: Path | None, signum: int = signal.SIGINT) -> None:
        super().__init__(f"interrupted in epoch {epoch} after update {update}")
        self.epoch, self.update, self.path, self.signum = epoch, update, path, signum


@dataclass
class LoopState:
    """Where a run stands: what the resume state saves (as the ``loop`` entry of its header, one
    key per field) and restores.

    Attributes:
        epoch: the current epoch (from 1); position: its chunks done; update: updates done in all.
        best: the best validation perplexity so far (None before the first epoch ends);
            bad_epochs: epochs since it last improved; history: one record per finished epoch.
        run_nll, run_tokens, run_seconds: the current epoch's training-loss sum, tokens, seconds.
    """

    epoch: int = 1
    position: int = 0
    update: int = 0
    best: float | None = None
    bad_epochs: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    run_nll: float = 0.0
    run_tokens: int = 0
    run_seconds: float = 0.0

    def next_epoch(self, record: dict[str, Any]) -> None:
        """Log the finished epoch's ``record`` (a new best if ``record["best"]``) and start the next."""
        if record["best"]:
            self.best, self.bad_epochs = record["valid_ppl"], 0
        else:
            self.bad_epochs += 1
        self.history.append(record)
        self.epoch, self.position = self.epoch + 1, 0
        self.run_nll, self.run_tokens, self.run_seconds = 0.0, 0, 0.0


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        epochs: one record per finished epoch, earlier runs' included (the lines of ``metrics.jsonl``).
        best_valid_ppl: the best validation perplexity (None if no epoch finished).
        stopped: why training ended: "epochs" (all done), "min_lr", "early_stop" or "updates"
            (``stop_after_updates``).
    """

    epochs: tuple[dict[str, Any], ...]
    best_valid_ppl: float | None
    stopped: str


class _Run:
    """One training run: model, loss, optimiser, schedule, the carried BPTT state and the loop
    position (:class:`LoopState`); its methods are the steps of :func:`train`."""

    def __init__(
        self,
        model: NeuralLM,
        corpus: Corpus,
        config: TrainConfig,
        out: Path | None,
        loss: Loss | Callable,
        parallel: SingleProcess | None = None,
        *,
        progress: bool = False,
        bar: bool = True,
        stop_after: int | None = None,
    ) -> None:
        self.model, self.corpus, self.config, self.out = model, corpus, config, out
        self.loss = Loss.of(loss)
        self.par = parallel or SingleProcess()  # ddp.DataParallel: this rank's rows, DDP, collectives
        self.data = self.par.shard(batchify(corpus.train, config.batch_size)).to(model.device)  # [B/W, L]
        self.forward = self.par.wrap(model, self.loss.module)  # model.features, under DDP when distributed
        self.optimizer = make_optimizer(model, config, self.loss.parameters())
        self.params = list(model.parameters()) + self.loss.parameters()  # clipped together
        self.schedule = schedule_for(config)
        self.loop = LoopState()
        self.fixed = {"model": config_to_dict(model.config), "vocab": model.vocab.fingerprint}
        self.hidden: Any = None
        self.progress = progress and self.par.is_main  # one line per epoch on stderr
        self.bar = bar and self.progress  # and a bar, when stderr is a terminal
        self.main_out = out if self.par.is_main else None  # only rank 0 writes
        self.stop_after = stop_after
        self.interrupt = _DeferInterrupt()
        self.stop = 0  # the signal of a stop every rank agreed on (0: none; see update)
        self.warned = False  # check_divergence warns once

    def restore(self) -> None:
        """Load ``out/resume.safetensors``; refuse other models or training options."""
        if self.out is None:
            raise ConfigError("resume needs the output directory")
        path = self.out / RESUME
        template = self.model.initial_state(self.config.batch_size)
        meta, hidden = load_training_state(
            path, model=self.model, optimizer=self.optimizer, hidden_template=template
        )
        self.hidden = self.par.local_state(hidden, self.model)  # saved with all B rows
        self.par.align_rng()
        if {k: meta.get(k) for k in self.fixed} != self.fixed:
            raise CheckpointError(f"{path} belongs to another model or vocabulary")
        saved = TrainConfig.from_dict(meta["train_config"])
        if saved.to_dict() | {"epochs": 0} != self.config.to_dict() | {"epochs": 0}:
            raise CheckpointError(f"{path}: training options differ from the interrupted run: {saved}")
        self.schedule.load_state_dict(meta["schedule"])
        self.loss.load_state_dict(meta.get("loss_state", {}))
        try:
            self.loop = LoopState(**meta["loop"])
        except (KeyError, TypeError) as e:
            raise CheckpointError(f"{path}: damaged loop position ({e})") from None

    def save(self) -> None:
        """Write the resume state (collective: every rank calls it; rank 0 writes)."""
        if self.out is not None:
            hidden = self.par.full_state(self.hidden, self.model)  # collective: all ranks call save()
        if self.main_out is not None:
            meta = {
                **self.fixed,
                "train_config": self.config.to_dict(),
                "schedule": self.schedule.state_dict(),
                "loss_state": self.loss.state_dict(),
                "loop": dataclasses.asdict(self.loop),
            }
            save_training_state(
                self.out / RESUME, model=self.model, optimizer=self.optimizer, hidden=hidden, meta=meta
            )

    def run(self, resume: bool) -> str:
        """Train from the start or from the resume state until a stopping rule; returns the
        reason (:attr:`TrainResult.stopped`)."""
        if resume:
            self.restore()
            if self.main_out is not None:
                write_metrics(self.main_out, self.loop.history)  # a kill may have cut the last rewrite short
        else:
            self.save()  # from the first moment on, a directory with run files holds a resume state
        config = self.config
        with self.interrupt:
            while self.loop.epoch <= config.epochs:
                lr = self.schedule.lr(self.loop.epoch, self.loop.update)
                if lr < config.min_lr:
                    return "min_lr"
                if not self.epoch():
                    return "updates"
                record = self.end_epoch(lr)
                self.check_divergence(record.get("train_ppl"), record["train_loss"])
                self.hidden = None
                self.save()
                if self.main_out is not None:
                    write_metrics(self.main_out, self.loop.history)  # after the state that holds it
                if self.progress:
                    tqdm.write(epoch_line(record), file=sys.stderr)
                    sys.stderr.flush()  # before what comes next on stdout
                if config.early_stop and self.loop.bad_epochs >= config.early_stop:
                    return "early_stop"
                # a stop asked for after the epoch's last update (during validation, say): every
                # rank is here, after the same save, so they agree now rather than one rank
                # leaving for a save's collective while the others validate (one small all-reduce)
                if self.loop.epoch <= config.epochs and (stop := self.par.agree(self.interrupt.sent)):
                    self.interrupt.signum = signal.Signals(stop)
                    self.interrupted(self.loop.epoch - 1)
        return "epochs"

    def interrupted(self, epoch: int) -> None:
        """Raise :class:`TrainingInterrupted` (the state is saved)."""
        path = self.out / RESUME if self.out is not None else None
        raise TrainingInterrupted(epoch, self.loop.update, path, self.interrupt.signum)

    def update(self, x: torch.Tensor, y: torch.Tensor, lr: float) -> None:
        """One truncated-BPTT update on the chunk x, y [B, t], the state carried and then detached.
        Afterwards ``stop`` is the signal number on every rank if any rank had been asked to stop before the
        collective that sums the training loss (where the ranks agree). A signal that arrives
        later sets only this rank's ``interrupt.requested``: the ranks act on it at the next
        agreement, never on a flag only some of them have seen."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with autocast(self.model.device, self.config.amp):
            features, hidden = self.forward(self.hidden, x)
            losses = self.loss.fn(self.model, features, y)  # [B, t] (B: this rank's rows)
        loss = losses.sum() / (x.shape[0] if self.config.sum_over_time else losses.numel())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.config.clip)
        self.optimizer.step()
        self.hidden = detach(hidden)
        loop, interrupt = self.loop, self.interrupt
        nll, tokens, self.stop = self.par.tally(
            losses.detach().double().sum(), losses.numel(), interrupt.sent
        )
        if self.stop:  # never reset
            interrupt.requested, interrupt.signum = True, signal.Signals(self.stop)
        loop.run_nll += nll
        loop.run_tokens += tokens
        loop.position += 1
        loop.update += 1

    def epoch(self) -> bool:
        """Run the rest of the current epoch. Returns False if stopped early (state saved)."""
        loop, epoch = self.loop, self.loop.epoch
        if self.hidden is None:
            self.hidden = self.model.initial_state(self.data.shape[0])
        bar = tqdm(
            total=num_bptt_batches(self.data, self.config.bptt),
            initial=loop.position,
            desc=f"epoch {epoch}",
            unit="batch",
            disable=None if self.bar else True,  # None: only when stderr is a terminal
            mininterval=5.0,
            leave=False,
        )
        t0 = time.perf_counter() - loop.run_seconds
        lines = self.progress and bar.disable  # no bar (not a terminal): a line now and then instead
        next_line = time.perf_counter() + PROGRESS_SECONDS
        for x, y in bptt_batches(self.data, self.config.bptt, start=loop.position):
            lr = self.schedule.lr(epoch, loop.update)
            self.update(x, y, lr)
            loop.run_seconds = time.perf_counter() - t0
            if lines and time.perf_counter() >= next_line:
                next_line = time.perf_counter() + PROGRESS_SECONDS
                self.progress_line(epoch, bar.total, lr)
            if not bar.disable:
                bar.update(1)
                bar.set_postfix(
                    ppl=f"{math.exp(loop.run_nll / loop.run_tokens):.1f}",
                    lr=f"{lr:.3g}",
                    tok_s=f"{loop.run_tokens / loop.run_seconds:.0f}",
                    refresh=False,
                )
            if self.stop or loop.update == self.stop_after:  # both the same on every rank
                bar.close()
                self.save()
                if self.stop:
                    self.interrupted(epoch)
                return False
            if self.config.save_every and loop.update % self.config.save_every == 0:
                self.save()
        bar.close()
        return True

    def progress_line(self, epoch: int, batches: int, lr: float) -> None:
        """One line on stderr during an epoch (when no bar is drawn), and the divergence check."""
        loop = self.loop
        loss = loop.run_nll / max(loop.run_tokens, 1)
        ppl = math.exp(min(loss, 700))
        fit = f"train ppl {ppl:.6g}" if self.loss.nll else f"train loss {loss:.4f}"
        done = f"batch {loop.position:,}/{batches:,} ({100 * loop.position / max(batches, 1):.0f} %)"
        print(
            f"epoch {epoch}: {done}, {fit}, lr {lr:.4g}, "
            f"{loop.run_tokens / max(loop.run_seconds, 1e-9):,.0f} tok/s",
            file=sys.stderr,
            flush=True,
        )
        self.check_divergence(ppl if self.loss.nll else None, loss)

    def check_divergence(self, ppl: float | None, loss: float) -> None:
        """Warn once when training has diverged: a loss that is not finite, or a perplexity more
        than twice the uniform distribution's (the vocabulary size V), which any model that learns
        beats (a fresh one starts near V: twice leaves room for its first updates)."""
        if self.warned or not self.par.is_main:
            return
        v = self.model.vocab_size
        if not math.isfinite(loss) or (ppl is not None and ppl > 2 * v):
            self.warned = True
            what = "is not finite" if not math.isfinite(loss) else f"gives perplexity {ppl:,.0f}"
            warnings.warn(
                f"training diverges: the training loss {what}, far worse than guessing uniformly among "
                f"the {v:,} tokens; lower the learning rate (lr {self.config.lr:g}; e.g. lr="
                f"{self.config.lr / 10:g}) or clip harder (clip {self.config.clip:g})",
                stacklevel=2,
            )

    def end_epoch(self, lr: float) -> dict[str, Any]:
        """Validate, update the schedule and the best checkpoint; returns the epoch's record and
        moves ``loop`` to the next epoch."""
        loop, t_valid = self.loop, time.perf_counter()
        valid_ppl = self.par.broadcast(evaluate(self.model, self.corpus.valid).ppl)  # rank 0's wins
        self.model.train()
        self.schedule.observe(loop.epoch, valid_ppl)
        train_loss = loop.run_nll / max(loop.run_tokens, 1)
        record = {
            "epoch": loop.epoch,
            "lr": lr,
            "updates": loop.update,
            "train_loss": train_loss,
            "train_ppl": (math.exp(train_loss) if train_loss < 709 else math.inf) if self.loss.nll else None,
            "valid_ppl": valid_ppl,
            "train_seconds": round(loop.run_seconds, 2),
            "train_tokens_per_s": round(loop.run_tokens / max(loop.run_seconds, 1e-9), 1),
            "valid_seconds": round(time.perf_counter() - t_valid, 2),
            "best": loop.best is None or valid_ppl < loop.best,
        }
        if record["best"] and self.main_out is not None:
            extra = {"train_config": self.config.to_dict(), "epoch": loop.epoch, "valid_ppl": valid_ppl}
            save_checkpoint(self.model, self.main_out, extra=extra)
        loop.next_epoch(record)
        return record


def epoch_line(record: dict[str, Any]) -> str:
    """An epoch's record as one readable line (``metrics.jsonl`` holds it as JSON)."""
    r = record
    fit = f"train ppl {r['train_ppl']:.2f}" if r.get("train_ppl") else f"train loss {r['train_loss']:.4f}"
    return (
        f"epoch {r['epoch']}: {fit}, valid ppl {r['valid_ppl']:.2f}{' (best)' if r.get('best') else ''}, "
        f"lr {r['lr']:.4g}, {r['updates']} updates, {r['train_seconds']:.1f} s "
        f"({r['train_tokens_per_s']:,.0f} tok/s) + valid {r['valid_seconds']:.1f} s"
    )


def train(
    model: NeuralLM,
    corpus: Corpus,
    config: TrainConfig,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    loss_fn: Loss | Callable | None = None,
    progress: bool = True,
    bar: bool = True,
    stop_after_updates: int | None = None,
    parallel: SingleProcess | None = None,
    overwrite: bool = False,
) -> TrainResult:
    """Train ``model`` on ``corpus.train``, validating on ``corpus.valid`` after each epoch.

    Args:
        out: directory for the best checkpoint, ``metrics.jsonl`` and ``resume.safetensors``;
            locked for the run (a second writer gets :class:`decodekit.util.locking.LockedError`).
            A fresh run refuses a directory that holds another run's files unless ``overwrite``.
        resume: continue from ``out/resume.safetensors`` (model, optimiser, schedule, RNG, position).
        loss_fn: the training loss, a :class:`.losses.Loss` or a per-token loss function (see
            :mod:`.losses`); default: the one ``config.loss`` names (:func:`.sampled.loss_for`:
            softmax, NCE, sampled softmax). Validation always uses the full softmax.
        progress: print one line per epoch on stderr (:func:`epoch_line`; rank 0 only).
        bar: with ``progress``, also draw a progress bar during each epoch when stderr is a
            terminal (never into a log file).
        stop_after_updates: save the resume state and stop after this many updates in all (tests).
        parallel: a :class:`.ddp.DataParallel` under torchrun (this rank's share of the batch,
            DDP gradients; only rank 0 writes and shows progress); default: one process.

    Returns: a :class:`TrainResult` (per-epoch records, best validation perplexity, why it stopped).
    Raises :class:`TrainingInterrupted` (a KeyboardInterrupt) after saving the resume state if
    Ctrl-C (SIGINT) or SIGTERM arrives: after the current update, or after the epoch's end when
    it arrives during validation (not in the last epoch: that run finishes).
    """
    _check_sizes(model, config, corpus)
    check_amp(model.device, config.amp)
    if model.device.type == "cpu":
        reuse_freed_memory()  # no page faults for the same large buffers at every update
    out = Path(out) if out is not None else None
    with contextlib.ExitStack() as stack:
        if out is not None:
            take_directory(stack, out, parallel or SingleProcess(), resume, overwrite)
        torch.manual_seed(config.seed)
        model.train()
        loss = Loss.of(loss_fn) if loss_fn is not None else loss_for(config, corpus.train, model.vocab_size)
        if not resume:
            loss.init_model(model)  # e.g. NCE's output biases -log V
        run = _Run(
            model,
            corpus,
            config,
            out,
            loss,
            parallel,
            progress=progress,
            bar=bar,
            stop_after=stop_after_updates,
        )
        stopped = run.run(resume)
    return TrainResult(tuple(run.loop.history), run.loop.best, stopped)
