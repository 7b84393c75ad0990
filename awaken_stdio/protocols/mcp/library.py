"""The requests a client reads rather than calls: ``resources/*``, ``prompts/*`` and ``completion/complete``.

``server.py`` routes them here once the app is open; the sources are ``resources.py``, ``prompts.py`` and
``completion.py``. A resource that does not exist is -32002 in the handshake era and -32602 in the 2026 one (which
retired -32002), with the URI in ``data``. Handshake-era subscriptions are per process (one client per stdio server);
2026-era ones live as long as their ``subscriptions/listen`` request (``server.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, JsonRpcError, JsonRpcPeer
from awaken_stdio.protocols.mcp.catalog import InvalidCursor
from awaken_stdio.protocols.mcp.completion import complete
from awaken_stdio.protocols.mcp.params import CompleteParams, GetPromptParams, ListParams, ResourceParams
from awaken_stdio.protocols.mcp.prompts import PromptError, Prompts
from awaken_stdio.protocols.mcp.resources import ResourceNotFound, Resources, Watch
from awaken_stdio.protocols.mcp.wire import Request

if TYPE_CHECKING:
    from awaken_stdio.app.app import App

__all__ = ["RESOURCE_NOT_FOUND", "Library"]

RESOURCE_NOT_FOUND = -32002
# 2026-era cache hints (``ttlMs``, always "private": the files are this user's): lists of files and records change.
RESOURCES_TTL_MS = 10_000
FIXED_TTL_MS = 60_000  # templates and prompts follow the config, fixed for the life of the process
READ_TTL_MS = 0  # a run's record or a file may change at any moment
_LEGACY = "legacy"  # the subscriber key of handshake-era subscriptions


class Library:
    def __init__(self, app: App, peer: JsonRpcPeer, *, page_size: int, poll_s: float) -> None:
        loaded = app.settings.loaded
        self.peer = peer
        self.page_size = page_size
        self.resources = Resources(app.store, app.settings.cwd, loaded.config.mcp.resources, loaded.base_dir)
        self.prompts = Prompts(app.runtime.agents, loaded.config.mcp.prompts, loaded.base_dir, self.resources)
        self.watch = Watch(self.resources.version, poll_s)

    async def list_resources(self, p: ListParams, request: Request) -> dict[str, Any]:
        try:
            resources, next_cursor = await self.resources.page(p.cursor, self.page_size)
        except InvalidCursor:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor") from None
        return _cacheable(_paged("resources", resources, next_cursor), request, RESOURCES_TTL_MS)

    async def list_templates(self, p: ListParams, request: Request) -> dict[str, Any]:
        return _cacheable({"resourceTemplates": [t.listing() for t in self.resources.templates]}, request, FIXED_TTL_MS)

    async def read(self, p: ResourceParams, request: Request) -> dict[str, Any]:
        uri = p.uri
        try:
            return _cacheable({"contents": await self.resources.read(uri)}, request, READ_TTL_MS)
        except ResourceNotFound as exc:
            raise _not_found(uri, exc, request) from None

    async def subscribe(self, p: ResourceParams, request: Request) -> dict[str, Any]:
        uri = p.uri
        if not await self.resources.exists(uri):
            raise _not_found(uri, ResourceNotFound(f"Resource not found: {uri}"), request)
        await self.watch.add(uri, _LEGACY, self._notify_updated)
        return {}

    async def unsubscribe(self, p: ResourceParams, request: Request) -> dict[str, Any]:
        self.watch.remove(p.uri, _LEGACY)
        return {}

    async def listen(self, uris: list[str], key: object, send: Callable[[str], Awaitable[None]]) -> list[str]:
        """Watch ``uris`` for a 2026-era listen stream; the ones honoured (those that exist)."""
        honoured = [uri for uri in uris if await self.resources.exists(uri)]
        for uri in honoured:
            await self.watch.add(uri, key, send)
        return honoured

    def unlisten(self, uris: list[str], key: object) -> None:
        for uri in uris:
            self.watch.remove(uri, key)

    async def list_prompts(self, p: ListParams, request: Request) -> dict[str, Any]:
        try:
            prompts, next_cursor = self.prompts.page(p.cursor, self.page_size)
        except InvalidCursor:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor") from None
        return _cacheable(_paged("prompts", prompts, next_cursor), request, FIXED_TTL_MS)

    async def get_prompt(self, p: GetPromptParams, request: Request) -> dict[str, Any]:
        try:
            return await self.prompts.get(p.name, p.arguments or {})
        except PromptError as exc:
            raise JsonRpcError(INVALID_PARAMS, str(exc)) from None

    async def complete(self, p: CompleteParams, request: Request) -> dict[str, Any]:
        completion = await complete(
            self.prompts, self.resources, ref=p.ref, name=p.argument.name, value=p.argument.value
        )
        return {"completion": completion}

    async def _notify_updated(self, uri: str) -> None:
        await self.peer.notify("notifications/resources/updated", {"uri": uri})


def _paged(key: str, items: list[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {key: items}
    if next_cursor is not None:
        out["nextCursor"] = next_cursor
    return out


def _cacheable(result: dict[str, Any], request: Request, ttl_ms: int) -> dict[str, Any]:
    if request.era == "modern":
        result.update(ttlMs=ttl_ms, cacheScope="private")
    return result


def _not_found(uri: str, exc: ResourceNotFound, request: Request) -> JsonRpcError:
    code = INVALID_PARAMS if request.era == "modern" else RESOURCE_NOT_FOUND
    return JsonRpcError(code, str(exc), {"uri": uri})
