"""The ``decodekit`` command line: a thin layer over the Python API.

Each sub-command lives in its own module and registers itself on :data:`main`. User
mistakes (bad options, unreadable files, invalid regexes) print one line and exit 2.
"""

from __future__ import annotations

import click

from decodekit.cli.common import run_main


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="decodekit")
def cli() -> None:
    """decodekit: exact, fast decoding for language models."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``decodekit`` script."""
    _register()
    run_main(cli, argv)


def _register() -> None:
    # Each sub-command module adds its commands to `cli`. They import only click at module
    # level (the library, and torch with it, inside the commands), so `decodekit --help` and
    # usage errors never import torch (tests/test_cli_startup.py).
    from decodekit.cli import (
        constraint,  # noqa: F401
        evaluate,  # noqa: F401
        generate,  # noqa: F401
        ngram,  # noqa: F401
        plot,  # noqa: F401
        score,  # noqa: F401
        train,  # noqa: F401
    )
