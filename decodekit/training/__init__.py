"""Training and evaluation of the bundled models: truncated BPTT, schedules, losses, resume."""

from decodekit.training.config import TrainConfig
from decodekit.training.evaluate import EvalResult, evaluate
from decodekit.training.loop import train
from decodekit.training.losses import softmax_cross_entropy
from decodekit.training.schedules import SCHEDULES, Constant, FixedDecay, Plateau, Schedule, make_schedule

__all__ = [
    "SCHEDULES",
    "Constant",
    "EvalResult",
    "FixedDecay",
    "Plateau",
    "Schedule",
    "TrainConfig",
    "evaluate",
    "make_schedule",
    "softmax_cross_entropy",
    "train",
]
