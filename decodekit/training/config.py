"""``TrainConfig``: every training option in one frozen, JSON-ready dataclass."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from decodekit.errors import ConfigError
from decodekit.training.schedules import SCHEDULES
from decodekit.util.checks import at_least, fraction, one_of, real, require

OPTIMIZERS = ("sgd", "adam")
AMP = ("off", "bf16")
LOSSES = ("softmax", "nce", "sampled-softmax")


def check_loss_options(name: str, k: int, alpha: float, learn_log_z: bool, smoothing: float = 0.0) -> None:
    """Checks that need no vocabulary (k <= V is checked when the loss is built)."""
    if name not in LOSSES:
        raise ConfigError(f"unknown loss {name!r}; known: {list(LOSSES)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"noise samples k must be an integer >= 1, got {k!r}")
    if not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"noise exponent alpha must be in [0, 1], got {alpha!r}")
    if not isinstance(smoothing, (int, float)) or not smoothing >= 0:
        raise ConfigError(f"noise smoothing must be >= 0, got {smoothing!r}")
    if learn_log_z and name != "nce":
        raise ConfigError(f"learn_log_z applies to the nce loss only, not {name!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Training options. Defaults: the Zaremba et al. (2014) "small" recipe.

    Attributes:
        epochs: maximum number of passes over the training stream.
        batch_size: B parallel streams; bptt: T steps per chunk (truncated BPTT).
        lr: initial learning rate; optimizer: "sgd" or "adam"; weight_decay: L2 coefficient.
        clip: maximum global gradient norm (0: no clipping).
        schedule: "fixed" (Zaremba), "plateau", "newbob" (RNNLM), "constant", ... (see :mod:`.schedules`);
            decay: the factor; decay_start: first decayed epoch ("fixed");
            patience: non-improving epochs before a decay ("plateau"); threshold: the relative
            improvement an epoch needs to count as improving ("plateau", "newbob":
            valid < best * (1 - threshold)).
        early_stop: stop after this many epochs without a new best validation perplexity (0: never).
        min_lr: stop when the learning rate falls below it.
        sum_over_time: loss = sum over the T steps of the batch-mean NLL (Zaremba's code and the
            TF tutorial); False: the mean over all N*T tokens (PyTorch's word_language_model).
        seed: torch seed set at the start (dropout and sampled losses draw from it).
        save_every: also write the resume state every this many updates (0: after each epoch only).
        max_logits: refuse settings with B*T*V above this (the logits and their gradient are
            materialised: 2**28 floats is 1 GiB per copy).
        loss: "softmax", "nce" or "sampled-softmax" (:mod:`.sampled`); noise_samples: k noise
            words per update, shared by the batch; noise_alpha: noise = unigram^alpha;
            learn_log_z: NCE learns log Z as one scalar (else log Z = 0); noise_smoothing: a
            pseudo-count added to every word's count before the power; nce_bias_init: NCE starts
            from output biases -log V (see :class:`.sampled.NCELoss`).
        tau, psi: "search-then-converge" (lr0 / psi^max(0, e - tau)) and "darken-moody"
            (lr0 / (1 + (e - 1) / tau)) schedules.
        amp: "off" (float32) or "bf16": the training forward pass and loss under bfloat16
            autocast (CUDA; CPU autocast works too but is rarely faster); weights, optimiser,
            gradients and validation stay float32.
    """

    epochs: int = 13
    batch_size: int = 20
    bptt: int = 20
    lr: float = 1.0
    optimizer: str = field(default="sgd", metadata={"choices": OPTIMIZERS})
    weight_decay: float = 0.0
    clip: float = 5.0
    schedule: str = field(default="fixed", metadata={"choices": tuple(SCHEDULES)})
    decay: float = 0.5
    decay_start: int = 6
    patience: int = 1
    threshold: float = 0.0
    early_stop: int = 0
    min_lr: float = 0.0
    sum_over_time: bool = True
    seed: int = 0
    save_every: int = 0
    max_logits: int = 2**28
    loss: str = field(default="softmax", metadata={"choices": LOSSES})
    noise_samples: int = 600
    noise_alpha: float = 1.0
    learn_log_z: bool = False
    noise_smoothing: float = 0.0
    nce_bias_init: bool = True
    tau: float = 7.0
    psi: float = 2.0
    amp: str = field(default="off", metadata={"choices": AMP})

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "bptt"):
            at_least(name, getattr(self, name))
        real("lr", self.lr, 0.0, open_low=True)
        real("clip", self.clip, 0.0)
        real("weight_decay", self.weight_decay, 0.0)
        fraction("threshold", self.threshold)
        require(self.amp in AMP, f"amp must be 'off' or 'bf16', got {self.amp!r}")
        one_of("optimizer", self.optimizer, OPTIMIZERS)
        check_loss_options(
            self.loss, self.noise_samples, self.noise_alpha, self.learn_log_z, self.noise_smoothing
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
