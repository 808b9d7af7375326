"""The normal form's data: :class:`Clause`, a conjunction of constraints on one JSON value, and
the operations on clauses alone (:func:`merge`: the conjunction of two; the members and positions a
clause gives a property or an item; the keywords that constrain a value)."""

from __future__ import annotations

import math
import re

import regex

from decodekit.constraints.frontends.ecma import translate
from decodekit.constraints.frontends.schema import limits
from decodekit.constraints.frontends.schema.limits import show
from decodekit.constraints.frontends.schema.rules import RecursionNotLowered
from decodekit.errors import ConstraintError

# Keywords that constrain a value (JSON Schema drafts 4 to 2020-12); every other keyword is an
# annotation or unknown, and ignored as validators ignore it (title, description, examples,
# default, $comment, $id, $schema, $anchor, deprecated, readOnly, id, self, links, x-*, javaType...).
_CONSTRAINING = (
    "type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength minLength "
    "pattern format maxItems minItems uniqueItems maxContains minContains contains items prefixItems "
    "additionalItems maxProperties minProperties required dependentRequired dependentSchemas "
    "dependencies properties patternProperties additionalProperties propertyNames allOf anyOf oneOf "
    "not if then else $ref $dynamicRef $recursiveRef unevaluatedItems unevaluatedProperties"
)


CONSTRAINING = frozenset(_CONSTRAINING.split(" "))


SUPPORTED = CONSTRAINING - {"$dynamicRef", "$recursiveRef", "unevaluatedItems", "unevaluatedProperties"}


TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


# The kinds of value a clause allows: "integer" is an integral number (1 and 1.0), "fraction" the others
KINDS = frozenset(("null", "boolean", "integer", "fraction", "string", "array", "object"))


class Context:
    """Where a subschema is read: ``base`` (the schema resource that ``#/...`` and ``#name`` refer
    to) and ``refs`` (the $ref targets enclosing it, to bound recursion)."""

    __slots__ = ("base", "refs")

    def __init__(self, base, refs: tuple):
        self.base, self.refs = base, refs


class Clause:
    """A conjunction of constraints on one JSON value (see the module docstring). Subschemas are
    kept as lists of ``(schema, ctx, pointer)``, all of which apply. ``exact``: False where a
    keyword was read as a part of what it allows (if/then/else without else, a recursion cut)."""

    _FIELDS = (
        "kinds enum lo hi mult min_len max_len patterns formats prefix items min_items max_items "
        "unique contains min_contains props required patprops additional extras min_props max_props "
        "names dep_required dep_schemas forbid excl exact ptr rule"
    )
    __slots__ = tuple(_FIELDS.split(" "))

    def __init__(self, ptr: str):
        self.kinds, self.enum, self.lo, self.hi, self.mult = set(KINDS), None, [], [], []
        self.min_len, self.max_len, self.patterns, self.formats = 0, None, [], []
        self.prefix, self.items, self.min_items, self.max_items, self.unique = [], [], 0, None, False
        self.contains, self.min_contains = [], 1
        self.props, self.required, self.patprops, self.additional = {}, set(), [], []
        self.extras = False  # additionalProperties / patternProperties given: extra members may be written
        self.min_props, self.max_props, self.names = 0, None, []
        self.dep_required, self.dep_schemas = {}, {}
        self.forbid = set()  # property names that must be absent (to keep oneOf branches apart)
        # (clause, pointer, what, part): values satisfying the clause are excluded (exact oneOf,
        # not); part: where that is not exact, the clause's kinds may be left out instead
        self.excl = []
        self.exact, self.ptr = True, ptr
        # a recursive definition written as a grammar's nonterminal: (key, (schema, ctx, pointer))
        # of the $ref target; the clause then stands for that schema and nothing else
        self.rule = None

    def copy(self) -> Clause:
        """A copy whose containers are new (one level deep; ``props`` and ``prefix`` two)."""
        limits.spend(self.ptr)
        c = object.__new__(Clause)
        c.kinds, c.enum, c.lo, c.hi = self.kinds.copy(), copied(self.enum), self.lo.copy(), self.hi.copy()
        c.mult, c.min_len, c.max_len = self.mult.copy(), self.min_len, self.max_len
        c.patterns, c.formats, c.items = self.patterns.copy(), self.formats.copy(), self.items.copy()
        c.prefix = [list(p) for p in self.prefix]
        c.min_items, c.max_items, c.unique = self.min_items, self.max_items, self.unique
        c.contains, c.min_contains = self.contains.copy(), self.min_contains
        c.props = {k: list(v) for k, v in self.props.items()}
        c.required, c.patprops = self.required.copy(), self.patprops.copy()
        c.additional, c.extras, c.names = self.additional.copy(), self.extras, self.names.copy()
        c.min_props, c.max_props = self.min_props, self.max_props
        c.dep_required, c.dep_schemas = self.dep_required.copy(), self.dep_schemas.copy()
        c.forbid, c.excl, c.exact, c.ptr = self.forbid.copy(), self.excl.copy(), self.exact, self.ptr
        c.rule = self.rule
        return c

    def constrains_only_kinds(self) -> bool:
        return (
            self.rule is None
            and not self.excl
            and (
                not (
                    self.lo
                    or self.hi
                    or self.mult
                    or self.min_len
                    or self.max_len is not None
                    or self.patterns
                )
                and not (
                    self.formats or self.prefix or self.items or self.min_items or self.max_items is not None
                )
                and not (
                    self.unique
                    or self.contains
                    or self.props
                    or self.required
                    or self.patprops
                    or self.additional
                )
                and not (
                    self.min_props
                    or self.max_props is not None
                    or self.names
                    or self.dep_required
                    or self.dep_schemas
                )
            )
        )


def kinds_of_types(types, ptr: str) -> set:
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or not types:
        raise ConstraintError(f"{show(ptr)}/type must be a type name or a non-empty array of them")
    out = set()
    for t in types:
        if t not in TYPES:
            raise ConstraintError(f"{show(ptr)}/type: unknown type {t!r}")
        out |= {"integer", "fraction"} if t == "number" else {t}
    return out


def kind_of(v) -> str:
    if v is None or isinstance(v, bool):
        return "null" if v is None else "boolean"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "fraction"
    return {int: "integer", str: "string", list: "array", dict: "object"}[type(v)]


def json_equal(a, b) -> bool:
    """JSON Schema equality: 1 == 1.0, but true != 1; arrays and objects deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def count_keyword(s: dict, key: str, ptr: str) -> int | None:
    v = s.get(key)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise ConstraintError(f"{show(ptr)}/{key} must be a non-negative integer, got {v!r}")
    return v


def number_keyword(s: dict, key: str, ptr: str):
    b = s[key]
    # an int is finite at any size (math.isfinite would convert it to a float: OverflowError past 1e308)
    infinite = isinstance(b, float) and not math.isfinite(b)
    if isinstance(b, bool) or not isinstance(b, (int, float)) or infinite:
        raise ConstraintError(f"{show(ptr)}/{key} must be a finite number, got {b!r}")
    return b


def merge(a: Clause, b: Clause, ptr: str) -> Clause | None:
    """The conjunction of two clauses (None: no value satisfies both)."""
    if a.rule is not None or b.rule is not None:  # a nonterminal: only alone
        if unconstrained(a):
            return b.copy()
        if unconstrained(b):
            return a.copy()
        raise RecursionNotLowered(f"{show(ptr)}: a recursive $ref beside keywords that restrict it")
    c = a.copy()
    c.kinds &= b.kinds
    if not c.kinds and a.exact and b.exact:
        return None
    if b.enum is not None:
        c.enum = b.enum if a.enum is None else [v for v in a.enum if any(json_equal(v, w) for w in b.enum)]
    c.lo += b.lo
    c.hi += b.hi
    c.mult += b.mult
    c.min_len = max(a.min_len, b.min_len)
    c.max_len = (
        b.max_len if a.max_len is None else a.max_len if b.max_len is None else min(a.max_len, b.max_len)
    )
    c.patterns += [p for p in b.patterns if p[0] not in [q[0] for q in a.patterns]]
    c.formats += [f for f in b.formats if f[0] not in [g[0] for g in a.formats]]
    n = max(len(a.prefix), len(b.prefix))
    if n:
        c.prefix = [position_subs(a, i) + position_subs(b, i) for i in range(n)]
    c.items = a.items + b.items
    c.min_items = max(a.min_items, b.min_items)
    c.max_items = smaller(a.max_items, b.max_items)
    c.unique = a.unique or b.unique
    if a.contains and b.contains:
        raise ConstraintError(f"{show(ptr)}: two contains keywords in one allOf are not supported")
    c.contains, c.min_contains = (a.contains, a.min_contains) if a.contains else (b.contains, b.min_contains)
    names = list(a.props) + [k for k in b.props if k not in a.props]
    if a.patprops and b.patprops:  # every name written is listed, with each side's subschemas
        names += sorted((a.required | b.required) - set(names))
        c.patprops = a.patprops + b.patprops
    else:
        c.patprops = [(p, subs + b.additional) for p, subs in a.patprops] + [
            (p, subs + a.additional) for p, subs in b.patprops
        ]
    c.props = {k: member_subs(a, k) + member_subs(b, k) for k in names}
    c.additional = a.additional + b.additional
    c.extras = (
        a.extras and b.extras
        if (a.additional or a.patprops) and (b.additional or b.patprops)
        else a.extras or b.extras
    )
    if (a.additional or a.patprops) and not (b.additional or b.patprops):
        c.extras = a.extras
    elif (b.additional or b.patprops) and not (a.additional or a.patprops):
        c.extras = b.extras
    both_patterns = bool(a.patprops and b.patprops)
    if both_patterns:  # an extra key would need both sides' key patterns: none written
        c.extras = False
    c.required = a.required | b.required
    c.min_props, c.max_props = max(a.min_props, b.min_props), smaller(a.max_props, b.max_props)
    c.names = a.names + b.names
    for k, d in b.dep_required.items():
        c.dep_required[k] = c.dep_required.get(k, set()) | d
    for k, d in b.dep_schemas.items():
        c.dep_schemas[k] = c.dep_schemas.get(k, []) + d
    c.forbid = a.forbid | b.forbid
    c.excl = a.excl + b.excl
    # both with patternProperties: a property may get more subschemas than apply (a side's
    # additionalProperties beside its matching pattern), so the clause is a part of the conjunction
    c.exact = a.exact and b.exact and not both_patterns
    return c


def unconstrained(c: Clause) -> bool:
    """Whether ``c`` allows every value (a fresh :class:`Clause`)."""
    return (
        c.rule is None
        and c.exact
        and c.enum is None
        and c.kinds == KINDS
        and not c.forbid
        and c.constrains_only_kinds()
    )


def copied(v):
    """A list, set or dict copied (one level); anything else as it is."""
    return v.copy() if isinstance(v, (list, set, dict)) else v


def smaller(a, b):
    return b if a is None else a if b is None else min(a, b)


def position_subs(c: Clause, i: int) -> list:
    return c.prefix[i] if i < len(c.prefix) else c.items


def name_matches(pattern: str, name: str, ptr: str) -> tuple[bool, bool]:
    """(surely, maybe): whether ``pattern`` matches ``name`` under both ECMA-262 and Python re,
    and whether it may under either."""
    try:
        surely = regex.fullmatch(translate(pattern, ptr).decoded, name) is not None
    except ConstraintError:
        surely = False
    try:
        maybe = surely or re.search(pattern, name) is not None
    except re.error:
        maybe = True
    return surely, maybe or not surely and maybe_ecma(pattern, name)


def maybe_ecma(pattern: str, name: str) -> bool:
    return any(ord(ch) >= 0x80 for ch in name)  # where the two readings of \d \w \s differ


def member_subs(c: Clause, name: str) -> list:
    """The subschemas that a property ``name`` of an object satisfying ``c`` must satisfy."""
    out = list(c.props.get(name, []))
    surely_any = False
    for p, subs in c.patprops:
        surely, maybe = name_matches(p, name, c.ptr)
        if maybe:
            out += subs
        surely_any = surely_any or surely
    if name not in c.props and not surely_any:
        out += c.additional
    return out


def without_enum(c: Clause) -> Clause:
    d = c.copy()
    d.enum = None
    return d
