"""MCP servers as toolsets: the tools of stdio and streamable-HTTP MCP servers as ``Tool`` objects.

One module serves both sources of servers, ``[mcp_servers]`` in the config (``app/assemble.py`` makes their specs)
and ACP ``session/new`` ``mcpServers``::

    specs = [McpServerSpec.from_acp(entry, cwd=session_cwd) for entry in params["mcpServers"]]
    async with open_mcp_toolsets(specs, on_change=refresh) as toolsets:
        for tool in toolsets.tools():
            runtime.add_tool(tool, replace=True)

What it owns: every connection, each run by one supervisor task (the SDK's cancel scopes are bound to the task that
entered them, so a session must be entered and left in the same task). All servers connect concurrently, each under
its own timeout; a server that fails to start or dies is reported in its ``McpServerStatus``, its tools are
withdrawn, and it is restarted with a bounded exponential backoff. Stdio servers run in their own process group with
an allow-listed environment (never our API keys); their stderr goes to our logger, and on exit the whole group is
ended (stdin closed, SIGTERM, SIGKILL), so no grandchild outlives us; should we die first, even by kill -9, the
process guard (``_processes.py``) ends it.

What it does not do: decide whether a call may run (the runtime's permission gate) or publish anything
(``protocols/``). ``mcp`` is imported inside functions only: it costs about half a second, which the ACP path must
not pay before it answers ``initialize``.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import shutil
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from awaken_stdio.contract.errors import ConfigError, ToolFailure
from awaken_stdio.contract.tools import EMPTY_SCHEMA, Tool, ToolCallContext, ToolDescriptor, ToolResult, infer_tool_kind
from awaken_stdio.tools._processes import open_session_process, release_session, stop_process_group, wait_until
from awaken_stdio.tools.schema import PortabilityError, portable_schema

if TYPE_CHECKING:
    import mcp_types
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client.session import ClientSession
    from mcp.shared.message import SessionMessage

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "McpServerSpec",
    "McpServerState",
    "McpServerStatus",
    "McpTool",
    "McpToolsets",
    "RestartPolicy",
    "open_mcp_toolsets",
    "server_environment",
]

logger = logging.getLogger(__name__)

McpServerState = Literal["connecting", "ready", "failed", "stopped"]

# What a stdio server inherits from us; everything else (API keys, tokens) stays here. The SDK's own default list is
# narrower (no locale, temp dir, proxies or CA bundles), which breaks servers behind a proxy or printing non-ASCII.
_ENV_ALLOW = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
        "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        # Windows: programs fail in odd ways without these.
        "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "APPDATA", "LOCALAPPDATA", "USERPROFILE",
        "USERNAME", "HOMEDRIVE", "HOMEPATH", "PROGRAMDATA", "PROGRAMFILES", "PROCESSOR_ARCHITECTURE",
    }
)  # fmt: skip
_ENV_ALLOW_PREFIXES = ("LC_",)
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 64  # model APIs cap tool names at 64 characters
_MAX_PAGES = 1000  # a server whose cursors never end cannot hang a listing
_MAX_LINE = 32 * 1024 * 1024  # one JSON-RPC message from a stdio server
_MAX_LOG_LINE = 64 * 1024  # one stderr line; longer ones are logged in pieces
_EXIT_CODE_WAIT_S = 1.0  # after stdout EOF, how long to wait for the exit code that explains it
_STDERR_TAIL, _STDERR_TAIL_CHARS = 3, 200  # the stderr lines a failed start is reported with
_DRAIN_S = 0.5  # after the group is gone, how long its last stderr lines may take to arrive
DEFAULT_CALL_TIMEOUT_S = 300.0  # a tool call's answer; the config's default, and the one of ACP session servers


# -- specs -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """How to reach one MCP server: a program to start (``stdio``) or a streamable-HTTP endpoint (``http``).

    ``env`` and ``headers`` are left out of the repr: they carry tokens. ``timeout_s`` bounds connecting, the
    handshake and each full listing; ``call_timeout_s`` each tool call (then cancelled on the server);
    ``stop_grace_s`` is each step of the shutdown escalation.
    """

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = 30.0
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    stop_grace_s: float = 2.0

    def __post_init__(self) -> None:
        where = f"MCP server {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("an MCP server needs a non-empty name")
        if self.transport == "stdio":
            if not self.command or self.url is not None:
                raise ConfigError(f"{where}: a stdio server needs a `command` and no `url`")
        elif self.transport == "http":
            if not self.url or not self.url.startswith(("http://", "https://")) or self.command is not None:
                raise ConfigError(f"{where}: an http server needs an http(s) `url` and no `command`")
        else:
            raise ConfigError(f"{where}: unsupported transport {self.transport!r} (use stdio or http)")
        if not self.timeout_s > 0 or not self.call_timeout_s > 0 or not self.stop_grace_s > 0:
            raise ConfigError(f"{where}: timeouts must be positive")

    @classmethod
    def from_acp(cls, entry: Any, *, cwd: str | None = None, timeout_s: float = 30.0) -> McpServerSpec:
        """The spec of one ACP ``session/new`` ``mcpServers`` entry.

        stdio ``{name, command, args, env: [{name, value}]}`` (``type`` absent or ``"stdio"``) or http ``{type:
        "http", name, url, headers: [{name, value}]}``. ACP gives stdio servers no working directory: the session's
        ``cwd`` is used. Anything else (``sse`` included) is a ``ConfigError`` the protocol layer answers -32602.
        """
        if not isinstance(entry, Mapping):
            raise ConfigError("mcpServers: each entry must be an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("mcpServers: each entry needs a non-empty string `name`")
        where = f"mcpServers[{name!r}]"
        kind = entry.get("type", "stdio")
        if kind == "http":
            url = entry.get("url")
            if not isinstance(url, str):
                raise ConfigError(f"{where}: an http server needs a string `url`")
            headers = _name_values(entry.get("headers", []), f"{where}.headers")
            return cls(name, "http", url=url, headers=headers, timeout_s=timeout_s)
        if kind != "stdio":
            raise ConfigError(f"{where}: unsupported MCP transport {kind!r} (stdio and http are supported)")
        command, args = entry.get("command"), entry.get("args", [])
        if not isinstance(command, str) or not command:
            raise ConfigError(f"{where}: a stdio server needs a string `command`")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{where}: `args` must be a list of strings")
        env = _name_values(entry.get("env", []), f"{where}.env")
        return cls(name, "stdio", command=command, args=tuple(args), env=env, cwd=cwd, timeout_s=timeout_s)


def _name_values(items: Any, where: str) -> dict[str, str]:
    if not isinstance(items, list):
        raise ConfigError(f"{where} must be a list of {{name, value}} objects")
    out: dict[str, str] = {}
    for item in items:
        if not (isinstance(item, Mapping) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)):
            raise ConfigError(f"{where}: each entry must be {{name: string, value: string}}")
        out[item["name"]] = item["value"]
    return out


def server_environment(extra: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a stdio server: the allow-listed variables of ours, then the spec's own.

    Shell functions exported by bash (values starting with ``()``) are not passed on.
    """
    source = os.environ if environ is None else environ
    env = {
        key: value
        for key, value in source.items()
        if (key in _ENV_ALLOW or key.startswith(_ENV_ALLOW_PREFIXES)) and not value.startswith("()")
    }
    env.update(extra)
    return env


def _missing_command(spec: McpServerSpec) -> str | None:
    """Why a stdio server's program cannot be started at all (not found on its PATH, or not executable), or None."""
    if spec.command is None:
        return None
    command = spec.command
    if os.sep in command and spec.cwd:
        command = os.path.join(spec.cwd, command)  # what the child resolves it against (absolute paths stay)
    if shutil.which(command, path=server_environment(spec.env).get("PATH", os.defpath)) is not None:
        return None
    return f"command not found: {spec.command} (install it, or give its absolute path as `command`)"


# -- status and policy -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class McpServerStatus:
    """What ``doctor``, ACP and MCP report about one server.

    ``error`` is the last failure (kept while reconnecting, cleared once ready); ``retry_in_s`` is set while a
    restart is scheduled, and ``None`` in ``failed`` once the restart policy gave up. ``stopped``: closed.
    """

    name: str
    transport: str
    state: McpServerState
    error: str | None = None
    tools: tuple[str, ...] = ()
    restarts: int = 0
    retry_in_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "error": self.error,
            "tools": list(self.tools),
            "restarts": self.restarts,
            "retry_in_s": self.retry_in_s,
        }


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """When a failed server is tried again: ``initial_s`` doubling up to ``max_s``, at most ``max_failures`` in a row.

    A connection that stayed up ``stable_s`` resets the count, so a server that crashes right after starting
    cannot restart forever while one that dies once a day always comes back.
    """

    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0
    max_failures: int = 8
    stable_s: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.max_s, self.initial_s * self.factor ** max(failures - 1, 0))


# -- tools -------------------------------------------------------------------------------------------------------


def _safe_name(text: str) -> str:
    return _UNSAFE_NAME.sub("_", text)


def _exposed_name(prefix: str, remote: str, taken: set[str]) -> str:
    """``<server>__<tool>`` within ``[A-Za-z0-9_.-]{1,64}``; a digest of the original keeps cut or clashing names
    apart."""
    name = f"{prefix}__{_safe_name(remote)}"
    if len(name) > _MAX_NAME or name in taken:
        digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - len(digest) - 1]}_{digest}"
    taken.add(name)
    return name


class McpTool(Tool):
    """One tool of an MCP server; calling it forwards ``tools/call`` over the server's current connection.

    Progress notifications become ``ctx.report_progress``; cancelling the call (the run's cancel scope or
    ``ctx.cancel``) abandons the request and the SDK sends the server ``notifications/cancelled``, as it does when
    no answer came within the server's ``call_timeout_s`` (the call then fails with a timeout).
    """

    def __init__(self, server: _Server, remote: mcp_types.Tool, name: str) -> None:
        self.server_name = server.spec.name
        self.remote_name = remote.name
        self._server = server
        annotations = remote.annotations
        read_only = bool(annotations and annotations.read_only_hint)
        self.descriptor = ToolDescriptor(
            name=name,
            description=remote.description or "",
            parameters=_portable_input(server.spec.name, remote),
            kind=infer_tool_kind(remote.name),
            read_only=read_only,
            # Explicit only: MCP's default (destructive unless read-only) would flag nearly every third-party tool.
            destructive=bool(annotations and annotations.destructive_hint) and not read_only,
            title=remote.title or (annotations.title if annotations else None),
            output_schema=_portable_output(remote.output_schema),
            metadata={"mcp_server": self.server_name, "mcp_tool": remote.name},
        )

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        link = self._server.link
        if link is None or link.session is None:
            raise ToolFailure(
                f"MCP server {self.server_name} is not connected: {self._server.status.error or 'starting'}"
            )

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.report_progress("running", message or "", progress=value, total=total)

        result: mcp_types.CallToolResult | None = None
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_token, ctx, tg.cancel_scope)
            try:
                result = await link.session.call_tool(
                    self.remote_name,
                    args,
                    read_timeout_seconds=self._server.spec.call_timeout_s,
                    progress_callback=progress,
                )
            except Exception as exc:  # raised below, outside the task group that would wrap it in a group
                failure = exc
            tg.cancel_scope.cancel()
        if failure is not None:
            raise self._call_error(failure, link) from failure
        if result is None:
            raise ToolFailure("the call was cancelled", "cancelled")
        return _tool_result(self.name, result)

    def _call_error(self, exc: Exception, link: _Link) -> ToolFailure:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
            limit = self._server.spec.call_timeout_s
            return ToolFailure(
                f"MCP server {self.server_name}: tool {self.remote_name} did not answer within {limit:g} s "
                "(call_timeout_s); the call was cancelled",
                "timeout",
            )
        if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            link.lose("the connection closed during a call")
            reason = "the connection closed during the call"
        elif isinstance(exc, MCPError):
            return ToolFailure(f"MCP server {self.server_name} answered error {exc.code}: {exc.message}")
        elif isinstance(exc, (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)):
            reason = _describe(exc)
            link.lose(reason)
        else:
            return ToolFailure(f"MCP server {self.server_name}: the call failed: {_describe(exc)}")
        return ToolFailure(f"MCP server {self.server_name} is not connected: {reason}")


async def _cancel_on_token(ctx: ToolCallContext, scope: anyio.CancelScope) -> None:
    """Cooperative cancellation (``ctx.cancel``) reaches the SDK call as a scope cancellation."""
    await ctx.cancel.wait()
    scope.cancel()


def _portable_input(server: str, remote: mcp_types.Tool) -> dict[str, Any]:
    schema = dict(remote.input_schema or {})
    schema.setdefault("type", "object")
    try:
        return portable_schema(schema)
    except PortabilityError as exc:
        # The server validates its own arguments; the model loses the shape, not the tool.
        logger.warning(
            "%s: tool %r: input schema not portable (%s); offering it without parameters", server, remote.name, exc
        )
        return dict(EMPTY_SCHEMA)


def _portable_output(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    try:
        return portable_schema(schema)
    except PortabilityError:
        return None


def _content_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}]"
    if kind == "resource_link":
        return f"[resource: {block.uri}]"
    if kind == "resource":
        text = getattr(block.resource, "text", None)
        return str(text) if text is not None else f"[resource: {block.resource.uri}]"
    return f"[{kind} content]"


def _tool_result(name: str, result: mcp_types.CallToolResult) -> ToolResult:
    """``isError`` becomes a failed result with the server's text; structured content is the data, text the
    message."""
    text = "\n".join(_content_text(block) for block in result.content)
    structured = result.structured_content
    if result.is_error:
        return ToolResult.error(name, text or "the MCP tool failed without a message", data=structured)
    if structured is not None:
        return ToolResult.success(name, data=structured, message=text or None)
    return ToolResult.success(name, data=text, message=text)


# -- connections -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lost:
    reason: str


_RELIST: Literal["relist"] = "relist"
_Signal = _Lost | Literal["relist"]


@dataclass(slots=True, eq=False)
class _Link:
    """One connection attempt: its session once ready, and how everyone tells its supervisor what happened."""

    signals: MemoryObjectSendStream[_Signal]
    session: ClientSession | None = None
    ready: bool = False
    lost_reason: str | None = None
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=_STDERR_TAIL))

    def lose(self, reason: str) -> None:
        if self.lost_reason is None:
            self.lost_reason = reason
        self._send(_Lost(reason))

    def failure(self, exc: BaseException) -> str:
        """Why the connection could not be made, with the server's last words: "it exited with code 2 (stderr:
        missing configuration)" says more than the handshake's "Connection closed"."""
        reason = self.lost_reason or _describe(exc)
        if self.stderr_tail:
            reason += f" (stderr: {' | '.join(self.stderr_tail)})"
        return reason

    def relist(self) -> None:
        self._send(_RELIST)

    def _send(self, signal: _Signal) -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.signals.send_nowait(signal)


@dataclass(slots=True, eq=False)
class _Server:
    spec: McpServerSpec
    prefix: str
    status: McpServerStatus
    tools: dict[str, McpTool] = field(default_factory=dict)
    link: _Link | None = None
    settled: anyio.Event = field(default_factory=anyio.Event)


OnChange = Callable[[McpServerStatus], Awaitable[None]]


class McpToolsets:
    """Every configured MCP server's connection and tools. Build it with ``open_mcp_toolsets`` or ``run`` it.

    ``on_change`` is awaited after each status change (connecting, ready, failed, a new listing) that happens once
    the first connections are settled; read the new tool set from ``tools()``. It runs in the server's supervisor:
    a slow callback delays that server only, and an exception is logged, not raised.
    """

    def __init__(
        self, specs: Iterable[McpServerSpec], *, on_change: OnChange | None = None, restart: RestartPolicy | None = None
    ) -> None:
        self._on_change = on_change
        self._restart = restart or RestartPolicy()
        self._servers: dict[str, _Server] = {}
        self._started = False
        prefixes: dict[str, str] = {}
        for spec in specs:
            prefix = _safe_name(spec.name)
            if prefix in prefixes:
                raise ConfigError(
                    f"MCP servers {prefixes[prefix]!r} and {spec.name!r} have the same tool prefix {prefix!r}"
                )
            prefixes[prefix] = spec.name
            self._servers[spec.name] = _Server(spec, prefix, McpServerStatus(spec.name, spec.transport, "connecting"))

    def tools(self) -> list[Tool]:
        """The tools of every ready server, sorted by name."""
        tools = [tool for server in self._servers.values() for tool in server.tools.values()]
        return sorted(tools, key=lambda t: t.name)

    def statuses(self) -> list[McpServerStatus]:
        return [server.status for server in self._servers.values()]

    def status(self, name: str) -> McpServerStatus:
        return self._servers[name].status

    async def run(self, *, task_status: anyio.abc.TaskStatus[McpToolsets] = anyio.TASK_STATUS_IGNORED) -> None:
        """Supervise every server until cancelled; ``started`` once each has connected or failed once."""
        if self._started:
            raise RuntimeError("McpToolsets.run() can be called only once")
        try:
            async with anyio.create_task_group() as tg:
                for server in self._servers.values():
                    tg.start_soon(self._supervise, server)
                for server in self._servers.values():
                    await server.settled.wait()
                self._started = True
                task_status.started(self)
                await anyio.sleep_forever()  # even when every supervisor gave up: their statuses stay readable
        finally:
            for server in self._servers.values():
                server.tools = {}
                server.status = replace(server.status, state="stopped", tools=(), retry_in_s=None)

    async def _supervise(self, server: _Server) -> None:
        failures = 0
        while True:
            await self._update(server, state="connecting", retry_in_s=None)
            started = anyio.current_time()
            reason, was_ready = await self._connect(server)
            was_stable = was_ready and anyio.current_time() - started >= self._restart.stable_s
            failures = 0 if was_stable else failures + 1
            missing = None if was_ready else _missing_command(server.spec)  # no restart can help: not retried
            reason = missing or reason
            logger.warning("MCP server %s: %s", server.spec.name, reason)
            server.tools = {}
            delay = None if missing or failures > self._restart.max_failures else self._restart.delay(failures)
            await self._update(server, state="failed", error=reason, tools=(), retry_in_s=delay)
            server.settled.set()
            if delay is None:
                return
            await anyio.sleep(delay)
            server.status = replace(server.status, restarts=server.status.restarts + 1)  # told with "connecting"

    async def _connect(self, server: _Server) -> tuple[str, bool]:
        """Connect, list and serve; why the connection ended, and whether it was ever ready."""
        from mcp.client.session import ClientSession

        spec = server.spec
        send, signals = anyio.create_memory_object_stream[_Signal](math.inf)
        link = _Link(send)

        async def on_message(message: Any) -> None:
            if isinstance(message, Exception):
                logger.warning("MCP server %s sent something unreadable: %s", spec.name, message)
            elif getattr(message, "method", None) == "notifications/tools/list_changed":
                link.relist()

        try:
            with send, signals, anyio.CancelScope(deadline=anyio.current_time() + spec.timeout_s) as connecting:
                async with (
                    _open_transport(spec, link) as (read, write),
                    ClientSession(read, write, message_handler=on_message, client_info=_client_info()) as session,
                ):
                    await session.initialize()
                    listed = await _list_all(session)
                    connecting.deadline = math.inf
                    link.session, link.ready, server.link = session, True, link
                    try:
                        await self._publish(server, listed)
                        return await self._serve(server, session, signals), True
                    finally:
                        server.link = link.session = None
            return link.failure(TimeoutError(f"no answer within {spec.timeout_s:g} s")), False
        except Exception as exc:  # whatever broke the connection is reported and retried, never raised
            return (link.lost_reason or _describe(exc), True) if link.ready else (link.failure(exc), False)

    async def _serve(self, server: _Server, session: ClientSession, signals: MemoryObjectReceiveStream[_Signal]) -> str:
        while True:
            signal = await signals.receive()
            if isinstance(signal, _Lost):
                return signal.reason
            try:
                with anyio.fail_after(server.spec.timeout_s):
                    listed = await _list_all(session)
            except Exception as exc:
                return f"tools/list failed: {_describe(exc)}"
            await self._publish(server, listed)

    async def _publish(self, server: _Server, listed: list[mcp_types.Tool]) -> None:
        taken: set[str] = set()
        tools = [McpTool(server, remote, _exposed_name(server.prefix, remote.name, taken)) for remote in listed]
        server.tools = {tool.name: tool for tool in tools}
        server.settled.set()
        await self._update(server, state="ready", error=None, tools=tuple(sorted(server.tools)), retry_in_s=None)

    async def _update(self, server: _Server, **changes: Any) -> None:
        server.status = replace(server.status, **changes)
        if self._started and self._on_change is not None:
            try:
                await self._on_change(server.status)
            except Exception:
                logger.exception("the MCP on_change callback failed for %s", server.spec.name)


@asynccontextmanager
async def open_mcp_toolsets(
    specs: Iterable[McpServerSpec], *, on_change: OnChange | None = None, restart: RestartPolicy | None = None
) -> AsyncIterator[McpToolsets]:
    """Connect every server concurrently and yield once each is ready or has failed; close them all on exit."""
    toolsets = McpToolsets(specs, on_change=on_change, restart=restart)
    async with anyio.create_task_group() as tg:
        await tg.start(toolsets.run)
        try:
            yield toolsets
        finally:
            tg.cancel_scope.cancel()


async def _list_all(session: ClientSession) -> list[mcp_types.Tool]:
    from mcp_types import PaginatedRequestParams

    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if cursor in seen:
            raise RuntimeError(f"tools/list repeated the cursor {cursor!r}")
        seen.add(cursor)
    raise RuntimeError(f"tools/list went on for more than {_MAX_PAGES} pages")


def _client_info() -> mcp_types.Implementation:
    from mcp_types import Implementation

    from awaken_stdio._version import __version__

    return Implementation(name="awaken-stdio", version=__version__)


def _describe(exc: BaseException) -> str:
    """One line for a status: the innermost error of a one-leaf exception group, its type when it has no text."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- transports --------------------------------------------------------------------------------------------------


def _open_transport(spec: McpServerSpec, link: _Link) -> AbstractAsyncContextManager[Any]:
    return _stdio_transport(spec, link) if spec.transport == "stdio" else _http_transport(spec)


@asynccontextmanager
async def _http_transport(spec: McpServerSpec) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP client. A server that went away is noticed at the next request, whose failure
    closes the connection (the call reports it and the supervisor reconnects)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    assert spec.url is not None  # checked by McpServerSpec
    # A long read timeout: the server may hold a response stream open while a tool works.
    timeout = httpx2.Timeout(spec.timeout_s, read=300.0)
    async with (
        httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


@asynccontextmanager
async def _stdio_transport(spec: McpServerSpec, link: _Link) -> AsyncIterator[Any]:
    """The SDK's ``stdio_client``, reworked where it falls short for us.

    It writes the server's stderr to a file, not a logger; it stops the process group only when the server itself
    outlives the grace period, leaving a grandchild of a server that exits cleanly running; and it does not say
    when the server went away. Framing follows the SDK: one JSON-RPC message per line, parse errors passed on.
    """
    import mcp_types
    from mcp.shared.message import SessionMessage

    assert spec.command is not None  # checked by McpServerSpec
    process = await open_session_process(
        [spec.command, *spec.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_environment(spec.env),
        cwd=spec.cwd,
    )
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    stdout_done, stderr_done = anyio.Event(), anyio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        lines = _LineReader(process.stdout, _MAX_LINE)
        try:
            while (line := await lines.read()) is not None:
                if not line.strip():
                    continue
                try:
                    message: SessionMessage | Exception = SessionMessage(
                        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except ValueError as exc:
                    message = exc  # the session reports it and goes on
                await read_send.send(message)
            # Before the session sees EOF and fails its calls, so the status says why ("exited with code 3").
            link.lose(await _exit_reason(process))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session is gone: we are shutting down
        except _LineTooLong as exc:
            link.lose(str(exc))
        finally:
            read_send.close()
            stdout_done.set()
        # Keep draining: a server blocked on a full stdout pipe cannot see its stdin close and exit.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for _ in process.stdout:
                pass

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            link.lose(f"its stdin closed ({_describe(exc)})")

    async def read_stderr() -> None:
        assert process.stderr is not None
        lines = _LineReader(process.stderr, _MAX_LOG_LINE, cut=True)
        try:
            while (line := await lines.read()) is not None:
                text = line.decode(errors="replace").rstrip("\r")
                logger.info("[%s] %s", spec.name, text)
                if text.strip():
                    link.stderr_tail.append(text.strip()[:_STDERR_TAIL_CHARS])
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            stderr_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        tg.start_soon(read_stderr)
        try:
            yield read_recv, write_send
        finally:
            # Stopping must finish even when we are cancelled, or the server would outlive us; every wait is bounded.
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                if not await stop_process_group(process, spec.stop_grace_s):
                    logger.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)
                release_session(process.pid)
                with anyio.move_on_after(_DRAIN_S):  # the server's last words
                    await stderr_done.wait()
                    await stdout_done.wait()
                with anyio.move_on_after(spec.stop_grace_s):
                    await process.aclose()
            tg.cancel_scope.cancel()


class _LineTooLong(Exception):
    pass


class _LineReader:
    """The lines of a byte stream without their ``\\n``; one longer than ``limit`` is cut (``cut``) or an error.

    A line's pieces are joined once, when it ends: a multi-megabyte message arriving in 64 KiB chunks is not copied
    and searched again for every chunk.
    """

    def __init__(self, stream: anyio.abc.ByteReceiveStream, limit: int, *, cut: bool = False) -> None:
        self._stream = stream
        self._limit = limit
        self._cut = cut
        self._pending: list[bytes] = []  # the unfinished line's pieces
        self._pending_size = 0
        self._lines: deque[bytes] = deque()
        self._eof = False

    async def read(self) -> bytes | None:
        """The next line, ``None`` at the end of the stream."""
        while not self._lines:
            if self._eof:
                return None
            try:
                chunk = await self._stream.receive()
            except anyio.EndOfStream:
                self._eof = True
                if self._pending_size:
                    self._lines.append(self._take_pending())
                continue
            if b"\n" in chunk:
                first, *middle, last = chunk.split(b"\n")
                self._pending.append(first)
                self._lines.append(self._take_pending())
                self._lines.extend(middle)
                chunk = last
            if chunk:
                self._pending.append(chunk)
                self._pending_size += len(chunk)
            if self._pending_size > self._limit:
                if not self._cut:
                    raise _LineTooLong(f"it sent a line of more than {self._limit} bytes")
                self._lines.append(self._take_pending())
        return self._lines.popleft()

    def _take_pending(self) -> bytes:
        line = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        return line


async def _exit_reason(process: anyio.abc.Process) -> str:
    if not await wait_until(lambda: process.returncode is not None, _EXIT_CODE_WAIT_S):
        return "it closed its stdout"
    return f"it exited with code {process.returncode}"
