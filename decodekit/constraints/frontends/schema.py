"""JSON Schema -> regex: a documented subset of JSON Schema compiled to a pattern of decodekit's
regex dialect (docs/constraints.md, "JSON Schema").

Sound by construction: every text the returned regex fully matches is JSON that validates
against the schema. Where the schema allows more than a regex can express (properties in any
order, extra properties, exact real-valued bounds), the regex covers a documented part of it;
a keyword that restricts the language and is not handled is refused with a
:class:`ConstraintError` naming its JSON pointer, never ignored.
"""

from __future__ import annotations

import json
import math

import regex

from decodekit.errors import ConstraintError

# Ignored: they do not restrict the language ($id only at the root: elsewhere it moves "#" refs).
_WORDS = "title description examples default $schema $id $comment deprecated readOnly writeOnly $defs"
ANNOTATIONS = frozenset(_WORDS.split(" ") + ["definitions", "contentMediaType", "contentEncoding"])
_TYPE_KEYWORDS = {
    "string": ("minLength", "maxLength", "pattern", "format"),
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
    "array": ("items", "minItems", "maxItems", "uniqueItems"),
    "object": ("properties", "required", "additionalProperties"),
}
_KNOWN = ANNOTATIONS | {k for ks in _TYPE_KEYWORDS.values() for k in ks}
_KNOWN |= {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"}
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
ANY_DEPTH = 2  # nesting of arrays/objects in a value the schema leaves free ({} or true)
# Bounds checked while compiling, so that a hostile schema fails in one line, at once: subschemas
# nested deeper than MAX_DEPTH (the regex engine refuses 100 nested groups anyway), and a regex
# longer than MAX_PATTERN_CHARS (each level of nested arrays doubles it: 18 levels of
# {"items": {...}} made 1.3 GB; no pattern this long fits the engine's 1,000,000 NFA states).
MAX_DEPTH, MAX_PATTERN_CHARS = 64, 16_000_000

# A character of a JSON string: raw (no quote, backslash, control character or lone surrogate),
# or an escape; a \u escape never names a surrogate, so each one decodes to exactly one character.
CHAR = (
    r'(?:[^"\\\x00-\x1f\ud800-\udfff]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
)
STRING = f'"{CHAR}*"'
INTEGER = r"-?(?:0|[1-9][0-9]*)"
NUMBER = INTEGER + r"(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_FRACTION = r"\.[0-9]*[1-9]"  # a fraction strictly between 0 and 1
_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001-9999 (Python's dates)
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    rf"(?:{_YEAR}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)"
    rf"|(?:0[13578]|1[02])-31)|{_LEAP}-02-29)"
)
_TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
FORMATS = {  # each matches only texts that need no JSON escape
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}T{_TIME}",
    "email": rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": rf"{_OCTET}(?:\.{_OCTET}){{3}}",
}
_META = frozenset(r"\.^$|?*+()[]{}#")


def json_schema(schema: dict | bool | str, *, whitespace: str = "compact") -> str:
    """Compile a JSON Schema (a dict, or its JSON text) into a regex constraint.

    Args:
        schema: the schema; local ``$ref`` (``#/$defs/...``, ``#/definitions/...``) are resolved
            in it.
        whitespace: ``"compact"`` (no whitespace: ``{"a":1,"b":[1,2]}``) or ``"flexible"`` (one
            optional space after each ``:`` and ``,``).

    Returns:
        A pattern for :func:`decodekit.compile_regex` (or ``constraint=``); every text it fully
        matches is JSON valid against ``schema``.

    Raises:
        ConstraintError: invalid schema JSON, or a keyword outside the supported subset, named by
            its JSON pointer (``/properties/age/multipleOf is not supported``).
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
    compiler = _Compiler(schema, whitespace == "flexible")
    try:
        body = compiler.value(schema, "")[0]
    except RecursionError:  # an enum or const value nested hundreds of levels deep
        raise ConstraintError("a value in the JSON Schema is nested too deeply to compile") from None
    return "(?a)" + body if compiler.ascii else body  # (?a): ASCII \d \w in embedded patterns


class _Compiler:
    def __init__(self, root, flexible: bool):
        self.root, self.refs, self.ascii, self.depth = root, [], False, 0
        self.colon, self.comma = (": ?", ", ?") if flexible else (":", ",")

    def value(self, s, ptr: str) -> tuple[str, frozenset]:
        """(regex, JSON types it can produce) for the subschema ``s`` at pointer ``ptr``, within
        :data:`MAX_DEPTH` and :data:`MAX_PATTERN_CHARS`."""
        at = ptr if len(ptr) <= 80 else ptr[:80] + "..."
        if self.depth >= MAX_DEPTH:
            raise ConstraintError(f"{at}: the JSON Schema nests subschemas more than {MAX_DEPTH} levels deep")
        self.depth += 1
        try:
            body, types = self._value(s, ptr)
        finally:
            self.depth -= 1
        if len(body) > MAX_PATTERN_CHARS:
            raise ConstraintError(
                f"{at or '/'}: the JSON Schema's regex would exceed {MAX_PATTERN_CHARS:,} characters "
                "(each level of nested arrays doubles it); simplify the schema"
            )
        return body, types

    def _value(self, s, ptr: str) -> tuple[str, frozenset]:
        if s is True or s == {}:
            return self.any(ANY_DEPTH), frozenset(TYPES)
        if not isinstance(s, dict):
            raise ConstraintError(f"{ptr or '/'}: a schema must be an object or true, got {s!r:.60}")
        for key in s:
            if key not in _KNOWN or (key == "$id" and ptr):
                raise ConstraintError(f"{ptr}/{key} is not supported")
        rest = {k: v for k, v in s.items() if k not in ANNOTATIONS}
        for key in ("$ref", "anyOf", "oneOf", "allOf"):
            if key in rest:
                if len(rest) > 1:
                    others = ", ".join(sorted(set(rest) - {key}))
                    raise ConstraintError(f"{ptr or '/'}: {key} beside {others} is not supported")
                return getattr(self, key.strip("$").lower())(rest[key], f"{ptr}/{key}")
        if "enum" in rest or "const" in rest:
            return self.enum(rest, ptr)
        types = rest.get("type")
        if types is None:  # the types whose keywords appear, else any value
            types = [t for t in TYPES if any(k in rest for k in _TYPE_KEYWORDS.get(t, ()))]
            if not types:
                return self.any(ANY_DEPTH), frozenset(TYPES)
        types = [types] if isinstance(types, str) else types
        if not isinstance(types, list) or not types:
            raise ConstraintError(f"{ptr}/type must be a type name or a non-empty array of them")
        for t in types:
            if t not in TYPES:
                raise ConstraintError(f"{ptr}/type: unknown type {t!r}")
        if "number" in types and "integer" in types:
            types = [t for t in types if t != "integer"]
        alts = [getattr(self, "t_" + t)(rest, ptr) for t in types]
        return _alt(alts), frozenset(types)

    def any(self, depth: int) -> str:
        scalar = f"null|true|false|{NUMBER}|{STRING}"
        if depth == 0:
            return f"(?:{scalar})"
        v = self.any(depth - 1)
        member = f"{STRING}{self.colon}{v}"
        return rf"(?:{scalar}|\[(?:{v}(?:{self.comma}{v})*)?\]|\{{(?:{member}(?:{self.comma}{member})*)?\}})"

    def ref(self, target, ptr: str):
        if not isinstance(target, str) or not target.startswith("#"):
            raise ConstraintError(
                f"{ptr or '/'}: only local references (#/...) are supported, got {target!r}"
            )
        if target in self.refs:
            raise ConstraintError(
                f"{ptr or '/'}: recursive $ref {target!r} is not supported (a regex has no recursion)"
            )
        node = self.root
        for part in target[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise ConstraintError(f"{ptr or '/'}: $ref {target!r} does not resolve")
        self.refs.append(target)
        try:
            return self.value(node, target[1:])
        finally:
            self.refs.pop()

    def anyof(self, branches, ptr: str, disjoint: bool = False):
        if not isinstance(branches, list) or not branches:
            raise ConstraintError(f"{ptr} must be a non-empty array of schemas")
        parts = [self.value(b, f"{ptr}/{i}") for i, b in enumerate(branches)]
        if disjoint:
            _check_disjoint([t for _, t in parts], ptr)
        return _alt([p for p, _ in parts]), frozenset().union(*(t for _, t in parts))

    def oneof(self, branches, ptr: str):
        """oneOf as anyOf, when no value can match two branches: their JSON types are disjoint."""
        return self.anyof(branches, ptr, disjoint=True)

    def allof(self, branches, ptr: str):
        if not isinstance(branches, list) or len(branches) != 1:
            raise ConstraintError(f"{ptr or '/'}: allOf is only supported with one schema")
        return self.value(branches[0], f"{ptr}/0")

    def enum(self, s: dict, ptr: str):
        if "enum" in s and "const" in s:
            raise ConstraintError(f"{ptr or '/'}: enum beside const is not supported")
        key = "enum" if "enum" in s else "const"
        values = s[key] if key == "enum" else [s[key]]
        if not isinstance(values, list) or not values:
            raise ConstraintError(f"{ptr}/enum must be a non-empty array")
        others = {k: v for k, v in s.items() if k != key}
        check = regex.compile("(?a)" + self.value(others, ptr)[0]) if others else None
        texts: dict[str, None] = {}  # in order, each once (a list's `in` made 200,000 values quadratic)
        types = set()
        for v in values:
            try:
                text = json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            except ValueError as e:
                raise ConstraintError(f"{ptr}/{key}: {str(v)[:60]!r} has no JSON form ({e})") from None
            if (check is None or check.fullmatch(text)) and text not in texts:
                texts[text] = None
                types.add(_type_of(v))
        if not texts:
            raise ConstraintError(f"{ptr}/{key}: no value satisfies the rest of the schema")
        return _alt([_escape(t) for t in texts]), frozenset(types)

    def t_null(self, s, ptr):
        return "null"

    def t_boolean(self, s, ptr):
        return "(?:true|false)"

    def t_integer(self, s, ptr):
        lo, hi, _, _ = _bounds(s, ptr)
        if lo is None and hi is None:
            return INTEGER
        return _signed_range(lo, hi, "") or _empty(ptr)

    def t_number(self, s, ptr):
        lo, hi, flo, fhi = _bounds(s, ptr)
        if lo is None and hi is None:
            return NUMBER
        alts = [_signed_range(lo, hi, "")]  # integers, then I.F (value strictly in (I, I+1))
        alts.append(_range(max(flo or 0, 0), None if fhi is None else fhi - 1, _FRACTION))
        if flo is None or flo < 0:
            alts.append(
                _range(max(-fhi if fhi is not None else 0, 0), None if flo is None else -flo - 1, _FRACTION)
            )
            alts[-1] = alts[-1] and "-" + alts[-1]
        return _alt([a for a in alts if a]) if any(alts) else _empty(ptr)

    def t_string(self, s, ptr):
        lo, hi = _count(s, "minLength", ptr), _count(s, "maxLength", ptr)
        given = [k for k in ("minLength", "maxLength", "pattern", "format") if k in s]
        if ("pattern" in s or "format" in s) and len(given) > 1:
            raise ConstraintError(
                f"{ptr or '/'}: {' with '.join(given)} is not supported (one of pattern, format)"
            )
        if "format" in s:
            if s["format"] not in FORMATS:
                raise ConstraintError(
                    f"{ptr}/format {s['format']!r} is not supported (supported: {', '.join(FORMATS)})"
                )
            return f'"{FORMATS[s["format"]]}"'
        if "pattern" in s:
            return f'"{self.pattern(s["pattern"], ptr + "/pattern")}"'
        if lo is None and hi is None:
            return STRING
        if hi is not None and hi < (lo or 0):
            _empty(ptr)
        return f'"{CHAR}{{{lo or 0},{"" if hi is None else hi}}}"'

    def pattern(self, p, ptr: str) -> str:
        """``^inner$`` embedded as ``(?:inner)`` when inner can match no character that JSON
        escapes (then the raw text is the value); ECMA-262 \\d \\w are ASCII: the regex gets (?a)."""
        from decodekit.constraints.syntax.nodes import Kind, Node
        from decodekit.constraints.syntax.parser import parse

        if not isinstance(p, str) or not (p.startswith("^") and p.endswith("$") and not p.endswith("\\$")):
            raise ConstraintError(f"{ptr or '/'}: only anchored patterns '^...$' are supported, got {p!r}")
        inner = f"(?:{p[1:-1]})"
        parse(f'(?a)"{inner}"')  # refuses anchors inside, \b under (?a), back-references
        root = parse(f"(?a){inner}")[0]
        stack, escaped = [root], [chr(c) for c in range(32)] + ['"', "\\"]
        while stack:
            node = stack.pop()
            stack.extend(i for i in node.items if isinstance(i, Node))
            if node.kind is Kind.SET and (bad := [c for c in escaped if _in_set(node.cset, c)]):
                raise ConstraintError(
                    f"{ptr or '/'}: pattern {p!r} can match {bad[0]!r}, which JSON writes escaped: exclude "
                    '" \\ and control characters (e.g. [^"\\\\\\x00-\\x1f] instead of . or \\s)'
                )
        self.ascii = True
        return inner

    def t_array(self, s, ptr):
        lo, hi = _count(s, "minItems", ptr) or 0, _count(s, "maxItems", ptr)
        if s.get("uniqueItems") is True and (hi is None or hi > 1):
            raise ConstraintError(f"{ptr}/uniqueItems is not supported (only with maxItems <= 1)")
        if "items" in s and not isinstance(s["items"], (dict, bool)):
            raise ConstraintError(f"{ptr}/items as an array (tuple validation) is not supported")
        item = self.value(s.get("items", True), f"{ptr}/items")[0]
        if hi is not None and hi < lo:
            _empty(ptr)
        if hi == 0:
            return r"\[\]"
        more = f"(?:{self.comma}{item}){{{max(lo - 1, 0)},{'' if hi is None else hi - 1}}}"
        return rf"\[{item}{more}\]" if lo > 0 else rf"\[(?:{item}{more})?\]"

    def t_object(self, s, ptr):
        props, required = s.get("properties", {}), s.get("required", [])
        if not isinstance(props, dict) or not isinstance(required, list):
            raise ConstraintError(f"{ptr or '/'}: properties must be an object and required an array")
        if missing := [r for r in required if r not in props]:
            raise ConstraintError(f"{ptr}/required: {missing[0]!r} is not in properties")
        members = []
        for name, sub in props.items():
            key = _escape(json.dumps(name, ensure_ascii=False))
            members.append(
                (f"{key}{self.colon}{self.value(sub, f'{ptr}/properties/{name}')[0]}", name in required)
            )
        first, later = "", ""  # the members from i on, when none / some came before
        for text, req in reversed(members):
            first = (
                f"{text}{later}" if req else f"(?:{text}{later}|{first})" if first else f"(?:{text}{later})?"
            )
            later = f"{self.comma}{text}{later}" if req else f"(?:{self.comma}{text})?{later}"
        return rf"\{{{first}\}}"


def _bounds(s: dict, ptr: str):
    """Integer bounds (lo, hi) of the integers allowed, and (flo, fhi) such that the open
    interval (I, I + 1) lies within the bounds iff flo <= I and I + 1 <= fhi. None: unbounded."""
    lo = hi = flo = fhi = None
    for key, down in (
        ("minimum", True),
        ("exclusiveMinimum", True),
        ("maximum", False),
        ("exclusiveMaximum", False),
    ):
        if key not in s:
            continue
        b = s[key]
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b):
            raise ConstraintError(f"{ptr}/{key} must be a finite number, got {b!r}")
        strict = key.startswith("exclusive")
        if down:
            i = math.floor(b) + 1 if strict else math.ceil(b)
            lo, flo = _max(lo, i), _max(flo, math.ceil(b))
        else:
            i = math.ceil(b) - 1 if strict else math.floor(b)
            hi, fhi = (
                -_max(-hi if hi is not None else None, -i),
                -_max(-fhi if fhi is not None else None, -math.floor(b)),
            )
    return lo, hi, flo, fhi


def _max(a: int | None, b: int) -> int:
    return b if a is None else max(a, b)


def _signed_range(lo: int | None, hi: int | None, tail: str) -> str:
    """Integers in [lo, hi] (None: unbounded), each followed by ``tail``; '' when none."""
    neg = _range(max(-hi, 1) if hi is not None else 1, None if lo is None else -lo, tail)
    pos = _range(max(lo, 0) if lo is not None else 0, hi, tail)
    return _alt([a for a in ("-" + neg if neg else "", pos) if a]) if neg or pos else ""


def _range(lo: int, hi: int | None, tail: str) -> str:
    """Decimal numerals (no leading zero) of lo <= n <= hi (hi None: unbounded), then ``tail``."""
    if hi is not None and hi < lo:
        return ""
    alts, n = [], len(str(lo))
    while hi is None or n <= len(str(hi)):
        a, b = max(lo, 10 ** (n - 1) if n > 1 else 0), 10**n - 1 if hi is None else min(hi, 10**n - 1)
        if hi is None and a == 10 ** (n - 1) and n > 1:
            alts.append(f"[1-9][0-9]{{{n - 1},}}")
            break
        alts.append(_same_length(str(a), str(b)))
        n += 1
    return f"(?:{'|'.join(alts)}){tail}"


def _same_length(a: str, b: str) -> str:
    """Fixed-width numerals from a to b (same length, a <= b)."""
    if a == b:
        return a
    if a[1:] == "0" * (len(a) - 1) and b[1:] == "9" * (len(b) - 1):
        return f"[{a[0]}-{b[0]}]" + (f"[0-9]{{{len(a) - 1}}}" if len(a) > 1 else "")
    if a[0] == b[0]:
        return a[0] + _same_length(a[1:], b[1:])
    k = len(a) - 1
    parts = [a[0] + _same_length(a[1:], "9" * k)]
    if int(a[0]) + 1 <= int(b[0]) - 1:
        parts.append(f"[{int(a[0]) + 1}-{int(b[0]) - 1}][0-9]{{{k}}}")
    parts.append(b[0] + _same_length("0" * k, b[1:]))
    return f"(?:{'|'.join(parts)})"


def _check_disjoint(branch_types: list, ptr: str) -> None:
    seen: set = set()
    for i, types in enumerate(branch_types):
        types = types | {"integer"} if "number" in types else types  # an integer is also a number
        if types & seen:
            raise ConstraintError(
                f"{ptr or '/'}: oneOf is only supported when its branches have disjoint types "
                f"(branch {i} shares {sorted(types & seen)}): write anyOf if they never overlap"
            )
        seen |= types


def _count(s: dict, key: str, ptr: str) -> int | None:
    v = s.get(key)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise ConstraintError(f"{ptr}/{key} must be a non-negative integer, got {v!r}")
    return v


def _in_set(cset, c: str) -> bool:
    """Whether the class may match ``c`` (predicates read both as ASCII and as Unicode)."""
    for flags in ("(?a)", ""):
        hit = c in cset.chars or any(
            bool(regex.fullmatch(flags + "\\" + n, c)) != neg for n, neg in cset.preds
        )
        if hit != cset.negated:
            return True
    return False


def _type_of(v) -> str:
    if v is None or isinstance(v, bool):
        return "null" if v is None else "boolean"
    return {int: "integer", float: "number", str: "string", list: "array", dict: "object"}[type(v)]


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _META else c for c in text)


def _alt(alts: list[str]) -> str:
    return alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"


def _empty(ptr: str):
    raise ConstraintError(f"{ptr or '/'}: the bounds allow no value")
