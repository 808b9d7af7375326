"""Training and evaluation of the bundled models: truncated BPTT, schedules, losses, resume."""

from decodekit.training.config import TrainConfig
from decodekit.training.embeddings import load_embeddings
from decodekit.training.evaluate import EvalResult, evaluate
from decodekit.training.loop import TrainingInterrupted, train
from decodekit.training.losses import softmax_cross_entropy
from decodekit.training.noise import NoiseDistribution
from decodekit.training.sampled import NCELoss, SampledSoftmaxLoss, make_loss
from decodekit.training.schedules import (
    SCHEDULES,
    Constant,
    DarkenMoody,
    FixedDecay,
    Plateau,
    Schedule,
    SearchThenConverge,
    make_schedule,
)

__all__ = [
    "SCHEDULES",
    "Constant",
    "DarkenMoody",
    "EvalResult",
    "FixedDecay",
    "NCELoss",
    "NoiseDistribution",
    "Plateau",
    "SampledSoftmaxLoss",
    "Schedule",
    "SearchThenConverge",
    "TrainConfig",
    "TrainingInterrupted",
    "evaluate",
    "load_embeddings",
    "make_loss",
    "make_schedule",
    "softmax_cross_entropy",
    "train",
]
