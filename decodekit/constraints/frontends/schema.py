"""JSON Schema -> regex: a documented subset of JSON Schema compiled to a pattern of decodekit's
regex dialect (docs/constraints.md, "JSON Schema").

Sound by construction: every text the returned regex fully matches is JSON that ``json.loads``
reads and that validates against the schema. Where the schema allows more than a regex can
express (properties in any order, extra properties, every real number), the regex covers a
documented part of it; a keyword that restricts the language and is not handled is refused with
a :class:`ConstraintError` naming its JSON pointer, never ignored.

Two stages. :func:`Normalizer.clauses` reads a subschema into its disjunctive normal form: a
list of :class:`Clause` (each a conjunction of constraints on one value: the JSON kinds allowed,
bounds, the properties' subschemas ...), with ``allOf``, ``$ref`` and sibling keywords merged into
every branch of ``anyOf`` / ``oneOf``. :class:`Compiler` then writes each clause as regex text,
counting NFA states as it goes so that a schema too large is refused before its text exists;
a schema too large for one regex text is written again *sealed* (:func:`_compile`): regex texts
as leaves of a :class:`Pattern`, each large subschema one shared leaf. Strings needing several
of ``pattern``, ``format`` and a length are their intersection (a Pattern). A ``oneOf`` whose
branches may share a value, and a ``not`` beyond types, are a complement: ``W & ~X`` (a Pattern)
where the excluded text ``X`` holds every spelling the front end writes of its values
(:func:`covers`: strings in any spelling, canonical integers, no objects), so that excluding a
text excludes its value; the rest is refused by :func:`needs`.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import math
import re
from decimal import Decimal
from fractions import Fraction

import regex

from decodekit.constraints.automata.derivatives import (
    Pattern,
    complement,
    concat,
    intersect,
    repeat,
    union,
)
from decodekit.constraints.frontends.ecma import translate
from decodekit.constraints.frontends.schema_rules import RecursionNotLowered, placeholder, to_cfg
from decodekit.constraints.syntax.budgets import MAX_NFA_STATES
from decodekit.errors import ConstraintError, ConstraintTooLarge

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
ANY_DEPTH = 2  # nesting of arrays/objects in a value the schema leaves free ({} or true)
# Bounds checked while compiling, so that a hostile schema fails in one line, at once: subschemas
# nested deeper than MAX_DEPTH, a regex longer than MAX_PATTERN_CHARS or of more NFA states than
# the engine's MAX_NFA_STATES (counted while the text is built, before any larger text exists).
MAX_DEPTH, MAX_PATTERN_CHARS, MAX_STATES = 64, 16_000_000, MAX_NFA_STATES
# A regex text over SEAL_STATES NFA states becomes a leaf of a Pattern (parsed by itself); the
# whole is then bounded by its expanded text, MAX_PATTERN_CHARS.
SEAL_STATES = 100_000
# Sealed (a schema too large for one regex text): every subschema's text of more than SHARE_LEAF
# characters is its own leaf (equal texts: one leaf, parsed once).
SHARE_LEAF = 2_000
# steps one writing may take (a subschema written, a clause copied, an object's (member, count)
# piece): a bound on the front end's work, which sharing makes far larger than what it writes
# (recursions x optional properties x combinations); counted over all of a schema's attempts
# (recursions cut sooner included), so that past it the schema is refused at once as too large
MAX_WORK = 75_000
STR_STATES = 500_000  # a regex text of more NFA states than this is written sealed
# a Pattern (an intersection) of more NFA states than this is written sealed: its regex texts are
# parsed one by one and its subschemas shared (Kubernetes kb_696: 0.29 s sealed, a timeout at 10 s not)
PATTERN_STATES = 20_000
SEALING: contextvars.ContextVar[Dag | None] = contextvars.ContextVar("sealing", default=None)
WORK: contextvars.ContextVar[list | None] = contextvars.ContextVar("work", default=None)  # [steps taken]


class MembersTooLarge(ConstraintTooLarge):
    """An object's optional properties would write a regex over the size bounds: written again
    with its first property among fewer (:meth:`Compiler.object`)."""


def spend(ptr: str) -> None:
    """One step of the writing under way; past :data:`MAX_WORK`, refused as too large."""
    work = WORK.get()
    if work is None:
        return
    work[0] += 1
    if work[0] > MAX_WORK:
        raise ConstraintTooLarge(
            f"{show(ptr)}: the JSON Schema's regex would exceed {MAX_WORK:,} steps to write (its "
            "recursions, combinations and optional properties): simplify the schema",
            bound="steps",
            limit=MAX_WORK,
            size=work[0],
        )


MAX_MEMBER_PIECES = 40_000  # (member, count so far) pieces of one object's members, each a DAG node
MAX_CLAUSES = 64  # alternatives of one subschema after distributing anyOf / oneOf over its siblings
MAX_REF_UNROLL = 3  # how many times one $ref may enclose itself (recursion cut below: no value);
# a schema whose regex would be too large is compiled again with its recursions unrolled fewer times
MAX_INT_DIGITS = 18  # digits of an integer without an upper bound (json.loads refuses over 4,300)
MAX_FRACTION_DIGITS = 6  # fraction digits of a number with bounds (15 significant digits at most)
MAX_ANY_ORDER = 4  # key_order="any": objects of at most this many listed properties, in every order
MAX_ENUM_UNIQUE = 5  # uniqueItems over a finite item set: at most this many values

# A character of a JSON string: raw (no quote, backslash, control character or lone surrogate),
# or an escape; a \u escape never names a surrogate, so each one decodes to exactly one character.
CHAR = (
    r'(?:[^"\\\x00-\x1f\ud800-\udfff]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
)
CHAR_STATES = 40
STRING = f'"{CHAR}*"'
INTEGER = rf"-?(?:0|[1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}})"
NUMBER = INTEGER + r"(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001-9999 (Python's dates)
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    rf"(?:{_YEAR}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)"
    rf"|(?:0[13578]|1[02])-31)|{_LEAP}-02-29)"
)
_FRAC = r"(?:\.[0-9]{1,6})?"
_TIME = (
    rf"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    rf"|23:59:60{_FRAC}(?:[Zz]|[+-]00:00))"  # a leap second: 23:59:60 UTC only
)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"(?:{_LABEL}\.){{0,2}}[A-Za-z](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?"  # at most 191 characters
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_H = "[0-9a-fA-F]{1,4}"
_IPV6 = (
    rf"(?:(?:{_H}:){{7}}{_H}|(?:{_H}:){{1,7}}:|(?:{_H}:){{1,6}}:{_H}|(?:{_H}:){{1,5}}(?::{_H}){{1,2}}"
    rf"|(?:{_H}:){{1,4}}(?::{_H}){{1,3}}|(?:{_H}:){{1,3}}(?::{_H}){{1,4}}|(?:{_H}:){{1,2}}(?::{_H}){{1,5}}"
    rf"|{_H}:(?::{_H}){{1,6}}|:(?:(?::{_H}){{1,7}}|:))"
)
_URI = rf"https?://{_HOST}(?::[1-9][0-9]{{0,3}})?(?:/[A-Za-z0-9._~!$&'()*+,;=:@-]*)*"
FORMATS = {  # each matches only texts that need no JSON escape (a "/" is written raw)
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}[Tt]{_TIME}",
    "email": rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": rf"{_OCTET}(?:\.{_OCTET}){{3}}",
    "ipv6": _IPV6,
    "hostname": _HOST,
    "uri": _URI,
    "json-pointer": r"(?:/(?:[A-Za-z0-9._-]|~[01])*)*",
}
# wider formats whose strings include those of a narrower one (an email is an idn-email)
# IDNA 2008 (RFC 5891 4.2.3.1) reserves "--" in a label's 3rd and 4th characters: "xn--" labels are
# A-labels whose Punycode must decode to a valid U-label ("xn--X", "xn--7a" do not), the others
# are invalid. An idn-hostname's labels here never have it (valid A-labels are left unwritten).
_IDN_TAIL = (  # a label after its first character
    r"(?:[A-Za-z0-9-]{0,2}[A-Za-z0-9]"
    r"|[A-Za-z0-9-](?:[A-Za-z0-9][A-Za-z0-9-]|-[A-Za-z0-9])[A-Za-z0-9-]{0,58}[A-Za-z0-9])?"
)
_IDN_HOST = rf"(?:[A-Za-z0-9]{_IDN_TAIL}\.){{0,2}}[A-Za-z]{_IDN_TAIL}"  # the last starts with a letter
FORMATS |= {"idn-email": FORMATS["email"], "idn-hostname": _IDN_HOST, "uri-reference": _URI, "iri": _URI}
FORMATS |= {"iri-reference": _URI, "uri-template": _URI}
# (shortest, longest) text of a format; None: unbounded (a length beside it needs an intersection)
FORMAT_LENGTHS = {
    "date": (10, 10),
    "uuid": (36, 36),
    "ipv4": (7, 15),
    "time": (9, 21),
    "date-time": (20, 32),
}
# formats validators check that are not supported (unknown formats are annotations: ignored)
UNSUPPORTED_FORMATS = frozenset(("regex", "duration", "relative-json-pointer"))
META = frozenset(r"\.^$|?*+()[]{}#")


def json_schema(
    schema: dict | bool | str, *, whitespace: str = "compact", key_order: str = "schema"
) -> str | Pattern:
    """Compile a JSON Schema (a dict, or its JSON text) into a regex constraint.

    Args:
        schema: the schema; local ``$ref`` (``#/$defs/...``, ``#/definitions/...``, ``#anchor``)
            are resolved in it.
        whitespace: ``"compact"`` (no whitespace: ``{"a":1,"b":[1,2]}``) or ``"flexible"`` (one
            optional space after each ``:`` and ``,``: ``{"a": 1, "b": [1,2]}`` too; never
            after ``{``/``[`` or before ``}``/``]``, never a newline).
        key_order: ``"schema"`` (an object's listed properties in the schema's order) or
            ``"any"`` (an object of at most :data:`MAX_ANY_ORDER` listed properties and no
            extra ones in every order; larger ones, or where every order would exceed the size
            bounds, in the schema's order).

    Returns:
        A pattern for :func:`decodekit.compile_regex` (or ``constraint=``); every text it fully
        matches is JSON valid against ``schema``: a regex ``str`` when no intersection is
        needed and one regex text of at most :data:`STR_STATES` NFA states says it, else a
        :class:`~decodekit.constraints.automata.derivatives.Pattern` (a string with several of
        ``pattern``, ``format``, ``minLength``/``maxLength``: their intersection; a larger
        schema: regex texts joined as Pattern leaves).

    Raises:
        ConstraintError: invalid schema JSON, or a keyword outside the supported subset, named by
            its JSON pointer (``/properties/age/multipleOf is not supported``), or a schema whose
            regex would exceed the size bounds.
    """
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise ConstraintError(f"the JSON Schema is not valid JSON: {e}") from None
        except RecursionError:
            raise ConstraintError("the JSON Schema is nested too deeply to parse") from None
    if whitespace not in ("compact", "flexible"):
        raise ConstraintError(f"whitespace must be 'compact' or 'flexible', got {whitespace!r}")
    if key_order not in ("schema", "any"):
        raise ConstraintError(f"key_order must be 'schema' or 'any', got {key_order!r}")
    frag, empty = _compile(schema, whitespace == "flexible", key_order == "any")
    if frag is None and empty:
        raise ConstraintError(empty)
    if frag is None:
        raise ConstraintError(
            "/: the JSON Schema allows no value (its bounds, enum or required properties exclude every one)"
        )
    return frag[0]


def _compile(schema, flexible: bool, any_order: bool = False):
    """The schema's fragment: written as one regex text (a Pattern only for intersections)
    where it has at most :data:`STR_STATES` NFA states (a Pattern: :data:`PATTERN_STATES`); else
    written *sealed*: every regex text of more than :data:`SEAL_STATES` NFA states split into
    Pattern leaves parsed one by one, counted repetitions kept symbolic, each subschema's text of
    more than :data:`SHARE_LEAF` characters one leaf (equal subschemas: one leaf, parsed once; a
    large schema compiles 5-40 times faster from such leaves than from one regex text), every
    piece used twice one node of a DAG, the whole bounded by the DAG's size (:class:`Dag`,
    :data:`MAX_PATTERN_CHARS`); too large still, with its recursions unrolled fewer times
    (:data:`MAX_REF_UNROLL` down to 1)."""
    work = WORK.set([0])  # steps taken by all the attempts together
    try:
        recursive = recursive_refs(schema)
        if recursive:
            try:
                return _grammar(schema, flexible, any_order, recursive), ""
            except (ConstraintError, RecursionError):
                pass  # written unrolled, as a schema without recursion
        return _attempts(schema, flexible, any_order)
    finally:
        WORK.reset(work)


def _grammar(schema, flexible: bool, any_order: bool, recursive: frozenset):
    """A recursive schema as a grammar (:mod:`.schema_rules`): each definition in ``recursive``
    written once, a nonterminal; the parts around recursions regular terminals, written as
    without recursion (plain, else sealed). ConstraintError where that fails (a recursion that
    a grammar cannot say, a size bound): the caller unrolls instead."""
    for share in (False, True):
        compiler = Compiler(schema, flexible, MAX_REF_UNROLL, share, any_order, recursive)
        token = SEALING.set(Dag() if share else None)
        try:
            frag = compiler.value([(schema, Context(schema, ()))], "")
        except ConstraintTooLarge:
            if share:
                raise
            continue
        finally:
            SEALING.reset(token)
        if not compiler.definitions:
            raise RecursionNotLowered("/: no recursion is written (only inside other keywords)")
        if frag is None:
            raise ConstraintError("/: the JSON Schema allows no value")
        texts = {name: f and f[0] for name, f in compiler.definitions.items()}
        return (to_cfg(frag[0], texts), frag[1])
    raise AssertionError("unreachable")


def recursive_refs(root) -> frozenset:
    """The ``$ref`` keys ``(id(base), target)`` of ``root`` that enclose themselves (directly or
    through other references), read as :meth:`Normalizer.ref` reads them: a walk of each
    target's subtree (a subschema with its own ``$id`` is a new base), then the keys on a cycle
    of the graph "the target of key a holds key b"."""
    edges: dict[tuple, set] = {}
    todo = [(None, root, root)]  # (key whose target this is, node, base)
    while todo:
        key, node, base = todo.pop()
        found = edges.setdefault(key, set())
        stack = [(node, base)]
        while stack:
            x, b = stack.pop()
            if isinstance(x, list):
                stack.extend((y, b) for y in x)
                continue
            if not isinstance(x, dict):
                continue
            if isinstance(x.get("$id"), str) and not x["$id"].startswith("#") and x is not b:
                b = x
            target = x.get("$ref")
            if isinstance(target, str) and target.startswith("#"):
                k = (id(b), target)
                if k not in edges:
                    resolved = resolve(b, target)
                    if resolved is None and b is not root:
                        resolved = resolve(root, target)
                    if resolved is not None:
                        edges[k] = set()
                        todo.append((k, resolved, b))
                found.add(k)
            for name, y in x.items():
                if name not in ("enum", "const", "default", "examples"):  # data, not schemas
                    stack.append((y, b))
    out = set()
    for start in edges:
        if start is None:
            continue
        seen, stack = set(), list(edges[start])
        while stack:
            k = stack.pop()
            if k == start:
                out.add(start)
                break
            if k not in seen:
                seen.add(k)
                stack.extend(edges.get(k, ()))
    return frozenset(out)


def _attempts(schema, flexible: bool, any_order: bool):
    plain = None
    for unroll in range(MAX_REF_UNROLL, 0, -1):
        for share in (False, True):
            compiler = Compiler(schema, flexible, unroll, share, any_order)
            token = SEALING.set(Dag() if share else None)
            try:
                frag = compiler.value([(schema, Context(schema, ()))], "")
            except RecursionError:  # an enum or const value nested hundreds of levels deep
                raise ConstraintError("a value in the JSON Schema is nested too deeply to compile") from None
            except ConstraintTooLarge:
                if share and plain is not None:
                    return plain, ""
                if share and not (compiler.norm.cut and unroll > 1):
                    raise
                continue
            except ConstraintError:
                if share and plain is not None:
                    return plain, ""
                raise
            finally:
                SEALING.reset(token)
            if (
                share
                or frag is None
                or frag[1] <= (STR_STATES if isinstance(frag[0], str) else PATTERN_STATES)
            ):
                return frag, compiler.empty
            plain = frag
    return frag, compiler.empty


def show(ptr: str) -> str:
    """A pointer for a one-line message: '/' for the root, repr when it has unprintable
    characters (a property name with a newline), cut to 80 characters."""
    ptr = ptr or "/"
    if not ptr.isprintable():
        ptr = repr(ptr)
    return ptr if len(ptr) <= 80 else ptr[:80] + "..."


def needs(ptr: str, what: str, op: str = "intersection"):
    """Refuse what needs the engine's intersection or complement of regular languages."""
    raise ConstraintError(f"{show(ptr)}: {what} needs the {op} of regular languages, which is not supported")


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
        spend(self.ptr)
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


class Normalizer:
    """Schema -> list of :class:`Clause` (disjunctive normal form)."""

    def __init__(self, root, unroll: int = MAX_REF_UNROLL, recursive: frozenset = frozenset()):
        self.root, self.unroll, self.cut = root, unroll, False
        # $ref keys read as a grammar's nonterminal (a rule clause) instead of unrolled
        self.recursive = recursive
        self.rule_kinds: dict[tuple, tuple[set, bool]] = {}

    def clauses(self, s, ctx: Context, ptr: str) -> list[Clause]:
        if s is True:
            return [Clause(ptr)]
        if s is False:
            return []
        if not isinstance(s, dict):
            raise ConstraintError(f"{show(ptr)}: a schema must be an object or a boolean, got {s!r:.60}")
        if isinstance(s.get("$id"), str) and not s["$id"].startswith("#") and s is not ctx.base:
            ctx = Context(s, ctx.refs)  # a new resource: its "#/..." references are relative to it
        c = Clause(ptr)
        self.own(c, s, ctx, ptr)
        alts = [c]
        if "$ref" in s:
            alts = self.product(alts, self.ref(s["$ref"], ctx, f"{ptr}/$ref"), ptr)
        if "allOf" in s:
            for i, sub in enumerate(self.array(s, "allOf", ptr)):
                alts = self.product(alts, self.clauses(sub, ctx, f"{ptr}/allOf/{i}"), ptr)
        for key in ("anyOf", "oneOf"):
            if key in s:
                branches = self.array(s, key, ptr)
                parts = [self.clauses(b, ctx, f"{ptr}/{key}/{i}") for i, b in enumerate(branches)]
                if key == "oneOf":
                    self.check_disjoint(parts, f"{ptr}/oneOf", alts)
                alts = self.product(alts, [x for p in parts for x in p], ptr)
        if "if" in s and "then" in s:  # (if and then) or (not if and else): the first part only
            both = self.product(
                self.clauses(s["if"], ctx, f"{ptr}/if"), self.clauses(s["then"], ctx, f"{ptr}/then"), ptr
            )
            alts = self.product(alts, both, ptr)
            for a in alts:
                a.exact = False
        elif "if" in s and "else" in s:
            for a in alts:
                a.exact = False  # values of the else branch are not written: then is absent, so if holds
            alts = self.product(alts, self.clauses(s["if"], ctx, f"{ptr}/if"), ptr)
        return [a for a in alts if a.kinds or not a.exact]

    def array(self, s: dict, key: str, ptr: str) -> list:
        v = s[key]
        if not isinstance(v, list) or not v:
            raise ConstraintError(f"{show(ptr)}/{key} must be a non-empty array of schemas")
        return v

    def product(self, alts: list[Clause], others: list[Clause], ptr: str) -> list[Clause]:
        out = [
            m
            for a in alts
            for b in others
            for x in self.opened(a, b)
            for y in self.opened(b, x)
            if (m := merge(x, y, ptr)) is not None
        ]
        if len(out) > MAX_CLAUSES:
            raise ConstraintError(
                f"{show(ptr)}: the schema's anyOf/oneOf/allOf combinations exceed {MAX_CLAUSES} alternatives"
            )
        return out

    def ref(self, target, ctx: Context, ptr: str) -> list[Clause]:
        if not isinstance(target, str) or not target.startswith("#"):
            raise ConstraintError(
                f"{show(ptr)}: only local references (#...) are supported, got {target!r:.80}"
            )
        key = (id(ctx.base), target)
        if ctx.refs.count(key) >= self.unroll and key in self.recursive:
            raise RecursionNotLowered(f"{show(ptr)}: a recursive $ref opened {self.unroll} times in a row")
        if ctx.refs.count(key) >= self.unroll:  # recursion cut: no value here (sound)
            self.cut = True
            c = Clause(ptr)
            c.kinds, c.exact = set(), False
            return [c]
        node = resolve(ctx.base, target)
        if node is None and ctx.base is not self.root:
            node = resolve(self.root, target)
        if node is None:
            raise ConstraintError(f"{show(ptr)}: $ref {target!r:.80} does not resolve")
        inner = Context(ctx.base, ctx.refs + (key,))
        if key in self.recursive:
            return [self.rule_clause(key, (node, inner, ptr), ptr)]
        return self.clauses(node, inner, ptr)

    def opened(self, c: Clause, other: Clause) -> list[Clause]:
        """``c``, or where ``c`` is a nonterminal that ``other`` restricts, the clauses of its
        definition (one level: the recursions inside stay nonterminals), so that the restriction
        is merged into them."""
        if c.rule is None or unconstrained(other):
            return [c]
        return self.clauses(*c.rule[1])

    def rule_clause(self, key: tuple, sub: tuple, ptr: str) -> Clause:
        """A clause standing for the recursive definition ``sub`` (a nonterminal): its kinds are
        those its clauses allow (exact when all its clauses are), so that kinds alone may prove
        two such clauses disjoint; every other question about it is answered by reading ``sub``."""
        if key not in self.rule_kinds:
            self.rule_kinds[key] = (set(KINDS), False)  # while being read: nothing proved
            parts = self.clauses(*sub)
            kinds = set().union(*(value_kinds(p) for p in parts)) if parts else set()
            self.rule_kinds[key] = (kinds, all(p.exact and p.rule is None for p in parts))
        c = Clause(ptr)
        c.kinds, c.exact = self.rule_kinds[key]
        c.kinds = set(c.kinds)
        c.rule = (key, sub)
        return c

    def own(self, c: Clause, s: dict, ctx: Context, ptr: str) -> None:
        """The keywords of ``s`` that constrain the value itself (not through other subschemas)."""
        for key in s:
            if key in CONSTRAINING and key not in SUPPORTED:
                raise ConstraintError(f"{show(ptr)}/{key} is not supported")
        if "type" in s:
            c.kinds &= kinds_of_types(s["type"], ptr)
        if "enum" in s or "const" in s:
            values = None
            if "enum" in s:
                if not isinstance(s["enum"], list) or not s["enum"]:
                    raise ConstraintError(f"{show(ptr)}/enum must be a non-empty array")
                values = list(s["enum"])
            if "const" in s:
                values = [s["const"]] if values is None else [v for v in values if json_equal(v, s["const"])]
            c.enum = values
        for key, down in (
            ("minimum", True),
            ("exclusiveMinimum", True),
            ("maximum", False),
            ("exclusiveMaximum", False),
        ):
            if key not in s:
                continue
            if isinstance(s[key], bool):  # draft 4: a flag on minimum / maximum
                continue
            b = number_keyword(s, key, ptr)
            strict = key.startswith("exclusive")
            plain = "minimum" if down else "maximum"
            if not strict and s.get("exclusive" + plain.capitalize()) is True:
                strict = True
            (c.lo if down else c.hi).append((b, strict))
        if "multipleOf" in s:
            m = number_keyword(s, "multipleOf", ptr)
            if m <= 0:
                raise ConstraintError(f"{show(ptr)}/multipleOf must be positive, got {m!r}")
            c.mult.append((m, ptr))
        c.min_len = count_keyword(s, "minLength", ptr) or 0
        c.max_len = count_keyword(s, "maxLength", ptr)
        if "pattern" in s:
            if not isinstance(s["pattern"], str):
                raise ConstraintError(f"{show(ptr)}/pattern must be a string")
            c.patterns.append((s["pattern"], f"{ptr}/pattern"))
        if "format" in s and isinstance(s["format"], str):
            if s["format"] in UNSUPPORTED_FORMATS:
                raise ConstraintError(
                    f"{show(ptr)}/format {s['format']!r} is not supported (supported: {', '.join(FORMATS)})"
                )
            if s["format"] in FORMATS:
                c.formats.append((s["format"], f"{ptr}/format"))
        # arrays
        items, prefix = s.get("items"), s.get("prefixItems")
        if isinstance(items, list):  # draft 4-7: tuple validation, then additionalItems
            prefix, items = items, s.get("additionalItems")
        if prefix is not None:
            if not isinstance(prefix, list):
                raise ConstraintError(f"{show(ptr)}/prefixItems must be an array of schemas")
            key = "prefixItems" if "prefixItems" in s else "items"
            c.prefix = [[(p, ctx, f"{ptr}/{key}/{i}")] for i, p in enumerate(prefix)]
        if items is not None:
            where = "additionalItems" if isinstance(s.get("items"), list) else "items"
            c.items = [(items, ctx, f"{ptr}/{where}")]
        c.min_items = count_keyword(s, "minItems", ptr) or 0
        c.max_items = count_keyword(s, "maxItems", ptr)
        c.unique = s.get("uniqueItems") is True
        if "contains" in s:
            c.contains = [(s["contains"], ctx, f"{ptr}/contains")]
            mc = count_keyword(s, "minContains", ptr)
            c.min_contains = 1 if mc is None else mc
            if "maxContains" in s:
                raise ConstraintError(f"{show(ptr)}/maxContains is not supported")
        # objects
        props = s.get("properties", {})
        if not isinstance(props, dict):
            raise ConstraintError(f"{show(ptr)}/properties must be an object")
        for name, sub in props.items():
            c.props[name] = [(sub, ctx, f"{ptr}/properties/{name}")]
        required = s.get("required", [])
        if isinstance(required, bool):  # draft 3 style: ignored by later validators
            required = []
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise ConstraintError(f"{show(ptr)}/required must be an array of names")
        c.required.update(required)
        pats = s.get("patternProperties", {})
        if not isinstance(pats, dict):
            raise ConstraintError(f"{show(ptr)}/patternProperties must be an object")
        for p, sub in pats.items():
            c.patprops.append((p, [(sub, ctx, f"{ptr}/patternProperties/{p}")]))
            c.extras = True
        if "additionalProperties" in s:
            add = s["additionalProperties"]
            if add is not True and add != {}:
                c.additional = [(add, ctx, f"{ptr}/additionalProperties")]
                c.extras = c.extras or add is not False
        c.min_props = count_keyword(s, "minProperties", ptr) or 0
        c.max_props = count_keyword(s, "maxProperties", ptr)
        if "propertyNames" in s:
            c.names = [(s["propertyNames"], ctx, f"{ptr}/propertyNames")]
        deps = dict(s.get("dependentRequired", {}))
        for name, d in dict(s.get("dependencies", {})).items():
            if isinstance(d, list):
                deps[name] = d
            else:
                c.dep_schemas[name] = [(d, ctx, f"{ptr}/dependencies/{name}")]
        for name, d in dict(s.get("dependentSchemas", {})).items():
            c.dep_schemas[name] = [(d, ctx, f"{ptr}/dependentSchemas/{name}")]
        for name, d in deps.items():
            if not isinstance(d, list):
                raise ConstraintError(f"{show(ptr)}/dependentRequired/{name} must be an array of names")
            c.dep_required[name] = set(d)
        if "not" in s:
            self.negate(c, s["not"], ctx, f"{ptr}/not")

    def negate(self, c: Clause, sub, ctx: Context, ptr: str) -> None:
        """``not``: exact when the subschema constrains only the type (or is a boolean); else, its
        clauses exact, their complement within ``c``'s texts (``excl``), written where
        :func:`covers` holds, else as the values of the kinds the subschema rejects (a part)."""
        if sub is True or sub == {}:
            c.kinds = set()
            return
        if sub is False:
            return
        parts = self.clauses(sub, ctx, ptr)
        if not parts:
            return
        if all(p.exact and p.enum is None and p.constrains_only_kinds() for p in parts):
            for p in parts:
                c.kinds -= p.kinds
            return
        if all(p.exact for p in parts):
            # the complement within c's texts: exact where covers holds when written (c merged
            # with its siblings: a type beside the not makes 1.0 no text of c); else the values of
            # the other kinds (a part); refused here when neither can be
            if not (c.kinds - set().union(*(value_kinds(p) for p in parts))) and not all(
                covers(p, c, self) for p in parts
            ):
                needs(ptr, "not", "complement")
            c.excl += [(p.copy(), ptr, "not", True) for p in parts]
            return
        needs(ptr, "not", "complement")

    def check_disjoint(self, parts: list[list[Clause]], ptr: str, siblings: list[Clause]) -> None:
        """oneOf as anyOf is exact when no value satisfies two branches: proved clause by clause
        (exact clauses only), by kinds, enum values or a required property with disjoint values;
        else made disjoint by writing less (:func:`separate`); where that fails, exactly one
        branch (:meth:`exclusive`)."""
        given = [[p.copy() for p in branch] for branch in parts]  # what each branch accepts
        try:
            self.disjoint_or_separate(parts, given, ptr)
        except ConstraintError:
            if not self.exclusive(given, ptr, siblings):
                raise
            parts[:] = given

    def exclusive(self, parts: list[list[Clause]], ptr: str, siblings: list[Clause]) -> bool:
        """Exactly one branch: each clause of a branch written minus the clauses of the other
        branches that it may share a value with (``excl``; the compiler writes ``W & ~(X | ...)``),
        each merged with the sibling keywords (``siblings``: every value written satisfies them,
        so excluding ``sibling and B`` excludes the same values as ``B``, and its text is the
        smaller, often of one kind). Sound only where every excluded clause is exact and its text
        holds every text the other clause writes of a value it accepts (:func:`covers`): then a
        text written and not excluded is of a value that satisfies no other branch. False (nothing
        changed) otherwise."""
        pairs = []
        try:
            for i, j in itertools.permutations(range(len(parts)), 2):
                what = f"oneOf (branches {min(i, j)} and {max(i, j)} may both match a value)"
                for a, s, b in itertools.product(parts[i], siblings, parts[j]):
                    am, bm = merge(s, a, ptr), merge(s, b, ptr)
                    if am is None or bm is None or disjoint(am, bm, self):
                        continue
                    # the merged one when its text is exact (an enum beside the oneOf makes it one spelling)
                    x = next((x for x in (bm, b) if am.exact and x.exact and covers(x, am, self)), None)
                    if x is None:
                        return False
                    pairs.append((a, id(x), x.copy(), what))  # copied before any exclusion is added
        except ConstraintError:
            return False
        seen = set()
        for a, key, x, what in pairs:
            if (id(a), key) not in seen:
                seen.add((id(a), key))
                a.excl.append((x, ptr, what, False))
        return True

    def disjoint_or_separate(self, parts: list[list[Clause]], given: list[list[Clause]], ptr: str) -> None:
        given = [[p.copy() for p in branch] for branch in given]
        for i, j in itertools.combinations(range(len(parts)), 2):
            for a, wa in zip(given[i], parts[i]):
                for b, wb in zip(given[j], parts[j]):
                    if not disjoint(a, b, self) and not separate(a, b, wa, wb, self):
                        needs(ptr, f"oneOf (branches {i} and {j} may both match a value)", "complement")
        if not any(p.kinds for branch in parts for p in branch):
            needs(ptr, "oneOf (its branches overlap in every kind of value)", "complement")


def resolve(base, target: str):
    """The subschema ``target`` (``#``, ``#/json/pointer``, ``#anchor``) names in ``base``; None."""
    if target in ("#", ""):
        return base
    if not target.startswith("#/"):
        name = target[1:]
        stack = [base]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if node.get("$anchor") == name or node.get("$id") == target or node.get("id") == target:
                    return node
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return None
    node = base
    from urllib.parse import unquote

    for part in target[2:].split("/"):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


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


def intervals(c: Clause):
    """(lo, lo_strict, hi, hi_strict) of the numeric bounds, as Decimals of the shortest repr
    (None: unbounded)."""
    lo = hi = None
    lo_s = hi_s = False
    for b, strict in c.lo:
        d = Decimal(repr(b)) if isinstance(b, float) else Decimal(b)
        if lo is None or d > lo or (d == lo and strict):
            lo, lo_s = d, strict
    for b, strict in c.hi:
        d = Decimal(repr(b)) if isinstance(b, float) else Decimal(b)
        if hi is None or d < hi or (d == hi and strict):
            hi, hi_s = d, strict
    return lo, lo_s, hi, hi_s


def disjoint(a: Clause, b: Clause, norm: Normalizer, depth: int = 0) -> bool:
    """Whether no value satisfies both clauses (False: not proved)."""
    if not (a.exact and b.exact) or depth > 8:
        return False
    if not (a.kinds & b.kinds):
        return True
    if a.rule is not None or b.rule is not None:
        return False
    for x, y in ((a, b), (b, a)):
        if x.enum is not None and all(check_value(y, v, norm) is False for v in x.enum):
            return True
    if a.enum is not None or b.enum is not None:
        return False
    return all(kind_disjoint(a, b, kind, norm, depth) for kind in a.kinds & b.kinds)


def kind_disjoint(a: Clause, b: Clause, kind: str, norm: Normalizer, depth: int = 0) -> bool:
    """Whether no value of ``kind`` satisfies both exact clauses without enum (False: not proved)."""
    for _ in (0,):
        if kind in ("integer", "fraction"):
            alo, alos, ahi, ahis = intervals(a)
            blo, blos, bhi, bhis = intervals(b)
            if (ahi is not None and blo is not None and (ahi < blo or ahi == blo and (ahis or blos))) or (
                bhi is not None and alo is not None and (bhi < alo or bhi == alo and (bhis or alos))
            ):
                continue
            return False
        if kind == "object" and (
            any(
                subs_disjoint(member_subs(a, k), member_subs(b, k), norm, depth)
                for k in a.required & b.required
            )
            or a.required & b.forbid
            or b.required & a.forbid
        ):
            continue
        return False
    return True


def separate(a: Clause, b: Clause, wa: Clause, wb: Clause, norm: Normalizer) -> bool:
    """Write less of two exact clauses ``a``, ``b`` (what two oneOf branches accept) so that no
    value written from one (``wa``, ``wb``: what is written) satisfies the other: objects lacking
    a property the other requires; the kinds where that or a proof fails written by neither.
    False when an enum stands in the way (its values would need a complement)."""
    if not (a.exact and b.exact) or a.enum is not None or b.enum is not None:
        return False
    if a.rule is not None or b.rule is not None:  # a nonterminal is written whole or not at all
        return False
    for kind in sorted(a.kinds & b.kinds):
        if kind_disjoint(a, b, kind, norm):
            continue
        # what is written is now a part of what each branch accepts: no proof may rest on it
        # (an enclosing oneOf would read "no integer written" as "no integer accepted")
        wa.exact = wb.exact = False
        if kind == "object" and (a.required - b.required) and (b.required - a.required):
            wa.forbid.add(min(b.required - a.required))
            wb.forbid.add(min(a.required - b.required))
            continue
        wa.kinds.discard(kind)
        wb.kinds.discard(kind)
    return True


def json_text(v) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def value_kinds(c: Clause) -> set:
    """The kinds of value that may satisfy ``c`` (those of its enum values)."""
    return c.kinds if c.enum is None else c.kinds & {kind_of(v) for v in c.enum}


def number_form(c: Clause) -> str | None:
    """How :meth:`Compiler.number` writes the numbers of ``c``: ``NUMBER`` (the JSON grammar:
    ``1.0``, ``1e2`` and ``-0`` too), ``INTEGER`` (``-0`` too), ``MULT`` (multiples, canonical),
    ``RANGE`` (canonical integers in range, decimals ``I.F``), ``FRAC`` (decimals only); None:
    refused there."""
    if c.mult:
        ms = {m for m, _ in c.mult}
        m = next(iter(ms))
        if len(ms) > 1 or c.lo or c.hi or not float(m).is_integer() or 1000 % int(m):
            return None
        return "INTEGER" if int(m) == 1 else "MULT"
    if not c.lo and not c.hi:
        return (
            "NUMBER" if c.kinds >= {"integer", "fraction"} else "INTEGER" if "integer" in c.kinds else "FRAC"
        )
    return "RANGE"


def short_integers(c: Clause) -> bool:
    """Whether every integer written for ``c`` has at most MAX_INT_DIGITS digits."""
    if number_form(c) != "RANGE":
        return True
    lo, lo_s, hi, hi_s = intervals(c)
    cap = Decimal(10) ** MAX_INT_DIGITS
    return (lo is None or lo > -cap) and (hi is None or hi < cap)


def covers(b: Clause, a: Clause, norm: Normalizer, depth: int = 0) -> bool:
    """Whether the text written for ``b`` holds every text written for ``a`` whose value satisfies
    ``b`` (False: not proved), so that ``W(a) & ~W(b)`` removes exactly the values of ``a`` that
    satisfy ``b``. Both are written by one compiler: one whitespace rule, and strings in every
    spelling (``"a"`` and ``"\u0061"``: a length is counted per decoded character). Proved for
    null, booleans, strings without ``pattern``/``format`` (whose texts are a part: one spelling,
    the BMP), integers where ``a`` writes them canonically or ``b`` writes the whole JSON number
    grammar (``-0`` is added to what an exclusion writes, see :meth:`Compiler.excluded`),
    fractions where ``b`` writes the whole grammar, and arrays item by item. Never for objects:
    a text's key order, and the extra members a schema accepts but does not write, would need one
    spelling per value. ``b`` must be exact and without enum (an enum writes one spelling)."""
    if depth > 6 or not b.exact or a.rule is not None or b.rule is not None:
        return False
    kinds = a.kinds & b.kinds
    if b.enum is not None:
        return enum_covers(b, a, norm)
    if a.enum is not None:
        return all(enum_covered(b, v, norm) for v in a.enum if kind_of(v) in b.kinds)
    if "object" in kinds:
        return False
    if "string" in kinds and (b.patterns or b.formats):
        return False
    bf = number_form(b)
    if "integer" in kinds:
        af = number_form(a)
        if af is None or bf is None or af == "NUMBER" and bf != "NUMBER" or not short_integers(a):
            return False
    if "fraction" in kinds and bf != "NUMBER":
        return False
    if "array" in kinds:
        if b.prefix or b.contains or b.unique or not b.items or a.unique:
            return False
        positions = [list(p) for p in a.prefix] + [a.items]
        if a.contains:
            positions.append(a.items + a.contains)
        try:
            bs = conjunction(b.items, norm)
            for subs in positions:
                for x in conjunction(subs, norm) if subs else [Clause(a.ptr)]:
                    if not all(
                        y.exact and covers(y, x, norm, depth + 1) for y in bs if not disjoint(x, y, norm)
                    ):
                        return False
        except ConstraintError:
            return False
    return True


def enum_covers(b: Clause, a: Clause, norm: Normalizer) -> bool:
    """:func:`covers` for an enum ``b``, written in one spelling each: where ``a`` writes only
    that spelling (null, booleans; integers where ``a`` writes canonical ones: not ``1.0``, and
    ``-0`` only where 0 is not in the enum) and the enum writes every value that satisfies ``b``."""
    if a.enum is not None:  # both in compact JSON: the same text where the same value is written
        texts = {json_text(w) for w in b.enum if check_value(without_enum(b), w, norm) is True}
        return all(
            check_value(b, v, norm) is False or check_value(b, v, norm) is True and json_text(v) in texts
            for v in a.enum
        )
    form = number_form(a) if a.kinds & {"integer", "fraction"} else "RANGE"
    for v in b.enum:
        kind = kind_of(v)
        if kind not in a.kinds or check_value(without_enum(b), v, norm) is False:
            continue  # a writes no text of it, or it does not satisfy b
        if check_value(without_enum(b), v, norm) is not True and not (
            b.constrains_only_kinds() and b.kinds == KINDS
        ):
            return False  # the enum writer leaves out what it cannot decide
        if kind in ("null", "boolean"):
            continue
        if (
            kind != "integer"
            or isinstance(v, float)
            or form in (None, "NUMBER")  # 0 is excluded as -0 too (Compiler.enum)
        ):
            return False
    return True


def enum_covered(b: Clause, v, norm: Normalizer) -> bool:
    """Whether the compact JSON text of ``v`` is written for ``b`` where ``v`` satisfies ``b``."""
    verdict = check_value(b, v, norm)
    if verdict is False:
        return True
    if verdict is None:
        return False
    kind = kind_of(v)
    if kind in ("null", "boolean"):
        return True
    if kind == "string":
        return not (b.patterns or b.formats)
    if kind == "integer":  # 1.0 is written "1.0": only the full grammar writes it
        form = number_form(b)
        return form is not None and abs(v) < 10**MAX_INT_DIGITS and (form == "NUMBER" or isinstance(v, int))
    if kind == "fraction":
        return number_form(b) == "NUMBER" and regex.fullmatch(NUMBER, json.dumps(v)) is not None
    return False


def subs_disjoint(xs: list, ys: list, norm: Normalizer, depth: int) -> bool:
    if not xs or not ys:
        return False
    cx, cy = conjunction(xs, norm), conjunction(ys, norm)
    return all(disjoint(a, b, norm, depth + 1) for a in cx for b in cy)


def conjunction(subs: list, norm: Normalizer) -> list[Clause]:
    """The clauses of the conjunction of ``subs`` (each ``(schema, ctx, pointer)``)."""
    alts = [Clause(subs[0][2] if subs else "")]
    for s, ctx, ptr in subs:
        alts = norm.product(alts, norm.clauses(s, ctx, ptr), ptr)
    return alts


def check_value(c: Clause, v, norm: Normalizer, depth: int = 0):
    """Whether the value ``v`` satisfies the clause: True, False, or None (not decided)."""
    if depth > 20:
        return None
    if c.rule is not None:
        return check_subs([c.rule[1]], v, norm, depth)
    kind = kind_of(v)
    if kind not in c.kinds:
        return False if c.exact else None
    if c.enum is not None and not any(json_equal(v, w) for w in c.enum):
        return False if c.exact else None
    verdicts = []
    if kind in ("integer", "fraction"):
        for b, strict in c.lo:
            verdicts.append(v > b if strict else v >= b)
        for b, strict in c.hi:
            verdicts.append(v < b if strict else v <= b)
        for m, _ in c.mult:
            verdicts.append(True if isinstance(v, int) and isinstance(m, int) and v % m == 0 else None)
    elif kind == "string":
        verdicts.append(c.min_len <= len(v) and (c.max_len is None or len(v) <= c.max_len))
        for p, ptr in c.patterns:
            surely, maybe = name_matches(p, v, ptr)
            verdicts.append(True if surely else False if not maybe else None)
        for f, _ in c.formats:
            verdicts.append(True if regex.fullmatch(FORMATS[f], v) else None)
    elif kind == "array":
        verdicts.append(c.min_items <= len(v) and (c.max_items is None or len(v) <= c.max_items))
        for i, x in enumerate(v):
            verdicts.append(check_subs(position_subs(c, i), x, norm, depth))
        if c.unique:
            verdicts.append(all(not json_equal(x, y) for x, y in itertools.combinations(v, 2)))
        if c.contains:
            hits = [check_subs(c.contains, x, norm, depth) for x in v]
            n_true, n_maybe = hits.count(True), hits.count(None)
            verdicts.append(
                True if n_true >= c.min_contains else None if n_true + n_maybe >= c.min_contains else False
            )
    elif kind == "object":
        verdicts.append(c.required <= v.keys() and not (c.forbid & v.keys()))
        verdicts.append(c.min_props <= len(v) and (c.max_props is None or len(v) <= c.max_props))
        for k, x in v.items():
            verdicts.append(check_subs(member_subs(c, k), x, norm, depth))
            if c.names:
                verdicts.append(check_subs(c.names, k, norm, depth))
            if k in c.dep_required:
                verdicts.append(c.dep_required[k] <= v.keys())
            if k in c.dep_schemas:
                verdicts.append(check_subs(c.dep_schemas[k], v, norm, depth))
    if False in verdicts:
        return False if c.exact else None
    if None in verdicts:
        return None
    for x, *_ in c.excl:  # a value satisfying an excluded clause fails this one
        r = check_value(x, v, norm, depth + 1)
        if r is not False:
            return False if r is True and c.exact else None
    return True


def check_subs(subs: list, v, norm: Normalizer, depth: int):
    if not subs:
        return True
    verdict = True
    for s, ctx, ptr in subs:
        try:
            parts = norm.clauses(s, ctx, ptr)
        except ConstraintError:
            return None
        results = [check_value(p, v, norm, depth + 1) for p in parts]
        r = True if True in results else None if None in results or not all(p.exact for p in parts) else False
        if r is False:
            return False
        if r is None:
            verdict = None
    return verdict


# ---------------------------------------------------------------------------------------------
# regex text: fragments are (text, states) or None (no value); the text is a regex string, or a
# Pattern where an intersection was needed (then everything around it is a Pattern too)


def fragment(text: str, states: int | None = None):
    return (text, len(text) if states is None else states)


def text_size(text) -> int:
    """The characters of a fragment's text (a Pattern: its text written out, shared parts at each use)."""
    return len(text) if isinstance(text, str) else text.text_length()


class Dag:
    """The Pattern nodes written while sealed, each counted once however often it is used: the
    regex texts' characters plus one per node and operand (:meth:`Pattern.size` of them all).
    A sealed fragment's Pattern weighs 1 in the fragment's count; its size is counted here, and
    the schema is bounded by ``total`` (:data:`MAX_PATTERN_CHARS`), the DAG, not its expansion."""

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
    :data:`SEAL_STATES`, each run (and every Pattern part) as a Pattern leaf."""
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
        if run and states + n > SEAL_STATES:
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
        if states <= SEAL_STATES:
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
        if states <= SEAL_STATES:
            return (f"(?:{'|'.join(p[0] for p in parts)})", states)
    leaves, run, states = [], [], 0
    for p in parts:  # alternatives grouped into regex texts under SEAL_STATES each
        if isinstance(p[0], Pattern):
            leaves.append(p[0])
            continue
        if run and states + p[1] > SEAL_STATES:
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
    if isinstance(p[0], Pattern) or states > SEAL_STATES:
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
    :data:`MAX_PATTERN_CHARS` (what the engine walks and prints)."""
    if frag is None:
        return False
    dag = SEALING.get()
    if isinstance(frag[0], str) or dag is None:
        return frag[1] > MAX_STATES or text_size(frag[0]) > MAX_PATTERN_CHARS
    return dag.add(frag[0]) > MAX_PATTERN_CHARS


def escaped(text: str) -> str:
    return "".join("\\" + c if c in META else c for c in text)


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
                f"{show(ptr)}: the JSON Schema's regex would exceed {MAX_PATTERN_CHARS:,} characters or "
                f"{MAX_STATES:,} automaton states (at least {what} here): simplify the schema",
                bound="characters or states",
                limit=MAX_PATTERN_CHARS,
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
        spend(ptr)
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
            if out is not None and isinstance(out[0], str) and len(out[0]) > SHARE_LEAF:
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
        """A recursive definition's placeholder (:func:`~.schema_rules.placeholder`); its text
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


def number_text(c: Clause, widen: bool):
    """A number's fragment (its kinds, bounds and multipleOf), and why it writes no integer when
    its bounds leave only integers past the digits written ("" otherwise). ``widen``: an excluded
    text, holding ``-0`` beside ``0``."""
    if c.mult:
        return multiple_text(c, widen), ""
    if not c.lo and not c.hi:
        if c.kinds >= {"integer", "fraction"}:
            return fragment(NUMBER), ""
        if "integer" in c.kinds:
            return fragment(INTEGER), ""
    why_none = ""
    lo, lo_s, hi, hi_s = intervals(c)
    parts = []
    if "integer" in c.kinds:
        ilo = None if lo is None else (math.floor(lo) + 1 if lo_s and lo == math.floor(lo) else math.ceil(lo))
        ihi = None if hi is None else (math.ceil(hi) - 1 if hi_s and hi == math.ceil(hi) else math.floor(hi))
        ints = signed_range(ilo, ihi)
        parts.append(ints)
        if not ints and signed_range(ilo, ihi, cap=None):  # only integers past the written digits
            side, bound = ("minimum", ilo) if ilo is not None and ilo > 0 else ("maximum", ihi)
            other = "maximum" if side == "minimum" else "minimum"
            why_none = (
                f"{show(c.ptr)}/{side}: an integer without a {other} is written with at most "
                f"{MAX_INT_DIGITS} digits, and {side} {short_number(bound)} leaves none; "
                f"give the {other} too"
            )
        if widen and (ilo is None or ilo <= 0) and (ihi is None or ihi >= 0):
            parts.append("-0")
    if "fraction" in c.kinds:
        parts.append(fraction_range(lo, lo_s, hi, hi_s))
    return either([fragment(p) for p in parts if p]), why_none


def multiple_text(c: Clause, widen: bool):
    """multipleOf for integers: a divisor of a power of ten, by the last digits."""
    ms = {m for m, _ in c.mult}
    m = ms.pop() if len(ms) == 1 else None
    ptr = c.mult[0][1]
    if "integer" not in c.kinds:  # only integers are written: none of them may be
        raise ConstraintError(f"{show(ptr)}/multipleOf is not supported where integers are excluded")
    if m is not None and not c.lo and not c.hi and not widen and integers_pass(m):
        return fragment(
            INTEGER
        )  # 10**-k: the integers, a part (their multiples of m with fractions are not written)
    if m is None or not (isinstance(m, int) or float(m).is_integer()) or c.lo or c.hi:
        raise ConstraintError(
            f"{show(ptr)}/multipleOf is not supported (only a divisor of 1000 or 10**-k, unbounded)"
        )
    m = int(m)
    k = next((k for k in range(4) if 10**k % m == 0), None)
    if k is None:
        raise ConstraintError(
            f"{show(ptr)}/multipleOf is not supported (only a divisor of 1000 or 10**-k, unbounded)"
        )
    if k == 0:
        return fragment(INTEGER)
    ends = [f"{r:0{k}d}" for r in range(0, 10**k, m)]
    zero = "-?0" if widen else "0"
    head = f"[1-9][0-9]{{0,{MAX_INT_DIGITS - k - 1}}}"
    small = [str(int(e)) for e in ends if e != "0" * k]  # below 10**k
    return fragment(
        f"(?:{zero}|-?(?:{head}(?:{'|'.join(ends)})|{'|'.join(small)}))"
        if small
        else f"(?:{zero}|-?{head}{'0' * k})"
    )


def integers_pass(m) -> bool:
    """Whether ``m`` is a float ``10**-k`` (``0.1``, ``0.01``, ...) that every JSON integer ``n`` is a
    multiple of as validators compute it: ``n / m`` in floating point is integral. The double
    nearest ``10**-k`` is ``10**-k (1 + d)``; with ``|d| < 2**-54`` (under half an ulp of any
    quotient), ``n / m`` rounds to ``n 10**k`` where that is below ``2**53``, and any quotient above
    is an integral double."""
    if isinstance(m, bool) or not isinstance(m, float) or not 0 < m < 1:
        return False
    k = round(-math.log10(m))
    if not 1 <= k <= 15 or Decimal(repr(m)) != Decimal(1).scaleb(-k):
        return False
    exact = Fraction(1, 10**k)
    return abs(exact / Fraction(m) - 1) < Fraction(1, 2**54)


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


def without_enum(c: Clause) -> Clause:
    d = c.copy()
    d.enum = None
    return d


def string_of_length(lo: int, hi: int | None):
    q = f"{{{lo},{'' if hi is None else hi}}}"
    states = CHAR_STATES * max(lo, hi or 1, 1) + 4
    if states > SEAL_STATES and SEALING.get():  # the count kept symbolic: one node of the engine
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
            f"{show(ptr)}: the JSON Schema's regex would exceed {MAX_PATTERN_CHARS:,} characters or "
            f"{MAX_STATES:,} automaton states (an object's optional properties, counted up to {cap}): "
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
        spend(ptr)
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
                f"{show(ptr)}: the JSON Schema's regex would exceed {MAX_PATTERN_CHARS:,} characters or "
                f"{MAX_STATES:,} automaton states (an object's optional properties): simplify the schema",
                bound="characters or states",
                limit=MAX_PATTERN_CHARS,
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


def signed_range(lo: int | None, hi: int | None, cap: int | None = 10**MAX_INT_DIGITS - 1) -> str:
    """Integers in [lo, hi] (None: unbounded, then at most MAX_INT_DIGITS digits); '' when none.
    ``cap=None``: whether any integer is in [lo, hi] ('-' or '' ; nothing is written)."""
    if cap is None:
        return "-" if lo is None or hi is None or lo <= hi else ""
    lo = -cap if lo is None else lo
    hi = cap if hi is None else hi
    neg = digit_range(max(-hi, 1), -lo) if lo < 0 else ""
    pos = digit_range(max(lo, 0), hi) if hi >= 0 else ""
    alts = [a for a in ("-" + neg if neg else "", pos) if a]
    return alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})" if alts else ""


def short_number(n: int) -> str:
    """An integer for a message: in full up to 30 digits, else its digit count."""
    text = str(n)
    return text if len(text) <= 30 else f"{text[:6]}... ({len(text.lstrip('-'))} digits)"


def digit_range(lo: int, hi: int) -> str:
    """Decimal numerals (no leading zero) of lo <= n <= hi; '' when none."""
    if hi < lo:
        return ""
    alts, n, full = [], len(str(lo)), []
    while n <= len(str(hi)):
        a, b = max(lo, 10 ** (n - 1) if n > 1 else 0), min(hi, 10**n - 1)
        if n > 1 and a == 10 ** (n - 1) and b == 10**n - 1:
            full.append(n)  # every numeral of n digits: merged with the next lengths
        else:
            alts.extend(digit_runs(full))
            full = []
            alts.append(same_length(str(a), str(b)))
        n += 1
    alts.extend(digit_runs(full))
    return alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"


def digit_runs(lengths: list[int]) -> list[str]:
    """Every numeral (no leading zero) of lengths[0] to lengths[-1] digits (consecutive)."""
    if not lengths:
        return []
    lo, hi = lengths[0] - 1, lengths[-1] - 1
    return ["[1-9][0-9]" + (f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")]


def same_length(a: str, b: str) -> str:
    """Fixed-width numerals from a to b (same length, a <= b; leading zeros allowed)."""
    if a == b:
        return a
    if a[1:] == "0" * (len(a) - 1) and b[1:] == "9" * (len(b) - 1):
        first = a[0] if a[0] == b[0] else f"[{a[0]}-{b[0]}]"
        return first + ("" if len(a) == 1 else "[0-9]" if len(a) == 2 else f"[0-9]{{{len(a) - 1}}}")
    if a[0] == b[0]:
        return a[0] + same_length(a[1:], b[1:])
    k = len(a) - 1
    parts = [a[0] + same_length(a[1:], "9" * k)]
    if int(a[0]) + 1 <= int(b[0]) - 1:
        mid = f"{int(a[0]) + 1}" if int(a[0]) + 1 == int(b[0]) - 1 else f"[{int(a[0]) + 1}-{int(b[0]) - 1}]"
        parts.append(mid + (f"[0-9]{{{k}}}" if k > 1 else "[0-9]"))
    parts.append(b[0] + same_length("0" * k, b[1:]))
    return f"(?:{'|'.join(parts)})"


def fixed_width(a: int, b: int, k: int) -> str:
    """Numerals of the integers a..b (0 <= a <= b) written with a point before the last k digits."""
    if k == 0:
        return digit_range(a, b)
    unit = 10**k
    ia, ib = a // unit, b // unit
    fa, fb = f"{a % unit:0{k}d}", f"{b % unit:0{k}d}"
    if ia == ib:
        return f"{ia}\\.{same_length(fa, fb)}"
    parts = [f"{ia}\\.{same_length(fa, '9' * k)}"]
    if ia + 1 <= ib - 1:
        parts.append(f"{digit_range(ia + 1, ib - 1)}\\.[0-9]{{{k}}}")
    parts.append(f"{ib}\\.{same_length('0' * k, fb)}")
    return f"(?:{'|'.join(parts)})"


def positive_fractions(lo: Decimal, lo_s: bool, hi: Decimal | None, hi_s: bool) -> list[str]:
    """Decimals v > 0 (1 to MAX_FRACTION_DIGITS fraction digits, the last non-zero, 15 significant
    digits at most) with lo < v (lo <= v unless lo_s) and v < hi (v <= hi unless hi_s)."""
    out = []
    for j in range(1, MAX_FRACTION_DIGITS + 1):
        unit = 10**j
        low, high = lo * unit, None if hi is None else hi * unit
        a = int(low) + (1 if lo_s else 0) if low == int(low) else math.ceil(low)
        b = (
            10**15 - 1
            if high is None
            else int(high) - (1 if hi_s else 0)
            if high == int(high)
            else math.floor(high)
        )
        a, b = max(a, 1), min(b, 10**15 - 1)
        if a > b:
            continue
        qa, qb = a // 10, b // 10  # M = 10 q + r with r in 1-9: the last digit non-zero

        def head(x: int, y: int, j: int = j) -> str:
            return fixed_width(x, y, j - 1) + ("\\." if j == 1 else "")

        def digit(x: int, y: int) -> str:
            return str(x) if x == y else f"[{x}-{y}]"

        if qa == qb:
            if max(a % 10, 1) <= b % 10:
                out.append(head(qa, qa) + digit(max(a % 10, 1), b % 10))
            continue
        out.append(head(qa, qa) + digit(max(a % 10, 1), 9))
        if qa + 1 <= qb - 1:
            out.append(head(qa + 1, qb - 1) + "[1-9]")
        if b % 10 >= 1:
            out.append(head(qb, qb) + digit(1, b % 10))
    return out


def fraction_range(lo, lo_s, hi, hi_s) -> str:
    """Non-integral decimals within the bounds (None: unbounded) as json.loads reads them: 15
    significant digits at most, so the float of one is strictly inside any bound it is inside."""
    zero = Decimal(0)
    pos = neg = []
    if hi is None or hi > 0:
        pos = positive_fractions(lo if lo is not None and lo > 0 else zero, lo_s, hi, hi_s)
    if lo is None or lo < 0:
        neg = positive_fractions(
            -hi if hi is not None and hi < 0 else zero, hi_s, None if lo is None else -lo, lo_s
        )
    alts = pos + ["-" + p for p in neg]
    return alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})" if alts else ""
