"""The options of ``decodekit train`` from the dataclasses they set: one per field of every model
config (``decodekit.models.CONFIGS``) and of ``TrainConfig`` (``--init-range`` sets
``init_range``), its type, default and choices (a field's ``choices`` metadata) from the field,
only its help text from here. Both are torch-free, so ``train --help`` is too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from decodekit.cli.common import UsageError
from decodekit.models import CONFIGS
from decodekit.training import TrainConfig

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


def _option(name: str, f: dataclasses.Field, help: str, default: Any, show: bool = False) -> Any:
    """The option ``--name`` setting field ``f``: a bool is a flag (``--x/--no-x`` unless it
    defaults to False)."""
    flag = "--" + name.replace("_", "-")
    kind = _type(f)
    if kind is bool and default is False:
        return click.option(flag, name, is_flag=True, default=False, help=help)
    if kind is bool:
        return click.option(f"{flag}/--no-{flag[2:]}", name, default=default, show_default=show, help=help)
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


def model_options() -> list[Any]:
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
        out.append(_option(name, f, help, None))  # None: the chosen kind's default
    return out


def train_options() -> list[Any]:
    """One option per TrainConfig field, its default shown."""
    out = []
    for f in dataclasses.fields(TrainConfig):
        help = TRAIN_HELP.get(f.name, f.name.replace("_", " ") + ".")
        if f.name in NEGATED:  # a flag that sets the field False
            out.append(_option(NEGATED[f.name], f, help, False))
        else:
            out.append(_option(f.name, f, help, f.default, show=True))
    return out


def options(decorators: list[Any]) -> Any:
    """One decorator applying ``decorators`` (click options), the first listed first in ``--help``."""

    def apply(command: Any) -> Any:
        for decorate in reversed(decorators):
            command = decorate(command)
        return command

    return apply


def model_config(kind: str, opts: dict):
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
    stack = fields.get("stack") or CONFIGS["stack-lstm"].stack  # the field's default
    if stack in ("ns", "rns") and fields.get("window") is None:
        raise UsageError(
            "--stack ns/rns needs --window D (memory-limited; e.g. 35): the state is carried across chunks"
        )
    if stack in ("superposition", "stratification") and fields.get("depth") is None:
        raise UsageError(f"--stack {stack} needs --stack-depth (e.g. 10): the state is carried across chunks")
