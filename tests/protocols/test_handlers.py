"""The method table both protocols dispatch through (``protocols/handlers.py``): a handler whose annotations do not
name its params model and the table's context is refused when the table is built; a dispatch validates the params
once, with the peer's precise -32602, and an unknown method is -32601."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from awaken_stdio.protocols.handlers import HandlerTable, entry
from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcError, error_to_wire

pytestmark = pytest.mark.anyio


class Context:
    """A protocol's per-request context."""


class Other:
    """Not the table's context."""


validated: list[str] = []


class NewParams(BaseModel):
    cwd: str
    count: int = 0

    @field_validator("cwd")
    @classmethod
    def _counted(cls, value: str) -> str:
        validated.append(value)
        return value


class CloseParams(BaseModel):
    session_id: str


class Handlers:
    def __init__(self) -> None:
        self.got: list[Any] = []

    async def new(self, params: NewParams, context: Context) -> dict[str, Any]:
        self.got.append((params, context))
        return {"cwd": params.cwd}

    async def close(self, params: CloseParams, context: Context) -> dict[str, Any]:
        return {}

    async def raw(self, params: dict[str, Any], context: Context) -> dict[str, Any]:
        return params

    async def other_context(self, params: NewParams, context: Other) -> None:
        return None

    def blocking(self, params: NewParams, context: Context) -> None:
        return None

    async def one_argument(self, params: NewParams) -> None:
        return None


def test_a_handler_whose_annotation_is_another_model_is_refused() -> None:
    """At run time, for what the type checker would refuse too (``entry`` ties a model to its handler's type)."""
    handlers = Handlers()
    with pytest.raises(TypeError, match=r"session/close: .* params model is .*NewParams"):
        HandlerTable(Context, [entry("session/close", NewParams, handlers.close)])


def test_a_handler_that_does_not_take_the_table_s_context_or_is_not_async_is_refused() -> None:
    handlers = Handlers()
    with pytest.raises(TypeError, match=r"the context is .*Context"):
        HandlerTable(Context, [entry("x", NewParams, handlers.other_context)])
    with pytest.raises(TypeError, match="is not an async function"):
        HandlerTable(Context, [entry("x", NewParams, handlers.blocking)])
    with pytest.raises(TypeError, match="takes 1 positional parameters"):
        HandlerTable(Context, [entry("x", NewParams, handlers.one_argument)])
    with pytest.raises(TypeError, match="params model is dict"):  # no model: the handler takes the raw object
        HandlerTable(Context, [entry("x", None, handlers.new)])
    with pytest.raises(ValueError, match="already registered"):
        HandlerTable(Context, [entry("x", NewParams, handlers.new), entry("x", NewParams, handlers.new)])


def test_a_model_the_handler_s_module_imports_for_the_checker_only_still_resolves() -> None:
    class Local(BaseModel):  # not in this module's globals, as a model imported under TYPE_CHECKING is not
        name: str

    async def handle(params: Local, context: Context) -> str:
        return params.name

    assert HandlerTable(Context, [entry("local", Local, handle)]).methods == {"local"}


async def test_dispatch_validates_the_params_once_and_hands_the_handler_its_model() -> None:
    handlers = Handlers()
    table = HandlerTable(Context, [entry("session/new", NewParams, handlers.new)])
    context = Context()
    validated.clear()
    assert await table.dispatch("session/new", {"cwd": "/w", "count": "3", "extra": 1}, context) == {"cwd": "/w"}
    assert validated == ["/w"]
    [(params, seen)] = handlers.got
    assert params == NewParams(cwd="/w", count=3) and seen is context


async def test_params_the_model_refuses_are_a_precise_invalid_params() -> None:
    table = HandlerTable(Context, [entry("session/new", NewParams, Handlers().new)])
    with pytest.raises(Exception) as refused:
        await table.dispatch("session/new", {"count": "many"}, Context())
    wire = error_to_wire(refused.value)
    assert wire["code"] == INVALID_PARAMS
    assert wire["message"] == "Invalid params: cwd: Field required (+1 more)"
    with pytest.raises(JsonRpcError) as not_object:
        await table.dispatch("session/new", [1, 2], Context())
    assert (not_object.value.code, not_object.value.message) == (
        INVALID_PARAMS,
        "Invalid params: params must be an object",
    )


async def test_no_params_are_an_empty_object_and_a_method_without_a_model_gets_them_raw() -> None:
    table = HandlerTable(Context, [entry("raw", None, Handlers().raw)])
    assert await table.dispatch("raw", None, Context()) == {}
    assert await table.dispatch("raw", {"a": [1]}, Context()) == {"a": [1]}


async def test_an_unknown_method_is_method_not_found() -> None:
    table = HandlerTable(Context, [entry("session/new", NewParams, Handlers().new)])
    assert "session/new" in table and "session/nope" not in table
    with pytest.raises(JsonRpcError) as unknown:
        await table.dispatch("session/nope", {}, Context())
    assert (unknown.value.code, unknown.value.message) == (METHOD_NOT_FOUND, "Method not found: session/nope")
