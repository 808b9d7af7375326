"""Shared by the CLI tests: a tiny word-level LSTM checkpoint and an in-process CLI runner."""

from __future__ import annotations

import torch
from click.testing import CliRunner

from decodekit.checkpoint import save_checkpoint
from decodekit.cli import _register, cli
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab


def word_checkpoint(directory, words, size: int = 16) -> str:
    """An untrained 1-layer LSTM over ``<unk> <eos> words`` saved in ``directory``; its path."""
    torch.manual_seed(0)
    model = LSTMLM(LSTMConfig(embed=size, hidden=size, layers=1), WordVocab(["<unk>", "<eos>", *words]))
    save_checkpoint(model.eval(), directory)
    return str(directory)


def run(*args, input=None):
    """``decodekit ARGS`` in this process (exceptions propagate, as in a test they should)."""
    _register()
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def exit_and_stderr(capfd, *args) -> tuple[int, list[str]]:
    """``decodekit ARGS`` through ``main`` (as the console script runs it): (exit status, the
    lines it wrote on stderr)."""
    from decodekit.cli import main

    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code
    return code, capfd.readouterr().err.strip().splitlines()
