"""The configs of the bundled models, in one torch-free room: what ``decodekit train --help`` and
``config.json`` read without importing torch. Each is a frozen dataclass with a ``kind`` class
attribute; :data:`CONFIGS` is the table of kinds (:data:`decodekit.models.registry.MODELS` pairs
each with its model class). A field whose values are a closed set says so in its metadata
(``choices``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from decodekit.util.checks import at_least, fraction, one_of, positive, require

STACKS = ("superposition", "stratification", "ns", "rns")
BOTTOMS = ("frozen", "replaceable")
"""``frozen``: DuSell & Chiang's definition (default); ``replaceable``: the extra position -1."""


def check_recurrent_config(config: Any) -> None:
    """Raise ConfigError for impossible sizes of an RNN/LSTM config (its ``__post_init__``)."""
    for name in ("embed", "hidden", "layers"):
        at_least(name, getattr(config, name))
    fraction("dropout", config.dropout)
    positive("init_range", config.init_range)
    require(
        not config.tie or config.embed == config.hidden,
        f"tied embeddings need embed == hidden, got embed={config.embed}, hidden={config.hidden}",
    )


def check_pda_sizes(
    num_states: int, num_symbols: int, window: int | None, bottom: str = "frozen", max_length: int = 512
) -> None:
    """The sizes of an NS/RNS stack (``max_length`` matters only without a window)."""
    at_least("stack_states |Q|", num_states)
    at_least("stack_symbols |Gamma|", num_symbols, 2, note=" (the bottom symbol and at least one more)")
    at_least("window D", window, optional=True, note=" (or None for unlimited)")
    one_of("stack bottom", bottom, BOTTOMS)
    if window is None:
        at_least("max_length", max_length)


def check_vector_stack(stack_embed: int, depth: int | None, push_hidden_size: int | None = None) -> None:
    """The sizes of a superposition or stratification stack (``push_hidden_size``: H when the
    superposition stack pushes h_t, which needs m = H)."""
    at_least("stack_embed", stack_embed)
    at_least("stack depth", depth, optional=True, note=" (or None for unbounded)")
    require(
        push_hidden_size is None or stack_embed == push_hidden_size,
        f"push_hidden needs stack_embed == hidden ({push_hidden_size}), got {stack_embed}",
    )


@dataclass(frozen=True)
class _RecurrentSizes:
    """The fields and checks an LSTM and an Elman RNN share (their configs subclass it)."""

    embed: int = 200
    hidden: int = 200
    layers: int = 2
    dropout: float = 0.0
    tie: bool = False
    init_range: float = 0.1

    def __post_init__(self) -> None:
        check_recurrent_config(self)


@dataclass(frozen=True)
class LSTMConfig(_RecurrentSizes):
    """Sizes of an LSTM LM. ``tie`` shares the embedding with the output layer
    (Press & Wolf 2017; needs ``embed == hidden``); ``init_range`` r: every parameter
    starts uniform in [-r, r]; ``dropout`` is applied to non-recurrent connections only."""

    kind: ClassVar[str] = "lstm"


@dataclass(frozen=True)
class RNNConfig(_RecurrentSizes):
    """Sizes of an Elman RNN LM (see :class:`decodekit.models.lstm.LSTMConfig` for the fields);
    one layer by default."""

    kind: ClassVar[str] = "rnn"
    layers: int = 1


@dataclass(frozen=True)
class MLPConfig:
    """Sizes of a Bengio MLP: ``order`` n (n-1 context words), ``embed`` m, ``hidden`` h
    (0: no hidden layer, needs ``direct``), ``direct`` connections x -> y, ``dropout`` on x and
    the hidden layer, ``init_range`` r: every parameter starts uniform in [-r, r]."""

    kind: ClassVar[str] = "mlp"
    order: int = 5
    embed: int = 30
    hidden: int = 100
    direct: bool = True
    dropout: float = 0.0
    init_range: float = 0.1

    def __post_init__(self) -> None:
        at_least("order", self.order, 2, note=" (at least one context word)")
        at_least("embed", self.embed)
        at_least("hidden", self.hidden, 0)
        require(self.hidden > 0 or self.direct, "an MLP with hidden=0 needs direct connections (direct=True)")
        fraction("dropout", self.dropout)
        positive("init_range", self.init_range)


@dataclass(frozen=True)
class StackLSTMConfig:
    """``stack``: superposition | stratification | ns | rns. ``stack_states`` |Q| and
    ``stack_symbols`` |Gamma| (ns/rns); ``window`` D (ns/rns; None = unlimited, then at most
    ``max_length`` steps per sequence); ``depth`` (superposition, stratification; None = unbounded);
    ``stack_embed`` m, the pushed-vector size (superposition/stratification); ``push_hidden``:
    superposition pushes h_t (needs m = hidden). Every parameter starts U(-init_range, init_range).
    ``recompute``: trade compute for training memory (see :meth:`StackLSTM.features`).
    ``bottom`` (ns/rns): ``"frozen"``, DuSell & Chiang's definition (the bottom symbol is never
    replaced or popped, a run that exposes it again has weight zero), or ``"replaceable"``, the
    definition of older decodekit checkpoints (a position -1 beneath it; see
    :mod:`decodekit.models.stack.nondeterministic`)."""

    kind: ClassVar[str] = "stack-lstm"
    stack: str = field(default="rns", metadata={"choices": STACKS})
    embed: int = 20
    hidden: int = 20
    stack_states: int = 2
    stack_symbols: int = 3
    window: int | None = None
    depth: int | None = None
    stack_embed: int = 20
    push_hidden: bool = False
    max_length: int = 512
    init_range: float = 0.1
    recompute: bool = False
    bottom: str = field(default="frozen", metadata={"choices": BOTTOMS})

    def __post_init__(self) -> None:
        at_least("embed", self.embed)
        at_least("hidden", self.hidden)
        positive("init_range", self.init_range)
        one_of("stack", self.stack, STACKS)
        if self.stack in ("ns", "rns"):
            check_pda_sizes(self.stack_states, self.stack_symbols, self.window, self.bottom, self.max_length)
        else:
            check_vector_stack(self.stack_embed, self.depth, self.hidden if self.push_hidden else None)


CONFIGS: dict[str, type] = {cls.kind: cls for cls in (LSTMConfig, RNNConfig, MLPConfig, StackLSTMConfig)}
"""kind -> config class of every bundled model."""
