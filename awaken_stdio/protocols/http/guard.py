"""The door of ``serve``, in front of every route: pure ASGI, so a refused request reaches no handler at all.

In order: the ``Host`` header and any ``Origin`` must name this server (403: a page whose name was re-pointed at
127.0.0.1, DNS rebinding, is turned away even before the token is looked at); then the bearer token (401, for HTTP
requests and WebSocket upgrades alike); then the body's size (413, counted as it streams in, whatever
``Content-Length`` claims). The token is compared in constant time and never written to a log.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Guard", "Policy", "allowed_hosts", "is_loopback"]

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only ever reaches this machine."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """What the door lets in: ``token`` (None: no token asked, loopback only), the host names clients may use
    besides loopback ones, the extra origins a browser page may come from, and the largest body."""

    token: str | None
    hosts: frozenset[str]
    origins: frozenset[str]
    max_body: int

    def host_allowed(self, host: str) -> bool:
        return is_loopback(host) or host.lower() in self.hosts


class Guard:
    """ASGI middleware applying a :class:`Policy` to every HTTP request and WebSocket upgrade."""

    def __init__(self, app: ASGIApp, policy: Policy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(headers)
        if refusal is not None:
            status, message = refusal
            log.warning("refused %s %s: %s", scope.get("method", "WEBSOCKET"), scope.get("path"), message)
            await _refuse(scope, receive, send=send, status=status, message=message)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        await self._sized(scope, receive, send, headers)

    def _refusal(self, headers: Headers) -> tuple[int, str] | None:
        host = _hostname(headers.get("host", ""))
        if host is None or not self.policy.host_allowed(host):
            return 403, "this server does not answer to that Host"
        origin = headers.get("origin")
        if origin is not None and origin not in self.policy.origins:
            origin_host = _hostname(urlsplit(origin).netloc) if origin != "null" else None
            if origin_host is None or not self.policy.host_allowed(origin_host):
                return 403, "requests from that Origin are not accepted"
        if self.policy.token is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self.policy.token.encode()
            ):
                return 401, "a valid bearer token is required (Authorization: Bearer <token>)"
        return None

    async def _sized(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        limit = self.policy.max_body
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(scope, receive, send=send, status=413, message=f"the body exceeds {limit} bytes")
            return
        seen = 0
        started = refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit and not refused:
                    refused = True
                    if not started:
                        await _refuse(scope, receive, send=send, status=413, message=f"the body exceeds {limit} bytes")
                    return {"type": "http.disconnect"}  # the handler sees a client gone, and does nothing
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except Exception:
            if not refused:
                raise


def _hostname(netloc: str) -> str | None:
    """The host of a ``Host`` header or an origin's netloc, without port or brackets; None when malformed."""
    if not netloc:
        return None
    try:
        host = urlsplit(f"//{netloc}").hostname
    except ValueError:
        return None
    return host.lower() if host else None


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="awaken-stdio"'))
    if scope["type"] == "websocket":
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "http.response.start", "status": status, "headers": [*headers, _length(body)]})
    await send({"type": "http.response.body", "body": body})


def _length(body: bytes) -> tuple[bytes, bytes]:
    return (b"content-length", str(len(body)).encode())


def allowed_hosts(names: Collection[str]) -> frozenset[str]:
    return frozenset(name.lower().strip("[]") for name in names)
