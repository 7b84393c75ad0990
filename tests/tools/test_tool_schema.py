"""portable_schema and check_portable: pydantic schemas rewritten into what every host and model API accepts."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from awaken_stdio.tools.schema import PortabilityError, check_portable, portable_schema


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    """An inner object."""

    x: int = Field(description="the x")


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    meow: int


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: int


class Everything(BaseModel):
    a: str
    b: int | None = None
    c: Inner | None = None
    d: Color = Color.RED
    e: Literal["x", "y"] = "x"
    f: Literal["only"] = "only"
    g: dict[str, Any] = {}
    h: list[Node] = []
    i: Annotated[int, Field(ge=0, le=9, description="a digit")] = 1
    j: Inner
    k: Annotated[Cat | Dog, Field(discriminator="kind")]
    m: int | str = 0
    title: str = "a property called title is kept"


def walk(node: Any) -> list[dict[str, Any]]:
    """Every dict in a schema, for asserting that a keyword appears nowhere."""
    if isinstance(node, dict):
        return [node, *(d for v in node.values() for d in walk(v))]
    if isinstance(node, list):
        return [d for v in node for d in walk(v)]
    return []


@pytest.fixture
def everything() -> dict[str, Any]:
    return portable_schema(Everything.model_json_schema())


def test_result_is_portable(everything: dict[str, Any]) -> None:
    assert check_portable(everything) == []
    assert everything["type"] == "object"
    for node in walk(everything):
        assert not {"$ref", "$defs", "$schema", "discriminator"} & node.keys()
        assert not isinstance(node.get("type"), list)


def test_titles_dropped_but_properties_named_title_kept(everything: dict[str, Any]) -> None:
    assert "title" in everything["properties"]
    assert all("title" not in node for node in walk(everything) if node is not everything["properties"])


def test_optional_collapses_to_its_type(everything: dict[str, Any]) -> None:
    assert everything["properties"]["b"] == {"type": "integer"}
    c = everything["properties"]["c"]
    assert c["type"] == "object" and c["properties"]["x"] == {"type": "integer", "description": "the x"}
    assert "b" not in everything["required"] and "c" not in everything["required"]


def test_optional_without_default_stays_required() -> None:
    class M(BaseModel):
        v: int | None

    schema = portable_schema(M.model_json_schema())
    assert schema["properties"]["v"] == {"type": "integer"}
    assert schema["required"] == ["v"]


def test_enum_literal_const_defaults_bounds(everything: dict[str, Any]) -> None:
    props = everything["properties"]
    assert props["d"] == {"type": "string", "enum": ["red", "blue"], "default": "red"}
    assert props["e"] == {"type": "string", "enum": ["x", "y"], "default": "x"}
    assert props["f"] == {"type": "string", "const": "only", "default": "only"}
    assert props["i"] == {"type": "integer", "minimum": 0, "maximum": 9, "default": 1, "description": "a digit"}
    assert props["g"] == {"type": "object", "additionalProperties": True, "default": {}}


def test_nested_model_inlined_with_its_description(everything: dict[str, Any]) -> None:
    assert everything["properties"]["j"] == {
        "type": "object",
        "description": "An inner object.",
        "properties": {"x": {"type": "integer", "description": "the x"}},
        "required": ["x"],
    }


def test_unions_below_root_stay_any_of(everything: dict[str, Any]) -> None:
    assert everything["properties"]["m"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 0}
    k = everything["properties"]["k"]
    assert "oneOf" not in k
    assert [branch["properties"]["kind"]["const"] for branch in k["anyOf"]] == ["cat", "dog"]


def test_recursion_is_cut_at_bounded_depth() -> None:
    schema = portable_schema(Node.model_json_schema(), max_depth=2)
    level2 = schema["properties"]["children"]["items"]
    assert level2["properties"]["name"] == {"type": "string"}
    assert level2["properties"]["children"]["items"] == {"type": "object"}
    assert check_portable(schema) == []


def test_root_ref_is_resolved() -> None:
    raw = Node.model_json_schema()
    assert "$ref" in raw  # pydantic puts a recursive root model under $defs
    assert portable_schema(raw)["required"] == ["name"]


def test_portable_schema_accepts_what_pydantic_accepts(everything: dict[str, Any]) -> None:
    good = {"a": "s", "j": {"x": 1}, "k": {"kind": "dog", "bark": 2}, "h": [{"name": "n", "children": []}]}
    Everything.model_validate(good)
    assert list(Draft202012Validator(everything).iter_errors(good)) == []
    bad = {"a": "s", "j": {}, "k": {"kind": "cat", "meow": 1}, "i": 12}
    assert len(list(Draft202012Validator(everything).iter_errors(bad))) == 2


def test_type_lists_collapse() -> None:
    raw = {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"], "default": None}, "b": {"type": ["string", "integer"]}},
    }
    assert portable_schema(raw)["properties"] == {
        "a": {"type": "string"},
        "b": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    }


def test_schema_keyword_dropped_and_data_untouched() -> None:
    raw = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"p": {"type": "object", "default": {"$ref": "not a ref, a value", "title": "kept"}}},
    }
    out = portable_schema(raw)
    assert "$schema" not in out
    assert out["properties"]["p"]["default"] == {"$ref": "not a ref, a value", "title": "kept"}


def test_input_not_mutated() -> None:
    raw = Everything.model_json_schema()
    before = repr(raw)
    portable_schema(raw)
    assert repr(raw) == before


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "string"},
        {"anyOf": [{"type": "object"}, {"type": "string"}]},
        {"$ref": "#/$defs/S", "$defs": {"S": {"type": "array"}}},
    ],
)
def test_non_object_roots_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(PortabilityError):
        portable_schema(raw)


@pytest.mark.parametrize("ref", ["https://example.com/schema.json", "#/$defs/Missing", "#/properties/a"])
def test_remote_or_dangling_refs_refused(ref: str) -> None:
    with pytest.raises(PortabilityError, match="ref"):
        portable_schema({"type": "object", "properties": {"a": {"$ref": ref}}, "$defs": {}})


def test_check_portable_names_each_violation() -> None:
    bad = {
        "$schema": "x",
        "anyOf": [{"type": "object"}],
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"type": ["string", "null"]}},
        "$defs": {"A": {"type": "object"}},
    }
    problems = check_portable(bad)
    assert problems == [
        '/: the root must have "type": "object", not a union (anyOf)',
        "/: anyOf at the root is not portable",
        "/: $schema is not portable",
        "/: $defs is not portable (inline it)",
        "/properties/a: $ref is not portable (inline it)",
        "/properties/b: a type list ['string', 'null'] is not portable (use one type, or anyOf)",
    ]
    assert check_portable([1]) == ["/: the root must be an object schema, not [1]"]
    assert check_portable({"type": "object", "properties": {}}) == []
