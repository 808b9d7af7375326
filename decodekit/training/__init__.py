"""Training and evaluation of the bundled models: truncated BPTT, schedules, losses, resume."""

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
