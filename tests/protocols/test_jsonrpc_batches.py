"""JSON-RPC batches are a per-protocol switch of the peer: off (MCP, ACP v1) an array is one -32600; on (ACP v2)
each entry is served and the answers go out as one array, none for notifications."""

from __future__ import annotations

import json
from typing import Any

import pytest

from awaken_stdio.protocols.jsonrpc import INVALID_REQUEST, METHOD_NOT_FOUND, JsonRpcPeer, Params, RequestContext

from .conftest import Serve

pytestmark = pytest.mark.anyio


def peer(*, batches: bool) -> tuple[JsonRpcPeer, list[Any]]:
    noted: list[Any] = []
    p = JsonRpcPeer()
    p.batches = batches

    async def echo(params: Params, ctx: RequestContext) -> Any:
        return params

    async def note(params: Params, ctx: RequestContext) -> None:
        noted.append(params)

    p.register("echo", echo)
    p.register_notification("note", note)
    return p, noted


async def test_batches_are_refused_unless_switched_on(serve: Serve) -> None:
    p, _ = peer(batches=False)
    async with serve(p) as wire:
        await wire.send([{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [1]}])
        answer = await wire.receive()
        assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST
        assert answer["error"]["message"] == "Invalid Request: batches are not supported"


async def test_a_batch_is_answered_with_one_array(serve: Serve) -> None:
    p, noted = peer(batches=True)
    async with serve(p) as wire:
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": ["a"]},
            {"jsonrpc": "2.0", "method": "note", "params": ["n"]},
            7,
            {"jsonrpc": "2.0", "id": 2, "method": "nothing"},
            {"jsonrpc": "2.0", "id": 3, "method": "echo", "params": ["b"]},
        ]
        await wire.send(batch)
        answers = json.loads(await wire.receive_line())
        assert isinstance(answers, list)
        by_id = {a["id"]: a for a in answers}
        assert by_id[1]["result"] == ["a"] and by_id[3]["result"] == ["b"]
        assert by_id[2]["error"]["code"] == METHOD_NOT_FOUND
        assert by_id[None]["error"]["code"] == INVALID_REQUEST
        assert len(answers) == 4 and noted == [["n"]]
        await wire.send([{"jsonrpc": "2.0", "method": "note", "params": ["m"]}])  # notifications only: no answer
        await wire.send([])
        empty = await wire.receive()
        assert empty["id"] is None and empty["error"]["message"] == "Invalid Request: an empty batch"
        assert noted == [["n"], ["m"]]
