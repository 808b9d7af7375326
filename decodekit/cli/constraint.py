"""``decodekit constraint``: compile a regex for a model's vocabulary and describe the automaton."""

from __future__ import annotations

import json

import click

from decodekit.cli.common import UsageError, load_model_option, model_options
from decodekit.constraints import DEFAULT_MAX_STATES


@click.command("constraint")
@click.argument("regex", required=False)
@click.option(
    "--grammar",
    "grammar_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Describe a Lark or GBNF grammar instead of a regex: its sizes and rules, and the token "
    "automaton's first states for the model's vocabulary where it can take a grammar.",
)
@click.option(
    "--json-schema",
    "json_schema",
    metavar="SCHEMA",
    help="Describe the constraint of a JSON Schema instead of a regex: a file, or the schema written "
    'inline (\'{"type": "integer"}\').',
)
@model_options(device=False)  # only the vocabulary is used: the model stays on the CPU
@click.option("--dot", is_flag=True, help="Print a Graphviz drawing of the token-level automaton instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the sizes as one JSON object.")
@click.option(
    "--max-states",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_STATES,
    show_default=True,
    help="State guard: the most automaton states a compile may build.",
)
def constraint(
    regex: str | None,
    grammar_path: str | None,
    json_schema: str | None,
    model_spec: str | None,
    hf_model: str | None,
    dot: bool,
    as_json: bool,
    max_states: int,
) -> None:
    """Compile REGEX (a full match of the generated text) for a model's vocabulary and print the
    token automaton's size: states, live states, shortest accepted length in tokens. With
    --json-schema SCHEMA: the same for the schema's constraint; with --grammar FILE: the grammar's
    sizes and rules instead."""
    from decodekit.constraints import as_automaton, check_pattern, describe, to_dot

    if dot and as_json:
        raise UsageError("--dot and --json are exclusive")
    if sum(x is not None for x in (regex, grammar_path, json_schema)) != 1:
        raise UsageError("give a REGEX, --grammar FILE or --json-schema SCHEMA (one of them)")
    if grammar_path is not None:
        return _grammar(grammar_path, model_spec, hf_model, dot, as_json)
    if json_schema is not None:
        from decodekit.cli.generate_options import schema_regex

        regex = schema_regex(json_schema)  # a bad schema: one line, before the model loads
    check_pattern(regex)  # a bad regex is reported before any model is loaded
    model = load_model_option(model_spec, hf_model)
    automaton = as_automaton(regex, model, max_states=max_states)
    if dot:
        vocab = model.vocab
        tokens = vocab.surface_bytes() if hasattr(vocab, "surface_bytes") else vocab.surfaces()
        click.echo(to_dot(automaton, tokens))
        return
    info = describe(automaton)
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(f"pattern            {regex!r}")
    click.echo(f"vocabulary         {info['vocab_size']} tokens, separator {automaton.separator!r}")
    click.echo(f"character DFA      {info['char_states']} states")
    click.echo(f"byte DFA (UTF-8)   {info['byte_states']} states")
    click.echo(
        f"token automaton    {info['candidate_states']} candidate states, {info['live_states']} live "
        f"(reachable and co-reachable), {info['states']} after merging equivalent states"
    )
    click.echo(f"accepting states   {info['accepting_states']}")
    click.echo(f"transitions        {info['transitions']} live (state, token) pairs")
    click.echo(f"shortest match     {info['shortest']} token(s)")


def _grammar(path: str, model_spec: str | None, hf_model: str | None, dot: bool, as_json: bool) -> None:
    """``constraint --grammar FILE``: the grammar's sizes and rules (read before any model loads),
    then, for the model's vocabulary, the fewest tokens of a sentence; a vocabulary that cannot
    take a grammar (a word vocabulary) is said in one line after the drawing."""
    from decodekit import Grammar
    from decodekit.constraints import ConstraintError, as_automaton

    if dot:
        raise UsageError("--dot draws a regex's automaton; a grammar's states are unbounded")
    grammar = Grammar.from_file(path)
    cfg, regular = grammar.cfg, grammar.regular
    info = {
        "grammar": grammar.source,
        "syntax": grammar.syntax,
        "start": grammar.start,
        "rules": len(cfg.rules),
        "nonterminals": len(cfg.nonterminals),
        "terminals": len(cfg.terminals),
        "engine_rules": len(regular.rules),
        "engine_terminals": len(regular.terminals),
    }
    model = load_model_option(model_spec, hf_model)
    try:
        automaton = as_automaton(grammar, model)
        info["shortest"], info["vocab_size"] = automaton.shortest, automaton.vocab_size
    except ConstraintError as e:
        info["unusable"] = str(e)
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(grammar.describe())
    if "unusable" in info:
        click.echo(f"this model's vocabulary: {info['unusable']}")
    else:
        click.echo(f"shortest sentence  {info['shortest']} token(s) of {info['vocab_size']}")
