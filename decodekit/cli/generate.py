"""``decodekit generate``: decode a prompt, or a JSON-lines file of prompts, with any strategy."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import warnings
from pathlib import Path

import click

from decodekit import STRATEGIES
from decodekit.cli.common import (
    UsageError,
    file_option,
    load_model_option,
    model_options,
    need_vocab,
    set_threads,
)
from decodekit.cli.generate_batch import run_batch
from decodekit.cli.generate_options import (
    described_constraints,
    flagged,
    from_transformers,
    given_options,
    read_grammar,
    read_stdin,
    schema_regex,
    stdin_has_input,
    warn_ignored,
)

STRATEGY_HELP = (
    "Search strategy. beam with --constraint: Anderson-style (one beam per automaton state); "
    "masked-beam: one beam, each step masked (huge patterns); diverse-beam: --num-beam-groups groups; "
    "stochastic-beam: --beam-size distinct samples without replacement; mbr: the best of --num-samples "
    "samples by expected --mbr-utility. Default: beam with a constraint, else greedy."
)


# json_schema()'s spelling choices, the first of each its default
JSON_FORMS = {
    name: {"type": click.Choice(choices), "default": choices[0], "show_default": True}
    for name, choices in {"whitespace": ["compact", "flexible"], "key_order": ["schema", "any"]}.items()
}


@click.command("generate")
@click.argument("prompt", required=False)
@model_options
@click.option("--strategy", type=click.Choice(list(STRATEGIES)), help=STRATEGY_HELP)
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
@click.option("--typical-p", type=float, help="Locally typical sampling's mass (Meister et al.).")
@click.option("--epsilon-cutoff", type=float, default=None, help="Drop tokens of probability < this.")
@click.option(
    "--eta-cutoff", type=float, default=None, help="Drop tokens below min(eta, sqrt(eta) * exp(-entropy))."
)
@click.option(
    "--num-samples", type=click.IntRange(min=1), default=1, show_default=True, help="Samples per prompt."
)
@click.option("--seed", type=int, default=None, help="Random seed for sampling (reproducible output).")
@click.option(
    "--num-beam-groups",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="diverse-beam: groups of --beam-size / N beams (transformers' num_beam_groups).",
)
@click.option(
    "--diversity-penalty",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="diverse-beam: subtracted per earlier group's use of a token at the same step (Hamming diversity).",
)
@click.option(
    "--mbr-utility",
    type=click.Choice(["f1", "exact", "chrf"]),
    default="f1",
    show_default=True,
    help="mbr: token-level F1, exact match, or chrF (needs sacrebleu).",
)
@file_option(
    "--grammar",
    "grammar_path",
    "A context-free grammar (Lark or GBNF, told by the extension or '::=') the continuation must be "
    "a sentence of: complete within --max-new-tokens (docs/constraints.md, 'Grammars'). With --constraint "
    "and --exclude, a sentence that also matches each and contains none.",
)
@file_option(
    "--json-schema",
    "json_schema_path",
    "A JSON Schema the continuation must satisfy (the subset: docs/constraints.md).",
)
@click.option(
    "--json-whitespace",
    **JSON_FORMS["whitespace"],
    help="With --json-schema: no whitespace, or one optional space after each ':' and ','.",
)
@click.option(
    "--json-key-order",
    **JSON_FORMS["key_order"],
    help="With --json-schema: properties in the schema's order, or any order (objects of up to 4).",
)
@click.option(
    "--suppress",
    multiple=True,
    metavar="TOKEN",
    help="A token never to generate (repeatable), as transformers' suppress_tokens: its text as "
    "generated (' is'), its vocabulary entry ('Ġis') or its id (318).",
)
@click.option(
    "--allow-unk",
    is_flag=True,
    help="Let the model generate <unk> (by default the vocabulary's <unk> is suppressed).",
)
@click.option(
    "--truncate",
    "truncation",
    type=click.Choice(["left", "right"]),
    default=None,
    help="Cut a prompt longer than the model's window (with --max-length new tokens): left keeps its "
    "last tokens, right its first (transformers' truncation_side).",
)
@click.option(
    "--stop",
    multiple=True,
    metavar="TEXT",
    help="End the text once it contains TEXT (repeatable; kept in the output): transformers' stop_strings.",
)
@click.option(
    "--repetition-penalty",
    type=float,
    default=1.0,
    show_default=True,
    help="Multiply the log-probability of every token already seen by this (> 1 discourages repeats).",
)
@click.option(
    "--presence-penalty",
    type=click.FloatRange(-2, 2),
    default=0.0,
    help="Subtract this from the logit of every token already generated (the OpenAI API's, in [-2, 2]).",
)
@click.option(
    "--frequency-penalty",
    type=click.FloatRange(-2, 2),
    default=0.0,
    help="Subtract this times its count so far from each generated token's logit (OpenAI's, in [-2, 2]).",
)
@click.option(
    "--logit-bias",
    multiple=True,
    metavar="TOKEN=BIAS",
    help="Add BIAS (in [-100, 100]) to TOKEN's logit (repeatable; TOKEN as --suppress takes it).",
)
@click.option(
    "--bad-words",
    multiple=True,
    metavar="TEXT",
    help="Never generate TEXT's token sequence (repeatable): transformers' bad_words_ids, vLLM's bad_words.",
)
@click.option(
    "--no-repeat-ngram-size",
    type=click.IntRange(min=0),
    default=0,
    help="Never generate an n-gram of this size twice (the prompt's included).",
)
@click.option(
    "--min-new-tokens",
    type=click.IntRange(min=0),
    default=0,
    help="No EOS before this many tokens are generated.",
)
@click.option(
    "--assistant-model",
    "assistant_spec",
    metavar="SPEC",
    help="Speculative decoding: a draft model over the same vocabulary (as --model: a directory, a "
    "bundled name or an .arpa n-gram) proposes tokens the model verifies, several per call; greedy "
    "and sampling only, the same outputs (greedy) or distribution (sampling) as without it.",
)
@click.option(
    "--num-assistant-tokens",
    type=click.IntRange(min=1),
    help="Tokens the draft proposes per call (default: adaptive, +2 after a fully kept draft, -1 else).",
)
@click.option(
    "--prompt-lookup",
    "prompt_lookup_num_tokens",
    type=click.IntRange(min=1),
    metavar="N",
    help="Speculative decoding without a draft model: propose the N tokens that followed the last "
    "bigram's (else token's) first earlier occurrence in the prompt and text so far.",
)
@click.option(
    "--fast-forward/--no-fast-forward",
    default=False,
    help="Under a constraint, feed the tokens every row is forced to take (a fixed key, a "
    "separator) to the model in one call with the chosen one: the same outputs, fewer calls.",
)
@click.option(
    "--draft-forced-text",
    is_flag=True,
    default=False,
    help="Under a constraint, any strategy: propose the text the constraint forces next (a key a "
    "tokenizer may split several ways) as a draft the model reads in one call, kept where the search "
    "takes it: the same outputs, fewer calls (pays on large models).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="torch CPU threads (default: 1 for a model under 20M parameters, else torch's choice).",
)
@click.option(
    "--stream",
    is_flag=True,
    help="Print the text as it is generated (greedy or sampling, one PROMPT, one sample).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per hypothesis per line (with per-token log-probabilities).",
)
@click.option(
    "--logprobs",
    type=click.IntRange(min=0),
    help="With --json: the N most probable tokens at each position (OpenAI's logprobs.content layout).",
)
@click.option(
    "--prompt-logprobs",
    type=click.IntRange(min=0),
    help="With --json: each prompt token's log-probability and the N most probable there (vLLM's).",
)
@file_option(
    "--dot",
    "dot_path",
    "Write a Graphviz drawing of the search (the beam tree; per-state beams under a constraint).",
)
@file_option(
    "--input",
    "input_path",
    "JSON lines {id, prompt, [constraint, options]} to decode instead of PROMPT.",
)
@file_option("--output", "output_path", "Where --input results go, one JSON object per input line.")
@click.option("--resume", is_flag=True, help="With --input: skip ids already in --output.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Prompts decoded together (--input).",
)
@click.option("--max-new-tokens", type=click.IntRange(min=0), hidden=True)  # transformers' names:
@click.option("--num-beams", type=click.IntRange(min=1), hidden=True)  # see from_transformers
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
    stream,
    grammar_path,
    json_schema_path,
    json_whitespace,
    json_key_order,
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

    given = given_options(click.get_current_context())
    patterns = options["constraint"]  # one: a string (as before), several: all must match
    options["constraint"] = None if not patterns else patterns[0] if len(patterns) == 1 else patterns
    options["exclude"] = tuple(options["exclude"])
    from_transformers(options, given)
    if prompt == "-" or (prompt is None and input_path is None and not sys.stdin.isatty()):
        prompt = read_stdin(required=prompt == "-")
    elif prompt is not None and stdin_has_input():
        click.echo("Warning: standard input is not read: a PROMPT was given (use - to read it)", err=True)
    if input_path not in (None, "-") and not os.path.exists(input_path):  # -: standard input
        raise UsageError(f"--input {input_path}: no such file")  # before loading torch and the model
    if (prompt is None) == (input_path is None):
        raise UsageError("give either a PROMPT (or text on standard input) or --input FILE")
    if resume and output_path is None:
        raise UsageError("--resume needs --output FILE (standard output keeps no records to skip)")
    if input_path is not None and dot_path is not None:
        raise UsageError("--dot draws the search of one PROMPT; it cannot be used with --input")
    _check_outputs(output_path, dot_path)
    if max_memory is not None:
        from decodekit.decoding.memory import parse_size

        try:
            max_memory = parse_size(max_memory)
        except ValueError as e:
            raise UsageError(f"--max-memory: {e}") from None
    options["suppress"] = tuple(options["suppress"])
    options["stop"] = tuple(options["stop"])
    options["logit_bias"] = _biases(options["logit_bias"])
    options["bad_words"] = tuple(options["bad_words"])
    threads = options.pop("threads")
    assistant_spec = options.pop("assistant_spec")
    if assistant_spec is not None and options["prompt_lookup_num_tokens"] is not None:
        raise UsageError("give --assistant-model or --prompt-lookup, not both")
    if grammar_path is not None:
        if json_schema_path is not None:
            raise UsageError("give --grammar or --json-schema, not both")
        grammar = read_grammar(grammar_path)  # a bad grammar: one line, before the model
        for pattern in patterns or ():  # its sentences that also match every --constraint
            grammar = grammar & pattern
        options["constraint"] = grammar  # --exclude applies to it as to a regex
    if json_schema_path is not None:  # --exclude still applies to the JSON text
        if patterns:
            raise UsageError("give --constraint or --json-schema, not both")
        options["constraint"] = schema_regex(json_schema_path, json_whitespace, json_key_order)
    elif given & {"json_whitespace", "json_key_order"}:
        flag = "--json-whitespace" if "json_whitespace" in given else "--json-key-order"
        raise UsageError(f"{flag} applies to --json-schema only")
    from decodekit.constraints import check_pattern

    for pattern in (*(patterns or ()), *options["exclude"]):  # a bad regex: one line, before the model loads
        check_pattern(pattern)
    config = GenerationConfig(**options)  # the remaining options are GenerationConfig's fields
    if input_path is None:  # after the checks: a mistake is one error, not a warning and an error
        warn_ignored(options, given)
    model = load_model_option(model_spec, hf_model, device)
    set_threads(threads, model)
    if assistant_spec is not None:
        config = config.replace(assistant_model=_assistant(assistant_spec, model))
    if input_path is not None:
        run_batch(model, input_path, output_path, config, resume, batch_size, max_memory)
        return
    vocab = need_vocab(model, "generate")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = vocab.encode(prompt)
    for w in caught:
        click.echo(f"Warning: {w.message}", err=True)
    if stream:
        if as_json or dot_path is not None:
            raise UsageError("--stream prints text: it cannot be used with --json or --dot")
        try:
            _stream(model, ids, config, vocab, max_memory)
        except ValueError as e:
            raise flagged(e) or e from None
        return
    tree = None
    if dot_path is not None:
        from decodekit import SearchTree

        tree = SearchTree()
    from tqdm import tqdm

    # a bar on a terminal's stderr once a run has taken 3 s (a grid over a large automaton)
    bar = tqdm(total=config.max_length, unit="step", delay=3, leave=False, disable=not sys.stderr.isatty())
    stopped = _Interrupt()

    def step(_) -> bool:
        bar.update()
        return stopped.asked  # Ctrl-C: end after this step and print the best so far

    try:
        with stopped:
            hyps = run(model, [ids], config, max_memory=max_memory, record=tree, observe=step)[0]
    except ValueError as e:  # decodekit's own errors: printed as they are, the library's names as flags
        raise flagged(e) or e from None
    except (RuntimeError, IndexError, MemoryError) as e:  # the model failed (a backend limit, ...)
        reason = (str(e).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"the model failed on this input: {type(e).__name__}: {reason}") from None
    finally:
        bar.close()
    if not hyps and stopped.asked:
        click.echo("Interrupted before any hypothesis was complete", err=True)
        raise SystemExit(130)
    if not hyps:
        click.echo(
            f"Error: no continuation matching {described_constraints(config)} was found within "
            f"--max-length {config.max_length}; try a larger --beam-size or --max-length",
            err=True,
        )
        raise SystemExit(1)
    if tree is not None:
        from decodekit.util.files import atomic_write

        text = tree.to_dot(vocab)
        try:
            atomic_write(Path(dot_path), lambda p: p.write_text(text, encoding="utf-8"), "--dot")
        except OSError as e:
            raise UsageError(f"cannot write --dot {dot_path}: {e.strerror}") from None
    for h in hyps:  # a --json line echoes its prompt, as a batch record does
        line = {"prompt": prompt, **h.to_dict(vocab)} if as_json else None
        click.echo(json.dumps(line, ensure_ascii=False) if as_json else h.decode(vocab))
    if stopped.asked:  # Ctrl-C: the best so far are printed; the status says they are not the end
        click.echo("Interrupted: the hypotheses above are the best found so far", err=True)
        raise SystemExit(130)


class _Interrupt:
    """While it is entered (in the main thread): the first Ctrl-C only asks the search to stop
    after its step (``asked``), so that the best hypotheses so far are printed and the command
    exits 130; a second one interrupts at once, as without it."""

    def __init__(self) -> None:
        self.asked, self._before = False, None

    def _handle(self, signum, frame) -> None:
        self.asked = True
        signal.signal(signal.SIGINT, self._before)  # a second Ctrl-C: the usual KeyboardInterrupt

    def __enter__(self) -> _Interrupt:
        if threading.current_thread() is threading.main_thread():
            self._before = signal.signal(signal.SIGINT, self._handle) or signal.default_int_handler
        return self

    def __exit__(self, *exc) -> None:
        if self._before is not None and signal.getsignal(signal.SIGINT) == self._handle:
            signal.signal(signal.SIGINT, self._before)


def _stream(model, ids: list[int], config, vocab, max_memory) -> None:
    """Print the continuation as its tokens come (decodekit.stream_text): each time the part of the
    decoded text not printed yet, holding back a character still split across tokens."""
    from decodekit import stream_text

    for piece in stream_text(model, ids, config, max_memory=max_memory):
        click.echo(piece, nl=False)
        sys.stdout.flush()
    click.echo("")


def _assistant(spec: str, model):
    """The draft ``--assistant-model`` names, on the model's device; an ARPA file's words are mapped
    onto the model's vocabulary (a draft must share its ids)."""
    from decodekit import load_model
    from decodekit.models import read_arpa

    vocab = getattr(model, "vocab", None)
    if spec.endswith(".arpa") and vocab is not None and os.path.isfile(spec):
        return read_arpa(spec, vocab=vocab).to(getattr(model, "device", "cpu"))
    return load_model(spec, device=getattr(model, "device", None))


def _check_outputs(output_path: str | None, dot_path: str | None) -> None:
    """Refuse an output that exists and is not a regular file (``/dev/null``, a FIFO) before the
    model is loaded; a symlink is followed (its target is written)."""
    from decodekit.util.files import writable_target

    for path, what in ((output_path, "--output"), (dot_path, "--dot")):
        if path is not None:
            writable_target(path, what)


def _biases(given: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
    """--logit-bias TOKEN=BIAS values as (token, bias) pairs (split at the last '=')."""
    out = []
    for item in given:
        token, sep, bias = item.rpartition("=")
        try:
            out.append((token, float(bias)))
        except ValueError:
            sep = ""
        if not sep or not token:
            raise UsageError(f"--logit-bias takes TOKEN=BIAS (' the=-5', '50256=-100'), got {item!r}")
    return tuple(out)


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise click.BadParameter(f"must be a finite number, got {value}")
    return value
