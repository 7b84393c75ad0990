"""A small MCP server for the toolset tests, on the SDK's low-level ``Server``.

Run it over stdio (``python server.py [--hang|--stubborn|--noisy|--fail-start]``); the HTTP tests import
``build_server()`` and serve its streamable-HTTP app in their own process. Tools are listed three to a page so
every listing needs several pages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

PAGE_SIZE = 3
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
NONE: dict[str, Any] = {"type": "object", "properties": {}}


def _tool(name: str, schema: dict[str, Any] = NONE, **extra: Any) -> types.Tool:
    return types.Tool(name=name, description=f"The {name} tool.", input_schema=schema, **extra)


def _text(text: str, **extra: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], **extra)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def build_server() -> Server[Any]:
    tools = [
        _tool("echo", TEXT, title="Echo", annotations=types.ToolAnnotations(read_only_hint=True)),
        _tool(
            "add",
            {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
            output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
        ),
        _tool("fail"),
        _tool("slow", {"type": "object", "properties": {"steps": {"type": "integer"}}}),
        _tool("block"),
        _tool("crash"),
        _tool("env", {"type": "object", "properties": {"name": {"type": "string"}}}),
        _tool("spawn"),
        _tool("shout", TEXT),
        _tool("grow"),
        _tool("delete_item", NONE, annotations=types.ToolAnnotations(destructive_hint=True, title="Delete")),
        _tool("weird name!"),
        _tool("x" * 70),
        _tool(
            "nested",
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"point": {"$ref": "#/$defs/Point"}},
                "$defs": {"Point": {"type": "object", "properties": {"x": {"type": ["number", "null"]}}}},
            },
        ),
    ]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        start = int(params.cursor) if params and params.cursor else 0
        end = start + PAGE_SIZE
        return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        match params.name:
            case "echo":
                return _text(args["text"])
            case "add":
                total = args["a"] + args["b"]
                return _text(f"{total}", structured_content={"sum": total})
            case "fail":
                return _text("it broke", is_error=True)
            case "slow":
                for step in range(1, args["steps"] + 1):
                    await ctx.session.report_progress(step, args["steps"], f"step {step}")
                return _text("done")
            case "block":
                try:
                    await ctx.session.report_progress(0, None, "blocking")
                    await anyio.sleep_forever()
                finally:
                    _log("block cancelled")
            case "crash":
                os._exit(3)
            case "env":
                return _text(os.environ.get(args["name"], "<unset>"))
            case "spawn":
                child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                return _text("spawned", structured_content={"pid": os.getpid(), "child": child.pid})
            case "shout":
                _log(args["text"])
                return _text("ok")
            case "grow":
                tools.append(_tool("extra"))
                await ctx.session.send_tool_list_changed()
                return _text("grown")
        raise ValueError(f"unknown tool {params.name}")

    return Server("test-server", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    server = build_server()
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "--fail-start":
        _log("cannot start: missing configuration")
        sys.exit(2)
    if mode == "--hang":
        time.sleep(600)
    if mode == "--noisy":
        for i in range(3):
            _log(f"noise {i}")
    if mode == "--stubborn":
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    anyio.run(serve_stdio)
    if mode == "--stubborn":
        time.sleep(600)  # a server that neither exits on stdin EOF nor on SIGTERM


if __name__ == "__main__":
    main()
