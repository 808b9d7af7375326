"""``decodekit plot``: training curves of one or more runs as a PNG, SVG or PDF."""

from __future__ import annotations

import click


@click.command("plot")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--out", "-o", default="training.png", show_default=True, help="The figure to write (.png, .svg or .pdf)."
)
@click.option("--title", default=None, help="The figure's title (default: the runs' names).")
def plot(run_dirs: tuple[str, ...], out: str, title: str | None) -> None:
    """Plot training and validation perplexity and the learning rate per epoch.

    RUN_DIRS are `decodekit train --out` directories (their metrics.jsonl); several runs share
    one figure. Needs matplotlib: pip install 'decodekit[plot]'.

    \b
    Example:
      decodekit plot runs/ptb-lstm runs/ptb-rnn -o ptb.svg
    """
    from decodekit import plot_runs

    click.echo(f"wrote {plot_runs(list(run_dirs), out, title=title)}")
