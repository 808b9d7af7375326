"""What Python ``regex`` checks before matching, where that changes the answer.

``regex`` tests the first character of the text against the pattern's *first set* (the items
that can start a match) before running the pattern. When any of those items is case-insensitive
the whole test is case-insensitive, and a case-sensitive negated class in it then rejects more
than the class itself: ``(?:[^ab]|(?i)c)`` fully matches ``"x"`` but not ``"A"`` (the test reads
``[^ab]`` as ``(?i)[^ab]``), while ``[^ab]`` alone, or ``[^ab](?i)c``, accepts an ``A`` there.
:func:`first_char_rejects` returns the characters this test rejects although the pattern's own
items would accept them, so that the compiled automaton agrees with ``regex.fullmatch``. It reads
``regex``'s own parse (its private ``_regex_core``); if that ever fails, nothing is rejected.
"""

from __future__ import annotations

import re

from regex import _regex_core as core

from decodekit.constraints.syntax import casefold

_FOLD_FLAG = re.compile(r"\(\?[a-zA-Z^-]*i")  # (?i), (?ai:...), ...: the test is case-sensitive without


def first_char_rejects(pattern: str) -> frozenset[str]:
    """Cased characters that ``regex``'s first-set test rejects at the start of a match although
    a case-sensitive reading of the first items accepts them (empty: the test changes nothing)."""
    if not _FOLD_FLAG.search(pattern):
        return frozenset()
    try:
        check, ascii_only = _first_set_check(pattern)
    except Exception:  # regex internals differ (another version): keep the plain reading
        return frozenset()
    if check is None or not check.case_flags & core.IGNORECASE:
        return frozenset()  # no test, or a case-sensitive one: it rejects nothing the items accept
    # a positive union is tested item by item; anything else (one item, a negated union) as a whole
    members = check.items if isinstance(check, core.SetUnion) and check.positive else (check,)
    if all(m.positive for m in members):
        return frozenset()  # folding a positive item only widens it
    rejected = []
    for c, variants in casefold.cased(ascii_only).items():
        codes = [ord(v) for v in (c, *variants)]
        plain = any(m.matches(ord(c)) for m in members)  # the items themselves (case aside)
        folded = any(
            any(m.matches(v) for v in codes) if m.positive else all(m.matches(v) for v in codes)
            for m in members
        )
        if plain and not folded:
            rejected.append(c)
    return frozenset(rejected)


def _first_set_check(pattern: str):
    """``regex``'s compiled first-set test of ``pattern`` (None: it has none), as ``regex``
    builds it (regex/_main.py ``_compile``), and whether the pattern is ASCII-only."""
    flags = 0
    while True:  # a global flag found mid-pattern restarts the parse with it, as regex does
        source = core.Source(pattern)
        info = core.Info(flags, source.char_type, {})
        source.ignore_space = bool(info.flags & core.VERBOSE)
        try:
            parsed = core._parse_pattern(source, info)
            break
        except core._UnscopedFlagSet:
            flags = info.global_flags
    if not info.flags & core._ALL_ENCODINGS:
        info.flags |= core.UNICODE
    parsed.fix_groups(pattern, False, False)
    parsed = parsed.optimise(info, False).pack_characters(info)
    return core._check_firstset(info, False, parsed.get_firstset(False)), bool(info.flags & core.ASCII)
