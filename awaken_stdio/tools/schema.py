"""Portable JSON Schemas for tool parameters and outputs.

MCP allows any JSON Schema, but the model APIs behind the hosts do not: Gemini, Vertex, Bedrock, Azure and Copilot
reject ``$ref``/``$defs``, root ``anyOf``/``oneOf``/``allOf``, type lists such as ``["object", "null"]`` and
``$schema``, and TS SDK clients drop a whole ``tools/list`` whose output schema lacks a root ``type: object``. This
module rewrites pydantic's JSON Schema into the subset all of them take, and lists what a given schema breaks.
It works on plain dicts and imports nothing, so protocol code can check third-party schemas cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["PortabilityError", "check_portable", "portable_schema"]

# Keywords whose value is one schema, a name -> schema map, or a list of schemas. Everything else is data
# (``default``, ``enum``, ``const``, ``examples``...) and is copied untouched, even when it looks like a schema.
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
        "additionalItems", "unevaluatedItems", "unevaluatedProperties")  # fmt: skip
_MAP = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_COMBINATORS = ("anyOf", "oneOf", "allOf")
# ``title`` is pydantic noise (the field name again); ``discriminator`` is OpenAPI, and its mapping holds $refs.
_DROPPED = frozenset({"$schema", "$id", "$comment", "$defs", "definitions", "title", "discriminator"})
_NULL = {"type": "null"}
DEFAULT_MAX_DEPTH = 3


class PortabilityError(ValueError):
    """The schema cannot be made portable (a non-object root, a remote or dangling ``$ref``)."""


def portable_schema(schema: dict[str, Any], *, max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """A copy of ``schema`` that every host and model API accepts.

    Local ``$ref``s are inlined and ``$defs`` removed; a recursive definition is expanded ``max_depth`` times along
    one path and then cut to a permissive ``{"type": "object"}`` (its own type), so the model still sees the shape
    of the first levels. ``X | None`` becomes ``X`` (a property with a default is not required; one without stays
    required, as the validator demands it); other unions stay ``anyOf`` below the root; ``oneOf`` becomes ``anyOf``.
    Titles, ``$schema`` and ``discriminator`` go; descriptions, defaults, enums, consts, bounds, ``items`` and
    ``additionalProperties`` stay. Raises ``PortabilityError`` when the root is not an object.
    """
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    out = _Inliner(defs, max_depth).node(schema, ())
    if not isinstance(out, dict) or out.get("type") != "object":
        raise PortabilityError(f"a tool schema must describe an object, not {_describe(out)}")
    if any(k in out for k in _COMBINATORS):
        raise PortabilityError("a tool schema must not be a union at its root (anyOf/oneOf/allOf)")
    return out


def check_portable(schema: Any) -> list[str]:
    """The portability rules ``schema`` breaks, one readable line each (empty when it is portable)."""
    problems: list[str] = []
    if not isinstance(schema, dict):
        return [f"/: the root must be an object schema, not {_describe(schema)}"]
    if schema.get("type") != "object":
        problems.append(f'/: the root must have "type": "object", not {_describe(schema)}')
    problems.extend(f"/: {k} at the root is not portable" for k in _COMBINATORS if k in schema)
    if "$schema" in schema:
        problems.append("/: $schema is not portable")
    _check(schema, "", problems)
    return problems


def _check(node: Any, path: str, problems: list[str]) -> None:
    if not isinstance(node, dict):
        return
    where = path or "/"
    if "$ref" in node:
        problems.append(f"{where}: $ref is not portable (inline it)")
    problems.extend(f"{where}: {k} is not portable (inline it)" for k in ("$defs", "definitions") if k in node)
    if isinstance(node.get("type"), list):
        problems.append(f"{where}: a type list {node['type']} is not portable (use one type, or anyOf)")
    _each_subschema(node, lambda sub, key: _check(sub, f"{path}/{key}", problems))


def _each_subschema(node: dict[str, Any], visit: Callable[[Any, str], None]) -> None:
    for key in _ONE:
        if key in node:
            visit(node[key], key)
    for key in _MAP:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                visit(sub, f"{key}/{name}")
    for key in _LIST:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                visit(sub, f"{key}/{i}")


class _Inliner:
    """Rewrites one schema tree; ``stack`` holds the refs being expanded on the current path."""

    def __init__(self, defs: dict[str, Any], max_depth: int) -> None:
        self.defs = defs
        self.max_depth = max_depth

    def node(self, s: Any, stack: tuple[str, ...]) -> Any:
        if not isinstance(s, dict):
            return s  # boolean schemas
        if "$ref" in s:
            return self._ref(s, stack)
        out: dict[str, Any] = {}
        for key, value in s.items():
            if key in _DROPPED or key == "$ref":
                continue
            if key in _ONE:
                out[key] = self.node(value, stack)
            elif key in _MAP and isinstance(value, dict):
                out[key] = {name: self.node(sub, stack) for name, sub in value.items()}
            elif key in _LIST and isinstance(value, list):
                out[key] = [self.node(sub, stack) for sub in value]
            else:
                out[key] = value
        return _simplify(out)

    def _ref(self, s: dict[str, Any], stack: tuple[str, ...]) -> Any:
        ref = s["$ref"]
        name = _local_def_name(ref)
        if name not in self.defs:
            raise PortabilityError(f"$ref {ref!r} does not name a definition of this schema")
        target = self.defs[name]
        if stack.count(ref) >= self.max_depth:
            kind = target.get("type") if isinstance(target, dict) else None
            resolved: Any = {"type": kind if isinstance(kind, str) else "object"}
            if isinstance(target, dict) and "description" in target:
                resolved["description"] = target["description"]
        else:
            resolved = self.node(target, (*stack, ref))
        siblings = self.node({k: v for k, v in s.items() if k != "$ref"}, stack)
        if not siblings:
            return resolved
        if not isinstance(resolved, dict):  # a boolean definition: keep the siblings' constraints under allOf
            return {**siblings, "allOf": [resolved]}
        return _simplify({**resolved, **siblings})  # the use site's description and default win


def _local_def_name(ref: Any) -> str:
    for prefix in ("#/$defs/", "#/definitions/"):
        if isinstance(ref, str) and ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
            return ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
    raise PortabilityError(f"only local $refs to #/$defs/<name> can be inlined, not {ref!r}")


def _simplify(s: dict[str, Any]) -> dict[str, Any]:
    """Collapse nullable unions and type lists, and turn ``oneOf`` into ``anyOf``."""
    kind = s.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"] or ["null"]
        if "null" not in types and s.get("default", 0) is None:
            del s["default"]  # null is no longer a value of the schema
        if len(types) == 1:
            s["type"] = types[0]
        else:
            del s["type"]
            s["anyOf"] = [{"type": t} for t in types]
    if "oneOf" in s and "anyOf" not in s:
        s["anyOf"] = s.pop("oneOf")
    branches = s.get("anyOf")
    if isinstance(branches, list) and _NULL in branches:
        rest = [b for b in branches if b != _NULL]
        del s["anyOf"]
        if s.get("default", 0) is None:
            del s["default"]
        if len(rest) == 1 and isinstance(rest[0], dict):
            s = {**rest[0], **s}
        elif rest:
            s["anyOf"] = rest
    all_of = s.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        del s["allOf"]
        s = {**all_of[0], **s}
    return s


def _describe(schema: Any) -> str:
    if not isinstance(schema, dict):
        return repr(schema)
    if "type" in schema:
        return f"type {schema['type']!r}"
    for key in _COMBINATORS:
        if key in schema:
            return f"a union ({key})"
    return "a schema without a type"
