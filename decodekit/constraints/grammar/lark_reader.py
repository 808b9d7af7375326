"""Lark grammars, read by the ``lark`` package itself, into a
:class:`~decodekit.constraints.grammar.cfg.CFG`.

``lark.load_grammar`` parses the text, resolves ``%import`` (lark's own grammars only:
``common``, ``unicode``, ...; nothing is read from the file system), ``%override``, ``%extend``,
``%ignore``, templates and aliases; its ``compile`` turns the rules into BNF and every terminal
(named, or a literal inside a rule) into a regex. What the tree shaping options mean (``?rule``,
``_rule``, ``-> alias``, ``!rule``, priorities) does not change the language and is dropped.

Two changes make the result exact and bounded:

- Before ``compile``, every optional (``x?``, ``[x]``) and every group of alternatives inside a
  sequence becomes a rule of its own. Lark distributes them (``"x"? "x"? ... "x"?`` n times makes
  2^n alternatives: seconds at n = 16); as rules they cost one each.
- The terminals of lark's ``common`` grammar that it writes with lazy quantifiers and look-behind
  (``ESCAPED_STRING``, ``C_COMMENT``), which Lark's Earley reads as "the shortest match", are
  replaced by plain regexes with that meaning (the engine reads a terminal as any full match).

A user's own lazy quantifier (``/".*?"/``) is read as any full match, as everywhere in decodekit.
"""

from __future__ import annotations

import re

from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal, at, line_col
from decodekit.errors import ConstraintError

__all__ = ["MAX_LARK_CHARS", "MAX_NESTING", "read_lark"]

MAX_NESTING = 100  # nested ( [ { in a Lark grammar: lark's loader recurses over the nesting
MAX_LARK_CHARS = 100_000  # lark's loader reads about 40,000 characters a second: larger is refused

# lark's compiled spellings of common.lark's shortest-match terminals -> the same languages as
# plain regexes (tests/constraints/grammar/test_lark.py checks them against lark by brute force)
_SHORTEST_MATCH = {
    '".*?(?<!\\\\)(\\\\\\\\)*?"': '"(?:[^"\\\\\\n]|\\\\.)*"',  # ESCAPED_STRING
    "/\\*(.|\n)*?\\*/": "/\\*(?:[^*]|\\*+[^*/])*\\*+/",  # C_COMMENT
}
_LIB_GRAMMARS = ("common.lark", "unicode.lark", "python.lark", "lark.lark")
_SCAN = re.compile(r'"(?:\\.|[^"\\\n])*"i?|/(?![/*])(?:\\.|[^/\\\n])+/[imslux]*|//[^\n]*|[(\[{]|[)\]}]|\n')
_RULE_DEF = re.compile(
    r"^[ \t]*(?:%(?:override|extend)[ \t]+)?[?!]*(_?[a-z][_a-z0-9]*)"
    r"[ \t]*(?:\{[^}\n]*\})?[ \t]*(?:\.[ \t]*-?\d+)?[ \t]*:",
    re.M,
)
_TERM_DEF = re.compile(
    r"^[ \t]*(?:%(?:override|extend)[ \t]+)?(_?[A-Z][_A-Z0-9]*)[ \t]*(?:\.[ \t]*-?\d+)?[ \t]*:", re.M
)
_USED_BUT_NOT_DEFINED = re.compile(
    r"(Rule|Terminal) '([^']+)' used but not defined \(in (rule|terminal) ([^)]+)\)"
)
_AT_LINE = re.compile(r"^(.*?),? at line (\d+),? column (\d+)", re.S)
_UNEXPECTED_INPUT = re.compile(r"Unexpected input at line (\d+) column (\d+)")


class _ImportRefused(Exception):
    pass


def _import_only_lark_grammars(base_path, grammar_path):
    """lark's import hook: lark's own grammars (``%import common.WS``), nothing else."""
    from lark.load_grammar import stdlib_loader

    if base_path is None and grammar_path in _LIB_GRAMMARS:
        return stdlib_loader(None, grammar_path)
    raise _ImportRefused(grammar_path)


def _check_nesting(text: str, source: str) -> None:
    depth, line_start, line = 0, 0, 1
    for m in _SCAN.finditer(text):
        c = m.group()
        if c == "\n":
            line, line_start = line + 1, m.end()
        elif c in "([{":
            depth += 1
            if depth > MAX_NESTING:
                col = m.start() - line_start + 1
                raise ConstraintError(
                    f"{source}:{line}:{col}: groups nest more than {MAX_NESTING} deep (the limit)"
                )
        elif c in ")]}":
            depth = max(0, depth - 1)


def _definitions(text: str, pattern: re.Pattern) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for m in pattern.finditer(text):
        out.setdefault(m.group(1), line_col(text, m.start(1)))
    return out


def _use_place(text: str, name: str, after: tuple[int, int] | None) -> tuple[int, int] | None:
    """Where ``name`` is first used (as a whole word, outside its definition) after ``after``."""
    offset = 0
    if after is not None:
        offset = sum(len(x) + 1 for x in text.split("\n")[: after[0] - 1]) + after[1] - 1
    word = re.compile(r"(?<![\w.])" + re.escape(name) + r"(?!\w)")
    for m in word.finditer(text, offset):
        rest = text[m.end() :].lstrip(" \t")
        if not rest.startswith(":"):
            return line_col(text, m.start())
    return after


def _message(e: Exception, text: str, source: str, rules: dict, terms: dict) -> str:
    """lark's exception as one line ``source:line:col: message``."""
    msg = str(e)
    m = _USED_BUT_NOT_DEFINED.search(msg)
    if m:
        kind, name, in_kind, owner = m.groups()
        what = "terminal" if name[:1].lstrip("_").isupper() else "rule"
        owner_at = (terms if in_kind == "terminal" else rules).get(owner)
        place = at(source, _use_place(text, name, owner_at))
        return f"{place}undefined {what} '{name}' (in {in_kind} '{owner}')"
    m = _UNEXPECTED_INPUT.search(msg)
    if m:
        return f"{source}:{m.group(1)}:{m.group(2)}: unexpected input"
    line, column = getattr(e, "line", None), getattr(e, "column", None)
    if isinstance(line, int) and isinstance(column, int) and line > 0:
        token = getattr(e, "token", None)
        what = f"unexpected {str(token)!r}" if token is not None else msg.split("\n", 1)[0]
        expected = sorted(getattr(e, "expected", None) or ())
        return f"{source}:{line}:{column}: {what}" + (
            f" (expected one of {', '.join(expected[:8])})" if expected else ""
        )
    m = _AT_LINE.match(msg)
    if m:
        return f"{source}:{m.group(2)}:{m.group(3)}: {m.group(1).strip()}"
    first = " ".join(msg.split())
    for name, where in {**rules, **terms}.items():  # "Rule 'x' defined more than once" ...
        if f"'{name}'" in first or f" {name} " in f" {first} ":
            return f"{at(source, where)}{first}"
    return f"{source}: {first}"


def _hoist(grammar) -> None:
    """Give every optional, ``[...]`` and group of alternatives inside a sequence a rule of its own
    (in ``grammar.rule_defs``, before lark compiles them), so that lark distributes nothing."""
    from lark import Token, Tree
    from lark.grammar import NonTerminal

    counter = 0
    work = [(name, tree) for name, params, tree, _o in grammar.rule_defs if not params]
    while work:
        owner, tree = work.pop()
        stack = [tree]
        while stack:
            node = stack.pop()
            if not isinstance(node, Tree):
                continue
            if node.data == "expansion":
                for i, child in enumerate(node.children):
                    if not isinstance(child, Tree):
                        continue
                    alts = None
                    if child.data == "maybe":
                        alts = list(child.children[0].children) + [Tree("expansion", [])]
                    elif child.data == "expr" and len(child.children) == 2 and str(child.children[1]) == "?":
                        alts = [Tree("expansion", [child.children[0]]), Tree("expansion", [])]
                    elif child.data == "expansions" and len(child.children) > 1:
                        alts = list(child.children)
                    if alts is None:
                        stack.append(child)
                        continue
                    counter += 1
                    name = f"__{owner.lstrip('_')}_opt_{counter}"
                    body = Tree("expansions", alts)
                    grammar.rule_defs.append((Token("RULE", name), (), body, None))
                    node.children[i] = Tree("value", [NonTerminal(name)])
                    work.append((name, body))
            else:
                stack.extend(node.children)


def _pattern(term) -> str:
    pattern = term.pattern.to_regexp()
    for lazy, plain in _SHORTEST_MATCH.items():
        if lazy in pattern:
            pattern = pattern.replace(lazy, "(?:" + plain + ")" if pattern != lazy else plain)
    return pattern


def read_lark(text: str, source: str = "<grammar>", start: str = "start") -> CFG:
    """Read a Lark grammar (module docstring) into a :class:`CFG` whose start is ``start``.

    Every rule the text defines (templates aside) is kept, reachable or not, with its place in
    :attr:`CFG.where`, so that :func:`~decodekit.constraints.grammar.reduce.reduce` (``strict``)
    can name an unused one. Raises :class:`ConstraintError` as ``source:line:col: message``."""
    if not isinstance(text, str):
        raise ConstraintError(f"{source}: a Lark grammar is text, not {type(text).__name__}")
    import lark
    from lark.load_grammar import load_grammar

    if len(text) > MAX_LARK_CHARS:
        raise ConstraintError(
            f"{source}: the Lark grammar is longer than {MAX_LARK_CHARS:,} characters (the limit: lark's "
            "reader is slow on large grammars; GBNF is read up to 1 MiB)"
        )
    _check_nesting(text, source)
    rules_at, terms_at = _definitions(text, _RULE_DEF), _definitions(text, _TERM_DEF)
    try:
        grammar, _files = load_grammar(text, source, [_import_only_lark_grammars], False)
        defined = [str(name) for name, params, _t, _o in grammar.rule_defs if not params]
        if start not in defined:
            raise ConstraintError(f"{source}: no rule '{start}' (the start symbol)")
        _hoist(grammar)
        terminals, rules, ignore = grammar.compile(list(dict.fromkeys([start, *defined])), set())
    except ConstraintError:
        raise
    except _ImportRefused as e:
        raise ConstraintError(
            f"{source}: %import of '{e}' refused: only lark's grammars (common, unicode, ...) are read"
        ) from None
    except RecursionError:
        raise ConstraintError(f"{source}: the grammar nests too deeply for lark's reader") from None
    except (lark.exceptions.LarkError, AssertionError, KeyError, ValueError, TypeError) as e:
        raise ConstraintError(_message(e, text, source, rules_at, terms_at)) from None
    names = {str(r.origin.name) for r in rules}
    tidy = {}  # lark's names for its rules of hoisted rules ("____x_opt_1_star_0") shortened
    for name in names:
        short = re.sub(r"^_{3,}", "__", name)
        if short != name and short not in names:
            tidy[name] = short
    terms: dict[str, Terminal] = {}
    for t in terminals:
        terms[str(t.name)] = Terminal(str(t.name), _pattern(t), terms_at.get(t.name))
    out_rules = []
    for r in rules:
        for sym in r.expansion:
            if sym.is_term and sym.name not in terms:
                raise ConstraintError(
                    f"{at(source, terms_at.get(sym.name) or rules_at.get(r.origin.name))}"
                    f"terminal '{sym.name}' has no pattern (%declare'd terminals are not supported)"
                )
        lhs = str(r.origin.name)
        out_rules.append(
            Rule(tidy.get(lhs, lhs), tuple(tidy.get(str(s.name), str(s.name)) for s in r.expansion))
        )
    where = {name: rules_at[name] for name in defined if name in rules_at}  # the user's own rules
    return CFG(start, tuple(out_rules), terms, tuple(str(n) for n in ignore), source, where)
