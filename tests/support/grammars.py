"""Grammar test helpers: random valid texts of a CFG (:func:`generate_texts`), random near-misses
(:func:`mutate`), and two membership oracles for :class:`CFG`'s language: lark's Earley parser on
the Lark rendering (:func:`lark_oracle`: a reference no one here wrote) and a small exact
chart parser over substrings (:func:`cfg_accepts`)."""

from __future__ import annotations

import functools
import itertools
import random

import regex
import torch

from decodekit.constraints.grammar.cfg import CFG
from decodekit.constraints.grammar.grammar import MAX_GRAMMAR_BYTES
from decodekit.constraints.syntax.nodes import Kind
from decodekit.constraints.syntax.parser import parse

# hostile grammars (issue 38 item 7) -> None (read) or a piece of the one-line refusal; the tests
# read each, benchmarks/bench_grammar.py --hostile also compiles each to its first mask
HOSTILE = {
    "60,000 nested groups (GBNF)": ("root ::= " + "(" * 60_000 + '"a"' + ")" * 60_000, "nest more than"),
    "deep groups (Lark)": ("start: " + "(" * 5_000 + '"a"' + ")" * 5_000, "nest more than"),
    "10,000 rules (GBNF)": (
        "root ::= r0\n"
        + "".join(f'r{i} ::= "x" r{i + 1} | "y"\n' for i in range(10_000))
        + 'r10000 ::= "z"\n',
        None,
    ),
    "10,000 rules (Lark)": (
        "start: r0\n" + "".join(f'r{i}: "x" r{i + 1} | "y"\n' for i in range(10_000)) + 'r10000: "z"\n',
        None,
    ),
    "x? x? x? ... (GBNF)": ("root ::= " + ' "x"?' * 2_000, None),
    "x? x? x? ... (Lark)": ("start: " + ' "x"?' * 500, None),
    "deep left recursion": (
        "root ::= r0\n"
        + "".join(f'r{i} ::= r{i} "a" | r{i + 1}\n' for i in range(5_000))
        + 'r5000 ::= "z"\n',
        None,
    ),
    "1 MB (GBNF)": ("root ::= " + " | ".join(f'"w{i}"' for i in range(60_000)) + "\n#" + "x" * 300_000, None),
    "1 MB (Lark)": ("start: " + " | ".join(f'"w{i}"' for i in range(60_000)) + "\n//" + "x" * 300_000, None),
    "over the size limit": ("# " + "x" * MAX_GRAMMAR_BYTES, "larger than"),
    "huge repeats": ('root ::= (("x"{10000}){10000}){10000}', None),
}


# characters a negated class or a predicate (\w \d \s) is sampled from
_POOL = [chr(c) for c in range(0x20, 0x7F)] + [
    "\n",
    "\t",
    "\r",
    "é",
    "ß",
    "中",
    "λ",
    "\x00",
    "\x1f",
    "\U0001f600",
]


# llama.cpp's json.gbnf with `value` as its root: whitespace counted after a newline ([ \t]{0,20})
JSON_GBNF = r"""
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
"""


def _char(cset, rng: random.Random) -> str:
    def ok(c: str) -> bool:
        hit = c in cset.chars or any(
            (regex.fullmatch(rf"\{name}", c) is not None) != neg for name, neg in cset.preds
        )
        return hit != cset.negated

    if not cset.negated and cset.chars and (not cset.preds or rng.random() < 0.7):
        return rng.choice(sorted(cset.chars))
    choices = [c for c in _POOL if ok(c)]
    if not choices:
        raise ValueError(f"cannot sample a character of {cset}")
    return rng.choice(choices)


def sample_regex(pattern: str, rng: random.Random, extra: int = 3, tries: int = 50) -> str:
    """A random full match of ``pattern`` (repetitions up to ``extra`` past their minimum),
    checked with ``regex.fullmatch``."""
    root, _ = parse(pattern)
    for _ in range(tries):
        out: list[str] = []
        stack = [root]
        while stack:
            node = stack.pop()
            if node.kind is Kind.SET:
                out.append(_char(node.cset, rng))
            elif node.kind is Kind.SEQ:
                stack.extend(reversed(node.items))
            elif node.kind is Kind.ALT:
                stack.append(rng.choice(node.items))
            elif node.kind is Kind.REP:
                hi = node.lo + extra if node.hi is None else min(node.hi, node.lo + extra)
                stack.extend([node.items[0]] * rng.randint(node.lo, hi))
        text = "".join(out)
        if regex.fullmatch(pattern, text):
            return text
    raise ValueError(f"no sample of {pattern!r} in {tries} tries")


def shortest(cfg: CFG) -> dict[str, int]:
    """Each symbol's fewest terminals in a derivation (terminals: 1)."""
    cost = {t: 1 for t in cfg.terminals}
    changed = True
    while changed:
        changed = False
        for r in cfg.rules:
            if all(s in cost for s in r.rhs):
                c = sum(cost[s] for s in r.rhs)
                if c < cost.get(r.lhs, 1 << 60):
                    cost[r.lhs] = c
                    changed = True
    return cost


def generate_texts(cfg: CFG, n: int, seed: int = 0, max_depth: int = 8, ignore_p: float = 0.2) -> list[str]:
    """``n`` random texts of ``cfg``'s language: rules chosen at random up to ``max_depth``, then
    toward the shortest completion; each terminal's text sampled from its regex; an ignore
    terminal's text put between two terminals with probability ``ignore_p``."""
    rng = random.Random(seed)
    cost = shortest(cfg)
    by_lhs: dict[str, list] = {}
    for r in cfg.rules:
        if all(s in cost for s in r.rhs):
            by_lhs.setdefault(r.lhs, []).append(r.rhs)
    texts = []
    for _ in range(n):
        out: list[str] = []
        stack = [(cfg.start, 0)]
        while stack:
            sym, depth = stack.pop()
            if sym in cfg.terminals:
                if out and cfg.ignore and rng.random() < ignore_p:
                    out.append(sample_regex(cfg.terminals[rng.choice(cfg.ignore)].pattern, rng, extra=1))
                out.append(sample_regex(cfg.terminals[sym].pattern, rng))
                continue
            alts = by_lhs[sym]
            if depth >= max_depth:
                best = min(sum(cost[s] for s in rhs) for rhs in alts)
                alts = [rhs for rhs in alts if sum(cost[s] for s in rhs) == best]
            rhs = rng.choice(alts)
            stack.extend((s, depth + 1) for s in reversed(rhs))
        texts.append("".join(out))
    return texts


def mutate(text: str, rng: random.Random, alphabet: str) -> str:
    """``text`` with one random edit: a character deleted, inserted, replaced, or two swapped."""
    if not text:
        return rng.choice(alphabet)
    i = rng.randrange(len(text))
    op = rng.randrange(4)
    if op == 0:
        return text[:i] + text[i + 1 :]
    if op == 1:
        return text[:i] + rng.choice(alphabet) + text[i:]
    if op == 2:
        return text[:i] + rng.choice(alphabet) + text[i + 1 :]
    j = rng.randrange(len(text))
    s = list(text)
    s[i], s[j] = s[j], s[i]
    return "".join(s)


def lark_oracle(cfg_or_text, posix: bool = True):
    """``text -> bool``: whether lark (``parser="earley", lexer="dynamic_complete"``) parses the
    text with ``cfg_or_text`` (a :class:`CFG`, rendered by ``to_lark``, or Lark grammar text).

    ``posix`` (the default) makes lark match terminals leftmost-longest (``regex.POSIX``): lark's
    Earley scanner then sees every full match of a terminal, the language :class:`CFG` defines;
    ``posix=False`` is lark as users run it (``/a|ab/`` never lexes ``ab``)."""
    import lark

    text = cfg_or_text
    if isinstance(cfg_or_text, CFG):
        from decodekit.constraints.grammar.render import to_lark

        text = to_lark(cfg_or_text)
    kwargs = {"regex": True, "g_regex_flags": regex.POSIX} if posix else {}
    parser = lark.Lark(text, parser="earley", lexer="dynamic_complete", **kwargs)

    def accepts(s: str) -> bool:
        try:
            parser.parse(s)
        except lark.exceptions.LarkError:
            return False
        return True

    return accepts


def cfg_accepts(cfg: CFG, text: str) -> bool:
    """Whether ``text`` is in ``cfg``'s language (cfg.py's definition, read literally): an Earley
    parser over positions whose scan step tries every substring against each terminal with
    ``regex.fullmatch``, and ignore text between terminals. Cubic or worse: short texts only."""
    n = len(text)
    full = {t.name: regex.compile(t.pattern) for t in cfg.terminals.values()}
    # ignorable[i] = the positions j >= i such that text[i:j] is a concatenation of ignore lexemes
    ignorable = [{i} for i in range(n + 1)]
    for i in range(n, -1, -1):
        for j in range(i + 1, n + 1):
            if any(full[g].fullmatch(text, i, j) for g in cfg.ignore):
                ignorable[i] |= ignorable[j]
    by_lhs: dict[str, list] = {}
    for r in cfg.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)
    # items: (lhs, rhs, dot, origin); chart[i]: items ending at i
    chart: list[set] = [set() for _ in range(n + 1)]
    start_items = [(cfg.start, rhs, 0, 0) for rhs in by_lhs.get(cfg.start, [])]
    chart[0].update(start_items)
    for i in range(n + 1):
        agenda = list(chart[i])
        while agenda:
            lhs, rhs, dot, origin = agenda.pop()
            if dot == len(rhs):  # complete
                for item in list(chart[origin]):
                    l2, r2, d2, o2 = item
                    if d2 < len(r2) and r2[d2] == lhs:
                        new = (l2, r2, d2 + 1, o2)
                        if new not in chart[i]:
                            chart[i].add(new)
                            agenda.append(new)
                continue
            sym = rhs[dot]
            if sym in full:  # scan: ignore text, then a lexeme text[k:j]
                for k in ignorable[i]:
                    for j in range(k + 1, n + 1):
                        if full[sym].fullmatch(text, k, j):
                            chart[j].add((lhs, rhs, dot + 1, origin))
                continue
            for rhs2 in by_lhs.get(sym, []):  # predict
                new = (sym, rhs2, 0, i)
                if new not in chart[i]:
                    chart[i].add(new)
                    agenda.append(new)
            # a nullable symbol completed at i already: advance over it
            if any((sym, r3, len(r3), i) in chart[i] for r3 in by_lhs.get(sym, [])):
                new = (lhs, rhs, dot + 1, origin)
                if new not in chart[i]:
                    chart[i].add(new)
                    agenda.append(new)
    return any(
        (cfg.start, rhs, len(rhs), 0) in chart[j]
        for j in range(n + 1)
        if n in ignorable[j]
        for rhs in by_lhs.get(cfg.start, [])
    )


def run_text(states, text: str) -> int:
    """The byte state of a ``ByteAutomaton`` after ``text``'s UTF-8 bytes from state 0 (-1: dead)."""
    s = 0
    for b in text.encode():
        s = states.step(s, b)
        if s < 0:
            return -1
    return s


def check_byte_states(states, member, alphabet: str, lookahead: int, length: int = 5) -> None:
    """Every text over ``alphabet`` up to ``length`` characters against brute force with the
    judge ``member``: accepted iff ``member`` says so; dead only if no completion of at most
    ``lookahead`` more characters is accepted; alive with a witness of the state's fewest bytes
    that is accepted, and no accepted completion shorter than that (searched up to ``lookahead``)."""
    import functools
    import itertools

    @functools.cache
    def fewest(prefix: str, budget: int) -> int | None:
        if member(prefix):
            return 0
        if budget == 0:
            return None
        got = [fewest(prefix + c, budget - 1) for c in alphabet]
        got = [g + 1 for g in got if g is not None]
        return min(got) if got else None

    for n in range(length + 1):
        for chars in itertools.product(alphabet, repeat=n):
            prefix = "".join(chars)
            s = run_text(states, prefix)
            assert (s >= 0 and states.accepting(s)) == member(prefix), prefix
            want = fewest(prefix, lookahead)
            if s < 0:
                assert want is None, (prefix, want)
                continue
            d = states.distance(s)
            assert d >= 0, prefix
            if want is not None or d <= lookahead:
                assert d == want, (prefix, d, want)
            w = states.witness(s)
            assert len(w) == d and member(prefix + w.decode()), (prefix, w)


def check_masks_at_budgets(auto, tokens, eos: int, member, lengths, min_tokens: bool = False) -> None:
    """``auto.allowed(state, remaining)`` for every sequence of the content tokens up to each
    length in ``lengths`` (``range``-like) whose text a sentence follows within 3 more tokens,
    and every budget 1..3, against brute force with the judge ``member`` (decoded text -> bool):
    a token is allowed iff some continuation within ``remaining - 1`` more tokens is accepted;
    EOS iff the text is. With ``min_tokens``, also ``auto.min_tokens`` is at most the fewest
    tokens that reach a sentence."""
    content = [v for v in range(len(tokens)) if v != eos and tokens[v] is not None]

    def decode(seq):
        return b"".join(tokens[v] for v in seq).decode()

    @functools.cache
    def reach_text(text, budget):  # a sentence within budget more tokens
        if member(text):
            return True
        return budget > 0 and any(reach_text(text + tokens[v].decode(), budget - 1) for v in content)

    for n in lengths:
        for seq in itertools.product(content, repeat=n):
            if not reach_text(decode(seq), 3):
                continue
            state = auto.walk(seq)
            assert state >= 0, seq
            for remaining in range(1, 4):
                got = auto.allowed(torch.tensor([state]), remaining)[0]
                want = torch.zeros(len(tokens), dtype=torch.bool)
                for v in content:
                    want[v] = reach_text(decode((*seq, v)), remaining - 1)
                want[eos] = member(decode(seq))
                assert torch.equal(got, want), (seq, remaining, got.nonzero(), want.nonzero())
            if min_tokens:
                fewest = min(r for r in range(4) if reach_text(decode(seq), r))
                assert auto.min_tokens(torch.tensor([state])).item() <= fewest
