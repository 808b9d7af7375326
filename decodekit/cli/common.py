"""Shared CLI plumbing: one-line errors with exit code 2, JSON output helpers."""

from __future__ import annotations

import sys

import click


class UsageError(click.ClickException):
    """A user mistake: printed as one line ``Error: ...``, exit code 2."""

    exit_code = 2


def run_main(group: click.Group, argv: list[str] | None) -> None:
    """Run the click group, turning library ``ValueError``s into one-line errors (exit 2)."""
    from decodekit.errors import DecodekitError

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
