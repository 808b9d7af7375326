"""Synthetic tasks: the context-free languages of DuSell & Chiang with exact lower bounds."""

from decodekit.tasks.formal import TASK_NAMES, FormalTask, make_task
from decodekit.tasks.pcfg import PCFG, LengthSampler, inside_by_length, string_probabilities

__all__ = [
    "PCFG",
    "TASK_NAMES",
    "FormalTask",
    "LengthSampler",
    "inside_by_length",
    "make_task",
    "string_probabilities",
]
