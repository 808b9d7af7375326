"""The ``decodekit`` command line: a thin layer over the Python API.

Each sub-command is a plain ``click.Command`` in its own module (which never imports this one's
group); :data:`COMMANDS` is the table the group adds them from. User mistakes (bad options,
unreadable files, invalid regexes) print one line and exit 2.
"""

from __future__ import annotations

import importlib

import click

from decodekit.cli.common import Commands, run_main

# command name -> "module:the click.Command in it". The modules import only click at module level
# (the library, and torch with it, inside the commands), so `decodekit --help` and usage errors
# never import torch (tests/cli/test_startup.py).
COMMANDS = {
    "constraint": "decodekit.cli.constraint:constraint",
    "eval": "decodekit.cli.evaluate:eval_command",
    "generate": "decodekit.cli.generate:generate",
    "ngram": "decodekit.cli.ngram:ngram_command",
    "plot": "decodekit.cli.plot:plot",
    "score": "decodekit.cli.score:score_command",
    "train": "decodekit.cli.train:train_command",
}


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="decodekit")
def cli() -> None:
    """decodekit: exact, fast decoding for language models."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``decodekit`` script."""
    _register()
    run_main(cli, argv)


def _register() -> None:
    """Add every command of :data:`COMMANDS` to :func:`cli` (once)."""
    for name, where in COMMANDS.items():
        if name not in cli.commands:
            module, _, attr = where.partition(":")
            cli.add_command(getattr(importlib.import_module(module), attr), name)
