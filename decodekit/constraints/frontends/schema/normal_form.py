"""Schema -> disjunctive normal form: :class:`Normalizer` reads a subschema into a list of
:class:`~.clauses.Clause` (``allOf``, ``$ref`` and sibling keywords merged into every branch of
``anyOf`` / ``oneOf``; ``not`` and overlapping ``oneOf`` as exclusions), :func:`resolve` finds a
local ``$ref``'s target, and :func:`recursive_refs` the references that enclose themselves."""

from __future__ import annotations

import itertools

from decodekit.constraints.frontends.schema.clauses import (
    CONSTRAINING,
    KINDS,
    SUPPORTED,
    Clause,
    Context,
    count_keyword,
    json_equal,
    kinds_of_types,
    merge,
    number_keyword,
    unconstrained,
)
from decodekit.constraints.frontends.schema.disjointness import covers, disjoint, separate, value_kinds
from decodekit.constraints.frontends.schema.formats import FORMATS, UNSUPPORTED_FORMATS
from decodekit.constraints.frontends.schema.limits import MAX_CLAUSES, MAX_REF_UNROLL, needs, show
from decodekit.constraints.frontends.schema.rules import RecursionNotLowered
from decodekit.errors import ConstraintError


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
