"""A protocol's method table: method -> params model -> handler, checked once when the table is built.

One convention for ACP and MCP: ``async def handler(params: Model, context: C) -> result``, where ``Model`` is the
pydantic model of the method's params and ``C`` the protocol's per-request context (MCP: the admitted ``Request``,
era and envelope; ACP: the peer's ``RequestContext``). A method answered before pydantic loads (MCP's first-answer
methods) has no model: its handler takes the params object as it came, ``dict[str, Any]``, and checks it by hand.

Building a table refuses a handler that is not a coroutine function or whose annotations do not name the model and
the context, so a table that would hand a handler the wrong type fails where it is written, not at a request. A
dispatch validates the params with the model once (a ``ValidationError`` is the peer's precise -32602), and a method
the table does not have is -32601. Standard library only: the tables are built after the first answer, but the
servers that build them load before it.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from awaken_stdio.protocols.jsonrpc_wire import INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcError, one_line

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["Entry", "HandlerTable", "entry", "params_object"]

M = TypeVar("M", bound="BaseModel")
C = TypeVar("C")
Raw = dict[str, Any]  # the params of a method without a model, as they came (an object)


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry(Generic[C]):
    """One method: its params model (``None``: the raw object) and its handler."""

    method: str
    params: type[BaseModel] | None
    handler: Callable[[Any, C], Awaitable[Any]]


@overload
def entry(method: str, params: type[M], handler: Callable[[M, C], Awaitable[Any]]) -> Entry[C]: ...
@overload
def entry(method: str, params: None, handler: Callable[[Raw, C], Awaitable[Any]]) -> Entry[C]: ...
def entry(method: str, params: type[Any] | None, handler: Callable[[Any, C], Awaitable[Any]]) -> Entry[C]:
    """``method`` served by ``handler`` with its params validated by ``params`` (the checker ties the two)."""
    return Entry(method=method, params=params, handler=handler)


class HandlerTable(Generic[C]):
    """The methods one protocol (or one of its versions) serves, each with the context type ``context``."""

    def __init__(self, context: type[C], entries: Iterable[Entry[C]]) -> None:
        self._entries: dict[str, Entry[C]] = {}
        for one in entries:
            if one.method in self._entries:
                raise ValueError(f"{one.method}: a handler is already registered")
            _check(one, context)
            self._entries[one.method] = one

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(self._entries)

    def __contains__(self, method: object) -> bool:
        return method in self._entries

    async def dispatch(self, method: str, params: Any, context: C) -> Any:
        """The handler's answer to ``method`` with ``params`` validated: -32601 when the table has no such method,
        -32602 when the params are not an object or the model refuses them."""
        found = self._entries.get(method)
        if found is None:
            raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {one_line(method)}")
        raw = params_object(params)
        return await found.handler(raw if found.params is None else found.params.model_validate(raw), context)


def params_object(params: Any) -> Raw:
    """The params of a request as an object: none is ``{}``, anything but an object -32602."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: params must be an object")
    return typing.cast(Raw, params)


def _check(one: Entry[Any], context: type[Any]) -> None:
    """Refuse a handler whose signature is not ``(params: <model or Raw>, context: <context>)``, async."""
    handler = one.handler
    where = f"{one.method}: handler {getattr(handler, '__qualname__', handler)!r}"
    if not inspect.iscoroutinefunction(handler):
        raise TypeError(f"{where} is not an async function")
    known: dict[str, Any] = {context.__name__: context}
    if one.params is not None:
        known[one.params.__name__] = one.params
    try:  # in the handler's module, which may import the model and the context for the checker only
        hints = typing.get_type_hints(handler, localns=known)
    except (NameError, TypeError) as exc:
        raise TypeError(f"{where} has annotations that do not resolve at run time: {exc}") from None
    names = [
        p.name
        for p in inspect.signature(handler).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(names) != 2:
        raise TypeError(f"{where} takes {len(names)} positional parameters, not (params, context)")
    wanted = Raw if one.params is None else one.params
    got = hints.get(names[0]), hints.get(names[1])
    if got[0] != wanted:
        raise TypeError(f"{where} takes {names[0]}: {got[0]!r}, but its params model is {wanted!r}")
    if got[1] is not context:
        raise TypeError(f"{where} takes {names[1]}: {got[1]!r}, but the context is {context!r}")
