"""JsonRpcPeer over in-memory byte streams: dispatch, errors, bad frames, correlation, cancellation, lifecycle."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import anyio
import pydantic
import pytest

from awaken_stdio.protocols import jsonrpc
from awaken_stdio.protocols.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ConnectionClosedError,
    JsonRpcError,
    JsonRpcPeer,
    Params,
    RequestContext,
    RequestTimeoutError,
    error_to_wire,
)

from .conftest import Serve, Wire

pytestmark = pytest.mark.anyio


async def echo(params: Params, ctx: RequestContext) -> Any:
    return params


def echo_peer(**kwargs: Any) -> JsonRpcPeer:
    peer = JsonRpcPeer(**kwargs)
    peer.register("echo", echo)
    return peer


# -- errors ----------------------------------------------------------------------------------------------------


def test_error_message_is_one_non_empty_line() -> None:
    assert JsonRpcError(-32000, "first\n  second\tthird").message == "first second third"
    assert JsonRpcError(INVALID_PARAMS, "  ").message == "Invalid params"
    assert JsonRpcError(-1, "").message == "Error"
    assert JsonRpcError(-1, "x").to_wire() == {"code": -1, "message": "x"}
    assert JsonRpcError(-1, "x", {"k": 1}).to_wire() == {"code": -1, "message": "x", "data": {"k": 1}}


def test_internal_error_is_one_line_with_details_in_data(caplog: pytest.LogCaptureFixture) -> None:
    try:
        raise ValueError("bad thing\nsecond line")
    except ValueError as exc:
        wire = error_to_wire(exc)
    assert wire == {
        "code": INTERNAL_ERROR,
        "message": "Internal error: bad thing",
        "data": {"type": "ValueError", "message": "bad thing\nsecond line"},
    }
    assert "Traceback" in caplog.text  # the traceback goes to the log, not the wire


def test_validation_error_is_invalid_params_without_pydantic_text() -> None:
    class Args(pydantic.BaseModel):
        cwd: str
        depth: int

    with pytest.raises(pydantic.ValidationError) as info:
        Args.model_validate({"depth": "deep"})
    wire = error_to_wire(info.value)
    assert wire["code"] == INVALID_PARAMS
    assert wire["message"] == "Invalid params: cwd: Field required (+1 more)"
    assert wire["data"] == {
        "errors": [
            {"loc": ["cwd"], "msg": "Field required"},
            {"loc": ["depth"], "msg": "Input should be a valid integer, unable to parse string as an integer"},
        ]
    }
    assert "pydantic.dev" not in json.dumps(wire) and "deep" not in json.dumps(wire)


def test_single_exception_groups_are_unwrapped() -> None:
    group = ExceptionGroup("tg", [ExceptionGroup("inner", [JsonRpcError(-32042, "nested")])])
    assert error_to_wire(group) == {"code": -32042, "message": "nested"}


# -- dispatch --------------------------------------------------------------------------------------------------


async def test_request_result_and_ids_echoed_exactly(serve: Serve) -> None:
    async with serve(echo_peer()) as wire:
        assert await wire.request(1, "echo", {"a": [1, "é"]}) == {"jsonrpc": "2.0", "id": 1, "result": {"a": [1, "é"]}}
        assert await wire.request("abc", "echo", [1, 2]) == {"jsonrpc": "2.0", "id": "abc", "result": [1, 2]}
        assert await wire.request(0, "echo") == {"jsonrpc": "2.0", "id": 0, "result": None}


async def test_decorators_and_duplicate_registration() -> None:
    peer = JsonRpcPeer()

    @peer.method("m")
    async def m(params: Params, ctx: RequestContext) -> None: ...

    @peer.on_notification("n")
    async def n(params: Params, ctx: RequestContext) -> None: ...

    with pytest.raises(ValueError, match="already registered"):
        peer.register("m", m)
    with pytest.raises(ValueError, match="already registered"):
        peer.register_notification("n", n)


async def test_unknown_method_and_unknown_notification(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=jsonrpc.__name__)
    async with serve(echo_peer()) as wire:
        answer = await wire.request(7, "nope")
        assert answer["error"]["code"] == METHOD_NOT_FOUND and answer["error"]["message"] == "Method not found: nope"
        await wire.send({"jsonrpc": "2.0", "method": "_vendor/unknown", "params": {}})
        await wire.assert_silent()
    assert "ignoring notification _vendor/unknown" in caplog.text


async def test_context_carries_id_method_and_peer(serve: Serve) -> None:
    peer = JsonRpcPeer()
    seen: list[RequestContext] = []

    @peer.method("who")
    async def who(params: Params, ctx: RequestContext) -> None:
        seen.append(ctx)
        await ctx.peer.notify("progress", {"for": ctx.request_id})

    @peer.on_notification("note")
    async def note(params: Params, ctx: RequestContext) -> None:
        seen.append(ctx)

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": "r1", "method": "who"})
        assert await wire.receive() == {"jsonrpc": "2.0", "method": "progress", "params": {"for": "r1"}}
        assert (await wire.receive())["id"] == "r1"
        await wire.send({"jsonrpc": "2.0", "method": "note"})
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "who"})
        assert (await wire.receive())["method"] == "progress"
        assert (await wire.receive())["id"] == 2
    assert [(c.method, c.request_id, c.peer is peer) for c in seen] == [
        ("who", "r1", True),
        ("note", None, True),
        ("who", 2, True),
    ]


@pytest.mark.parametrize(
    ("raised", "code", "message"),
    [
        (JsonRpcError(-32000, "Authentication required", {"methods": ["key"]}), -32000, "Authentication required"),
        (RuntimeError("boom"), INTERNAL_ERROR, "Internal error: boom"),
        (KeyError("cwd"), INTERNAL_ERROR, "Internal error: 'cwd'"),
    ],
)
async def test_handler_exceptions_become_errors(serve: Serve, raised: Exception, code: int, message: str) -> None:
    peer = JsonRpcPeer()

    @peer.method("fail")
    async def fail(params: Params, ctx: RequestContext) -> None:
        raise raised

    async with serve(peer) as wire:
        error = (await wire.request(1, "fail"))["error"]
        assert (error["code"], error["message"]) == (code, message)
        assert (await wire.request(2, "fail"))["error"]["code"] == code  # still serving


async def test_validation_error_from_handler_is_invalid_params(serve: Serve) -> None:
    peer = JsonRpcPeer()
    adapter = pydantic.TypeAdapter(dict[str, int])

    @peer.method("typed")
    async def typed(params: Params, ctx: RequestContext) -> Any:
        return adapter.validate_python(params)

    async with serve(peer) as wire:
        error = (await wire.request(1, "typed", {"a": "x"}))["error"]
        assert error["code"] == INVALID_PARAMS
        assert error["data"]["errors"][0]["loc"] == ["a"]


@pytest.mark.parametrize("result", [object(), float("nan"), {"k": {1, 2}}])
async def test_result_that_is_not_json_is_an_internal_error(serve: Serve, result: Any) -> None:
    peer = JsonRpcPeer()

    @peer.method("bad")
    async def bad(params: Params, ctx: RequestContext) -> Any:
        return result

    async with serve(peer) as wire:
        error = (await wire.request(1, "bad"))["error"]
        assert error["code"] == INTERNAL_ERROR and error["message"] == "Internal error: the result is not JSON"


async def test_lines_are_compact_utf8_with_escaped_newlines(serve: Serve) -> None:
    async with serve(echo_peer()) as wire:
        await wire.request(1, "echo", {"text": "a\nb\u2028ü"})
        assert wire.raw_lines[-1] == '{"jsonrpc":"2.0","id":1,"result":{"text":"a\\nb\u2028ü"}}'.encode()
        # A lone surrogate cannot be UTF-8: the line falls back to ASCII escapes and stays valid JSON.
        await wire.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"echo","params":["\\ud800"]}\n')
        assert (await wire.receive()) == {"jsonrpc": "2.0", "id": 2, "result": ["\ud800"]}
        assert b"\\ud800" in wire.raw_lines[-1]


# -- bad frames ------------------------------------------------------------------------------------------------

BAD_FRAMES = [
    (b"not json", PARSE_ERROR, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"echo"', PARSE_ERROR, None),
    (b"\xff\xfe{}", PARSE_ERROR, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[NaN]}', PARSE_ERROR, None),
    (b"[" * 100_000, PARSE_ERROR, None),
    (b"[]", INVALID_REQUEST, None),
    (b'[{"jsonrpc":"2.0","id":1,"method":"echo"}]', INVALID_REQUEST, None),
    (b"5", INVALID_REQUEST, None),
    (b'"echo"', INVALID_REQUEST, None),
    (b"null", INVALID_REQUEST, None),
    (b'{"id":1,"method":"echo"}', INVALID_REQUEST, 1),
    (b'{"jsonrpc":"1.0","id":"x","method":"echo"}', INVALID_REQUEST, "x"),
    (b'{"jsonrpc":"2.0","id":2,"method":5}', INVALID_REQUEST, 2),
    (b'{"jsonrpc":"2.0","id":3,"method":""}', INVALID_REQUEST, 3),
    (b'{"jsonrpc":"2.0","method":7}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":null,"method":"echo"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"echo"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":true,"method":"echo"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":4,"method":"echo","params":"x"}', INVALID_REQUEST, 4),
    (b'{"jsonrpc":"2.0","id":5}', INVALID_REQUEST, 5),
]


@pytest.mark.parametrize(("frame", "code", "echoed_id"), BAD_FRAMES)
async def test_bad_frames_are_answered_and_the_connection_stays_usable(
    serve: Serve, frame: bytes, code: int, echoed_id: Any
) -> None:
    async with serve(echo_peer()) as wire:
        await wire.send_raw(frame + b"\n")
        answer = await wire.receive()
        assert answer["jsonrpc"] == "2.0" and answer["id"] == echoed_id
        assert answer["error"]["code"] == code
        assert "\n" not in answer["error"]["message"] and answer["error"]["message"]
        assert (await wire.request(99, "echo", ["ok"]))["result"] == ["ok"]


async def test_blank_lines_crlf_and_split_chunks(serve: Serve) -> None:
    async with serve(echo_peer()) as wire:
        await wire.send_raw(b"\n   \r\n\n")
        await wire.assert_silent()
        await wire.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}\r\n')
        assert (await wire.receive())["result"] == [1]
        frame = (
            b'{"jsonrpc":"2.0","id":2,"method":"echo","params":["split"]}\n{"jsonrpc":"2.0","id":3,"method":"echo"}\n'
        )
        for i in range(0, len(frame), 7):
            await wire.send_raw(frame[i : i + 7])
        assert [(await wire.receive())["id"] for _ in range(2)] == [2, 3]


async def test_last_line_without_newline_is_served(serve: Serve) -> None:
    peer = echo_peer()
    wire_out: list[dict[str, Any]] = []
    async with serve(peer) as wire:
        await wire.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}')
        wire.close_input()
    wire_out = wire.read_available()
    assert wire_out == [{"jsonrpc": "2.0", "id": 1, "result": [1]}]


async def test_duplicate_in_flight_id_is_refused(serve: Serve) -> None:
    peer = echo_peer()
    release = anyio.Event()

    @peer.method("wait")
    async def wait(params: Params, ctx: RequestContext) -> str:
        await release.wait()
        return "done"

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "wait"})
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "echo"})
        answer = await wire.receive()
        assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST
        assert answer["error"]["data"] == {"id": 1}
        release.set()
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "done"}


# -- maximum line size -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True])
async def test_line_over_the_limit_is_refused_and_the_next_line_works(serve: Serve, chunked: bool) -> None:
    limit = 1000
    async with serve(echo_peer(max_line_bytes=limit)) as wire:
        at_limit = b'{"jsonrpc":"2.0","id":1,"method":"echo","params":["' + b"a" * 1000
        at_limit = at_limit[: limit - 3] + b'"]}'
        assert len(at_limit) == limit
        await wire.send_raw(at_limit + b"\n")
        assert (await wire.receive())["id"] == 1
        over = b'{"jsonrpc":"2.0","id":2,"method":"echo","params":["' + b"b" * 5000 + b'"]}\n'
        if chunked:
            for i in range(0, len(over), 300):
                await wire.send_raw(over[i : i + 300])
        else:
            await wire.send_raw(over)
        answer = await wire.receive()
        assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST
        assert answer["error"]["message"] == "Invalid Request: line exceeds the maximum of 1000 bytes"
        assert answer["error"]["data"] == {"maxLineBytes": 1000}
        await wire.assert_silent()  # one answer per long line
        assert (await wire.request(3, "echo", ["after"]))["result"] == ["after"]


async def test_long_line_is_refused_while_it_streams_in_not_at_its_end(serve: Serve) -> None:
    async with serve(echo_peer(max_line_bytes=1000)) as wire:
        for _ in range(50):  # 50 KB and no newline yet: nothing of it is kept
            await wire.send_raw(b"x" * 1000)
        assert (await wire.receive())["error"]["data"] == {"maxLineBytes": 1000}
        await wire.send_raw(b"tail of the long line\n")
        await wire.assert_silent()
        assert (await wire.request(1, "echo", [1]))["result"] == [1]


# -- concurrency -----------------------------------------------------------------------------------------------


async def test_slow_request_does_not_block_others_or_notifications(serve: Serve) -> None:
    peer = echo_peer()
    release = anyio.Event()

    @peer.method("slow")
    async def slow(params: Params, ctx: RequestContext) -> str:
        await release.wait()
        return "slow done"

    @peer.on_notification("release")
    async def on_release(params: Params, ctx: RequestContext) -> None:
        release.set()

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": "slow", "method": "slow"})
        assert (await wire.request("fast", "echo", ["fast"]))["result"] == ["fast"]
        await wire.send({"jsonrpc": "2.0", "method": "release"})
        assert await wire.receive() == {"jsonrpc": "2.0", "id": "slow", "result": "slow done"}


async def test_notifications_run_in_order_and_a_slow_one_blocks_no_request(serve: Serve) -> None:
    peer = echo_peer()
    seen: list[int] = []
    gate = anyio.Event()

    @peer.on_notification("n")
    async def note(params: Params, ctx: RequestContext) -> None:
        assert isinstance(params, dict)
        if params["i"] == 0:
            await gate.wait()
        seen.append(params["i"])

    async with serve(peer) as wire:
        for i in range(50):
            await wire.send({"jsonrpc": "2.0", "method": "n", "params": {"i": i}})
        assert (await wire.request(1, "echo", [1]))["result"] == [1]
        assert seen == []
        gate.set()
        await wire.request(2, "echo")
        with anyio.fail_after(1):
            while len(seen) < 50:
                await anyio.sleep(0.001)
    assert seen == list(range(50))


async def test_failing_notification_handler_is_logged(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    peer = echo_peer()

    @peer.on_notification("bad")
    async def bad(params: Params, ctx: RequestContext) -> None:
        raise RuntimeError("notification boom")

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "method": "bad"})
        await wire.assert_silent()
        assert (await wire.request(1, "echo", [1]))["result"] == [1]
    assert "notification handler for bad failed" in caplog.text


# -- outbound requests -----------------------------------------------------------------------------------------


async def test_outbound_requests_correlate_out_of_order(serve: Serve) -> None:
    peer = JsonRpcPeer()
    results: dict[str, Any] = {}

    @peer.method("ask_two")
    async def ask_two(params: Params, ctx: RequestContext) -> Any:
        async def ask(name: str) -> None:
            results[name] = await ctx.peer.request("client/ask", {"name": name})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a")
            tg.start_soon(ask, "b")
        return results

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": "top", "method": "ask_two"})
        first, second = await wire.receive(), await wire.receive()
        assert first["method"] == second["method"] == "client/ask"
        assert first["id"] != second["id"] and all(type(m["id"]) is int for m in (first, second))
        for message in (second, first):  # answered in reverse order
            await wire.send({"jsonrpc": "2.0", "id": message["id"], "result": message["params"]["name"].upper()})
        assert (await wire.receive())["result"] == {"a": "A", "b": "B"}


async def test_outbound_error_answer_raises(serve: Serve) -> None:
    peer = JsonRpcPeer()
    raised: list[JsonRpcError] = []

    @peer.method("ask")
    async def ask(params: Params, ctx: RequestContext) -> None:
        try:
            await ctx.peer.request("client/ask")
        except JsonRpcError as exc:
            raised.append(exc)
            raise

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "ask"})
        outbound = await wire.receive()
        assert "params" not in outbound
        error = {"code": -32001, "message": "denied", "data": {"why": "no"}}
        await wire.send({"jsonrpc": "2.0", "id": outbound["id"], "error": error})
        assert (await wire.receive())["error"] == error  # re-raised: passed through unchanged
    assert (raised[0].code, raised[0].message, raised[0].data) == (-32001, "denied", {"why": "no"})


async def test_outbound_timeout_then_late_and_unknown_answers_are_ignored(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    peer = echo_peer()

    @peer.method("ask")
    async def ask(params: Params, ctx: RequestContext) -> str:
        with pytest.raises(RequestTimeoutError, match=r"no answer to client/slow within 0\.05 s"):
            await ctx.peer.request("client/slow", timeout=0.05)
        return "gave up"

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "ask"})
        outbound = await wire.receive()
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "gave up"}
        await wire.send({"jsonrpc": "2.0", "id": outbound["id"], "result": "late"})
        await wire.send({"jsonrpc": "2.0", "id": 12345, "result": "who?"})
        await wire.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
        await wire.assert_silent()  # never answer a response
        assert (await wire.request(2, "echo", [2]))["result"] == [2]
    assert "unknown request id 12345" in caplog.text
    assert "could not read one of our messages" in caplog.text


async def test_malformed_error_answer_still_completes_the_request(serve: Serve) -> None:
    peer = JsonRpcPeer()

    @peer.method("ask")
    async def ask(params: Params, ctx: RequestContext) -> Any:
        try:
            await ctx.peer.request("client/ask")
        except JsonRpcError as exc:
            return [exc.code, exc.data]

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "ask"})
        outbound = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": outbound["id"], "error": "nope"})
        assert (await wire.receive())["result"] == [INTERNAL_ERROR, "nope"]


async def test_pending_outbound_request_fails_on_eof(serve: Serve) -> None:
    peer = JsonRpcPeer(eof_grace_s=1)
    failures: list[BaseException] = []

    @peer.method("ask")
    async def ask(params: Params, ctx: RequestContext) -> str:
        try:
            await ctx.peer.request("client/ask")
        except ConnectionClosedError as exc:
            failures.append(exc)
        with pytest.raises(ConnectionClosedError):
            await ctx.peer.request("client/again")
        return "closed"

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "ask"})
        assert (await wire.receive())["method"] == "client/ask"
        wire.close_input()
    # The handler finished within the grace period, so its answer was still written after EOF.
    assert wire.read_available() == [{"jsonrpc": "2.0", "id": 1, "result": "closed"}]
    assert len(failures) == 1


async def test_request_and_notify_need_a_running_peer() -> None:
    peer = JsonRpcPeer()
    with pytest.raises(ConnectionClosedError):
        await peer.request("x")
    with pytest.raises(ConnectionClosedError):
        await peer.notify("x")


# -- cancellation ----------------------------------------------------------------------------------------------


async def test_cancel_request_stops_the_handler_and_sends_no_answer(serve: Serve) -> None:
    peer = echo_peer()
    started, stopped = anyio.Event(), anyio.Event()
    outcomes: list[bool] = []

    @peer.method("long")
    async def long(params: Params, ctx: RequestContext) -> str:
        started.set()
        try:
            await anyio.sleep(30)
        finally:
            stopped.set()
        return "never"

    @peer.on_notification("notifications/cancelled")
    async def cancelled(params: Params, ctx: RequestContext) -> None:
        assert isinstance(params, dict)
        outcomes.append(ctx.peer.cancel_request(params["requestId"]))

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": "L", "method": "long"})
        await started.wait()
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}})
        with anyio.fail_after(1):
            await stopped.wait()
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}})
        assert (await wire.request(1, "echo", [1]))["result"] == [1]  # the first message after: no answer to L
        await wire.assert_silent()
    assert outcomes == [True, False]


async def test_cancel_before_the_handler_starts(serve: Serve) -> None:
    peer = echo_peer()
    ran: list[str] = []

    @peer.method("work")
    async def work(params: Params, ctx: RequestContext) -> str:
        await anyio.sleep(0)
        ran.append("work")
        return "done"

    @peer.on_notification("cancel")
    async def cancel(params: Params, ctx: RequestContext) -> None:
        ctx.peer.cancel_request(1)

    async with serve(peer) as wire:
        # One chunk: the request is registered, then cancelled, before its task gets to run.
        await wire.send_raw(
            b'{"jsonrpc":"2.0","id":1,"method":"work"}\n{"jsonrpc":"2.0","method":"cancel"}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"echo"}\n'
        )
        assert (await wire.receive())["id"] == 2
        await wire.assert_silent()
    assert ran == []


# -- writing ---------------------------------------------------------------------------------------------------


async def test_queued_lines_are_written_in_order_and_batched(serve: Serve) -> None:
    peer = JsonRpcPeer()

    @peer.method("burst")
    async def burst(params: Params, ctx: RequestContext) -> int:
        for i in range(2000):
            await ctx.peer.notify("tick", {"i": i})
        return 2000

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "burst"})
        ticks = [(await wire.receive())["params"]["i"] for _ in range(2000)]
        assert ticks == list(range(2000))
        assert (await wire.receive())["result"] == 2000
        assert wire.writer.writes < 50  # 2001 lines, a handful of writes


async def test_broken_output_ends_run(serve: Serve) -> None:
    peer = JsonRpcPeer()
    failures: list[BaseException] = []

    @peer.method("talk")
    async def talk(params: Params, ctx: RequestContext) -> None:
        try:
            while True:
                await ctx.peer.notify("chatter")
                await anyio.sleep(0.001)
        except ConnectionClosedError as exc:
            failures.append(exc)
            raise

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "talk"})
        await wire.receive()
        wire.from_peer.close()  # the client stops reading our output; input stays open
    assert failures  # run() returned (serve exited) and the handler saw the closed connection


# -- lifecycle -------------------------------------------------------------------------------------------------


async def test_eof_cancels_handlers_after_the_grace_and_writes_nothing_after(serve: Serve) -> None:
    peer = JsonRpcPeer(eof_grace_s=0.1)
    state: list[str] = []

    @peer.method("stubborn")
    async def stubborn(params: Params, ctx: RequestContext) -> str:
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            state.append("cancelled")
            try:
                await ctx.peer.notify("too late")
            except ConnectionClosedError:
                state.append("refused")
        return "answer after cancellation"  # swallowing cancellation must still not reach the wire

    @peer.method("quick")
    async def quick(params: Params, ctx: RequestContext) -> str:
        await anyio.sleep(0.02)
        return "quick"

    start = time.monotonic()
    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "stubborn"})
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "quick"})
        await anyio.sleep(0.005)
        wire.close_input()
    elapsed = time.monotonic() - start
    assert 0.1 <= elapsed < 0.5
    assert state == ["cancelled", "refused"]
    assert wire.read_available() == [{"jsonrpc": "2.0", "id": 2, "result": "quick"}]
    with pytest.raises(ConnectionClosedError):
        await peer.notify("after")


async def test_eof_when_idle_returns_at_once(serve: Serve) -> None:
    start = time.monotonic()
    async with serve(echo_peer()) as wire:
        await wire.request(1, "echo")
    assert time.monotonic() - start < 0.1


async def test_close_from_a_handler_answers_it_then_returns(serve: Serve) -> None:
    peer = JsonRpcPeer()

    @peer.method("shutdown")
    async def shutdown(params: Params, ctx: RequestContext) -> str:
        ctx.peer.close()
        return "bye"

    async with serve(peer) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "shutdown"})
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "bye"}
        await wait_until_stopped(peer)


async def wait_until_stopped(peer: JsonRpcPeer) -> None:
    """Until ``run`` has shut down: it refuses new lines from then on."""
    with anyio.fail_after(2):
        while True:
            try:
                await peer.notify("probe")
            except ConnectionClosedError:
                return
            await anyio.sleep(0.01)


async def test_close_before_run_and_run_only_once(serve: Serve) -> None:
    peer = echo_peer()
    peer.close()
    async with serve(peer):
        pass
    wire = Wire()
    try:
        with pytest.raises(RuntimeError, match="only once"):
            await peer.run(wire.reader, wire.writer)
    finally:
        wire.close()


async def test_parent_death_is_treated_as_eof(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonrpc, "_PARENT_POLL_S", 0.01)
    parent = [os.getppid()]
    monkeypatch.setattr(os, "getppid", lambda: parent[0])
    peer = echo_peer(watch_parent=True)
    async with serve(peer) as wire:
        assert (await wire.request(1, "echo", [1]))["result"] == [1]
        parent[0] = 1  # reparented: our parent is gone, though our input is still open
        await wait_until_stopped(peer)
