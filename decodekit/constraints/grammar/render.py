"""A :class:`~decodekit.constraints.grammar.cfg.CFG` written out: as a Lark grammar with the same
language (:func:`to_lark`, the test oracle's input for grammars read from GBNF) and as a short
drawing of its rules (:func:`draw`, for ``decodekit constraint --grammar``)."""

from __future__ import annotations

import re

from decodekit.constraints.grammar.cfg import CFG

__all__ = ["draw", "lark_pattern", "to_lark"]

_RULE_NAME = re.compile(r"[a-z][_a-z0-9]*")
_TERM_NAME = re.compile(r"[A-Z][_A-Z0-9]*")


def lark_pattern(pattern: str) -> str:
    """``pattern`` as the body of a Lark ``/.../`` literal: every unescaped ``/`` escaped, every
    control character (lark refuses a raw newline there) and ``"`` (lark's unescaping of ``\\"``
    loses a backslash) written as ``\\xHH``."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if ord(e) < 0x20 or e in '\x7f"':
                out.append(f"\\x{ord(e):02x}")  # an escaped control character is the character
            else:
                out.append(c + e)
            i += 2
            continue
        if c == "/":
            out.append("\\/")
        elif ord(c) < 0x20 or c in '\x7f"':
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _names(symbols, upper: bool, taken: set[str], fixed: dict[str, str]) -> dict[str, str]:
    """Lark names (rules ``[a-z][_a-z0-9]*``, terminals ``[A-Z][_A-Z0-9]*``), distinct from
    ``taken``; the original spelled as closely as Lark allows."""
    pattern = _TERM_NAME if upper else _RULE_NAME
    out = dict(fixed)
    taken |= set(fixed.values())
    for sym in symbols:
        if sym in out:
            continue
        base = sym.upper() if upper else sym.lower()
        base = re.sub(r"[^_a-zA-Z0-9]+", "_", base).strip("_") or ("T" if upper else "r")
        if not pattern.fullmatch(base):
            base = ("T_" if upper else "r_") + base
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        out[sym] = name
    return out


def to_lark(cfg: CFG) -> str:
    """A Lark grammar whose language (``lark.Lark(text, parser="earley",
    lexer="dynamic_complete")``) is ``cfg``'s: the start rule is ``start``, every terminal a
    ``/regex/``, ``%ignore`` kept.

    One caveat is Lark's, not the rendering's: its Earley scanner takes, at each position, the
    first match of a terminal's regex and that match's shorter prefixes, so a terminal with an
    ordered alternative or a lazy quantifier that stops early (``/a|ab/``) loses lexemes that
    :class:`CFG` counts; ``regex=True, g_regex_flags=regex.POSIX`` (leftmost-longest) restores
    them (``tests/support/grammars.py``'s ``lark_oracle``)."""
    rules = _names(cfg.nonterminals, False, set(), {cfg.start: "start"})
    terms = _names(cfg.terminals, True, set(), {})
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in cfg.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)
    lines = []
    for lhs, alts in by_lhs.items():
        bodies = [" ".join(rules.get(s) or terms[s] for s in rhs) or "()" for rhs in alts]
        lines.append(f"{rules[lhs]}: " + "\n    | ".join(bodies))
    lines.append("")
    for name, term in cfg.terminals.items():
        lines.append(f"{terms[name]}: /{lark_pattern(term.pattern)}/")
    for name in cfg.ignore:
        lines.append(f"%ignore {terms[name]}")
    return "\n".join(lines) + "\n"


def draw(cfg: CFG, max_lines: int = 40, width: int = 100) -> str:
    """The first rules of ``cfg`` as ``lhs ::= alt | alt`` lines, each cut at ``width``
    characters, then ``... N more rules`` and the terminals' patterns (as many as fit)."""
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in cfg.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)

    def cut(line: str) -> str:
        return line if len(line) <= width else line[: width - 3] + "..."

    lines = []
    for lhs, alts in by_lhs.items():
        if len(lines) >= max_lines // 2:
            lines.append(f"  ... {len(by_lhs) - len(lines)} more nonterminals")
            break
        lines.append(cut(f"  {lhs} ::= " + " | ".join(" ".join(rhs) or "()" for rhs in alts)))
    for shown, (name, term) in enumerate(cfg.terminals.items()):
        if len(lines) >= max_lines:
            lines.append(f"  ... {len(cfg.terminals) - shown} more terminals")
            break
        if re.fullmatch(r"[\w-]+", name):  # a named terminal (a literal or class names itself)
            lines.append(cut(f"  {name} = /{term.pattern}/"))
    if cfg.ignore:
        lines.append(cut("  ignored between terminals: " + ", ".join(cfg.ignore)))
    return "\n".join(lines)
