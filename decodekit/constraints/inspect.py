"""What a compiled :class:`TokenAutomaton` looks like: its sizes, and a Graphviz drawing."""

from __future__ import annotations

import json
from collections.abc import Sequence

import torch

from decodekit.constraints.tokens.automaton import TokenAutomaton


def describe(automaton: TokenAutomaton) -> dict:
    """The automaton's sizes along the compile (``decodekit constraint`` prints them): the
    character and byte DFAs, the token-level candidates, live and merged states, accepting
    states, live (state, token) transitions, and the shortest accepted length in tokens."""
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


def to_dot(automaton: TokenAutomaton, token_strings: Sequence[str | bytes | None], examples: int = 3) -> str:
    """Graphviz source: one edge per (state, next state) pair, labelled with up to ``examples``
    of its tokens (``token_strings``: str or bytes per token id) and how many there are;
    accepting states are double circles, each labelled with its fewest tokens to acceptance."""
    src, tok = torch.nonzero(automaton.next_state >= 0, as_tuple=True)
    dst = automaton.next_state[src, tok]
    s = automaton.num_states
    key = src * s + dst  # one per (state, next state) edge
    order = torch.argsort(key * automaton.vocab_size + tok)
    key, tok = key[order], tok[order]
    edges, edge_of, counts = torch.unique_consecutive(key, return_inverse=True, return_counts=True)
    rank = torch.arange(len(key)) - (torch.cumsum(counts, 0) - counts)[edge_of]  # among the edge's tokens
    shown: dict[int, list] = {}
    for e, t in zip(edge_of[rank < examples].tolist(), tok[rank < examples].tolist()):
        shown.setdefault(e, []).append(token_strings[t])
    lines = ["digraph token_automaton {", "  rankdir=LR;", '  start [shape=point, label=""];']
    for q in range(s):
        shape = "doublecircle" if bool(automaton.accepting[q]) else "circle"
        lines.append(f'  {q} [shape={shape}, label="{q}\\nmin {int(automaton.min_tokens_to_accept[q])}"];')
    lines.append(f"  start -> {automaton.initial};")
    for e, (k, c) in enumerate(zip(edges.tolist(), counts.tolist())):
        lines.append(f'  {k // s} -> {k % s} [label="{_label(shown[e], c)}"];')
    lines.append("}")
    return "\n".join(lines)


def _label(tokens: list, count: int) -> str:
    """An edge label: its example tokens, and the count when there are more (escaped for dot)."""
    shown = ", ".join(_readable(t) for t in tokens)
    more = f", ... ({count} tokens)" if count > len(tokens) else ""
    return (shown + more).replace("\\", "\\\\").replace('"', '\\"')


def _readable(token: str | bytes | None) -> str:
    """A token for a label: its text, or ``b'\\xe4'`` for bytes that are not text on their own."""
    if isinstance(token, bytes):
        try:
            token = token.decode("utf-8")
        except UnicodeDecodeError:
            return repr(token)
    return json.dumps(token, ensure_ascii=False)
