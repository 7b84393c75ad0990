"""Our JSON-RPC peer against a reference: ``jsonrpcserver`` answers the same inbound frames the same way.

``jsonrpcserver`` stays off the serving path (importing it loads ``jsonschema``, ~130 ms, more than the whole budget
before the first answer, and it serves inbound requests only), so it is the yardstick here instead. Each frame goes
through its dispatcher and through ``JsonRpcPeer``; the answers must agree on what JSON-RPC 2.0 fixes: whether there
is an answer, the error code, and the id. Messages may differ. Where we differ on purpose (batches, ids that are
neither strings nor integers: MCP and ACP rule them out), the last test says so.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from jsonrpcserver import Result, Success, dispatch

from awaken_stdio.protocols.jsonrpc import JsonRpcPeer, Params, RequestContext

from .conftest import Serve

pytestmark = pytest.mark.anyio


def reference_echo(*args: Any, **kwargs: Any) -> Result:
    return Success(kwargs or list(args) or None)


def reference_add(a: int, b: int) -> Result:
    return Success(a + b)


REFERENCE = {"echo": reference_echo, "add": reference_add}


class AddParams(pydantic.BaseModel):
    a: int
    b: int


def our_peer() -> JsonRpcPeer:
    peer = JsonRpcPeer()

    @peer.method("echo")
    async def echo(params: Params, ctx: RequestContext) -> Any:
        return params

    @peer.method("add")
    async def add(params: Params, ctx: RequestContext) -> Any:
        args = AddParams.model_validate(params)  # a ValidationError is the peer's -32602
        return args.a + args.b

    @peer.on_notification("echo")
    async def noted(params: Params, ctx: RequestContext) -> None:
        pass

    return peer


def essentials(answer: dict[str, Any], *, id_fixed: bool) -> tuple[Any, ...]:
    """What the spec fixes in an answer: its id (when the spec says which) and its result or error code."""
    outcome = ("error", answer["error"]["code"]) if "error" in answer else ("result", answer["result"])
    return (answer["id"] if id_fixed else "-", *outcome)


async def ours(serve: Serve, frame: str) -> dict[str, Any] | None:
    async with serve(our_peer()) as wire:
        await wire.send_raw(frame.encode() + b"\n")
        if frame.startswith('{"jsonrpc": "2.0", "method"'):  # a notification: nothing may come back
            await wire.assert_silent(0.2)
            return None
        return await wire.receive()


def reference(frame: str) -> dict[str, Any] | None:
    text = dispatch(frame, methods=REFERENCE)
    return json.loads(text) if text else None


# (frame, whether the spec fixes the answer's id: not when an Invalid Request carried a readable one)
FRAMES = {
    "request with named params": ('{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"a": [1, "é"]}}', True),
    "request with positional params": ('{"jsonrpc": "2.0", "id": "abc", "method": "echo", "params": [1, 2]}', True),
    "request without params": ('{"jsonrpc": "2.0", "id": 0, "method": "echo"}', True),
    "typed params": ('{"jsonrpc": "2.0", "id": 2, "method": "add", "params": {"a": 1, "b": 2}}', True),
    "invalid params": ('{"jsonrpc": "2.0", "id": 3, "method": "add", "params": {"a": 1}}', True),
    "method not found": ('{"jsonrpc": "2.0", "id": 4, "method": "nope"}', True),
    "notification": ('{"jsonrpc": "2.0", "method": "echo", "params": {"a": 1}}', True),
    "notification of an unknown method": ('{"jsonrpc": "2.0", "method": "nope"}', True),
    "parse error": ('{"jsonrpc": "2.0", "id": 1, "method"', True),
    "not an object": ('"hello"', True),
    "a number": ("42", True),
    "an empty batch": ("[]", True),
    "wrong jsonrpc version": ('{"jsonrpc": "1.0", "id": 5, "method": "echo"}', False),
    "no jsonrpc member": ('{"id": 6, "method": "echo"}', False),
    "method not a string": ('{"jsonrpc": "2.0", "id": 7, "method": 5}', False),
    "neither method nor result": ('{"jsonrpc": "2.0", "id": 8}', False),
    "params neither object nor array": ('{"jsonrpc": "2.0", "id": 9, "method": "echo", "params": "s"}', False),
    "id an object": ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "echo"}', True),
    "empty method name": pytest.param(
        '{"jsonrpc": "2.0", "id": 10, "method": ""}',
        True,
        marks=pytest.mark.xfail(reason='"" is a valid method name: Method not found, not our Invalid Request'),
    ),
}


@pytest.mark.parametrize(("frame", "id_fixed"), FRAMES.values(), ids=FRAMES.keys())
async def test_the_peer_answers_as_the_reference_does(serve: Serve, frame: str, id_fixed: bool) -> None:
    expected, got = reference(frame), await ours(serve, frame)
    assert (expected is None) == (got is None), (expected, got)
    if expected is not None and got is not None:
        assert essentials(got, id_fixed=id_fixed) == essentials(expected, id_fixed=id_fixed), (expected, got)
        assert got["jsonrpc"] == "2.0"


@pytest.mark.parametrize(
    "frame",
    [
        '[{"jsonrpc": "2.0", "id": 1, "method": "echo"}]',  # batches: removed from MCP, never used by ACP
        '{"jsonrpc": "2.0", "id": null, "method": "echo"}',  # MCP: an id MUST NOT be null
        '{"jsonrpc": "2.0", "id": 1.5, "method": "echo"}',  # MCP and ACP: a string or an integer
    ],
)
async def test_where_we_differ_on_purpose_it_is_an_invalid_request(serve: Serve, frame: str) -> None:
    assert reference(frame) is not None and "result" in json.dumps(reference(frame))  # the reference serves it
    got = await ours(serve, frame)
    assert got is not None and got["error"]["code"] == -32600 and got["id"] is None
