"""``decodekit constraint``: compile a regex for a model's vocabulary and describe the automaton."""

from __future__ import annotations

import json

import click

from decodekit.cli.common import UsageError, load_model_option, model_options
from decodekit.constraints import DEFAULT_MAX_STATES


@click.command("constraint")
@click.argument("regex")
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
    regex: str, model_spec: str | None, hf_model: str | None, dot: bool, as_json: bool, max_states: int
) -> None:
    """Compile REGEX (a full match of the generated text) for a model's vocabulary and print the
    token automaton's size: states, live states, shortest accepted length in tokens."""
    from decodekit.constraints import as_automaton, check_pattern, describe, to_dot

    if dot and as_json:
        raise UsageError("--dot and --json are exclusive")
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
