"""``decodekit constraint``: compile a regex for a model's vocabulary and describe the automaton."""

from __future__ import annotations

import json

import click

from decodekit.cli import cli
from decodekit.cli.common import UsageError


@cli.command("constraint")
@click.argument("regex")
@click.option(
    "--model", "model_spec", metavar="DIR", help="Checkpoint directory (default: the bundled PTB LSTM)."
)
@click.option("--dot", is_flag=True, help="Print a Graphviz drawing of the token-level automaton instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the sizes as one JSON object.")
@click.option(
    "--max-states",
    type=click.IntRange(min=1),
    help="State guard: the most automaton states a compile may build (default: the library's, "
    "decodekit.constraints.DEFAULT_MAX_STATES).",
)
def constraint(regex: str, model_spec: str | None, dot: bool, as_json: bool, max_states: int | None) -> None:
    """Compile REGEX (a full match of the generated text) for a model's vocabulary and print the
    token automaton's size: states, live states, shortest accepted length in tokens."""
    from decodekit import load_model
    from decodekit.constraints import as_automaton, check_pattern

    if dot and as_json:
        raise UsageError("--dot and --json are exclusive")
    check_pattern(regex)  # a bad regex is reported before any model is loaded
    model = load_model(model_spec)
    limits = {} if max_states is None else {"max_states": max_states}  # None: the library's default
    automaton = as_automaton(regex, model, **limits)
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


def describe(automaton) -> dict:
    """The sizes ``decodekit constraint`` prints, as a dict."""
    return {
        "pattern": automaton.pattern,
        "vocab_size": automaton.vocab_size,
        "separator": automaton.separator,
        "char_states": automaton.stats.get("char_states"),
        "byte_states": automaton.stats.get("byte_states"),
        "candidate_states": automaton.stats.get("candidate_states"),
        "live_states": automaton.stats.get("live_states"),
        "states": automaton.num_states,
        "accepting_states": int(automaton.accepting.sum()),
        "transitions": int((automaton.next_state >= 0).sum()),
        "shortest": automaton.shortest,
    }


def _readable(token: str | bytes | None) -> str:
    """A token for a label: its text, or ``b'\\xe4'`` for bytes that are not text on their own."""
    if isinstance(token, bytes):
        try:
            token = token.decode("utf-8")
        except UnicodeDecodeError:
            return repr(token)
    return json.dumps(token, ensure_ascii=False)


def _label(tokens: list, count: int) -> str:
    shown = ", ".join(_readable(t) for t in tokens)
    more = f", ... ({count} tokens)" if count > len(tokens) else ""
    return (shown + more).replace("\\", "\\\\").replace('"', '\\"')


def to_dot(automaton, surfaces, examples: int = 3) -> str:
    """Graphviz source: one edge per (state, next state) pair, labelled with up to ``examples``
    tokens (``surfaces``: str or bytes per token id) and the number of tokens; accepting states
    are double circles."""
    import torch

    src, tok = torch.nonzero(automaton.next_state >= 0, as_tuple=True)
    dst = automaton.next_state[src, tok]
    s = automaton.num_states
    key = src * s + dst
    order = torch.argsort(key * automaton.vocab_size + tok)
    key, tok = key[order], tok[order]
    edges, first, counts = torch.unique_consecutive(key, return_inverse=True, return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(key)) - starts[first]
    shown: dict[int, list[str]] = {}
    for e, t in zip(first[rank < examples].tolist(), tok[rank < examples].tolist()):
        shown.setdefault(e, []).append(surfaces[t])
    lines = ["digraph token_automaton {", "  rankdir=LR;", '  start [shape=point, label=""];']
    for q in range(s):
        shape = "doublecircle" if bool(automaton.accepting[q]) else "circle"
        lines.append(f'  {q} [shape={shape}, label="{q}\\nmin {int(automaton.min_tokens_to_accept[q])}"];')
    lines.append(f"  start -> {automaton.initial};")
    for e, (k, c) in enumerate(zip(edges.tolist(), counts.tolist())):
        lines.append(f'  {k // s} -> {k % s} [label="{_label(shown[e], c)}"];')
    lines.append("}")
    return "\n".join(lines)
