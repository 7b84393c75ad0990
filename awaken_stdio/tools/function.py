"""``@tool``: a plain Python function as a tool.

The function's signature is the tool's contract: its type hints become a pydantic model that both publishes a
portable JSON Schema and validates the model's arguments, its docstring becomes the description. What it does not
do: decide whether a call may run (the runtime's permission gate) or turn exceptions into failed results (the
runtime's executor, through ``tool_error_result``).

::

    @tool(kind="read")
    def read_notes(topic: str, limit: int = 10) -> list[str]:
        '''The notes saved under a topic, newest first.

        Args:
            topic: The topic's name.
            limit: At most this many notes.
        '''
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, is_dataclass
from typing import Annotated, Any, get_args, get_origin, overload

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python
from typing_extensions import is_typeddict

from awaken_stdio.contract.content import CONTENT_TYPES, is_content
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.preview import ToolPreview
from awaken_stdio.contract.tools import (
    Tool,
    ToolCallContext,
    ToolDescriptor,
    ToolKind,
    ToolOutput,
    ToolResult,
    infer_tool_kind,
)
from awaken_stdio.tools.schema import portable_schema

__all__ = ["FunctionTool", "tool"]

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_KINDS = frozenset(get_args(ToolKind))
# Only an author's explicit kind makes a tool read-only by default: kinds guessed from names are too loose to skip
# the permission prompt on ("send_emails" contains "ls").
_READ_ONLY_KINDS = frozenset({"read", "search", "think"})
# Unknown arguments are an error the model can fix, rather than silently ignored ("limt" for "limit").
_ARGS_CONFIG = ConfigDict(extra="forbid", protected_namespaces=())


class FunctionTool(Tool):
    """A tool made from a function; ``@tool`` builds it. Calling it calls the function.

    Async functions run on the event loop; sync ones in a worker thread, abandoned when the call is cancelled (the
    function sees ``ctx.cancelled`` turn true and should return; ``anyio.from_thread.run`` reaches the loop, e.g. for
    ``ctx.report_progress``). Parameters annotated ``ToolCallContext`` receive the call's context and are not in the
    schema. When the only other parameter is a pydantic model without a default, its fields are the tool's
    arguments (the "arguments model" style) instead of one nested object. A parameter typed ``X | None`` without a
    default defaults to ``None``, so the model may leave it out.

    The argument model and the schemas are built on first use: importing a module full of tools stays cheap and
    type hints may name classes defined later in the module.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        kind: ToolKind | None = None,
        read_only: bool | None = None,
        destructive: bool | None = None,
        title: str | None = None,
    ) -> None:
        if isinstance(func, FunctionTool):  # re-decorating (e.g. to rename) wraps the function, not the tool
            func = func.func
        name = name if name is not None else str(getattr(func, "__name__", ""))
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"invalid tool name {name!r}: use 1-64 letters, digits, '_', '.' or '-' (pass name=... to @tool)"
            )
        if kind is not None and kind not in _KINDS:
            raise ValueError(f"tool {name!r}: unknown kind {kind!r}; one of {', '.join(sorted(_KINDS))}")
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise ValueError(f"tool {name!r}: generators are not supported; return the whole result")
        for p in inspect.signature(func).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ValueError(f"tool {name!r}: *args and **kwargs have no schema; name every parameter")
        if read_only and destructive:
            raise ValueError(f"tool {name!r} cannot be both read-only and destructive")
        functools.update_wrapper(self, func)
        self.func = func
        self._name = name
        self._kind: ToolKind = kind if kind is not None else infer_tool_kind(name)
        self._read_only = read_only if read_only is not None else kind in _READ_ONLY_KINDS
        self._destructive = destructive if destructive is not None else (self._kind == "delete" and not read_only)
        self._title = title
        summary, self._param_docs = parse_docstring(inspect.getdoc(func))
        self._description = description if description is not None else summary
        self._is_async = inspect.iscoroutinefunction(func)
        self._previewer: Callable[..., Awaitable[ToolPreview | None]] | None = None

    @property
    def name(self) -> str:
        return self._name

    @functools.cached_property
    def _signature(self) -> _Signature:
        return _Signature.build(self.func, self._name, self._param_docs)

    @functools.cached_property
    def descriptor(self) -> ToolDescriptor:  # pyright: ignore[reportIncompatibleVariableOverride]  # read-only, as declared
        sig = self._signature
        return ToolDescriptor(
            name=self._name,
            description=self._description,
            parameters=portable_schema(sig.model.model_json_schema()),
            kind=self._kind,
            read_only=self._read_only,
            destructive=self._destructive,
            title=self._title,
            output_schema=sig.output_schema(),
        )

    def validate_args(self, args: dict[str, Any] | None) -> dict[str, Any]:
        """Check ``args`` against the signature; return them as sent (``None`` as ``{}``).

        They are not returned normalised, so the arguments the runtime records are the model's own and a
        non-idempotent validator never runs on its own output. The copy returned carries the validated model, which
        the next ``execute`` of this tool uses instead of validating the same input again.
        """
        instance = self._signature.validate(args)
        return _CheckedArgs(self._signature, instance, {} if args is None else args)

    async def execute(self, args: dict[str, Any] | None, ctx: ToolCallContext) -> Any:
        """Call the function; its return value is made JSON-ready unless it already is a result."""
        posargs, kwargs = self._bound(args, ctx)
        try:
            if self._is_async:
                value = await self.func(*posargs, **kwargs)
            else:
                call = functools.partial(self.func, *posargs, **kwargs)
                value = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            ctx.cancel.cancel()  # an abandoned thread keeps running: tell it to stop
            raise
        if is_content(value):  # images, audio, resources: kept as blocks, not turned into JSON
            return ToolResult.rich(self._name, value)
        return _json_ready(value)

    def previewer(
        self, func: Callable[..., Awaitable[ToolPreview | None]]
    ) -> Callable[..., Awaitable[ToolPreview | None]]:
        """Decorate the async function that describes a call before it runs (see ``Tool.preview``). It takes the
        tool's own parameters (the context included) and returns a ``ToolPreview`` or None::

            @write_file.previewer
            async def _(ctx: ToolCallContext, path: str, content: str) -> ToolPreview: ...
        """
        if not inspect.iscoroutinefunction(func):
            raise ValueError(f"tool {self._name!r}: a previewer must be an async function")
        self._previewer = func
        return func

    async def preview(self, args: dict[str, Any] | None, ctx: ToolCallContext) -> ToolPreview | None:
        if self._previewer is None:
            return None
        posargs, kwargs = self._bound(args, ctx)
        return await self._previewer(*posargs, **kwargs)

    def _bound(self, args: dict[str, Any] | None, ctx: ToolCallContext) -> tuple[list[Any], dict[str, Any]]:
        """The function's arguments: the model ``validate_args`` checked (validated again only when there is none)."""
        sig = self._signature
        instance = args.take(sig) if isinstance(args, _CheckedArgs) else None
        return sig.call_args(instance if instance is not None else sig.validate(args), ctx)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self._name!r})"


@overload
def tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    title: str | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    title: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make ``func`` a tool, as ``@tool`` or ``@tool(name=..., kind=...)``.

    Args:
        func: The function (when used bare).
        name: The tool's name, default the function's; 1-64 of ``[A-Za-z0-9_.-]``.
        description: What the model reads, default the docstring without its ``Args:`` section.
        kind: The ACP tool kind, default guessed from the name.
        read_only: Whether the tool changes nothing (read-only tools run without asking); default true only for
            an explicit kind ``read``, ``search`` or ``think``.
        destructive: Whether it may destroy data; default true for the kind ``delete``.
        title: A human-readable name for clients' UIs.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f, name=name, description=description, kind=kind, read_only=read_only, destructive=destructive, title=title
        )

    return wrap if func is None else wrap(func)


# -- signature -> model ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Param:
    name: str  # in the signature and in the JSON arguments
    field: str  # in the pydantic model: differs when the name would shadow a BaseModel attribute


@dataclass(frozen=True, slots=True, kw_only=True)
class _Signature:
    model: type[BaseModel]
    params: tuple[_Param, ...]
    context_params: tuple[str, ...]
    positional_only: tuple[str, ...]  # in signature order, context parameters included
    flat: bool  # the model is the single parameter's own type: the arguments object *is* that parameter
    returns: Any

    @staticmethod
    def build(func: Callable[..., Any], tool_name: str, docs: dict[str, str]) -> _Signature:
        # A context imported only under TYPE_CHECKING still resolves; the module's own names win.
        globalns = {"ToolCallContext": ToolCallContext, **getattr(func, "__globals__", {})}
        try:
            hints = typing.get_type_hints(func, globalns=globalns, include_extras=True)
        except NameError as exc:
            raise TypeError(f"tool {tool_name!r}: cannot resolve the type hints of its function: {exc}") from exc
        params: list[tuple[inspect.Parameter, Any]] = []
        context: list[str] = []
        parameters = inspect.signature(func).parameters.values()
        for p in parameters:
            hint = hints.get(p.name, Any)
            if _is_context(hint):
                context.append(p.name)
            else:
                params.append((p, hint))
        returns = hints.get("return")
        posonly = tuple(p.name for p in parameters if p.kind is p.POSITIONAL_ONLY)
        if len(params) == 1 and params[0][0].default is inspect.Parameter.empty:
            p, hint = params[0]
            model_type = _unannotated(hint)
            if isinstance(model_type, type) and issubclass(model_type, BaseModel):
                return _Signature(
                    model=model_type,
                    params=(_Param(name=p.name, field=p.name),),
                    context_params=tuple(context),
                    positional_only=posonly,
                    flat=True,
                    returns=returns,
                )
        fields: dict[str, Any] = {}
        out: list[_Param] = []
        taken = {p.name for p, _ in params}
        for p, hint in params:
            field = _field_name(p.name, taken)
            taken.add(field)
            info: dict[str, Any] = {}
            if field != p.name:
                info["alias"] = p.name
            if p.name in docs and not _has_description(hint):
                info["description"] = docs[p.name]
            default = p.default
            if default is inspect.Parameter.empty:
                default = None if _is_optional(hint) else ...
            fields[field] = (hint, Field(default, **info))
            out.append(_Param(name=p.name, field=field))
        model = create_model(f"{tool_name}_arguments", __config__=_ARGS_CONFIG, **fields)
        return _Signature(
            model=model,
            params=tuple(out),
            context_params=tuple(context),
            positional_only=posonly,
            flat=False,
            returns=returns,
        )

    def validate(self, args: Any) -> BaseModel:
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ToolFailure(f"the arguments must be a JSON object, not {type(args).__name__}", "invalid_arguments")
        try:
            return self.model.model_validate(args)
        except ValidationError as exc:
            raise ToolFailure(explain_validation_error(exc), "invalid_arguments") from None

    def call_args(self, instance: BaseModel, ctx: ToolCallContext) -> tuple[list[Any], dict[str, Any]]:
        values = {p.name: instance if self.flat else getattr(instance, p.field) for p in self.params}
        values.update(dict.fromkeys(self.context_params, ctx))
        posargs = [values.pop(name) for name in self.positional_only]
        return posargs, values

    def output_schema(self) -> dict[str, Any] | None:
        """A schema for returns typed as a model, dataclass or TypedDict: the objects MCP can check.

        The schema is an optional extra, so a return type pydantic cannot describe (``typing.TypedDict`` before
        Python 3.12) means no schema rather than a tool that cannot be listed.
        """
        ret = _unannotated(self.returns)
        if not isinstance(ret, type) or issubclass(ret, (ToolResult, ToolOutput, *CONTENT_TYPES)):
            return None
        if not (issubclass(ret, BaseModel) or is_dataclass(ret) or is_typeddict(ret)):
            return None
        try:
            return portable_schema(TypeAdapter(ret).json_schema(mode="serialization"))
        except PydanticUserError:
            return None


class _CheckedArgs(dict[str, Any]):
    """Arguments ``validate_args`` accepted, with their validated model for one ``execute`` of the same tool.

    Used once: executing the same arguments again validates afresh, as the function may have changed the model.
    """

    __slots__ = ("_instance", "_signature")

    def __init__(self, signature: _Signature, instance: BaseModel, args: dict[str, Any]) -> None:
        super().__init__(args)
        self._signature: _Signature | None = signature
        self._instance = instance

    def take(self, signature: _Signature) -> BaseModel | None:
        if self._signature is not signature:
            return None
        self._signature = None
        return self._instance


def explain_validation_error(exc: ValidationError) -> str:
    """One line naming each bad field and what is wrong with it, for the model to fix its call."""
    parts: list[str] = []
    for err in exc.errors(include_url=False, include_context=False, include_input=False):
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in err["loc"]).lstrip(".")
        parts.append(f"{where}: {err['msg']}" if where else err["msg"])
    return "; ".join(parts)


def _field_name(name: str, taken: set[str]) -> str:
    """A model field for parameter ``name``; pydantic refuses names that start with '_' or shadow its own."""
    if not name.startswith("_") and not hasattr(BaseModel, name):
        return name
    field = "arg_" + name.lstrip("_")
    while field in taken or hasattr(BaseModel, field):
        field += "_"
    return field


def _unannotated(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _is_context(hint: Any) -> bool:
    hint = _unannotated(hint)
    return isinstance(hint, type) and issubclass(hint, ToolCallContext)


def _is_optional(hint: Any) -> bool:
    hint = _unannotated(hint)
    return get_origin(hint) in (typing.Union, types.UnionType) and type(None) in get_args(hint)


def _has_description(hint: Any) -> bool:
    if get_origin(hint) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in hint.__metadata__)


def _json_ready(value: Any) -> Any:
    """Results and plain JSON pass through; models, dataclasses, paths, dates... become JSON values."""
    if isinstance(value, ToolResult | ToolOutput):
        return value
    return to_jsonable_python(value, fallback=str)


# -- docstrings ------------------------------------------------------------------------------------------------

_ARGS_HEADER = re.compile(r"(?P<indent>\s*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):\s*")
_ARG_LINE = re.compile(r"\*{0,2}(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the description and the ``Args:`` entries.

    The description is everything but the ``Args:`` section (other sections such as ``Returns:`` tell the model
    something useful); each entry's continuation lines join its first line with single spaces.
    """
    if not doc:
        return "", {}
    kept: list[str] = []
    params: dict[str, str] = {}
    lines = inspect.cleandoc(doc).splitlines()
    i = 0
    while i < len(lines):
        header = _ARGS_HEADER.fullmatch(lines[i])
        if header is None:
            kept.append(lines[i])
            i += 1
            continue
        depth = len(header["indent"])
        i += 1
        current: str | None = None
        entry_depth = -1
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > depth):
            entry = _ARG_LINE.fullmatch(lines[i].strip())
            if entry and (current is None or _indent(lines[i]) <= entry_depth):
                current, entry_depth = str(entry["name"]), _indent(lines[i])
                params[current] = entry["text"].strip()
            elif current is not None and lines[i].strip():
                params[current] = f"{params[current]} {lines[i].strip()}".strip()
            i += 1
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return description, params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
