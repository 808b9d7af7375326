"""What ``decodekit generate``'s options mean beyond their names: transformers' option names,
options the chosen strategy does not read, a prompt from standard input, a JSON Schema file."""

from __future__ import annotations

import json
import sys

import click

from decodekit.cli.common import UsageError


def resolved_strategy(options: dict) -> str:
    """The strategy a run uses: --strategy, else beam (Anderson-style) under a constraint, else greedy."""
    return options["strategy"] or ("beam" if options["constraint"] or options["exclude"] else "greedy")


# transformers' generate() options -> decodekit's (docs/decoding.md has the table)
TRANSFORMERS_NAMES = {
    "max_new_tokens": "--max-length",
    "num_beams": "--strategy beam --beam-size",
    "num_return_sequences": "--n-best (beam) or --num-samples (sample)",
    "do_sample": "--strategy sample",
}
ONLY_FOR = {  # options that only one strategy reads
    "sample": ("temperature", "top_k", "top_p", "min_p", "num_samples", "seed"),
    "beam": ("beam_size", "length_penalty", "n_best"),
}


def described_constraints(config) -> str:
    """The constraints in words, for the no-match message."""
    c, exclude = config.constraint, list(config.exclude)
    if not exclude and not isinstance(c, tuple):
        return repr(c)
    patterns = list(c) if isinstance(c, tuple) else [] if c is None else [c]
    return (f"all of {patterns}" if patterns else "any text") + (f" and none of {exclude}" if exclude else "")


def given_options(ctx: click.Context) -> set[str]:
    """The options the user typed (or set through the environment), not defaults."""
    from click.core import ParameterSource

    typed = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    return {name for name in ctx.params if ctx.get_parameter_source(name) in typed}


def from_transformers(options: dict, given: set[str]) -> None:
    """Fold transformers' option names into ours (in place), refusing contradictions."""
    new_tokens = options.pop("max_new_tokens")
    beams, returned, do_sample = (options.pop(k) for k in ("num_beams", "num_return_sequences", "do_sample"))
    if new_tokens is not None:
        if "max_length" in given:
            raise UsageError("give --max-length or --max-new-tokens (the same option), not both")
        options["max_length"] = new_tokens
    wanted = "sample" if do_sample else ("beam" if beams is not None and beams > 1 else None)
    if wanted is not None and options["strategy"] not in (None, wanted):
        raise UsageError(
            f"--strategy {options['strategy']} contradicts {'--do-sample' if do_sample else '--num-beams'}"
        )
    if wanted is not None:
        options["strategy"] = wanted
    if beams is not None:
        options["beam_size"] = beams
    if returned is not None:
        strategy = resolved_strategy(options)
        if strategy == "greedy" and returned > 1:
            raise UsageError("greedy search returns one sequence: add --num-beams N or --do-sample")
        options["num_samples" if strategy == "sample" else "n_best"] = returned


def warn_ignored(options: dict, given: set[str]) -> None:
    """Warn (as transformers does) about options the chosen strategy does not read."""
    strategy = resolved_strategy(options)
    for owner, names in ONLY_FOR.items():
        for name in names:
            if owner != strategy.removeprefix("masked-") and name in given:
                flag = "--" + name.replace("_", "-")
                click.echo(
                    f"Warning: {flag} is ignored: it applies to --strategy {owner}; this run uses {strategy}",
                    err=True,
                )


def schema_regex(path: str) -> str:
    """The regex of the JSON Schema in ``path`` (one-line errors for unreadable or bad files)."""
    from decodekit import json_schema, read_bytes

    try:  # a regular file only (a FIFO would block, a device never end), of at most 16 MiB
        text = read_bytes(path, "--json-schema", max_bytes=16 * 2**20).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read --json-schema {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--json-schema {path} is not JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:
        raise UsageError(f"--json-schema {path} is nested too deeply to parse") from None
    return json_schema(schema)


def read_stdin(required: bool) -> str | None:
    """The prompt piped in (one trailing newline removed); None when nothing came and it was optional."""
    text = sys.stdin.read()
    if not text and not required:
        return None
    return text[:-1] if text.endswith("\n") else text
