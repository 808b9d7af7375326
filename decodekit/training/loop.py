"""The training loop (truncated BPTT) and streaming evaluation.

Each update runs the model over one chunk ``x [B, T]`` from the carried state, takes the loss
against ``y [B, T]`` (inputs shifted by one), clips the global gradient norm and steps the
optimiser; the final state is detached (the lecture notes' truncated BPTT: gradients stop at
the chunk boundary, the state flows on). After every epoch: validation perplexity, the
schedule, the best model as a checkpoint in ``out``, the resume state in
``out/resume.safetensors`` and then ``metrics.jsonl`` rewritten from the history that state holds
(:mod:`.rundir`), so a kill between any two writes loses nothing and repeats nothing. The
directory is locked for the whole run (:mod:`decodekit.locking`).
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from decodekit.checkpoint import save_checkpoint
from decodekit.data import Corpus, batchify, bptt_batches, num_bptt_batches
from decodekit.errors import CheckpointError
from decodekit.models.neural import NeuralLM
from decodekit.models.registry import config_to_dict
from decodekit.models.state import detach
from decodekit.training.allocator import reuse_freed_memory
from decodekit.training.config import TrainConfig
from decodekit.training.ddp import SingleProcess, autocast
from decodekit.training.evaluate import evaluate
from decodekit.training.resume import RESUME, load_training_state, save_training_state
from decodekit.training.rundir import take_directory, write_metrics
from decodekit.training.sampled import load_loss_state, loss_state, make_loss
from decodekit.training.schedules import make_schedule

Loss = Callable[[NeuralLM, torch.Tensor, torch.Tensor], torch.Tensor]


class _DeferInterrupt:
    """Turn Ctrl-C into a flag that the loop checks between updates (main thread only)."""

    def __init__(self) -> None:
        self.requested = False
        self._old: Any = None

    def __enter__(self) -> _DeferInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, lambda *_: setattr(self, "requested", True))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


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
        raise ValueError(
            f"batch_size x bptt x vocab = {config.batch_size} x {config.bptt} x {model.vocab_size} = "
            f"{n:,} logits per update exceeds the limit {config.max_logits:,}; lower them"
        )
    if getattr(model, "vocab", None) is not None and model.vocab != corpus.vocab:
        raise ValueError(
            f"the model's vocabulary ({model.vocab_size} tokens) is not the corpus vocabulary "
            f"({len(corpus.vocab)} tokens)"
        )


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped training after the state was saved: ``epoch``, ``update`` and ``path`` (the
    resume state, None without an output directory) say where."""

    def __init__(self, epoch: int, update: int, path: Path | None) -> None:
        super().__init__(f"interrupted in epoch {epoch} after update {update}")
        self.epoch, self.update, self.path = epoch, update, path


class _Run:
    """The mutable state of one training run: model, optimiser, schedule and the loop position
    (``loop``: epoch, chunk position, update count, best validation ppl, history, running sums)."""

    def __init__(
        self,
        model: NeuralLM,
        corpus: Corpus,
        config: TrainConfig,
        out: Path | None,
        loss_fn: Loss | None = None,
        parallel: SingleProcess | None = None,
    ) -> None:
        self.model, self.corpus, self.config, self.out = model, corpus, config, out
        self.par = parallel or SingleProcess()  # ddp.DataParallel: this rank's rows, DDP, collectives
        self.data = self.par.shard(batchify(corpus.train, config.batch_size)).to(model.device)  # [B/W, L]
        self.forward = self.par.wrap(model, loss_fn)  # model.features, under DDP when distributed
        self.loss_fn = loss_fn
        loss_params = list(loss_fn.parameters()) if isinstance(loss_fn, torch.nn.Module) else []
        self.optimizer = make_optimizer(model, config, loss_params)
        self.params = list(model.parameters()) + loss_params  # clipped together
        self.schedule = make_schedule(
            config.schedule,
            config.lr,
            decay=config.decay,
            start=config.decay_start,
            patience=config.patience,
            threshold=config.threshold,
            tau=config.tau,
            psi=config.psi,
        )
        self.loop: dict[str, Any] = {
            "epoch": 1,
            "position": 0,
            "update": 0,
            "best": None,
            "bad_epochs": 0,
            "history": [],
            "run_nll": 0.0,
            "run_tokens": 0,
            "run_seconds": 0.0,
        }
        self.fixed = {"model": config_to_dict(model.config), "vocab": model.vocab.fingerprint}
        self.hidden: Any = None

    def restore(self) -> None:
        """Load ``out/resume.safetensors``; refuse other models or training options."""
        if self.out is None:
            raise ValueError("resume needs the output directory")
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
        load_loss_state(self.loss_fn, meta.get("loss_state", {}))
        self.loop = meta["loop"]

    def save(self) -> None:
        """Write the resume state (collective: every rank calls it; rank 0 writes)."""
        if self.out is not None:
            hidden = self.par.full_state(self.hidden, self.model)  # collective: all ranks call save()
        if self.out is not None and self.par.is_main:
            meta = {
                **self.fixed,
                "train_config": self.config.to_dict(),
                "schedule": self.schedule.state_dict(),
                "loss_state": loss_state(self.loss_fn),
                "loop": self.loop,
            }
            save_training_state(
                self.out / RESUME, model=self.model, optimizer=self.optimizer, hidden=hidden, meta=meta
            )

    def update(
        self, x: torch.Tensor, y: torch.Tensor, lr: float, loss_fn: Loss, interrupt: _DeferInterrupt
    ) -> None:
        """One truncated-BPTT update on the chunk x, y [B, t], the state carried and then detached.
        Afterwards ``interrupt.requested`` is set on every rank if any rank was asked to stop (the
        ranks agree in the same collective that sums the training loss)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with autocast(self.model.device, self.config.amp):
            features, hidden = self.forward(self.hidden, x)
            losses = loss_fn(self.model, features, y)  # [B, t] (B: this rank's rows)
        loss = losses.sum() / (x.shape[0] if self.config.sum_over_time else losses.numel())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.config.clip)
        self.optimizer.step()
        self.hidden = detach(hidden)
        loop = self.loop
        nll, tokens, any_stop = self.par.tally(
            losses.detach().double().sum(), losses.numel(), interrupt.requested
        )
        if any_stop:  # never reset: a Ctrl-C arriving during the collective must not be lost
            interrupt.requested = True
        loop["run_nll"] += nll
        loop["run_tokens"] += tokens
        loop["position"] += 1
        loop["update"] += 1

    def epoch(
        self, loss_fn: Loss, progress: bool, interrupt: _DeferInterrupt, stop_after: int | None
    ) -> bool:
        """Run the rest of the current epoch. Returns False if stopped early (state saved)."""
        loop, epoch = self.loop, self.loop["epoch"]
        if self.hidden is None:
            self.hidden = self.model.initial_state(self.data.shape[0])
        bar = tqdm(
            total=num_bptt_batches(self.data, self.config.bptt),
            initial=loop["position"],
            desc=f"epoch {epoch}",
            unit="batch",
            disable=not progress,
            mininterval=5.0,
        )
        t0 = time.perf_counter() - loop["run_seconds"]
        for x, y in bptt_batches(self.data, self.config.bptt, start=loop["position"]):
            lr = self.schedule.lr(epoch, loop["update"])
            self.update(x, y, lr, loss_fn, interrupt)
            loop["run_seconds"] = time.perf_counter() - t0
            if progress:
                bar.update(1)
                bar.set_postfix(
                    ppl=f"{math.exp(loop['run_nll'] / loop['run_tokens']):.1f}",
                    lr=f"{lr:.3g}",
                    tok_s=f"{loop['run_tokens'] / loop['run_seconds']:.0f}",
                    refresh=False,
                )
            if interrupt.requested or loop["update"] == stop_after:
                bar.close()
                self.save()
                if interrupt.requested:
                    path = self.out / RESUME if self.out is not None else None
                    raise TrainingInterrupted(epoch, loop["update"], path)
                return False
            if self.config.save_every and loop["update"] % self.config.save_every == 0:
                self.save()
        bar.close()
        return True


def train(
    model: NeuralLM,
    corpus: Corpus,
    config: TrainConfig,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    loss_fn: Loss | None = None,
    progress: bool = True,
    stop_after_updates: int | None = None,
    parallel: SingleProcess | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Train ``model`` on ``corpus.train``, validating on ``corpus.valid`` after each epoch.

    Args:
        out: directory for the best checkpoint, ``metrics.jsonl`` and ``resume.safetensors``;
            locked for the run (a second writer gets :class:`decodekit.locking.LockedError`).
            A fresh run refuses a directory that holds another run's files unless ``overwrite``.
        resume: continue from ``out/resume.safetensors`` (model, optimiser, schedule, RNG, position).
        loss_fn: per-token training loss (see :mod:`.losses`); default: ``config.loss`` built by
            :func:`.sampled.make_loss` (softmax, NCE, sampled softmax). Validation always uses
            the full softmax.
        stop_after_updates: save the resume state and stop after this many updates in all (tests).
        parallel: a :class:`.ddp.DataParallel` under torchrun (this rank's share of the batch,
            DDP gradients; only rank 0 writes and shows progress); default: one process.

    Returns: ``{"epochs": [...per-epoch records...], "best_valid_ppl": ..., "stopped": reason}``.
    Raises :class:`TrainingInterrupted` (a KeyboardInterrupt) after saving the resume state if
    Ctrl-C arrives.
    """
    _check_sizes(model, config, corpus)
    if model.device.type == "cpu":
        reuse_freed_memory()  # no page faults for the same large buffers at every update
    out = Path(out) if out is not None else None
    with contextlib.ExitStack() as stack:
        if out is not None:
            take_directory(stack, out, parallel or SingleProcess(), resume, overwrite)
        return _train(model, corpus, config, out, resume, loss_fn, progress, stop_after_updates, parallel)


def _train(model, corpus, config, out, resume, loss_fn, progress, stop_after_updates, parallel):
    torch.manual_seed(config.seed)
    model.train()
    if loss_fn is None:
        loss_fn = make_loss(
            config.loss,
            train_ids=corpus.train,
            vocab_size=model.vocab_size,
            k=config.noise_samples,
            alpha=config.noise_alpha,
            learn_log_z=config.learn_log_z,
            smoothing=config.noise_smoothing,
            init_bias=config.nce_bias_init,
        )
    if not resume and hasattr(loss_fn, "init_model"):
        loss_fn.init_model(model)  # e.g. NCE's output biases -log V
    run = _Run(model, corpus, config, out, loss_fn, parallel)
    progress = progress and run.par.is_main
    main_out = out if run.par.is_main else None
    if resume:
        run.restore()
        if main_out is not None:
            write_metrics(main_out, run.loop["history"])  # a kill may have cut the last rewrite short
    else:
        run.save()  # from the first moment on, a directory with run files holds a resume state
    loop, stopped = run.loop, "epochs"
    with _DeferInterrupt() as interrupt:
        while loop["epoch"] <= config.epochs:
            lr = run.schedule.lr(loop["epoch"], loop["update"])
            if lr < config.min_lr:
                stopped = "min_lr"
                break
            if not run.epoch(loss_fn, progress, interrupt, stop_after_updates):
                stopped = "updates"
                break
            record = _end_epoch(model, corpus, config, loop, run.schedule, lr, main_out, loss_fn, run.par)
            run.hidden = None
            run.save()
            if main_out is not None:
                write_metrics(main_out, loop["history"])  # after the state that holds the history
            if progress:
                tqdm.write(json.dumps(record))
            if config.early_stop and loop["bad_epochs"] >= config.early_stop:
                stopped = "early_stop"
                break
    return {"epochs": loop["history"], "best_valid_ppl": loop["best"], "stopped": stopped}


def _end_epoch(
    model: NeuralLM,
    corpus: Corpus,
    config: TrainConfig,
    loop: dict,
    schedule: Any,
    lr: float,
    out: Path | None,
    loss_fn: Loss,
    par: SingleProcess,
) -> dict:
    """Validate, update the schedule and the best checkpoint, log; advance ``loop`` to the next epoch."""
    t_valid = time.perf_counter()
    valid_ppl = par.broadcast(evaluate(model, corpus.valid).ppl)  # every rank computes; rank 0's wins
    model.train()
    schedule.observe(loop["epoch"], valid_ppl)
    improved = loop["best"] is None or valid_ppl < loop["best"]
    record = {
        "epoch": loop["epoch"],
        "lr": lr,
        "updates": loop["update"],
        "train_loss": loop["run_nll"] / max(loop["run_tokens"], 1),
        "train_ppl": math.exp(loop["run_nll"] / max(loop["run_tokens"], 1))
        if getattr(loss_fn, "is_nll", False)
        else None,
        "valid_ppl": valid_ppl,
        "train_seconds": round(loop["run_seconds"], 2),
        "train_tokens_per_s": round(loop["run_tokens"] / max(loop["run_seconds"], 1e-9), 1),
        "valid_seconds": round(time.perf_counter() - t_valid, 2),
        "best": improved,
    }
    if improved:
        loop["best"], loop["bad_epochs"] = valid_ppl, 0
        if out is not None:
            save_checkpoint(
                model,
                out,
                extra={"train_config": config.to_dict(), "epoch": loop["epoch"], "valid_ppl": valid_ppl},
            )
    else:
        loop["bad_epochs"] += 1
    loop["history"].append(record)
    loop.update(epoch=loop["epoch"] + 1, position=0, run_nll=0.0, run_tokens=0, run_seconds=0.0)
    return record
