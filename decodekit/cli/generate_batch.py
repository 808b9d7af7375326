"""``decodekit generate --input FILE --output FILE``: JSON lines, resumable, one record per line,
split over the ranks under torchrun (the protocol is the library's: :mod:`decodekit.jobs`)."""

from __future__ import annotations

import sys
import warnings

import click

from decodekit.cli.common import UsageError


def read_input(input_path: str):
    """The lines of --input, streamed as bytes (:func:`decodekit.jsonl_lines`: each is decoded
    on its own, so one bad byte fails one line). A regular file or a pipe (``<(...)``); devices,
    directories and unreadable files are refused here, before anything is written. ``-``:
    standard input, whatever it is (a pipe, a file, a terminal; empty, as ``/dev/null``: no prompts)."""
    from decodekit import distributed, jsonl_lines

    if input_path == "-" and distributed.world()[1] > 1:
        raise UsageError(
            "--input - cannot be shared by torchrun's processes (each would read part of it); give a file"
        )
    return jsonl_lines(sys.stdin.buffer if input_path == "-" else input_path, "--input")


def run_batch(model, input_path, output_path, config, resume, batch_size, max_memory) -> None:
    """Decode a JSON-lines file with :func:`decodekit.generate_jsonl` (under torchrun each rank
    its share, one --output); rank 0 prints the totals. Exit status 1 when some line got an error
    record."""
    from tqdm import tqdm

    from decodekit import distributed, generate_jsonl
    from decodekit.jobs import OtherRankError, count_prompts

    lines = read_input(input_path)
    rank, size = distributed.world()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tqdm(
            total=None if input_path == "-" else count_prompts(input_path),
            unit="prompt",
            desc=f"generate[{rank}]" if size > 1 else "generate",
            disable=None if rank == 0 else True,
        ) as bar:
            try:
                counts = generate_jsonl(
                    model, lines, output_path, config, batch_size=batch_size, resume=resume,
                    progress=bar.update, max_memory=max_memory,
                )  # fmt: skip
            except OtherRankError:
                raise SystemExit(2) from None  # rank 0 says why
    for w in caught:
        click.echo(f"Warning: {w.message}", err=True)
    if rank != 0:
        raise SystemExit(1 if counts["errors"] else 0)
    errors = counts["errors"]
    where = output_path if output_path is not None else "standard output"
    click.echo(
        f"{counts['written']} written, {counts['skipped']} skipped (already done), "
        f"{errors} errors -> {where}",
        err=True,
    )
    if errors:
        first = f" (first: {counts['first_error']})" if counts.get("first_error") else ""
        retry = " and --resume retries them" if output_path is not None else ""
        said = f"Error: {errors} line(s) failed{first}; their error records are in {where}{retry}"
        click.echo(said, err=True)
        raise SystemExit(1)
