"""Shared CLI plumbing: one-line errors with exit code 2, JSON output helpers."""

from __future__ import annotations

import shlex
import sys

import click

ARGV: list[str] | None = None  # the arguments of this invocation (set by run_main)


class UsageError(click.ClickException):
    """A user mistake: printed as one line ``Error: ...``, exit code 2."""

    exit_code = 2


def run_main(group: click.Group, argv: list[str] | None) -> None:
    """Run the click group, turning library ``ValueError``s into one-line errors (exit 2)."""
    from decodekit import DecodekitError

    global ARGV
    ARGV = list(sys.argv[1:] if argv is None else argv)
    try:
        group.main(args=argv, prog_name="decodekit", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        hint = ""
        ctx = getattr(e, "ctx", None)
        if isinstance(e, click.UsageError) and ctx is not None:
            hint = f" (see '{ctx.command_path} --help')"
        click.echo(f"Error: {e.format_message()}{hint}", err=True)
        sys.exit(2 if e.exit_code == 1 else e.exit_code)
    except (DecodekitError, ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)


def rerun_command(add: str, drop: tuple[str, ...] = ()) -> str:
    """This invocation as a shell command, with the flag ``add`` and without the flags ``drop``."""
    if ARGV is None:
        return f"the same command with {add}"
    args = [a for a in ARGV if a not in drop and a != add]
    return shlex.join(["decodekit", *args, add])
