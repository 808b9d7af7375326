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

The package, by stage: :mod:`.clauses` and :mod:`.normal_form` (schema -> clauses),
:mod:`.disjointness` (what is proved about clauses), :mod:`.formats` and :mod:`.numbers` (the
regexes of strings and numbers), :mod:`.fragments` and :mod:`.compiler` (clauses -> regex text or
Pattern), :mod:`.rules` (a recursive schema's grammar), :mod:`.limits` (every bound).
"""

from __future__ import annotations

import json

from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.frontends.schema import limits
from decodekit.constraints.frontends.schema.clauses import Context
from decodekit.constraints.frontends.schema.compiler import Compiler
from decodekit.constraints.frontends.schema.fragments import SEALING, Dag
from decodekit.constraints.frontends.schema.limits import MAX_REF_UNROLL, WORK
from decodekit.constraints.frontends.schema.normal_form import recursive_refs
from decodekit.constraints.frontends.schema.rules import RecursionNotLowered, to_cfg
from decodekit.errors import ConstraintError, ConstraintTooLarge


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
        needed and one regex text of at most :data:`limits.STR_STATES` NFA states says it, else a
        :class:`~decodekit.constraints.automata.pattern.Pattern` (a string with several of
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
    where it has at most :data:`limits.STR_STATES` NFA states (a Pattern: :data:`limits.PATTERN_STATES`); else
    written *sealed*: every regex text of more than :data:`limits.SEAL_STATES` NFA states split into
    Pattern leaves parsed one by one, counted repetitions kept symbolic, each subschema's text of
    more than :data:`limits.SHARE_LEAF` characters one leaf (equal subschemas: one leaf, parsed once; a
    large schema compiles 5-40 times faster from such leaves than from one regex text), every
    piece used twice one node of a DAG, the whole bounded by the DAG's size (:class:`Dag`,
    :data:`limits.MAX_PATTERN_CHARS`); too large still, with its recursions unrolled fewer times
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
    """A recursive schema as a grammar (:mod:`.rules`): each definition in ``recursive``
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
                or frag[1] <= (limits.STR_STATES if isinstance(frag[0], str) else limits.PATTERN_STATES)
            ):
                return frag, compiler.empty
            plain = frag
    return frag, compiler.empty


from decodekit.constraints.frontends.schema.clauses import CONSTRAINING  # noqa: E402
from decodekit.constraints.frontends.schema.formats import FORMATS  # noqa: E402
from decodekit.constraints.frontends.schema.limits import (  # noqa: E402
    MAX_ANY_ORDER,
    MAX_DEPTH,
    MAX_PATTERN_CHARS,
)

__all__ = [
    "CONSTRAINING",
    "FORMATS",
    "MAX_ANY_ORDER",
    "MAX_DEPTH",
    "MAX_PATTERN_CHARS",
    "MAX_REF_UNROLL",
    "json_schema",
    "recursive_refs",
]
