"""One tool of an MCP server as a ``Tool``: its portable name and schemas, the forwarded ``tools/call``, the result."""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.tools import EMPTY_SCHEMA, Tool, ToolCallContext, ToolDescriptor, ToolResult, infer_tool_kind
from awaken_stdio.tools.mcp.spec import McpServerSpec, McpServerStatus
from awaken_stdio.tools.mcp.transport import Link, describe
from awaken_stdio.tools.schema import PortabilityError, portable_schema

if TYPE_CHECKING:
    import mcp_types

__all__ = ["McpTool", "Server", "exposed_name", "safe_name"]

logger = logging.getLogger("awaken_stdio.tools.mcp")  # one logger for the MCP client, whichever module logs

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 64  # model APIs cap tool names at 64 characters


def safe_name(text: str) -> str:
    return _UNSAFE_NAME.sub("_", text)


def exposed_name(prefix: str, remote: str, taken: set[str]) -> str:
    """``<server>__<tool>`` within ``[A-Za-z0-9_.-]{1,64}``; a digest of the original keeps cut or clashing names
    apart."""
    name = f"{prefix}__{safe_name(remote)}"
    if len(name) > _MAX_NAME or name in taken:
        digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - len(digest) - 1]}_{digest}"
    taken.add(name)
    return name


@dataclass(slots=True, eq=False, kw_only=True)
class Server:
    """One configured server as its tools see it: the connection to call through, and its status."""

    spec: McpServerSpec
    prefix: str
    status: McpServerStatus
    tools: dict[str, McpTool] = field(default_factory=dict)
    link: Link | None = None
    settled: anyio.Event = field(default_factory=anyio.Event)


class McpTool(Tool):
    """One tool of an MCP server; calling it forwards ``tools/call`` over the server's current connection.

    Progress notifications become ``ctx.report_progress``; cancelling the call (the run's cancel scope or
    ``ctx.cancel``) abandons the request and the SDK sends the server ``notifications/cancelled``, as it does when
    no answer came within the server's ``call_timeout_s`` (the call then fails with a timeout).
    """

    def __init__(self, server: Server, remote: mcp_types.Tool, name: str) -> None:
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

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.report_progress("running", message or "", progress=progress, total=total)

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

    def _call_error(self, exc: Exception, link: Link) -> ToolFailure:
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
            reason = describe(exc)
            link.lose(reason)
        else:
            return ToolFailure(f"MCP server {self.server_name}: the call failed: {describe(exc)}")
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


def _tool_result(name: str, result: mcp_types.CallToolResult) -> ToolResult:
    """``isError`` becomes a failed result with the server's text; structured content is the data, text the
    message; images, audio and resources stay blocks (``ToolResult.content``) for the protocols to show."""
    from awaken_stdio.contract.content import from_wire, model_text

    wire = [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in result.content]
    blocks = [b for b in map(from_wire, wire) if b is not None]
    text = model_text(blocks)
    structured = result.structured_content
    if result.is_error:
        return ToolResult.error(name, text or "the MCP tool failed without a message", data=structured)
    if structured is not None:
        out = ToolResult.success(name, data=structured, message=text or None)
    else:
        out = ToolResult.success(name, data=text, message=text)
    if any(b.type != "text" for b in blocks):
        out.content = blocks
    return out
