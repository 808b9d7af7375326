"""What ``decodekit generate``'s options mean beyond their names: transformers' option names,
options the chosen strategy does not read, a prompt from standard input, a JSON Schema file."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import click

from decodekit import STRATEGIES
from decodekit.cli.common import UsageError


def strategy_name(options: dict) -> str:
    """The strategy a run uses: --strategy, else beam (Anderson-style) under a constraint, else greedy."""
    return STRATEGIES.resolve(options["strategy"], bool(options["constraint"] or options["exclude"]))


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


# transformers' generate() options the CLI takes as flags, and the settings folding them may change
TRANSFORMERS_FLAGS = ("max_new_tokens", "num_beams", "num_return_sequences", "do_sample")
FOLDED = ("strategy", "max_length", "beam_size", "n_best", "num_samples")


def from_transformers(options: dict, given: set[str]) -> None:
    """Fold transformers' option names into ours (in place) with the library's fold
    (``GenerationConfig.replace``, which reads the strategies' declarations), the options typed
    (``given``) counting as set; its refusals of contradictions are usage errors in flags."""
    theirs = {k: options.pop(k) for k in TRANSFORMERS_FLAGS}
    theirs = {k: v for k, v in theirs.items() if v is not None and v is not False}  # --do-sample: a flag
    if not theirs:
        return
    from decodekit import GenerationConfig

    ours = {k: options[k] for k in (*FOLDED, "constraint", "exclude")}
    try:
        base = GenerationConfig(**{k: v for k, v in ours.items() if k not in given})
        folded = base.replace(**{k: v for k, v in ours.items() if k in given}, **theirs)
    except ValueError as e:
        raise UsageError(as_flags(str(e))) from None
    options.update({k: getattr(folded, k) for k in FOLDED})


def as_flags(message: str) -> str:
    """A library message with its names for what the CLI takes as flags said as the flags: the
    strategies (``strategy='masked-beam'`` -> ``--strategy masked-beam``), ``max_length`` and
    transformers' names (``num_beams`` -> ``--num-beams``). The one table from the library's
    names to the CLI's."""
    for name in STRATEGIES:
        for spelled in (f"strategy='{name}'", f'strategy="{name}"', f"strategy '{name}'"):
            message = message.replace(spelled, f"--strategy {name}")
    return re.sub(
        r"\b(" + "|".join(("max_length", *TRANSFORMERS_FLAGS)) + r")\b",
        lambda m: "--" + m.group(1).replace("_", "-"),
        message,
    )


def flagged(error: ValueError) -> UsageError | None:
    """``error`` said with the CLI's flags (:func:`as_flags`), or None when it names none."""
    text = str(error)
    return None if as_flags(text) == text else UsageError(as_flags(text))


def warn_ignored(options: dict, given: set[str]) -> None:
    """Warn (as transformers does) about options the chosen strategy does not read."""
    name = strategy_name(options)
    reads = STRATEGIES[name].reads
    owners: dict[str, str] = {}  # an option -> the first strategy that reads it
    for strategy in STRATEGIES.values():
        owners.update({option: strategy.name for option in strategy.reads if option not in owners})
    for option, owner in owners.items():
        if option not in reads and option in given:
            if option == "temperature" and options.get("temperature") == 0 and name == "greedy":
                continue  # temperature 0 asks for what greedy does
            flag = "--" + option.replace("_", "-")
            click.echo(
                f"Warning: {flag} is ignored: it applies to --strategy {owner}; this run uses {name}",
                err=True,
            )


def read_grammar(path: str) -> Any:
    """The :class:`decodekit.Grammar` in the file ``path`` (Lark or GBNF: the extension, else
    ``::=`` in the text); a missing, unreadable or bad one is a one-line error."""
    from decodekit import Grammar

    return Grammar.from_file(path)


def schema_regex(path: str, whitespace: str = "compact", key_order: str = "schema") -> Any:
    """The constraint of the JSON Schema in ``path``, or written inline (``'{"type": "integer"}'``:
    text starting with ``{`` that names no file), with ``whitespace`` and ``key_order`` as
    :func:`decodekit.json_schema` takes them; one-line errors for unreadable or bad ones."""
    from decodekit import json_schema
    from decodekit.util.files import read_bytes

    if path.lstrip().startswith("{") and not os.path.exists(path):
        text, path = path, "(inline)"
    else:
        try:  # a regular file only (a FIFO would block, a device never end), of at most 16 MiB
            text = read_bytes(path, "--json-schema", max_bytes=16 * 2**20).decode("utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            why = getattr(e, "strerror", None) or e
            raise UsageError(f"cannot read --json-schema {path}: {why}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--json-schema {path} is not JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:
        raise UsageError(f"--json-schema {path} is nested too deeply to parse") from None
    return json_schema(schema, whitespace=whitespace, key_order=key_order)


def stdin_has_input() -> bool:
    """Whether standard input is a pipe or a non-empty file (known without reading it): what
    a PROMPT argument would leave unread."""
    import stat

    try:
        st = os.fstat(sys.stdin.fileno())
    except (OSError, ValueError, AttributeError):  # closed, or not a real file (a test runner's)
        return False
    return stat.S_ISFIFO(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_size > 0)


def read_stdin(required: bool) -> str | None:
    """The prompt piped in (one trailing newline removed); None when nothing came and it was optional.
    At most 64 MiB (the line limit of --input): a stream that goes on (``/dev/zero``) is one line."""
    from decodekit.cli.common import stdin_text

    text = stdin_text("the prompt")
    if not text and not required:
        return None
    return text[:-1] if text.endswith("\n") else text
