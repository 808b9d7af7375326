"""``decodekit generate --input FILE --output FILE``: JSON lines, resumable, one record per line,
split over the ranks under torchrun."""

from __future__ import annotations

import contextlib
import os
import warnings

import click

from decodekit.cli.common import UsageError, os_error_message


def read_input(input_path: str):
    """The lines of --input, streamed as bytes (:func:`decodekit.jsonl_lines`: each is decoded
    on its own, so one bad byte fails one line). A regular file or a pipe (``<(...)``); devices,
    directories and unreadable files are refused here, before anything is written."""
    from decodekit import jsonl_lines

    return jsonl_lines(input_path, "--input")


def _total(input_path: str, keep) -> int | None:
    """How many lines this rank will decode: a first pass over a regular file, None for a pipe
    (which can be read only once)."""
    import stat

    if not stat.S_ISREG(os.stat(input_path).st_mode):
        return None
    mine = (x for n, x in enumerate(read_input(input_path), 1) if keep is None or keep(n))
    return sum(1 for x in mine if not isinstance(x, bytes) or x.removeprefix(b"\xef\xbb\xbf").strip())


def run_batch(model, input_path, output_path, config, resume, batch_size, max_memory) -> None:
    """Decode a JSON-lines file; under torchrun each rank takes every world-th line, writes
    its own part file, and rank 0 merges the parts into --output at the end. Exit status 1 when
    some line got an error record."""
    from tqdm import tqdm

    from decodekit import DecodekitError, distributed, exclusive, generate_jsonl, part_path, results

    lines = read_input(input_path)
    rank, size = distributed.init(getattr(model, "device", None))
    target, keep, skip = output_path, None, None
    with contextlib.ExitStack() as stack:
        if size > 1:
            parts = [part_path(output_path, r) for r in range(size)]
            error = None
            if rank == 0:  # rank 0 holds --output's lock for the whole run
                try:
                    stack.enter_context(exclusive(output_path, "--output"))
                    results.prepare(output_path, resume=resume, parts=parts)
                except (DecodekitError, OSError) as e:  # LockedError, a refused path, a full disk
                    error = os_error_message(e) if isinstance(e, OSError) else str(e)
            if distributed.broadcast_int(error is not None):
                distributed.shutdown()
                if error is None:
                    raise SystemExit(2)  # rank 0 says why
                raise UsageError(error)
            target, skip = parts[rank], results.done_ids(output_path)

            def keep(n: int) -> bool:
                return (n - 1) % size == rank

        total = _total(input_path, keep)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with tqdm(
                total=total,
                unit="prompt",
                desc=f"generate[{rank}]" if size > 1 else "generate",
                disable=None if rank == 0 else True,
            ) as bar:
                counts = generate_jsonl(
                    model, lines, target, config, batch_size=batch_size, resume=resume and size == 1,
                    progress=bar.update, keep=keep, skip_ids=skip, max_memory=max_memory,
                )  # fmt: skip
        for w in caught:
            click.echo(f"Warning: {w.message}", err=True)
        if size > 1:
            counts["skipped"] = distributed.all_sum(counts["skipped"])  # also a barrier
            if rank == 0:
                counts |= results.merge(output_path, parts)  # the totals of all ranks
            counts["errors"] = distributed.broadcast_int(counts["errors"])
            distributed.shutdown()
            if rank != 0:
                raise SystemExit(1 if counts["errors"] else 0)
    errors = counts["errors"]
    click.echo(
        f"{counts['written']} written, {counts['skipped']} skipped (already done), "
        f"{errors} errors -> {output_path}",
        err=True,
    )
    if errors:
        first = f" (first: {counts['first_error']})" if counts.get("first_error") else ""
        click.echo(
            f"Error: {errors} line(s) failed{first}; their error records are in {output_path} "
            "and --resume retries them",
            err=True,
        )
        raise SystemExit(1)
