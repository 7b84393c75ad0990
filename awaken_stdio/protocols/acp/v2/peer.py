"""The JSON-RPC peer of an ACP connection: v1's, until ``initialize`` negotiates a dialect (v2).

The v1 machinery (``AcpServer``, its turns, permission questions, tools' forms) sends ``session/update``
notifications and the requests that wait for the person (``ASKS``) through the peer; once a dialect is set, those go
through it, which sends their v2 form with the peer's own ``raw_notify`` and ``raw_request``. Everything else is the
plain peer's.
Standard library and anyio only: the peer exists before the first answer.
"""

from __future__ import annotations

from typing import Any, Protocol

from awaken_stdio.protocols.jsonrpc import JsonRpcPeer, Params

__all__ = ["ASKS", "AcpPeer", "Dialect"]

ASKS = frozenset({"session/request_permission", "elicitation/create"})  # requests a person answers


class Dialect(Protocol):
    """What a negotiated protocol version does with the v1 machinery's outbound messages."""

    async def update(self, params: dict[str, Any]) -> None:
        """Send one v1 ``session/update`` (its params) in this dialect."""
        ...

    async def ask(self, method: str, params: dict[str, Any], cancel_method: str | None) -> Any:
        """Send one request of ``ASKS`` (its v1 params) in this dialect; the client's answer."""
        ...


class AcpPeer(JsonRpcPeer):
    dialect: Dialect | None = None

    async def notify(self, method: str, params: Params = None) -> None:
        if self.dialect is not None and method == "session/update" and isinstance(params, dict):
            await self.dialect.update(params)
        else:
            await super().notify(method, params)

    async def request(
        self,
        method: str,
        params: Params = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - as JsonRpcPeer.request
        cancel_method: str | None = None,
    ) -> Any:
        if self.dialect is not None and method in ASKS and isinstance(params, dict):
            return await self.dialect.ask(method, params, cancel_method)
        return await super().request(method, params, timeout=timeout, cancel_method=cancel_method)

    async def raw_notify(self, method: str, params: Params = None) -> None:
        await super().notify(method, params)

    async def raw_request(self, method: str, params: Params = None, *, cancel_method: str | None = None) -> Any:
        return await super().request(method, params, cancel_method=cancel_method)
