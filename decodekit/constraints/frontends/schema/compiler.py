"""Lowering: :class:`Compiler` writes each clause of the normal form as a fragment (regex text,
a Pattern where an intersection or complement is needed, a grammar's placeholder where a
recursive ``$ref`` is a nonterminal), counting NFA states as it goes so that a schema too large
is refused before its text exists."""

from __future__ import annotations

import itertools
import json

from decodekit.constraints.automata.pattern import Pattern, complement, intersect
from decodekit.constraints.frontends.ecma import translate
from decodekit.constraints.frontends.schema import limits
from decodekit.constraints.frontends.schema.clauses import (
    KINDS,
    Clause,
    json_equal,
    kind_of,
    member_subs,
    name_matches,
    without_enum,
)
from decodekit.constraints.frontends.schema.disjointness import (
    check_subs,
    check_value,
    conjunction,
    covers,
    value_kinds,
)
from decodekit.constraints.frontends.schema.formats import CHAR_STATES, FORMAT_LENGTHS, FORMATS, STRING
from decodekit.constraints.frontends.schema.fragments import (
    SEALING,
    array_text,
    either,
    escaped,
    fit_lengths,
    fragment,
    joined,
    members_text,
    not_words,
    opaque,
    string_of_length,
    text_size,
    too_large,
)
from decodekit.constraints.frontends.schema.limits import (
    MAX_ANY_ORDER,
    MAX_DEPTH,
    MAX_ENUM_UNIQUE,
    MAX_REF_UNROLL,
    MembersTooLarge,
    needs,
    show,
)
from decodekit.constraints.frontends.schema.normal_form import Normalizer
from decodekit.constraints.frontends.schema.numbers import NUMBER, number_text
from decodekit.constraints.frontends.schema.rules import RecursionNotLowered, placeholder
from decodekit.errors import ConstraintError, ConstraintTooLarge

ANY_DEPTH = 2  # nesting of arrays/objects in a value the schema leaves free ({} or true)


class Compiler:
    def __init__(
        self,
        root,
        flexible: bool,
        unroll: int = MAX_REF_UNROLL,
        share: bool = False,
        any_order: bool = False,
        recursive: frozenset = frozenset(),
    ):
        self.norm, self.depth, self.any_order = Normalizer(root, unroll, recursive), 0, any_order
        self.rule_names: dict[tuple, str] = {}  # recursive $ref key -> nonterminal name
        self.definitions: dict[str, object] = {}  # nonterminal name -> fragment (None: no value)
        self.opening = None  # the nonterminal whose definition value() is about to write
        self.share, self.memo = share, {}
        self.empty = ""  # why the first place that writes no value writes none (an enum, a bound)
        self.colon, self.comma = (": ?", ", ?") if flexible else (":", ",")
        # writing an excluded text (under an odd number of complements): it must hold every
        # spelling of its values that the text around writes (integers 0 spelled "-0" too)
        self.widen = False

    def check(self, frag, ptr: str):
        if too_large(frag):
            dag = SEALING.get()
            if isinstance(frag[0], str):
                what = f"{frag[1]:,} NFA states"
            elif dag is None:
                what = f"{frag[1]:,} NFA states or {text_size(frag[0]):,} characters of regex text"
            else:
                what = f"{dag.total:,} characters and nodes of regex texts, each written once"
            raise ConstraintTooLarge(
                f"{show(ptr)}: the JSON Schema's regex would exceed {limits.MAX_PATTERN_CHARS:,} "
                f"characters or "
                f"{limits.MAX_STATES:,} automaton states (at least {what} here): simplify the schema",
                bound="characters or states",
                limit=limits.MAX_PATTERN_CHARS,
            )
        return frag

    def value(self, subs: list, ptr: str):
        """The fragment of the values satisfying every ``(schema, ctx)`` of ``subs`` (None: none)."""
        rule = self.restricted_rule(subs)
        if rule is not None:
            if self.opening != rule:
                return self.named(rule, subs, ptr)
            self.opening = None  # writing the rule's own definition
        if self.depth >= MAX_DEPTH:
            raise ConstraintError(
                f"{show(ptr)}: the JSON Schema nests subschemas more than {MAX_DEPTH} levels deep"
            )
        key = self.share and (
            self.widen,
            *((id(s), ctx and id(ctx.base), ctx and ctx.refs) for s, ctx in subs),
        )
        if key in self.memo:
            return self.memo[key]
        limits.spend(ptr)
        self.depth += 1
        try:
            if all(s is True or s == {} for s, _ in subs):
                out = self.check(self.any(ANY_DEPTH), ptr)
            else:
                alts = [Clause(ptr)]
                for s, ctx in subs:
                    alts = self.norm.product(alts, self.norm.clauses(s, ctx, ptr), ptr)
                out = self.check(either([self.clause(c) for c in alts]), ptr)
        finally:
            self.depth -= 1
        if self.share:
            if out is not None and isinstance(out[0], str) and len(out[0]) > limits.SHARE_LEAF:
                out = (opaque(out[0]), 1)  # equal texts: one leaf (Patterns are hash-consed)
            self.memo[key] = out
        return out

    def subs(self, subs: list, ptr: str):
        return self.value([(s, ctx) for s, ctx, _ in subs] or [(True, None)], subs[0][2] if subs else ptr)

    def any(self, depth: int):
        scalar = f"null|true|false|{NUMBER}|{STRING}"
        if depth == 0:
            return fragment(f"(?:{scalar})")
        v = self.any(depth - 1)[0]
        member = f"{STRING}{self.colon}{v}"
        return fragment(
            rf"(?:{scalar}|\[(?:{v}(?:{self.comma}{v})*)?\]|\{{(?:{member}(?:{self.comma}{member})*)?\}})"
        )

    def clause(self, c: Clause):
        if c.rule is not None:
            return self.nonterminal(c)
        if c.excl:
            return self.excluded(c)
        if c.enum is not None:
            return self.enum(c)
        parts = []
        if "null" in c.kinds:
            parts.append(fragment("null"))
        if "boolean" in c.kinds:
            parts.append(fragment("(?:true|false)"))
        if c.kinds & {"integer", "fraction"}:
            parts.append(self.number(c))
        if "string" in c.kinds:
            parts.append(self.string(c))
        if "array" in c.kinds:
            parts.append(self.array(c))
        if "object" in c.kinds:
            parts.append(self.object(c))
        return self.check(either(parts), c.ptr)

    def restricted_rule(self, subs: list):
        """The key of a subschema that is a recursive ``$ref`` beside keywords restricting it
        (``{"$ref": "#", "type": "object"}``): written as its own nonterminal, so that the
        definition opened to merge the restriction in is written once (None: not such a one)."""
        if not self.norm.recursive or len(subs) != 1:
            return None
        s, ctx = subs[0]
        target = s.get("$ref") if isinstance(s, dict) else None
        if not isinstance(target, str) or ctx is None or (id(ctx.base), target) not in self.norm.recursive:
            return None
        return ("restricted", id(s), id(ctx.base))

    def named(self, key: tuple, subs: list, ptr: str):
        """The placeholder of the nonterminal ``key`` whose definition is ``value(subs)``."""
        if self.widen:
            raise RecursionNotLowered(f"{show(ptr)}: a recursive $ref inside an excluded text")
        name = self.rule_names.get(key)
        if name is None:
            name = self.rule_names[key] = f"def{len(self.rule_names)}"
            self.definitions[name] = None  # while written: a use inside is the placeholder
            self.opening = key
            self.definitions[name] = self.value(subs, ptr)
        return (placeholder(name), 1)

    def nonterminal(self, c: Clause):
        """A recursive definition's placeholder (:func:`~.rules.placeholder`); its text
        is written once, into :attr:`definitions`, the first time it is used."""
        key, (node, ctx, ptr) = c.rule
        return self.named(key, [(node, ctx)], ptr)

    def excluded(self, c: Clause):
        """``W(c) & ~(W(x) | ...)`` over the excluded clauses ``x`` (exact oneOf, ``not``): the
        texts of ``c``'s values that satisfy no ``x``, each ``x`` checked by :func:`covers`
        against ``c`` as merged with its siblings (else refused; for a ``not``, the kinds of value
        ``x`` accepts are left out of ``c``, a part). The excluded texts are written
        with ``-0`` beside every ``0`` (writing more of them only removes more)."""
        odd = self.widen  # writing an excluded text: it must hold every text of c's values
        base = c.copy()
        base.excl = []
        excluded = []
        for x, ptr, what, part in c.excl:
            # odd: W(x) of a sound writer holds no text of c's values, so any x may be removed
            if odd or x.exact and covers(x, base, self.norm):
                excluded.append(x)
            elif part:  # a value of a kind x rejects satisfies c: those are written (a part)
                base.kinds -= value_kinds(x)
            else:
                needs(ptr, what, "complement")
        if not base.kinds:
            return None
        pos = self.clause(base)
        if pos is None:
            return None
        neg = []
        self.widen = not odd
        try:
            for x in excluded:
                x = x.copy()
                x.kinds &= base.kinds  # texts of other kinds are not in W(c): nothing to remove
                if x.kinds:
                    neg.append(self.clause(x))
        finally:
            self.widen = odd
        out = either(neg)
        if out is None:
            return pos
        size = pos[1] + out[1] if not SEALING.get() else 1
        return self.check((intersect(pos[0], complement(out[0])), size), c.ptr)

    def enum(self, c: Clause):
        plain = c.constrains_only_kinds() and c.kinds == KINDS
        texts: dict[str, None] = {}  # in order, each once (a list's `in` made 200,000 values quadratic)
        for v in c.enum:
            try:
                text = json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            except ValueError as e:
                raise ConstraintError(f"{show(c.ptr)}/enum: {str(v)[:60]!r} has no JSON form ({e})") from None
            if text in texts:
                continue
            if not plain and check_value(without_enum(c), v, self.norm) is not True:
                continue
            texts[text] = None
            if self.widen and text == "0":
                texts["-0"] = None  # an excluded text: every spelling of 0
        if not texts:
            # no value here: an optional place is left out
            self.empty = self.empty or f"{show(c.ptr)}/enum: no value satisfies the rest of the schema"
            return None
        # a literal alternation: counted as the trie of its texts is, about a state per value
        out = either([fragment(escaped(t), 2) for t in texts])
        return out and (out[0], max(out[1], 2 * len(texts)))

    # numbers ------------------------------------------------------------------------------------
    def number(self, c: Clause):
        out, why_none = number_text(c, self.widen)
        self.empty = self.empty or why_none
        return out

    # strings ------------------------------------------------------------------------------------
    def string(self, c: Clause):
        """A string's fragment: its formats, patterns and length bounds each as a regex of the
        JSON text (``"..."``); several of them: their intersection (a Pattern). Each regex admits
        only texts whose decoded string satisfies its keyword, so the intersection is sound; the
        length regex is ``"CHAR{lo,hi}"``, one decoded character per CHAR (an escape such as
        ``\\n`` or ``\\u00e9`` is one CHAR, surrogate escapes are not spelled), so it is exact."""
        lo, hi = c.min_len, c.max_len
        if hi is not None and hi < lo:
            return None
        texts = [(f'"{FORMATS[f]}"', text_size(FORMATS[f]) + 2) for f, _ in c.formats]
        length = lo or hi is not None
        if len(c.formats) == 1 and not c.patterns and length:
            shortest, longest = FORMAT_LENGTHS.get(c.formats[0][0], (0, None))
            if lo <= shortest and longest is not None and (hi is None or longest <= hi):
                length = False  # every text of the format has a length within the bounds
        for p, ptr in c.patterns:
            t = translate(p, ptr)
            if length and len(c.patterns) == 1 and not c.formats:
                fitted = fit_lengths(p, ptr, lo, hi, t)
                if fitted is not None:
                    return fragment(f'"{fitted.encoded}"', fitted.states)
            texts.append((f'"{t.encoded}"', t.states))
        if length or not texts:
            texts.append((STRING, CHAR_STATES + 4) if lo == 0 and hi is None else string_of_length(lo, hi))
        if len(texts) == 1:
            return texts[0]
        if not SEALING.get():
            return (intersect(*(Pattern(t) for t, _ in texts)), max(n for _, n in texts) * len(texts))
        return (intersect(*(Pattern(t) for t, _ in texts)), 1)

    # arrays -------------------------------------------------------------------------------------
    def array(self, c: Clause):
        lo, hi = c.min_items, c.max_items
        if hi is not None and hi < lo:
            return None
        prefix = list(c.prefix)
        rest = c.items
        if c.contains and c.min_contains > 0:
            if prefix or c.unique:
                raise ConstraintError(
                    f"{show(c.ptr)}/contains is only supported without prefixItems and uniqueItems"
                )
            prefix = [rest + c.contains for _ in range(c.min_contains)]
            lo = max(lo, c.min_contains)
        if c.unique and (hi is None or hi > 1):
            return self.unique(c, prefix, rest, lo, hi)
        if hi is not None:
            prefix = prefix[:hi]
        texts = [self.subs(p, f"{c.ptr}/items") for p in prefix]
        rest_text = self.subs(rest, f"{c.ptr}/items") if (hi is None or hi > len(prefix)) else None
        return self.check(array_text(texts, rest_text, lo, hi, self.comma), c.ptr)

    def unique(self, c: Clause, prefix, rest, lo: int, hi: int | None):
        """uniqueItems: arrays of distinct values of a finite item set (enum, null, booleans);
        otherwise arrays of at most one item (always unique)."""
        values = None
        if not prefix:
            parts = conjunction([(s, ctx, p) for s, ctx, p in rest], self.norm) if rest else None
            if parts and all(
                p.rule is None and (p.enum is not None or p.kinds <= {"null", "boolean"}) for p in parts
            ):
                values = []
                for p in parts:
                    cands = (
                        p.enum
                        if p.enum is not None
                        else [v for v in (None, True, False) if kind_of(v) in p.kinds]
                    )
                    for v in cands:
                        if check_value(p, v, self.norm) is True and not any(json_equal(v, w) for w in values):
                            values.append(v)
        if values is not None and len(values) <= MAX_ENUM_UNIQUE:
            texts = [escaped(json.dumps(v, ensure_ascii=False, separators=(",", ":"))) for v in values]
            seqs = [
                rf"\[{self.comma.join(p)}\]"
                for n in range(lo, min(len(texts), hi if hi is not None else len(texts)) + 1)
                for p in itertools.permutations(texts, n)
            ]
            return either([fragment(s) for s in seqs])
        if lo > 1:
            raise ConstraintError(
                f"{show(c.ptr)}/uniqueItems is not supported with minItems > 1 over more than "
                f"{MAX_ENUM_UNIQUE} possible items (distinct items are not a regular language)"
            )
        texts = [self.subs(p, f"{c.ptr}/items") for p in prefix[:1]]
        rest_text = self.subs(rest, f"{c.ptr}/items") if not prefix else None
        return array_text(texts, rest_text, lo, 1, self.comma)

    # objects ------------------------------------------------------------------------------------
    def object(self, c: Clause):
        required = set(c.required)
        for name in list(c.dep_required):
            if name in required:
                required |= c.dep_required[name]
        listed = list(c.props) + sorted(required - c.props.keys())
        forbidden = set(c.forbid)
        for name in listed:
            if name in c.dep_required and not c.dep_required[name] <= required:
                forbidden.add(name)  # written only with its dependencies: never written
            if name in c.dep_schemas:
                if name in required:
                    raise ConstraintError(
                        f"{show(c.ptr)}/dependentSchemas of a required property is not supported"
                    )
                forbidden.add(name)
            if c.names and check_subs(c.names, name, self.norm, 0) is not True:
                forbidden.add(name)
        if forbidden & required:
            return None
        members = []
        for name in listed:
            if name in forbidden:
                continue
            key = escaped(json.dumps(name, ensure_ascii=False))
            val = self.subs(member_subs(c, name), f"{c.ptr}/properties/{name}")
            if val is None:
                if name in required:
                    return None
                continue
            members.append((joined(fragment(key + self.colon), val), name in required))
        extra = None
        if c.extras and not c.names and not c.dep_required and not c.dep_schemas:
            extra = self.extra_members(c, listed + sorted(c.forbid - set(listed)))
        if self.any_order and extra is None and 1 < len(members) <= MAX_ANY_ORDER:
            try:
                return self.check(self.any_order_members(members, c), c.ptr)
            except ConstraintTooLarge:
                pass  # too large in any order: written in the schema's order
        for first in (None, 8, 1):  # too large: the first property written among the first 8, then 1
            try:
                return self.check(
                    members_text(members, extra, c.min_props, c.max_props, self.comma, first, c.ptr), c.ptr
                )
            except MembersTooLarge:
                if first == 1:
                    raise
        return None

    def any_order_members(self, members: list, c: Clause):
        """``{`` members ``}`` in every order: each subset of the listed members that holds the
        required ones and satisfies minProperties/maxProperties, in each of its orders."""
        alts = []
        required = {i for i, (_, req) in enumerate(members) if req}
        for k in range(len(members) + 1):
            if k < c.min_props or c.max_props is not None and k > c.max_props or k < len(required):
                continue
            for order in itertools.permutations(range(len(members)), k):
                if not required <= set(order):
                    continue
                parts = [fragment(r"\{")]
                for j, i in enumerate(order):
                    parts += [fragment(self.comma), members[i][0]] if j else [members[i][0]]
                alts.append(joined(*parts, fragment(r"\}")))
        return either(alts)

    def extra_members(self, c: Clause, names: list):
        """key:value for properties not listed: keys of a patternProperties pattern (when no
        listed name may match it), else identifiers that are no listed name (additionalProperties)."""
        alts = []
        all_pats = [s for _, subs in c.patprops for s in subs]
        for p, subs in c.patprops:
            ptr = subs[0][2] if subs else c.ptr
            if any(name_matches(p, n, ptr)[1] for n in names):
                continue
            keys = translate(p, ptr)
            value = self.subs(all_pats, ptr)  # a key may match other patterns too
            if value is not None:
                alts.append(joined(fragment(f'"{keys.encoded}"{self.colon}', keys.states + 4), value))
        if not c.patprops and c.additional:
            value = self.subs(c.additional, c.additional[0][2])
            if value is not None:
                alts.append(joined(fragment(f'"{not_words(names)}"{self.colon}'), value))
        return either(alts)
