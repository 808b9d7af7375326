"""Regex text as the front end writes it: a fragment is ``(text, NFA states)`` or None (no
value), the text a regex string or a :class:`Pattern` where an intersection was needed;
:func:`joined`, :func:`either`, :func:`repeated` combine fragments plainly or *sealed* (regex
texts as Pattern leaves, shared in a :class:`Dag`); arrays and objects' members as fragments."""

from __future__ import annotations

import contextvars

from decodekit.constraints.automata.pattern import Pattern, concat, repeat, union
from decodekit.constraints.frontends.ecma import translate
from decodekit.constraints.frontends.schema import limits
from decodekit.constraints.frontends.schema.formats import CHAR, CHAR_STATES
from decodekit.constraints.frontends.schema.limits import MAX_MEMBER_PIECES, MembersTooLarge, show

SEALING: contextvars.ContextVar[Dag | None] = contextvars.ContextVar("sealing", default=None)


META = frozenset(r"\.^$|?*+()[]{}#")


def fragment(text: str, states: int | None = None):
    return (text, len(text) if states is None else states)


def text_size(text) -> int:
    """The characters of a fragment's text (a Pattern: its text written out, shared parts at each use)."""
    return len(text) if isinstance(text, str) else text.text_length()


class Dag:
    """The Pattern nodes written while sealed, each counted once however often it is used: the
    regex texts' characters plus one per node and operand (:meth:`Pattern.size` of them all).
    A sealed fragment's Pattern weighs 1 in the fragment's count; its size is counted here, and
    the schema is bounded by ``total`` (:data:`limits.MAX_PATTERN_CHARS`), the DAG, not its expansion."""

    def __init__(self):
        self.seen: set[Pattern] = set()
        self.total = 0

    def add(self, p: Pattern) -> int:
        stack = [p]
        while stack:
            x = stack.pop()
            if x in self.seen:
                continue
            self.seen.add(x)
            kids = x.children
            self.total += len(x.args) + 1 if not kids and isinstance(x.args, str) else len(kids) + 1
            stack.extend(k for k in kids if k not in self.seen)
        return self.total


def opaque(text: str) -> Pattern:
    """``text`` as a leaf of a Pattern that :func:`concat` and :func:`repeat` never join into a
    longer regex text (a union of one), so that each regex text the engine parses stays under
    its NFA-state budget while the whole is larger (counted repetitions stay symbolic)."""
    return Pattern("", "or", (Pattern(text),))


def sealed_runs(parts: list) -> list:
    """Consecutive str fragments of ``parts`` joined while their NFA states stay under
    :data:`limits.SEAL_STATES`, each run (and every Pattern part) as a Pattern leaf."""
    out, run = [], []

    def flush():
        if run:
            out.append(opaque("".join(t for t, _ in run)))
            run.clear()

    states = 0
    for text, n in parts:
        if isinstance(text, Pattern):
            flush()
            out.append(text)
            continue
        if text == "":
            continue
        if run and states + n > limits.SEAL_STATES:
            flush()
        if not run:
            states = 0
        run.append((text, n))
        states += n
    flush()
    return out


def joined(*parts):
    if any(p is None for p in parts):
        return None
    if not SEALING.get():
        if any(isinstance(p[0], Pattern) for p in parts):
            texts = [p[0] for p in parts if p[0] != ""]
            return (concat(*texts) if texts else "", sum(p[1] for p in parts))
        return ("".join(p[0] for p in parts), sum(p[1] for p in parts))
    if all(isinstance(p[0], str) for p in parts):
        states = sum(p[1] for p in parts)
        if states <= limits.SEAL_STATES:
            return ("".join(p[0] for p in parts), states)
    items = sealed_runs(list(parts))
    return (concat(*items), 1) if items else fragment("")


def either(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    if not SEALING.get():
        if any(isinstance(p[0], Pattern) for p in parts):
            return (union(*(p[0] for p in parts)), sum(p[1] for p in parts) + 2)
        return (f"(?:{'|'.join(p[0] for p in parts)})", sum(p[1] for p in parts) + 2)
    if all(isinstance(p[0], str) for p in parts):
        states = sum(p[1] for p in parts) + 2
        if states <= limits.SEAL_STATES:
            return (f"(?:{'|'.join(p[0] for p in parts)})", states)
    leaves, run, states = [], [], 0
    for p in parts:  # alternatives grouped into regex texts under limits.SEAL_STATES each
        if isinstance(p[0], Pattern):
            leaves.append(p[0])
            continue
        if run and states + p[1] > limits.SEAL_STATES:
            leaves.append(Pattern(f"(?:{'|'.join(run)})"))
            run, states = [], 0
        run.append(p[0])
        states += p[1]
    if run:
        leaves.append(Pattern(f"(?:{'|'.join(run)})"))
    one = leaves[0] if leaves[0].op != "re" else opaque(leaves[0].args)
    return (union(*leaves) if len(leaves) > 1 else one, 1)


def repeated(p, lo: int, hi: int | None):
    if hi == 0 or p is not None and p[0] == "":
        return fragment("")
    if p is None:
        return fragment("") if lo == 0 else None
    if (lo, hi) == (1, 1):
        return p
    states = p[1] * max(lo, hi or 1, 1) + 2
    if isinstance(p[0], Pattern) and not SEALING.get():
        return (repeat(p[0], lo, hi), states)
    if isinstance(p[0], Pattern) or states > limits.SEAL_STATES:
        inner = p[0] if isinstance(p[0], Pattern) and p[0].op != "re" else opaque(str(p[0]))
        return (repeat(inner, lo, hi), 1)  # the engine keeps the count symbolic
    q = (
        "*"
        if (lo, hi) == (0, None)
        else "?"
        if (lo, hi) == (0, 1)
        else "+"
        if (lo, hi) == (1, None)
        else None
    )
    q = q or (f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}")
    return (f"(?:{p[0]}){q}", states)


def too_large(frag) -> bool:
    """A str: more NFA states than one regex text may have; a Pattern: an expanded text over
    :data:`limits.MAX_PATTERN_CHARS` (what the engine walks and prints)."""
    if frag is None:
        return False
    dag = SEALING.get()
    if isinstance(frag[0], str) or dag is None:
        return frag[1] > limits.MAX_STATES or text_size(frag[0]) > limits.MAX_PATTERN_CHARS
    return dag.add(frag[0]) > limits.MAX_PATTERN_CHARS


def escaped(text: str) -> str:
    return "".join("\\" + c if c in META else c for c in text)


def fit_lengths(p: str, ptr: str, lo: int, hi: int | None, t):
    """The pattern's translation cut to strings of lo..hi characters (its repetitions capped,
    repeated classes repeated more), or None when that does not fit."""

    def ok(t) -> bool:
        return lo <= t.shortest and (hi is None or t.longest is not None and t.longest <= hi)

    if ok(t):
        return t
    if lo > t.shortest:
        t = translate(p, ptr, None, lo - t.shortest)
        if t.shortest < lo:
            return None
        if ok(t):
            return t
    if hi is None:
        return None
    need = max(lo - translate(p, ptr).shortest, 0)
    best, a, b = None, 0, hi
    while a <= b:  # the largest cap that fits (longest grows with the cap)
        mid = (a + b) // 2
        cand = translate(p, ptr, mid, need)
        if cand.longest is not None and cand.longest <= hi:
            best, a = cand, mid + 1
        else:
            b = mid - 1
    return best if best is not None and ok(best) else None


def string_of_length(lo: int, hi: int | None):
    q = f"{{{lo},{'' if hi is None else hi}}}"
    states = CHAR_STATES * max(lo, hi or 1, 1) + 4
    if states > limits.SEAL_STATES and SEALING.get():  # the count kept symbolic: one node of the engine
        return (concat('"', repeat(opaque(CHAR), lo, hi), '"'), 1)
    return (f'"{CHAR}{q}"', states)


def array_text(texts: list, rest, lo: int, hi: int | None, comma: str):
    """``[`` items ``]``: the i-th of ``texts`` at position i, then ``rest`` repeated; between
    ``lo`` and ``hi`` items (a None text: no value there, so the array ends before)."""
    k = len(texts)
    rest_lo, rest_hi = max(lo - k, 0), None if hi is None else max(hi - k, 0)
    if k == 0:
        if rest is None or rest_hi == 0:
            tail = fragment("") if rest_lo == 0 else None
        else:
            more = repeated(
                joined(fragment(comma), rest), max(rest_lo - 1, 0), None if rest_hi is None else rest_hi - 1
            )
            tail = joined(rest, more)
            if rest_lo == 0:
                tail = repeated(tail, 0, 1)
    else:
        tail = repeated(joined(fragment(comma), rest) if rest is not None else None, rest_lo, rest_hi)
    for i in range(k - 1, -1, -1):
        body = joined(fragment(comma if i else ""), texts[i], tail) if texts[i] is not None else None
        tail = repeated(body, 0, 1) if i >= lo else body
        if tail is None:
            return None
    return joined(fragment(r"\["), tail, fragment(r"\]"))


def members_text(
    members: list, extra, min_props: int, max_props: int | None, comma: str, first=None, ptr: str = ""
):
    """``{`` members ``}``: ``members`` (fragment, required) in order, each optional one present or
    not, then ``extra`` members repeated; at least ``min_props`` of the listed ones (repeated extra
    keys may collapse), at most ``max_props`` in all. ``first``: the first member written is one of
    the first ``first + 1`` (the rest of the regex then grows linearly, not quadratically)."""
    cap = max(min_props, 1) if max_props is None else max_props
    memo: dict = {}
    n = len(members)
    if sum(min(i, cap) + 1 for i in range(n + 1)) > MAX_MEMBER_PIECES:  # the (member, count) pieces
        raise MembersTooLarge(
            f"{show(ptr)}: the JSON Schema's regex would exceed {limits.MAX_PATTERN_CHARS:,} "
            f"characters or "
            f"{limits.MAX_STATES:,} automaton states (an object's optional properties, counted up to {cap}): "
            "simplify the schema",
            bound="pieces",
            limit=MAX_MEMBER_PIECES,
        )

    def tail(count: int):
        need = 1 if count == min_props - 1 and extra is not None else 0  # one extra member: distinct
        if count + need < min_props:
            return None
        room = None if max_props is None else max_props - count
        if extra is None or room == 0:
            return fragment("") if not need else None
        if count == 0:
            first = joined(
                extra, repeated(joined(fragment(comma), extra), 0, None if room is None else room - 1)
            )
            return first if need else repeated(first, 0, 1)
        return repeated(joined(fragment(comma), extra), need, room)

    def gen(i: int, count: int):
        key = (i, min(count, cap))
        if key in memo:
            return memo[key]
        limits.spend(ptr)
        if i == n:
            out = tail(count)
        else:
            text, req = members[i]
            sep = fragment(comma if count else "")
            full = max_props is not None and count >= max_props
            present = None if full else joined(sep, text, gen(i + 1, count + 1))
            if req:
                out = present
            elif first is not None and count == 0 and i >= first and present is not None:
                # linear from here: this member, or (no required one left) no listed member at all
                later_required = any(r for _, r in members[i:])
                out = present if later_required else either([present, tail(0)])
            elif count >= cap and max_props is None and count:
                out = joined(
                    repeated(joined(sep, text), 0, 1), gen(i + 1, count)
                )  # the counts no longer matter
            else:
                out = either([present, gen(i + 1, count)])
        if too_large(out):
            raise MembersTooLarge(
                f"{show(ptr)}: the JSON Schema's regex would exceed {limits.MAX_PATTERN_CHARS:,} "
                f"characters or "
                f"{limits.MAX_STATES:,} automaton states (an object's optional properties): "
                "simplify the schema",
                bound="characters or states",
                limit=limits.MAX_PATTERN_CHARS,
            )
        memo[key] = out
        return out

    return joined(fragment(r"\{"), gen(0, 0), fragment(r"\}"))


KEY_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


def not_words(words: list[str]) -> str:
    """Non-empty keys of ``[A-Za-z0-9_]`` that are none of ``words``."""
    trie: dict = {}
    for w in words:
        if all(ch in KEY_CHARS for ch in w):
            node = trie
            for ch in w:
                node = node.setdefault(ch, {})
            node[""] = {}
    free = f"[{KEY_CHARS[:10]}A-Z_a-z]"

    def walk(node: dict, top: bool) -> str:
        alts = [] if top or "" in node else [""]
        kids = sorted(k for k in node if k)
        others = "".join(ch for ch in KEY_CHARS if ch not in kids)
        if others:
            cls = others if len(others) < 10 else None
            alts.append((f"[{cls}]" if cls else f"[^{''.join(kids)}\\W]" if kids else free) + f"{free}*")
        for ch in kids:
            alts.append(ch + walk(node[ch], False))
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return walk(trie, True)
