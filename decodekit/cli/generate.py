"""``decodekit generate``: decode a prompt, or a JSON-lines file of prompts, with any strategy."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import warnings

import click

from decodekit.cli import cli
from decodekit.cli.common import UsageError, load_model_option, model_options

STRATEGIES = ("greedy", "sample", "beam")
STRATEGY_HELP = (
    "Search strategy. Default: beam with --constraint/--exclude (Anderson-style search), else greedy."
)


@cli.command()
@click.argument("prompt", required=False)
@model_options
@click.option("--strategy", type=click.Choice(STRATEGIES), help=STRATEGY_HELP)
@click.option(
    "--constraint",
    metavar="REGEX",
    multiple=True,
    help="Regex the whole continuation must match: '.*\\bprofit\\b.*'. Repeatable: all must match.",
)
@click.option(
    "--exclude",
    metavar="REGEX",
    multiple=True,
    help="Regex that must match nowhere in the continuation. Repeatable.",
)
@click.option(
    "--max-length",
    type=click.IntRange(min=0),
    default=30,
    show_default=True,
    help="Most tokens to generate, EOS included.",
)
@click.option("--beam-size", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--length-penalty",
    type=float,
    default=1.0,
    show_default=True,
    callback=lambda ctx, param, value: _finite(value),
    help="alpha in score = logprob / len**alpha (0: raw log-probability).",
)
@click.option(
    "--n-best", type=click.IntRange(min=1), default=1, show_default=True, help="Hypotheses per prompt (beam)."
)
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=click.IntRange(min=1), default=None)
@click.option("--top-p", type=float, default=None)
@click.option("--min-p", type=float, default=None)
@click.option(
    "--num-samples", type=click.IntRange(min=1), default=1, show_default=True, help="Samples per prompt."
)
@click.option("--seed", type=int, default=None, help="Random seed for sampling (reproducible output).")
@click.option(
    "--json-schema",
    "json_schema_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A JSON Schema the continuation must satisfy (compact JSON; the subset: docs/constraints.md).",
)
@click.option(
    "--suppress",
    multiple=True,
    metavar="TOKEN",
    help="A token never to generate (repeatable), as transformers' suppress_tokens.",
)
@click.option(
    "--allow-unk",
    is_flag=True,
    help="Let the model generate <unk> (by default the vocabulary's <unk> is suppressed).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per hypothesis per line (with per-token log-probabilities).",
)
@click.option(
    "--dot",
    "dot_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write a Graphviz drawing of the search (the beam tree; per-state beams under a constraint).",
)
@click.option(
    "--input",
    "input_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="JSON lines {id, prompt, [constraint, options]} to decode instead of PROMPT.",
)
@click.option(
    "--output",
    "output_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Where --input results go, one JSON object per input line.",
)
@click.option("--resume", is_flag=True, help="With --input: skip ids already in --output.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Prompts decoded together (--input).",
)
@click.option("--max-new-tokens", type=click.IntRange(min=0), hidden=True)  # transformers' names:
@click.option("--num-beams", type=click.IntRange(min=1), hidden=True)  # see TRANSFORMERS_NAMES
@click.option("--num-return-sequences", type=click.IntRange(min=1), hidden=True)
@click.option("--do-sample", is_flag=True, default=None, hidden=True)
@click.option(
    "--max-memory",
    metavar="SIZE",
    help="Memory a search may use, e.g. 8G (default: $DECODEKIT_MAX_MEMORY, else 90% of the free memory).",
)
def generate(
    prompt,
    model_spec,
    hf_model,
    device,
    as_json,
    json_schema_path,
    dot_path,
    input_path,
    output_path,
    resume,
    batch_size,
    max_memory,
    **options,
):
    """Generate a continuation of PROMPT (text, tokenised by the model's vocabulary; "-" or
    a pipe: read it from standard input).

    transformers' names are accepted: --max-new-tokens (= --max-length), --num-beams N
    (= --strategy beam --beam-size N), --num-return-sequences N (= --n-best / --num-samples),
    --do-sample (= --strategy sample).

    \b
    Examples:
      decodekit generate "the company said"
      decodekit generate "the company said" --constraint '.*\\bprofit\\b.*'
      decodekit generate "the" --strategy sample --top-p 0.9 --seed 1 --num-samples 3 --json
      echo "the company said" | decodekit generate --strategy beam
      decodekit generate --input prompts.jsonl --output results.jsonl --resume
    """
    from decodekit import GenerationConfig
    from decodekit import generate as run

    given = _given(click.get_current_context())
    patterns = options["constraint"]  # one: a string (as before), several: all must match
    options["constraint"] = None if not patterns else patterns[0] if len(patterns) == 1 else patterns
    options["exclude"] = tuple(options["exclude"])
    _from_transformers(options, given)
    if prompt == "-" or (prompt is None and input_path is None and not sys.stdin.isatty()):
        prompt = _read_stdin(required=prompt == "-")
    if (prompt is None) == (input_path is None):
        raise UsageError("give either a PROMPT (or text on standard input) or --input FILE")
    if input_path is None:
        _warn_ignored(options, given)
    if input_path is not None and output_path is None:
        raise UsageError("--input needs --output FILE")
    if input_path is not None and dot_path is not None:
        raise UsageError("--dot draws the search of one PROMPT; it cannot be used with --input")
    if max_memory is not None:
        from decodekit import parse_size

        try:
            max_memory = parse_size(max_memory)
        except ValueError as e:
            raise UsageError(f"--max-memory: {e}") from None
    options["suppress"] = tuple(options["suppress"])
    if json_schema_path is not None:  # --exclude still applies to the JSON text
        if patterns:
            raise UsageError("give --constraint or --json-schema, not both")
        options["constraint"] = _schema_regex(json_schema_path)
    config = GenerationConfig(**options)  # the remaining options are GenerationConfig's fields
    model = load_model_option(model_spec, hf_model, device)
    if input_path is not None:
        _batch(model, input_path, output_path, config, resume, batch_size, max_memory)
        return
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        raise UsageError("this model has no vocabulary, so text prompts cannot be encoded")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = vocab.encode(prompt)
    for w in caught:
        click.echo(f"Warning: {w.message}", err=True)
    tree = None
    if dot_path is not None:
        from decodekit import SearchTree

        tree = SearchTree()
    try:
        hyps = run(model, [ids], config, max_memory=max_memory, record=tree)[0]
    except ValueError:
        raise  # decodekit's own errors: printed as they are
    except (RuntimeError, IndexError, MemoryError) as e:  # the model failed (a backend limit, ...)
        reason = (str(e).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"the model failed on this input: {type(e).__name__}: {reason}") from None
    if not hyps:
        click.echo(
            f"Error: no continuation matching {_wanted(config)} was found within "
            f"--max-length {config.max_length}; try a larger --beam-size or --max-length",
            err=True,
        )
        raise SystemExit(1)
    if tree is not None:
        try:
            with open(dot_path, "w", encoding="utf-8") as f:
                f.write(tree.to_dot(vocab))
        except OSError as e:
            raise UsageError(f"cannot write --dot {dot_path}: {e.strerror}") from None
    for h in hyps:
        click.echo(json.dumps(h.to_dict(vocab), ensure_ascii=False) if as_json else h.text(vocab))


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


def _wanted(config) -> str:
    """The constraints in words, for the no-match message."""
    c, exclude = config.constraint, list(config.exclude)
    if not exclude and not isinstance(c, tuple):
        return repr(c)
    patterns = list(c) if isinstance(c, tuple) else [] if c is None else [c]
    return (f"all of {patterns}" if patterns else "any text") + (f" and none of {exclude}" if exclude else "")


def _given(ctx: click.Context) -> set[str]:
    """The options the user typed (or set through the environment), not defaults."""
    from click.core import ParameterSource

    typed = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    return {name for name in ctx.params if ctx.get_parameter_source(name) in typed}


def _from_transformers(options: dict, given: set[str]) -> None:
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
        strategy = options["strategy"] or (
            "beam" if options["constraint"] or options["exclude"] else "greedy"
        )
        if strategy == "greedy" and returned > 1:
            raise UsageError("greedy search returns one sequence: add --num-beams N or --do-sample")
        options["n_best" if strategy == "beam" else "num_samples"] = returned


def _warn_ignored(options: dict, given: set[str]) -> None:
    """Warn (as transformers does) about options the chosen strategy does not read."""
    strategy = options["strategy"] or ("beam" if options["constraint"] or options["exclude"] else "greedy")
    for owner, names in ONLY_FOR.items():
        for name in names:
            if owner != strategy and name in given:
                flag = "--" + name.replace("_", "-")
                click.echo(
                    f"Warning: {flag} is ignored: it applies to --strategy {owner}; this run uses {strategy}",
                    err=True,
                )


def _schema_regex(path: str) -> str:
    """The regex of the JSON Schema in ``path`` (one-line errors for unreadable or bad files)."""
    from decodekit import json_schema

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(16 * 2**20)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read --json-schema {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--json-schema {path} is not JSON: {e.msg} at line {e.lineno}") from None
    return json_schema(schema)


def _read_stdin(required: bool) -> str | None:
    """The prompt piped in (one trailing newline removed); None when nothing came and it was optional."""
    text = sys.stdin.read()
    if not text and not required:
        return None
    return text[:-1] if text.endswith("\n") else text


def _read_input(input_path: str) -> list[bytes]:
    """The lines of --input as bytes (each is decoded on its own: one bad byte fails one line).
    A regular file or a pipe (``<(...)``); devices and directories are refused."""
    import stat

    try:
        st = os.stat(input_path)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise UsageError(f"--input {input_path} is not a regular file or a pipe")
        with open(input_path, "rb") as f:
            return f.read().split(b"\n")
    except OSError as e:
        raise UsageError(f"cannot read --input {input_path}: {e.strerror}") from None


def _batch(model, input_path, output_path, config, resume, batch_size, max_memory) -> None:
    """Decode a JSON-lines file; under torchrun each rank takes every world-th line, writes
    its own part file, and rank 0 merges the parts into --output at the end. Exit status 1 when
    some line got an error record."""
    from tqdm import tqdm

    from decodekit import LockedError, distributed, exclusive, generate_jsonl, part_path, results

    lines = _read_input(input_path)
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
                except (LockedError, OSError) as e:
                    error = str(e)
            if distributed.broadcast_int(error is not None):
                distributed.shutdown()
                if error is None:
                    raise SystemExit(2)  # rank 0 says why
                raise UsageError(error)
            target, skip = parts[rank], results.done_ids(output_path)

            def keep(n: int) -> bool:
                return (n - 1) % size == rank

        total = sum(1 for n, x in enumerate(lines, 1) if x.strip() and (keep is None or keep(n)))
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


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise click.BadParameter(f"must be a finite number, got {value}")
    return value
