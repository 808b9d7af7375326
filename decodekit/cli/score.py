"""``decodekit score``: the log-probability and perplexity of each line, as KenLM's ``query``."""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections.abc import Iterator
from typing import BinaryIO

import click

from decodekit.cli.common import (
    UsageError,
    load_model_option,
    model_options,
    need_vocab,
    set_threads,
    threads_option,
)


@click.command("score")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@model_options
@threads_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, then a summary object.")
def score_command(
    file: str, model_spec: str | None, hf_model: str | None, device: str, threads: int | None, as_json: bool
) -> None:
    """Score each line of FILE ('-': standard input) as one sentence: the sum of
    log p(w_t | w_<t) over its tokens and the end of sentence, predicted from a sentence boundary
    (the model's BOS, else its EOS, as context), and its perplexity exp(-logprob / tokens).

    Prints per line: log10 probability, perplexity, tokens (EOS counted), unknown tokens, the
    text; then the total on stderr. With --json: {"line", "text", "logprob" (natural log),
    "log10prob", "tokens", "unknown", "perplexity"} per line and a final {"total": ...} object."""

    from decodekit.models import stream_logprobs

    lines = _lines(file)
    model = load_model_option(model_spec, hf_model, device)
    set_threads(threads, model)
    vocab = need_vocab(model, "score")
    if model.bos_id is None and model.eos_id is None:
        raise UsageError("score needs a model with a BOS or an EOS token to start a sentence from")
    total_lp, total_tokens, total_unknown = 0.0, 0, 0
    for number, text in enumerate(lines, start=1):
        ids = vocab.encode(text, warn_unknown=False) if text.strip() else []
        unknown = sum(1 for i in ids if i == getattr(vocab, "unk_id", None))
        end = [model.eos_id] if model.eos_id is not None else []
        stream = ids + end if model.bos_id is not None else [model.eos_id, *ids, *end]
        logprob = float(stream_logprobs(model, stream).double().sum())
        tokens = len(ids) + len(end)
        total_lp, total_tokens = total_lp + logprob, total_tokens + tokens
        total_unknown += unknown
        ppl = math.exp(-logprob / tokens) if tokens else float("nan")
        if as_json:
            record = {"line": number, "text": text, "logprob": logprob, "log10prob": logprob / math.log(10)}
            click.echo(json.dumps(record | {"tokens": tokens, "unknown": unknown, "perplexity": ppl}))
        else:
            click.echo(f"{logprob / math.log(10):.4f}\t{ppl:.2f}\t{tokens}\t{unknown}\t{text}")
    ppl = math.exp(-total_lp / total_tokens) if total_tokens else float("nan")
    summary = {"logprob": total_lp, "tokens": total_tokens, "unknown": total_unknown, "perplexity": ppl}
    if as_json:
        click.echo(json.dumps({"total": summary}))
    else:
        click.echo(
            f"Total: log10 {total_lp / math.log(10):.4f}, perplexity {ppl:.2f} over {total_tokens} tokens "
            f"({total_unknown} unknown)",
            err=True,
        )


def _lines(file: str) -> Iterator[str]:
    """The lines of FILE (a regular file, or standard input for '-'), read one at a time: memory
    is bounded by the longest line, of at most :data:`~decodekit.util.files.MAX_LINE_BYTES` (64 MiB, as
    ``generate --input``); a longer one is an error (exit 2), with the lines before it scored.
    The first line is read here, before the model loads, so that a missing, unreadable, binary or
    endless (``/dev/zero``) file is one line at once. A UTF-8 BOM is ignored; ``\\r\\n``,
    ``\\r`` and the other line ends of ``str.splitlines`` end a line."""
    from decodekit.util.files import open_regular

    if file == "-":
        stream, name = sys.stdin.buffer, "standard input"
    else:
        try:
            stream, name = open_regular(file, "score FILE"), file
        except FileNotFoundError:
            raise UsageError(f"{file}: no such file") from None
    lines = _read(stream, name, close=file != "-")
    first = next(lines, None)
    return iter(()) if first is None else itertools.chain([first], lines)


def _read(stream: BinaryIO, name: str, close: bool) -> Iterator[str]:
    from decodekit.util.files import MAX_LINE_BYTES, bounded_lines

    try:
        for number, data in enumerate(bounded_lines(stream, MAX_LINE_BYTES), start=1):
            if data is None:
                raise UsageError(
                    f"{name}: line {number} is longer than {MAX_LINE_BYTES:,} bytes "
                    "(score reads one sentence per line)"
                )
            try:
                text = data.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                bad = data[e.start : e.start + 1]
                raise UsageError(f"{name}: not UTF-8 text (line {number}, byte {e.start}: {bad!r})") from None
            yield from text.splitlines() or [""]
    finally:
        if close:
            stream.close()
