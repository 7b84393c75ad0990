"""``awaken-stdio serve``: one process, one app, many network clients (ACP at ``/acp``, MCP at ``/mcp``).

Why uvicorn and Starlette: the ``mcp`` package already depends on them (and on sse-starlette); the one addition is
``websockets``, uvicorn's WebSocket implementation (and the ACP SDK's client's). uvicorn's limits (connections,
keep-alive, WebSocket message size) and Starlette's routing are all this needs, and
every request passes the :class:`~awaken_stdio.protocols.http.guard.Guard` first. None of it is imported by the stdio
modes. Loopback by default; another address is served too, with a warning when nothing says TLS is in front.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute

from awaken_stdio.app.startup import Startup
from awaken_stdio.contract.errors import UsageError
from awaken_stdio.protocols.http.acp_http import AcpEndpoint
from awaken_stdio.protocols.http.guard import Guard, Policy, allowed_hosts, is_loopback
from awaken_stdio.protocols.http.mcp_http import McpEndpoint
from awaken_stdio.protocols.http.token import load_token

if TYPE_CHECKING:
    from awaken_stdio.app.app import Settings

__all__ = ["DEFAULT_LISTEN", "MAX_BODY", "MAX_CONNECTIONS", "Listen", "parse_listen", "serve"]

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:8765"
MAX_BODY = 8 * 1024 * 1024  # bytes of one request body
MAX_CONNECTIONS = 200  # open HTTP connections and WebSockets; more are answered 503
KEEP_ALIVE_S = 30  # an idle keep-alive connection is closed after this


@dataclass(frozen=True, slots=True, kw_only=True)
class Listen:
    host: str
    port: int


def parse_listen(value: str) -> Listen:
    """``HOST:PORT``, ``[v6]:PORT`` or ``:PORT`` (loopback); a precise ``UsageError`` otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen {value!r}: expected HOST:PORT (e.g. {DEFAULT_LISTEN})")
    host = host.strip("[]") or "127.0.0.1"
    return Listen(host=host, port=int(port))


def serve(args: argparse.Namespace) -> int:
    """The ``serve`` command; exits 2 for a bad option, config or token, else when stopped (SIGINT, SIGTERM)."""
    startup = Startup.from_args(args)
    listen = parse_listen(args.listen or DEFAULT_LISTEN)
    loopback = is_loopback(listen.host)
    if args.no_token:
        if not loopback:
            raise UsageError("--no-token is for a loopback address only")
        token = None
        _say("warning: --no-token: any local program can use this server")
    else:
        try:
            token, source = load_token()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        _say(f"the bearer token is in {source}")
    if not loopback:
        _say(
            f"warning: serving {listen.host}, beyond this machine, over plain HTTP: put a TLS reverse proxy "
            "in front (see the README, 'Over the network')"
        )
    hosts = list(args.allow_host or [])
    if not loopback and listen.host not in ("0.0.0.0", "::"):
        hosts.append(listen.host)
    policy = Policy(
        token=token, hosts=allowed_hosts(hosts), origins=frozenset(args.allow_origin or []), max_body=MAX_BODY
    )
    settings = startup.settings()
    return anyio.run(_serve, startup, settings, listen, policy, backend="asyncio")


def _say(text: str) -> None:
    """One line for the person who started the server (stderr; never a secret)."""
    sys.stderr.write(f"awaken-stdio: {text}\n")
    sys.stderr.flush()


async def _serve(startup: Startup, settings: Settings, listen: Listen, policy: Policy) -> int:
    from awaken_stdio.app.app import open_app

    async with open_app(settings) as app, anyio.create_task_group() as tg:
        mcp = McpEndpoint(startup, app, tg)
        acp = AcpEndpoint(startup, app, tg)
        routes = [
            Route("/mcp", mcp.handle, methods=["GET", "POST", "DELETE"]),
            Route("/acp", acp.handle, methods=["GET", "POST", "DELETE"]),
            WebSocketRoute("/acp", acp.socket),
        ]
        asgi = Guard(Starlette(routes=routes), policy)
        config = uvicorn.Config(
            asgi,
            host=listen.host,
            port=listen.port,
            log_config=None,
            access_log=False,
            lifespan="off",
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=KEEP_ALIVE_S,
            ws="websockets-sansio",
            ws_max_size=MAX_BODY,
            server_header=False,
        )
        server = uvicorn.Server(config)
        tg.start_soon(mcp.reap)
        tg.start_soon(acp.reap)
        tg.start_soon(_announce, server)
        try:
            await server.serve()
        finally:
            mcp.close()
            acp.close()
            tg.cancel_scope.cancel()
    return 0


async def _announce(server: uvicorn.Server) -> None:
    """One stderr line once listening, naming the bound port (``--listen HOST:0`` picks a free one)."""
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for this
        await anyio.sleep(0.02)
    for listener in server.servers:
        for sock in listener.sockets:
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            _say(f"serving ACP at http://{shown}:{port}/acp (and ws://) and MCP at http://{shown}:{port}/mcp")
