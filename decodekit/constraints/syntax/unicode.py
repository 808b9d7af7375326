"""The Unicode tables of the syntax stage, read from Python ``regex`` itself over all code points:
the ``\\w \\d \\s`` bits of every code point (:func:`predicate_bits`, which the character and byte
DFAs use too) and the members of a property class (:func:`scan`: ``\\p{...}``, ``[[:alpha:]]``)."""

from __future__ import annotations

import functools

import numpy as np
import regex

from decodekit.constraints.syntax.budgets import MAX_CLASS_CHARS

CODE_POINTS = 0x110000


@functools.lru_cache(maxsize=1)
def all_code_points() -> str:
    """Every code point U+0000..U+10FFFF once, surrogates included (for scanning with regex)."""
    return np.arange(CODE_POINTS, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


@functools.lru_cache(maxsize=64)
def scan_codes(item: str) -> tuple[bool, np.ndarray | None, int]:
    """The characters one set item (``\\p{...}``, ``[[:alpha:]]``, ``(?a)\\w`` ...) matches, read from
    ``regex`` itself over all code points: (True, excluded code points) when it matches all but
    those, else (False, member code points); the smaller side, None if both exceed
    MAX_CLASS_CHARS; and the member count. ~10-130 ms; cached compactly (4 bytes a character)."""
    text = all_code_points()
    compiled = regex.compile(item)
    rest = compiled.sub("", text)
    matched = len(text) - len(rest)

    def codes(chars: str) -> np.ndarray:
        return np.frombuffer(chars.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()

    if len(rest) <= MAX_CLASS_CHARS and len(rest) <= matched:
        return True, codes(rest), matched
    if matched <= MAX_CLASS_CHARS:
        return False, codes("".join(compiled.findall(text))), matched
    return False, None, matched


def scan(item: str) -> tuple[bool, frozenset | None, int]:
    """:func:`scan_codes` with the characters as a frozenset."""
    is_excluded, codes, matched = scan_codes(item)
    if codes is None:
        return is_excluded, None, matched
    return is_excluded, frozenset(codes.tobytes().decode("utf-32-le", "surrogatepass")), matched


PREDICATE_BITS = {"w": 4, "d": 2, "s": 1}
OCCURRING_BITS = (0, 4, 6, 1)  # the combinations of bits that occur: none, \w, \w and \d, \s


@functools.lru_cache(maxsize=1)
def predicate_bits() -> np.ndarray:
    """[0x110000] uint8: 4 if the code point is ``\\w``, 2 if ``\\d``, 1 if ``\\s`` (Python
    ``regex``'s Unicode definitions, read from ``regex`` over all code points: ~0.1 s, once)."""
    text = all_code_points()
    bits = np.zeros(CODE_POINTS, dtype=np.uint8)
    for name, bit in PREDICATE_BITS.items():
        for m in regex.finditer(f"\\{name}+", text):
            bits[m.start() : m.end()] |= bit
    return bits
