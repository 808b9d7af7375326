"""The text a constraint forces next: :func:`forced_bytes` (issue 40 item 2b: the draft of a
speculative step where the constraint allows one continuation only, a JSON key, a separator)."""

from __future__ import annotations

import numpy as np

from decodekit.constraints.automata.protocol import UNKNOWN, ByteAutomaton


def forced_bytes(states: ByteAutomaton, s: int, limit: int) -> bytes:
    """The bytes that every text of the language after byte state ``s`` begins with, at most
    ``limit``: while the state does not accept, the one byte leading to a live state (a state
    with some text to acceptance); none where two or more do."""
    out = bytearray()
    codes = np.arange(256, dtype=np.int64)
    while len(out) < limit and not states.accepting(s):
        unknown = codes[states.table[s] == UNKNOWN]
        if len(unknown):
            states.fill(np.full(len(unknown), s, dtype=np.int64), unknown)
        row = states.table[s]
        live = []
        for b in np.flatnonzero(row >= 0).tolist():  # two live bytes settle it: stop there
            if states.distance(int(row[b])) >= 0:
                live.append(b)
                if len(live) == 2:
                    break
        if len(live) != 1:
            break
        out.append(live[0])
        s = int(row[live[0]])
    return bytes(out)
