"""Several regex constraints at once: texts that fully match every pattern and contain a match of
no exclude, as one byte DFA (the product of the patterns' UTF-8 byte DFAs).

Anderson et al. (2017, https://arxiv.org/abs/1612.00576) constrain captions to contain several
given words in any order with one automaton whose states record which words were seen: the
product of ``.*\\bdog\\b.*``, ``.*\\bpark\\b.*`` ... does exactly that.

The product runs over bytes, not characters: the byte DFAs of all patterns share one alphabet
(the 256 bytes), whereas each character DFA has its own character classes. An exclude ``R``
becomes the byte DFA of ``(?s:.*(?:R).*)`` (built on the parsed pattern, so ``R``'s own flags
and comments stay inside it), whose missing transitions mean "can no longer match": a sink that
is *fine* for the product (complemented), not a dead end. The positive components keep the
product on valid UTF-8 (with no positive pattern, ``(?s:.*)`` is one). A breadth-first search
over the reachable tuples of component states (one vectorised pass per level) builds the table;
states that cannot accept are dropped, equivalent ones merged (:func:`graph.minimize`), and the
result is lifted to tokens like a single pattern's byte DFA.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from decodekit.constraints.automata.chardfa import build_char_dfa
from decodekit.constraints.automata.graph import distances_to_accept, distinct_columns, minimize
from decodekit.constraints.automata.utf8 import ByteDFA, byte_dfa, code_point_classes
from decodekit.constraints.syntax.firstset import first_char_rejects
from decodekit.constraints.syntax.nodes import Anchor, Kind, Node
from decodekit.constraints.syntax.parser import parse
from decodekit.errors import ConstraintError, ConstraintTooLarge

ANY_TEXT = r"(?s:.*)"  # the positive pattern when only excludes are given
BFS_FACTOR = 4  # reachable product states allowed before minimisation, x max_states
DENSE_KEYS = 2**22  # tuples of component states numbered through a dense array up to this many


def as_patterns(value, name: str) -> tuple[str, ...]:
    """A str or a sequence of str as a tuple (ConstraintError otherwise)."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(p, str) for p in value):
        return tuple(value)
    raise ConstraintError(
        f"{name} must be a string (a regex) or a list of strings, got {type(value).__name__} {value!r}"
    )


def describe(patterns: Sequence[str], excludes: Sequence[str]) -> str:
    """The readable ``TokenAutomaton.pattern`` of a combination: ``(A) & (B) & !(R)``."""
    return " & ".join([f"({p})" for p in patterns] + [f"!({x})" for x in excludes])


def listed(patterns: Sequence[str], excludes: Sequence[str]) -> str:
    out = f"all of {list(patterns)}" if patterns else "any text"
    return out + (f" and none of {list(excludes)}" if excludes else "")


class Component(NamedTuple):
    """One pattern's minimal character DFA and code point classes (``dfa`` None: an exclude that
    matches nothing, so it constrains nothing)."""

    dfa: object
    classes: object
    exclude: bool


class Product(NamedTuple):
    """The product byte DFA (None if no text matches) and the sizes along the way."""

    dfa: ByteDFA | None
    stats: dict[str, int]


def first_char_gate(pattern: str) -> str | None:
    """The pattern ``(?s:[^C].*)`` of the texts that pass ``regex``'s first-character test of
    ``pattern`` (:func:`decodekit.constraints.syntax.firstset.first_char_rejects`: C, the characters it
    rejects although the pattern's items accept them), or None when the test changes nothing."""
    rejects = first_char_rejects(pattern)
    if not rejects:
        return None
    return "(?s:[^" + "".join(f"\\U{ord(c):08x}" for c in sorted(rejects)) + "].*)"


def components(patterns: Sequence[str], excludes: Sequence[str], max_states: int) -> list[Component]:
    """Parse every pattern (an exclude ``R`` as ``(?s:.*(?:R).*)``) into its character DFA; a
    pattern whose first-character test narrows it (:func:`first_char_gate`) gets the gate as one
    more component, as a single pattern's compile does."""
    out = []
    gates = [g for g in map(first_char_gate, patterns) if g is not None]
    for pattern in [*(patterns or (ANY_TEXT,)), *dict.fromkeys(gates)]:
        ast, boundaries = parse(pattern)
        out.append(_component(ast, boundaries, max_states, False))
        if out[-1].dfa is None:
            raise ConstraintError(
                f"regex {pattern!r} matches no text at all, so no text matches {listed(patterns, excludes)}"
            )
    dot = parse(ANY_TEXT)[0]
    for pattern in excludes:
        ast, boundaries = parse(pattern)
        refuse_anchors(ast, pattern)
        refuse_first_char_test(pattern)
        ast = Node.seq((dot, ast, dot))
        out.append(_component(ast, boundaries, max_states, True))
    return out


def _component(ast, boundaries: bool, max_states: int, exclude: bool) -> Component:
    dfa = build_char_dfa(ast, boundaries, max_states)
    if dfa.initial < 0:
        return Component(None, None, exclude)
    return Component(dfa, code_point_classes(dfa.other, dfa.explicit), exclude)


def refuse_anchors(ast: Node, pattern: str) -> None:
    """``^``/``$`` in an exclude would be no-ops inside ``.*(?:R).*``: refused, not misread."""
    stack = [ast]
    while stack:
        node = stack.pop()
        if node.kind is Kind.ASSERT and node.anchor in (Anchor.START, Anchor.END):
            raise ConstraintError(
                f"exclude {pattern!r}: anchors (^ $ \\A \\Z) are not supported in an exclude, which "
                "must match nowhere in the text (drop them, or forbid a prefix with a positive pattern)"
            )
        if node.kind is not Kind.SET:
            stack.extend(node.items)


def refuse_first_char_test(pattern: str) -> None:
    """An exclude is matched anywhere (``regex.search``), and ``regex`` skips the start positions
    whose character its first-character test rejects: a gate at every position, which a
    product of whole-text automata cannot express. Refused rather than misread."""
    rejects = first_char_rejects(pattern)
    if rejects:
        shown = "".join(sorted(rejects)[:8]) + ("..." if len(rejects) > 8 else "")
        raise ConstraintError(
            f"exclude {pattern!r}: regex's first-character test reads its first items case-insensitively "
            f"and skips matches starting with {shown!r}, which decodekit cannot reproduce in an exclude; "
            "write the case of those items explicitly (for example [^abAB] for [^ab] beside (?i)...)"
        )


def product(parts: list[Component], available: np.ndarray | None, max_states: int, label: str) -> Product:
    """The trim, minimal product byte DFA of ``parts`` over the bytes ``available`` [256]
    (None: all). ``label`` names the constraints in the size error."""
    dfas = [
        byte_dfa(p.dfa.table, p.dfa.accepting, p.classes, None if available is None else available.copy())
        for p in parts
        if p.dfa is not None
    ]
    excluded = [p.exclude for p in parts if p.dfa is not None]
    stats = {"char_states": sum(int(p.dfa.table.shape[0]) for p in parts if p.dfa is not None)}
    # the bytes that act alike in every component share a joint class
    joint_of, first_byte = _joint_classes(np.stack([d.byte_class for d in dfas]))
    steps, accepting = [], []
    for d, exclude in zip(dfas, excluded):
        table = d.table[:, d.byte_class[first_byte]].astype(np.int64)  # [Q_i, J]
        acc = d.accepting
        if exclude:  # the sink Q_i: no match of R can start or finish any more
            q = len(table)
            table = np.vstack([np.where(table >= 0, table, q), np.full((1, table.shape[1]), q)])
            acc = np.append(acc, False)
        steps.append(table)
        accepting.append(acc)
    table, states = _explore(steps, excluded, BFS_FACTOR * max_states, label)
    stats["product_states"] = len(table)
    acc = np.ones(len(table), dtype=bool)
    for i, exclude in enumerate(excluded):
        acc &= accepting[i][states[:, i]] != exclude
    dist = distances_to_accept(table, acc)
    live = dist >= 0
    if not live[0]:
        return Product(None, stats)
    remap = np.append(np.where(live, np.cumsum(live) - 1, -1), -1)
    out = minimize(remap[table[live]], acc[live], 0, hint=dist[live])
    if len(out.table) > max_states:
        raise ConstraintTooLarge(
            f"constraint too large: {label} need {len(out.table)} byte-level states after minimisation "
            f"(max_states={max_states}); use fewer or simpler constraints",
            bound="states",
            limit=max_states,
            size=len(out.table),
        )
    stats["byte_states"] = len(out.table)
    columns, which = distinct_columns(out.table)
    first = excluded.index(False)  # every positive component tracks where characters end
    boundary = dfas[first].boundary[states[np.flatnonzero(live)[out.reps], first]]
    dfa = ByteDFA(columns.astype(np.int32), out.accepting, 0, which[joint_of].astype(np.int64), boundary)
    return Product(dfa, stats)


def _joint_classes(byte_classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``byte_classes`` [k, 256] -> (joint class of each byte [256], a byte of each class [J])."""
    _, first, joint = np.unique(byte_classes.T, axis=0, return_index=True, return_inverse=True)
    return joint.reshape(-1), first


def _explore(steps: list[np.ndarray], excluded: list[bool], limit: int, label: str):
    """Breadth-first search over the tuples of component states reachable from (0, ..., 0).

    Returns (table [S, J] int64, -1 where a positive component dies; states [S, k] the tuple of
    each product state). Past ``limit`` states, ConstraintError."""
    k, width = len(steps), steps[0].shape[1]
    sizes = np.array([len(t) for t in steps], dtype=np.int64)
    radix = np.concatenate([[1], np.cumprod(sizes[:-1])]) if k else sizes
    total = float(np.prod(sizes.astype(float)))
    if total >= 2**62:
        raise ConstraintTooLarge(
            f"constraint too large: {label} are too many to combine ({total:.3g} state tuples)",
            bound="state_tuples",
        )
    dense = total <= DENSE_KEYS
    index = np.full(int(np.prod(sizes)), -1, dtype=np.int64) if dense else {}
    positive = [i for i in range(k) if not excluded[i]]
    tuples = [np.zeros((1, k), dtype=np.int64)]
    rows = []
    index[0] = 0
    count, frontier = 1, tuples[0]
    while len(frontier):
        nxt = np.stack([steps[i][frontier[:, i]] for i in range(k)], axis=-1)  # [F, J, k]
        ok = (nxt[..., positive] >= 0).all(axis=-1)  # [F, J]
        keys = np.where(ok, (np.maximum(nxt, 0) * radix).sum(axis=-1), -1)
        uniq, inverse = np.unique(keys[ok], return_inverse=True)
        if dense:
            ids = index[uniq]
            new = ids < 0
            ids[new] = count + np.arange(int(new.sum()))
            index[uniq[new]] = ids[new]
        else:
            got = [index.get(key, -1) for key in uniq.tolist()]
            ids = np.array(got, dtype=np.int64)
            new = ids < 0
            ids[new] = count + np.arange(int(new.sum()))
            index.update(zip(uniq[new].tolist(), ids[new].tolist()))
        row = np.full((len(frontier), width), -1, dtype=np.int64)
        row[ok] = ids[inverse.reshape(-1)]
        rows.append(row)
        count += int(new.sum())
        if count > limit:
            raise ConstraintTooLarge(
                f"constraint too large: {label} have more than {count} reachable byte-level states "
                f"(limit {limit}, {BFS_FACTOR} x max_states); use fewer or simpler constraints",
                bound="states",
                limit=limit,
                size=count,
            )
        # the new states, in id order: the tuple of each from its key
        fresh = uniq[new][np.argsort(ids[new], kind="stable")]
        frontier = (fresh[:, None] // radix) % sizes
        tuples.append(frontier)
    return np.concatenate(rows), np.concatenate(tuples)
