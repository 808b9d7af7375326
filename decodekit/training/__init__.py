"""Training and evaluation of the bundled models: truncated BPTT, schedules, losses, resume.

Names are imported on first use (:mod:`decodekit.util.lazy`), so ``decodekit train --help`` reads
:class:`TrainConfig` without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decodekit.util.lazy import lazy_exports

# public name -> the module that defines it
_LAZY: dict[str, str] = {
    "Constant": "decodekit.training.schedules",
    "DarkenMoody": "decodekit.training.schedules",
    "DataParallel": "decodekit.training.ddp",
    "EvalResult": "decodekit.training.evaluate",
    "evaluate": "decodekit.training.evaluate",
    "FixedDecay": "decodekit.training.schedules",
    "load_embeddings": "decodekit.training.embeddings",
    "local_rows": "decodekit.training.ddp",
    "LoopState": "decodekit.training.loop",
    "Loss": "decodekit.training.losses",
    "loss_for": "decodekit.training.sampled",
    "make_loss": "decodekit.training.sampled",
    "make_schedule": "decodekit.training.schedules",
    "NCELoss": "decodekit.training.sampled",
    "NoiseDistribution": "decodekit.training.noise",
    "Plateau": "decodekit.training.schedules",
    "reconcile": "decodekit.training.rundir",
    "RESUME": "decodekit.training.resume",
    "run_files": "decodekit.training.rundir",
    "SampledSoftmaxLoss": "decodekit.training.sampled",
    "Schedule": "decodekit.training.schedules",
    "schedule_for": "decodekit.training.schedules",
    "SCHEDULES": "decodekit.training.schedules",
    "SearchThenConverge": "decodekit.training.schedules",
    "softmax_cross_entropy": "decodekit.training.losses",
    "train": "decodekit.training.loop",
    "TrainConfig": "decodekit.training.config",
    "TrainingInterrupted": "decodekit.training.loop",
    "TrainResult": "decodekit.training.loop",
    "write_metrics": "decodekit.training.rundir",
}

__all__ = [
    "RESUME",
    "SCHEDULES",
    "Constant",
    "DarkenMoody",
    "DataParallel",
    "EvalResult",
    "FixedDecay",
    "LoopState",
    "Loss",
    "NCELoss",
    "NoiseDistribution",
    "Plateau",
    "SampledSoftmaxLoss",
    "Schedule",
    "SearchThenConverge",
    "TrainConfig",
    "TrainResult",
    "TrainingInterrupted",
    "evaluate",
    "load_embeddings",
    "local_rows",
    "loss_for",
    "make_loss",
    "make_schedule",
    "reconcile",
    "run_files",
    "schedule_for",
    "softmax_cross_entropy",
    "train",
    "write_metrics",
]

if TYPE_CHECKING:
    from decodekit.training.config import TrainConfig
    from decodekit.training.ddp import DataParallel, local_rows
    from decodekit.training.embeddings import load_embeddings
    from decodekit.training.evaluate import EvalResult, evaluate
    from decodekit.training.loop import LoopState, TrainingInterrupted, TrainResult, train
    from decodekit.training.losses import Loss, softmax_cross_entropy
    from decodekit.training.noise import NoiseDistribution
    from decodekit.training.resume import RESUME
    from decodekit.training.rundir import reconcile, run_files, write_metrics
    from decodekit.training.sampled import NCELoss, SampledSoftmaxLoss, loss_for, make_loss
    from decodekit.training.schedules import (
        SCHEDULES,
        Constant,
        DarkenMoody,
        FixedDecay,
        Plateau,
        Schedule,
        SearchThenConverge,
        make_schedule,
        schedule_for,
    )


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
