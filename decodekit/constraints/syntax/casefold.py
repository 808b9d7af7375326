"""Case-insensitive matching of single characters exactly as Python ``regex`` (V0) does it.

Under ``(?i)`` ``regex`` uses *simple* case folding (V0 has no FULLCASE: ``ß`` never matches
``ss``). A literal ``c`` matches a character ``x`` iff ``x`` is one of the "cases" of ``c``; a set
matches ``x`` iff one of the cases of ``x`` is in it (and a negated set iff none is). The case
relation is symmetric but not transitive: ``i`` matches ``I`` and ``İ`` (U+0130), ``I`` matches ``i``
and ``ı`` (U+0131), so ``İ`` and ``ı`` do not match each other. It also knows characters newer than
this Python's ``unicodedata`` (Unicode 16's U+A7CB pairs with U+0264), so it is taken from
``regex`` itself: the candidates of ``c`` are ``regex``'s own case list of ``c`` (its C function
``get_all_cases``) plus ``c``'s one-character lower/upper/casefold/title forms, and each candidate
is kept only if ``regex.fullmatch('(?i)' + regex.escape(c), x)`` says so. Results are computed
lazily and cached per character; a table of every character with another case (about 3,000) is
built once (0.3 s) when a large set has to be folded.
"""

from __future__ import annotations

import functools

import regex

from decodekit.constraints.syntax.unicode import CODE_POINTS

try:  # regex's own case lists (a C function of the regex package, present since 2015)
    from regex._regex import get_all_cases as _get_all_cases
except ImportError:  # pragma: no cover - then Python's case mappings, grouped, are the candidates
    _get_all_cases = None

_CASE_FLAGS = {False: int(regex.IGNORECASE | regex.UNICODE), True: int(regex.IGNORECASE | regex.ASCII)}
_PREFIX = {False: "(?i)", True: "(?ai)"}
SMALL_SET = 2048  # sets up to this size are folded character by character


def _python_cases(c: str) -> set[str]:
    return {f for f in (c.lower(), c.upper(), c.casefold(), c.title()) if len(f) == 1}


@functools.lru_cache(maxsize=1)
def _python_groups() -> dict[str, frozenset[str]]:
    """Fallback candidates when ``get_all_cases`` is missing: characters linked by Python's
    one-character case mappings, in either direction (one pass over all code points, ~1 s)."""
    linked: dict[str, set[str]] = {}
    for cp in range(CODE_POINTS):
        c = chr(cp)
        for f in _python_cases(c):
            if f != c:
                linked.setdefault(c, {c}).add(f)
                linked.setdefault(f, {f}).add(c)
    out = {}
    for c, group in linked.items():  # two steps: k -> K -> KELVIN SIGN
        out[c] = frozenset(group.union(*(linked.get(g, ()) for g in group)))
    return out


def _candidates(c: str, ascii_only: bool) -> set[str]:
    if _get_all_cases is not None:
        found = {chr(x) for x in _get_all_cases(_CASE_FLAGS[ascii_only], ord(c))}
    else:  # pragma: no cover
        found = set(_python_groups().get(c, ()))
    found |= _python_cases(c)
    found.add(c)
    return found


@functools.lru_cache(maxsize=65536)
def variants(c: str, ascii_only: bool = False) -> frozenset[str]:
    """The characters ``x`` with ``regex.fullmatch('(?i)' + regex.escape(c), x)`` (``(?ai)`` with
    ``ascii_only``); always contains ``c``."""
    found = _candidates(c, ascii_only)
    if len(found) == 1:
        return frozenset(found)
    pattern = _PREFIX[ascii_only] + regex.escape(c)
    return frozenset(x for x in found if x == c or regex.fullmatch(pattern, x))


@functools.lru_cache(maxsize=2)
def cased(ascii_only: bool = False) -> dict[str, frozenset[str]]:
    """Every character with a case variant other than itself -> :func:`variants` (one pass over
    all code points through ``get_all_cases``, then ~3,000 verified characters)."""
    if _get_all_cases is None:  # pragma: no cover
        candidates = list(_python_groups())
    else:
        flags = _CASE_FLAGS[ascii_only]
        candidates = [chr(cp) for cp in range(CODE_POINTS) if len(_get_all_cases(flags, cp)) > 1]
    out = {}
    for c in candidates:
        v = variants(c, ascii_only)
        if len(v) > 1:
            out[c] = v
    return out


def fold(chars, ascii_only: bool = False) -> set[str]:
    """The characters that ``(?i)[chars]`` matches: every case variant of every character."""
    chars = set(chars)
    if len(chars) <= SMALL_SET:
        out: set[str] = set()
        for c in chars:
            out |= variants(c, ascii_only)
        return out
    out = set(chars)
    for c, v in cased(ascii_only).items():
        if c in chars:
            out |= v
    return out


def fold_complement(excluded, ascii_only: bool = False) -> set[str]:
    """For the set of all characters except ``excluded``: the characters that ``(?i)`` of it
    still does *not* match, i.e. those of ``excluded`` all of whose case variants are excluded."""
    excluded = set(excluded)
    if len(excluded) <= SMALL_SET:
        return {c for c in excluded if variants(c, ascii_only) <= excluded}
    table = cased(ascii_only)
    return {c for c in excluded if c not in table or table[c] <= excluded}
