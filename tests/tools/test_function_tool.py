"""@tool: schemas from signatures, argument validation, context injection, threads, results and cancellation."""

from __future__ import annotations

import sys
import threading
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import anyio
import anyio.from_thread
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from awaken_stdio.contract.errors import ToolError
from awaken_stdio.contract.events import AgentEvent, ToolCallStreamDelta
from awaken_stdio.contract.state import Snapshot
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolOutput, ToolResult, tool_error_result
from awaken_stdio.tools import FunctionTool, tool
from awaken_stdio.tools.schema import check_portable

pytestmark = pytest.mark.anyio


def make_ctx(**kw: Any) -> ToolCallContext:
    return ToolCallContext(
        call_id="c1", tool_name="t", thread_id="th", run_id="r", agent_id="a", snapshot=Snapshot(revision=0), **kw
    )


def params(t: FunctionTool) -> dict[str, Any]:
    schema = t.descriptor.parameters
    assert check_portable(schema) == []
    return schema


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


ORIGIN = Point(x=0)


class Tree(BaseModel):
    label: str
    kids: list[Tree] = []


# -- schemas ---------------------------------------------------------------------------------------------------


def test_scalar_and_container_types() -> None:
    @tool
    def f(s: str, i: int, x: float, b: bool, xs: list[int], m: dict[str, float], n: int = 3) -> None: ...

    assert params(f) == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "xs": {"type": "array", "items": {"type": "integer"}},
            "m": {"type": "object", "additionalProperties": {"type": "number"}},
            "n": {"type": "integer", "default": 3},
        },
        "required": ["s", "i", "x", "b", "xs", "m"],
        "additionalProperties": False,
    }


def test_no_parameters() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert params(ping) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_literal_enum_optional() -> None:
    @tool
    def f(mode: Literal["fast", "slow"], only: Literal["x"], color: Color = Color.BLUE, a: int | None = None,
          b: Optional[str] = None, c: int | None = 5) -> None: ...  # noqa: UP045  # fmt: skip

    props = params(f)["properties"]
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert props["only"] == {"type": "string", "const": "x"}
    assert props["color"] == {"type": "string", "enum": ["red", "blue"], "default": "blue"}
    assert props["a"] == {"type": "integer"}
    assert props["b"] == {"type": "string"}
    assert props["c"] == {"type": "integer", "default": 5}
    assert params(f)["required"] == ["mode", "only"]


def test_optional_without_default_is_not_required_and_defaults_to_none() -> None:
    @tool
    def f(path: str, limit: int | None) -> Any:
        return limit

    assert params(f)["required"] == ["path"]
    assert f.validate_args({"path": "p"}) == {"path": "p"}


def test_nested_and_recursive_models() -> None:
    @tool
    def f(at: Point, tree: Tree, n: int = 0) -> None: ...

    props = params(f)["properties"]
    assert props["at"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }
    assert props["tree"]["properties"]["kids"]["items"]["properties"]["label"] == {"type": "string"}


def test_descriptions_from_annotated_and_docstring() -> None:
    @tool
    def search(
        pattern: Annotated[str, Field(description="A regular expression.")],
        path: str = ".",
        glob: Annotated[str | None, Field(description="Wins over the docstring.")] = None,
    ) -> list[str]:
        """Search files for a pattern.

        Lines that match are returned with their numbers.

        Args:
            pattern: Ignored: the annotation says it.
            path (str): Where to look,
                relative to the working directory.
            glob: Ignored too.

        Returns:
            Matching lines.
        """
        return []

    d = search.descriptor
    assert d.description == (
        "Search files for a pattern.\n\n"
        "Lines that match are returned with their numbers.\n\n"
        "Returns:\n    Matching lines."
    )
    props = params(search)["properties"]
    assert props["pattern"] == {"type": "string", "description": "A regular expression."}
    assert props["path"] == {
        "type": "string",
        "default": ".",
        "description": "Where to look, relative to the working directory.",
    }
    assert props["glob"] == {"type": "string", "description": "Wins over the docstring."}


def test_explicit_metadata_and_no_docstring() -> None:
    @tool(name="my.tool-1", description="Explicit.", title="My tool", kind="fetch", destructive=True)
    def f(x: int) -> int:
        """Not the description.

        Args:
            x: Still documents x.
        """
        return x

    d = f.descriptor
    assert (d.name, d.description, d.title, d.kind, d.read_only, d.destructive) == (
        "my.tool-1", "Explicit.", "My tool", "fetch", False, True
    )  # fmt: skip
    assert params(f)["properties"]["x"]["description"] == "Still documents x."

    @tool
    def bare(x: int) -> int:
        return x

    assert bare.descriptor.description == ""
    assert bare.name == "bare"


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("delete_note", {}, ("delete", False, True)),
        ("read_note", {}, ("read", False, False)),  # a guessed kind never skips the permission prompt
        ("send_emails", {}, ("other", False, False)),  # whole words only: "ls" is not in "send_emails"
        ("note", {"kind": "read"}, ("read", True, False)),
        ("note", {"kind": "search"}, ("search", True, False)),
        ("note", {"kind": "think"}, ("think", True, False)),
        ("note", {"kind": "fetch"}, ("fetch", False, False)),
        ("delete_note", {"read_only": True}, ("delete", True, False)),
        ("note", {"kind": "read", "read_only": False}, ("read", False, False)),
        ("run_it", {}, ("execute", False, False)),
    ],
)
def test_kind_and_hints_defaults(name: str, kwargs: dict[str, Any], expected: tuple[str, bool, bool]) -> None:
    def f() -> None: ...

    d = tool(name=name, **kwargs)(f).descriptor
    assert (d.kind, d.read_only, d.destructive) == expected


def test_context_parameter_is_injected_not_published() -> None:
    seen: list[Any] = []

    @tool
    def f(a: int, ctx: ToolCallContext, b: int = 2) -> int:
        seen.append(ctx)
        return a + b

    assert set(params(f)["properties"]) == {"a", "b"}
    assert params(f)["required"] == ["a"]


def test_context_imported_only_for_type_checking_is_still_recognised() -> None:
    namespace: dict[str, Any] = {}
    exec("def f(ctx: 'ToolCallContext', x: int) -> int:\n    return x", namespace)
    t = tool(namespace["f"])
    assert set(params(t)["properties"]) == {"x"}


def test_single_model_parameter_is_the_arguments_object() -> None:
    @tool
    def move(to: Point, ctx: ToolCallContext) -> Point:
        return to

    assert params(move) == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }


def test_model_parameter_with_default_or_company_stays_nested() -> None:
    @tool
    def a(to: Point = ORIGIN) -> None: ...

    @tool
    def b(to: Point, speed: int) -> None: ...

    assert set(params(a)["properties"]) == {"to"}
    assert set(params(b)["properties"]) == {"to", "speed"}


def test_parameters_that_would_shadow_pydantic_names() -> None:
    @tool
    def f(json: str, schema: int, _private: int = 0) -> dict[str, Any]:
        return {"json": json, "schema": schema, "_private": _private}

    assert params(f)["properties"] == {
        "json": {"type": "string"},
        "schema": {"type": "integer"},
        "_private": {"type": "integer", "default": 0},
    }
    assert f.validate_args({"json": "j", "schema": 1})


def test_output_schema_for_models_typeddicts_and_dataclasses() -> None:
    class TD(TypedDict):
        a: int

    @dataclass
    class DC:
        b: str

    def returning(ret: Any) -> FunctionTool:
        def f() -> None: ...

        f.__annotations__["return"] = ret
        return tool(f)

    assert returning(Point).descriptor.output_schema == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }
    assert returning(TD).descriptor.output_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }
    assert returning(DC).descriptor.output_schema == {
        "type": "object",
        "properties": {"b": {"type": "string"}},
        "required": ["b"],
    }
    for ret in (str, list[Point], dict[str, int], None, ToolResult):
        assert returning(ret).descriptor.output_schema is None

    class StdTD(typing.TypedDict):
        a: int

    # pydantic describes typing.TypedDict from Python 3.12 on; before, the tool still works, without the schema
    expected = None if sys.version_info < (3, 12) else returning(TD).descriptor.output_schema
    assert returning(StdTD).descriptor.output_schema == expected


def test_schema_built_lazily_so_later_names_resolve() -> None:
    @tool
    def f(p: DefinedAfterTheTool) -> None: ...

    assert params(f)["properties"] == {"n": {"type": "integer"}}

    @tool
    def g(p: NeverDefined) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match=r"'g'.*NeverDefined"):
        _ = g.descriptor


class DefinedAfterTheTool(BaseModel):
    n: int


# -- decoration-time errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "slash/name", "ünïcode", "x" * 65, "<lambda>"])
def test_bad_names_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        tool(name=name)(lambda: None)


def test_lambda_needs_a_name() -> None:
    with pytest.raises(ValueError, match="pass name="):
        tool(lambda: None)
    assert tool(name="x" * 64)(lambda: None).name == "x" * 64


def test_unsupported_functions_rejected() -> None:
    def star(*args: int) -> None: ...

    def stars(**kwargs: int) -> None: ...

    def gen() -> Any:
        yield 1

    for f in (star, stars):
        with pytest.raises(ValueError, match=r"\*args and \*\*kwargs"):
            tool(f)
    with pytest.raises(ValueError, match="generators"):
        tool(gen)
    with pytest.raises(ValueError, match="unknown kind"):
        tool(kind="nope")(star)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="both read-only and destructive"):
        tool(name="x", read_only=True, destructive=True)(lambda: None)


# -- validation ------------------------------------------------------------------------------------------------


@tool
def read_file(path: str, limit: int = 100, line: int | None = None) -> str:
    return f"{path}:{limit}:{line}"


def test_invalid_arguments_name_each_field() -> None:
    with pytest.raises(ToolError) as info:
        read_file.validate_args({"limit": "many"})
    err = info.value
    assert err.kind == "invalid_arguments"
    assert str(err) == (
        "Invalid arguments: path: Field required; "
        "limit: Input should be a valid integer, unable to parse string as an integer"
    )
    assert "pydantic" not in str(err) and "http" not in str(err)
    assert tool_error_result("read_file", err).message == str(err)


def test_unknown_arguments_and_nested_locations() -> None:
    @tool
    def f(points: list[Point], tag: str = "") -> None: ...

    with pytest.raises(ToolError, match=r"^Invalid arguments: points\[1\]\.x: Field required; tagg: Extra inputs"):
        f.validate_args({"points": [{"x": 1}, {"y": 2}], "tagg": "t"})


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(ToolError, match="must be a JSON object, not list"):
        read_file.validate_args([1])  # type: ignore[arg-type]


def test_null_arguments_mean_none_given() -> None:
    @tool
    def f(n: int = 1) -> int:
        return n

    assert f.validate_args(None) == {}
    with pytest.raises(ToolError, match="path: Field required"):
        read_file.validate_args(None)


def test_valid_arguments_returned_as_sent() -> None:
    args = {"path": "a", "limit": "7"}
    assert read_file.validate_args(args) == {"path": "a", "limit": "7"}


# -- execution -------------------------------------------------------------------------------------------------


async def test_sync_runs_in_a_worker_thread_and_async_on_the_loop() -> None:
    loop_thread = threading.get_ident()

    @tool
    def sync_tool() -> int:
        return threading.get_ident()

    @tool
    async def async_tool() -> int:
        return threading.get_ident()

    assert await sync_tool.execute({}, make_ctx()) != loop_thread
    assert await async_tool.execute({}, make_ctx()) == loop_thread


async def test_arguments_are_validated_and_converted_for_the_function() -> None:
    got: dict[str, Any] = {}

    @tool
    def f(ctx: ToolCallContext, n: int, /, color: Color, at: Point, when: int | None, json: str = "") -> str:
        got.update(ctx=ctx, n=n, color=color, at=at, when=when, json=json)
        return "ok"

    ctx = make_ctx()
    assert await f.execute({"n": "3", "color": "red", "at": {"x": 1}, "json": "j"}, ctx) == "ok"
    assert got == {"ctx": ctx, "n": 3, "color": Color.RED, "at": Point(x=1), "when": None, "json": "j"}
    with pytest.raises(ToolError, match="n: Field required"):
        await f.execute({"color": "red", "at": {"x": 1}}, ctx)


async def test_flattened_model_parameter_receives_the_model() -> None:
    @tool
    async def move(ctx: ToolCallContext, to: Point) -> Point:
        return Point(x=to.x + 1, y=to.y)

    assert await move.execute({"x": 1}, make_ctx()) == {"x": 2, "y": 0}
    with pytest.raises(ToolError, match=r"^Invalid arguments: x: Field required$"):
        await move.execute({}, make_ctx())


@dataclass
class Found:
    path: Path
    color: Color


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text", "text"),
        ({"a": [1, 2.5, None, True]}, {"a": [1, 2.5, None, True]}),
        (None, None),
        (Point(x=1), {"x": 1, "y": 0}),
        (Found(Path("a/b"), Color.RED), {"path": "a/b", "color": "red"}),
        ([Point(x=2)], [{"x": 2, "y": 0}]),
        ((1, 2), [1, 2]),
        (object, str(object)),
    ],
)
async def test_return_values_become_json(value: Any, expected: Any) -> None:
    @tool
    def f() -> Any:
        return value

    assert await f.execute({}, make_ctx()) == expected


async def test_results_and_outputs_pass_through() -> None:
    result = ToolResult.error("f", "declined")
    output = ToolOutput(result=ToolResult.success("f", 1))

    @tool
    def f(which: Literal["result", "output"]) -> ToolResult | ToolOutput:
        return result if which == "result" else output

    assert await f.execute({"which": "result"}, make_ctx()) is result
    assert await f.execute({"which": "output"}, make_ctx()) is output


@pytest.mark.parametrize("is_async", [False, True])
async def test_errors_propagate_unchanged(is_async: bool) -> None:
    def boom(kind: str) -> None:
        if kind == "tool":
            raise ToolError("no such note", "not_found")
        raise RuntimeError("disk on fire")

    async def aboom(kind: str) -> None:
        boom(kind)

    t = tool(name="boom")(aboom if is_async else boom)
    with pytest.raises(ToolError) as info:
        await t.execute({"kind": "tool"}, make_ctx())
    assert info.value.kind == "not_found"
    assert tool_error_result("boom", info.value).message == "Not found: no such note"
    with pytest.raises(RuntimeError, match="disk on fire"):
        await t.execute({"kind": "other"}, make_ctx())


async def test_cancelled_sync_tool_is_abandoned_and_sees_the_token() -> None:
    started, stopped = threading.Event(), threading.Event()
    release = threading.Event()

    @tool
    def slow(ctx: ToolCallContext) -> str:
        started.set()
        while not ctx.cancelled:
            release.wait(0.01)
        stopped.set()
        return "stopped"

    ctx = make_ctx()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow.execute, {}, ctx)
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()
    assert ctx.cancelled
    assert await anyio.to_thread.run_sync(stopped.wait, 5)


async def test_sync_tool_reaches_the_loop_for_progress() -> None:
    events: list[AgentEvent] = []

    async def emit(event: AgentEvent) -> None:
        events.append(event)

    @tool
    def chatty(ctx: ToolCallContext) -> str:
        anyio.from_thread.run(ctx.stream_output, "half way")
        return "done"

    assert await chatty.execute({}, make_ctx(emit=emit)) == "done"
    assert events == [ToolCallStreamDelta(id="c1", delta="half way")]


def test_decorated_function_stays_callable_and_is_a_tool() -> None:
    assert isinstance(read_file, Tool)
    assert read_file("p", 2) == "p:2:None"
    assert read_file.__name__ == "read_file"
    assert repr(read_file) == "FunctionTool('read_file')"


def test_redecorating_renames_without_sharing_the_descriptor() -> None:
    assert read_file.descriptor.name == "read_file"
    renamed = tool(name="cat_file", read_only=True)(read_file)
    assert renamed.func is read_file.func
    assert (renamed.descriptor.name, renamed.descriptor.read_only) == ("cat_file", True)
    assert renamed.descriptor.parameters == read_file.descriptor.parameters
