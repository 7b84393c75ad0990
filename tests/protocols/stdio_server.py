"""A tiny JSON-RPC server on ``open_stdio`` + ``JsonRpcPeer``, launched by the raw-pipe tests.

Its ``pollute`` method writes to stdout in every way a real agent might by accident.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import anyio

from awaken_stdio.protocols.jsonrpc import JsonRpcPeer, Params, RequestContext
from awaken_stdio.protocols.stdio import open_stdio

EARLY_STDOUT = sys.stdout  # a reference taken before the guard, as a library's log handler might hold


def build() -> JsonRpcPeer:
    peer = JsonRpcPeer(watch_parent=True)

    @peer.method("echo")
    async def echo(params: Params, ctx: RequestContext) -> Any:
        return params

    @peer.method("sleep")
    async def sleep(params: Params, ctx: RequestContext) -> str:
        assert isinstance(params, dict)
        await anyio.sleep(params["seconds"])
        return "slept"

    @peer.method("pollute")
    async def pollute(params: Params, ctx: RequestContext) -> str:
        print("stray print")
        print("buffered print without newline", end="", file=EARLY_STDOUT)
        await anyio.run_process(["echo", "child stdout"], stdout=None, stderr=None)
        ctypes.CDLL(None).printf(b"libc printf\n")
        return "polluted"

    @peer.method("ask")
    async def ask(params: Params, ctx: RequestContext) -> Any:
        return await ctx.peer.request("client/question", params)

    return peer


async def main() -> None:
    peer = build()
    async with open_stdio() as (reader, writer):
        await peer.run(reader, writer)


if __name__ == "__main__":
    anyio.run(main)
