"""Character classes (``[...]``) as the parser reads them: :class:`ClassReader`, a part of
:class:`~decodekit.constraints.syntax.parser._Parser` (its escapes and members from
:class:`~decodekit.constraints.syntax.items.ItemReader`): a plain body read at once, every other
class member by member, the same text under the same flags read once per parse."""

from __future__ import annotations

import re

from decodekit.constraints.syntax.charsets import CharSet, make_set
from decodekit.constraints.syntax.items import ItemReader
from decodekit.constraints.syntax.nodes import Char, Node, Range
from decodekit.constraints.syntax.scanner import Refusal

_PLAIN_CLASS = re.compile(r"\[(\^?)([^][\\^][^][\\]*)\]")


class ClassReader(ItemReader):
    """Reads a class after its ``[`` into a set node. The parser provides ``class_cache`` (class
    text, flags, ascii -> node; None outside the cached core), ``made`` (items, negation, flags,
    ascii -> CharSet) and ``_set_node(cset)``."""

    class_cache: dict | None
    made: dict

    def _set_node(self, cset: CharSet) -> Node:
        raise NotImplementedError

    def _set(self) -> Node:
        start = self.pos - 1
        cache = self.class_cache
        if cache is not None:
            # the text up to the first "]" that can close it; a hit: the same text read before
            # as a whole class under the same flags (parsing it again would give the same node)
            s, j = self.s, start + 1
            j += s.startswith("^", j)
            j += s.startswith("]", j)
            end = s.find("]", j)
            hit = cache.get((s[start : end + 1], self.flags, self.ascii)) if end >= 0 else None
            if hit is not None:  # (a class outside the core left it for the whole parse when first read)
                self.pos = end + 1
                return hit
        node = self._read_set(start)
        if cache is not None:
            cache[(self.s[start : self.pos], self.flags, self.ascii)] = node
        return node

    def _read_set(self, start: int) -> Node:
        plain = _PLAIN_CLASS.match(self.s, start)
        items = _plain_items(plain.group(2)) if plain else None
        if items is not None:  # what the loop below reads of it, read at once
            self.pos = plain.end()
            return self._made_set(items, bool(plain.group(1)))
        saved_ignore = self.ignore_space
        self.ignore_space = False
        try:
            negate = self.match("^")
            items = self._set_member()
            while True:
                saved = self.pos
                if self.match("]"):
                    self.pos = saved
                    break
                items += self._set_member()
            if not self.match("]"):
                raise Refusal("syntax", "missing ]", start)
        finally:
            self.ignore_space = saved_ignore
        return self._made_set(items, negate)

    def _made_set(self, items: list, negate: bool) -> Node:
        key = (tuple(items), negate, self.flags, self.ascii)  # all that make_set reads but the position
        cset = self.made.get(key)
        if cset is None:
            cset = self.made[key] = make_set(items, negate, self)
        return self._set_node(cset)


def _plain_items(body: str) -> list | None:
    """The items of a class body of plain characters and ranges (``_PLAIN_CLASS``), as
    ``_set_member`` reads them (``a-`` at the end: ``a`` and ``-``); None for a body it leaves to
    the general reader: a set operation (``--`` ``&&`` ``||`` ``~~``) or a reversed range."""
    if "--" in body or "&&" in body or "||" in body or "~~" in body:
        return None
    items, i, n = [], 0, len(body)
    while i < n:
        c = ord(body[i])
        if i + 1 < n and body[i + 1] == "-":
            if i + 2 == n:
                items += [Char(c), Char(ord("-"))]
                break
            last = ord(body[i + 2])
            if c > last:
                return None
            items.append(Char(c) if c == last else Range(c, last))
            i += 3
        else:
            items.append(Char(c))
            i += 1
    return items
