"""``initialize`` answered before the event loop starts (``protocols/acp/initialize.py``): the bytes the JSON-RPC
peer would have sent, nothing the client wrote lost however it was split, and every other first line left to the
peer, whose answer it always was. The real process over real pipes; every message validated against the schema."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from .. import early_talk
from ..early_talk import EARLY, LATE, answer, catches_sigterm, frame, imported_after_the_answer
from .conftest import ROOT, SCHEMA, Harness, validate_def

pytestmark = pytest.mark.anyio

AGENT_MESSAGE = jsonschema.Draft202012Validator(SCHEMA)
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}, "terminal": True}},
}


def session_new(harness: Harness, request_id: int) -> bytes:
    params = {"cwd": str(harness.workspace), "mcpServers": []}
    return frame({"jsonrpc": "2.0", "id": request_id, "method": "session/new", "params": params})


async def talk(
    harness: Harness, writes: list[bytes], ids: set[Any], *, python: tuple[str, ...] = (), eof: bool = False
) -> tuple[list[bytes], str]:
    """``early_talk.talk`` with the harness's agent at debug level; every stdout line validated against the schema."""
    command = harness.command()
    command = [command[0], *python, *command[1:], "--log-level", "debug"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    lines, log = await early_talk.talk(command, harness.workspace, env, writes, ids, eof=eof)
    for line in lines:
        AGENT_MESSAGE.validate(json.loads(line))
    return lines, log


def needs_a_key(harness: Harness) -> None:
    """A default model whose API key is not set: ``initialize`` names the auth method."""
    harness.config = harness.dir / "keyless.toml"
    harness.config.write_text('[models.m]\nprovider = "openai"\nmodel = "gpt-4.1"\n[agents.a]\nmodel = "m"\n')


@pytest.mark.parametrize("config", ["scripted", "needs a key"])
async def test_initialize_split_in_two_writes_is_answered_early_with_the_bytes_the_peer_sends(
    harness: Harness, config: str
) -> None:
    harness.configure([{"text": "hi"}])
    if config == "needs a key":
        needs_a_key(harness)
    data = frame(INIT)
    early, early_log = await talk(harness, [data[:20], data[20:]], {1})
    # a blank first line is the peer's to skip, so the same initialize after it is answered on the event loop
    late, late_log = await talk(harness, [b"\n" + data], {1})
    assert early == late
    validate_def("InitializeResponse", answer(early, 1)["result"])
    methods = answer(early, 1)["result"]["authMethods"]
    assert [m["id"] for m in methods] == ["configure-model"]  # in every answer: the ACP registry requires one
    assert ("needs an API key" in methods[0]["description"]) == (config == "needs a key")
    assert EARLY in early_log and LATE not in early_log
    assert LATE in late_log and EARLY not in late_log


async def test_initialize_and_session_new_in_one_write_are_both_answered(harness: Harness) -> None:
    harness.configure([{"text": "hi"}])
    lines, log = await talk(harness, [frame(INIT) + session_new(harness, 2)], {1, 2})
    assert EARLY in log
    assert [m.get("id") for m in map(json.loads, lines) if "method" not in m] == [1, 2]
    validate_def("InitializeResponse", answer(lines, 1)["result"])
    validate_def("NewSessionResponse", answer(lines, 2)["result"])


async def test_input_that_ends_before_a_newline_is_still_answered(harness: Harness) -> None:
    harness.configure([{"text": "hi"}])
    lines, log = await talk(harness, [frame(INIT).rstrip(b"\n")], {1}, eof=True)
    validate_def("InitializeResponse", answer(lines, 1)["result"])
    assert LATE in log  # the peer's last line without its newline, as always


@pytest.mark.parametrize(
    ("first", "error"),
    [
        (
            b"{not json",
            {
                "code": -32700,
                "message": "Parse error: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            },
        ),
        (b"[]", {"code": -32600, "message": "Invalid Request: batches are not supported"}),
        (
            b'{"jsonrpc": "1.0", "id": 7, "method": "initialize"}',
            {"code": -32600, "message": 'Invalid Request: "jsonrpc" must be "2.0"'},
        ),
        (
            b'{"jsonrpc": "2.0", "id": null, "method": "initialize"}',
            {"code": -32600, "message": "Invalid Request: id must be a string or an integer"},
        ),
        (
            b'{"jsonrpc": "2.0", "id": 7, "method": "no/such_method"}',
            {"code": -32601, "message": "Method not found: no/such_method"},
        ),
    ],
)
async def test_any_other_first_line_gets_the_peers_answer_and_initialize_follows(
    harness: Harness, first: bytes, error: dict[str, Any]
) -> None:
    harness.configure([{"text": "hi"}])
    lines, log = await talk(harness, [first + b"\n" + frame(INIT)], {1})
    first_answer = json.loads(lines[0])
    assert first_answer["error"] == error
    validate_def("Error", first_answer["error"])
    validate_def("InitializeResponse", answer(lines, 1)["result"])
    assert LATE in log and EARLY not in log


@pytest.mark.parametrize(
    ("capabilities", "named"),
    [({"terminal": [1]}, "terminal"), ({"elicitation": 5}, "elicitation"), ({"fs": {"readTextFile": [1]}}, "fs")],
)
async def test_initialize_params_that_need_validation_are_left_to_the_peer(
    harness: Harness, capabilities: dict[str, Any], named: str
) -> None:
    """A capability of the wrong type: pydantic's -32602, as always (pydantic then loads before that answer), and
    the session goes on: an early answer never accepts what the app would refuse later."""
    harness.configure([{"text": "hi"}])
    bad = {**INIT, "id": 7, "params": {"protocolVersion": 1, "clientCapabilities": capabilities}}
    lines, _ = await talk(harness, [frame(bad) + frame(INIT) + session_new(harness, 2)], {7, 1, 2})
    error = answer(lines, 7)["error"]
    assert error["code"] == -32602 and f"clientCapabilities.{named}" in error["message"]
    validate_def("InitializeResponse", answer(lines, 1)["result"])
    assert "sessionId" in answer(lines, 2)["result"]


def test_the_hand_check_covers_every_client_capability() -> None:
    """Each field of the wire model, given a value of the wrong type, is left to the model: a field added to it
    without a hand check would be accepted early and refused when the app opens."""
    from awaken_stdio.protocols.acp.initialize import client_capabilities
    from awaken_stdio.protocols.acp.wire import ClientCapabilities

    for field in ClientCapabilities.model_fields.values():
        params = {"protocolVersion": 1, "clientCapabilities": {field.alias: 5}}
        assert client_capabilities(params, validate=False) is None, field.alias


async def test_asyncio_and_anyio_are_imported_only_after_the_answer(harness: Harness) -> None:
    harness.configure([{"text": "hi"}])
    lines, log = await talk(harness, [frame(INIT) + session_new(harness, 2)], {1, 2}, python=("-X", "importtime"))
    validate_def("NewSessionResponse", answer(lines, 2)["result"])
    imported_after_the_answer(log, "ssl", "pydantic", "platformdirs")  # --config and --store given


async def test_sigterm_while_waiting_for_the_first_line_exits_0(harness: Harness) -> None:
    harness.configure([{"text": "hi"}])
    process = await anyio.open_process(
        harness.command(), cwd=harness.workspace, env={"PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE
    )
    async with process:
        with anyio.fail_after(30):
            while not catches_sigterm(process.pid):  # the early read's handler is in place: it waits on fd 0
                await anyio.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            assert await process.wait() == 0
        assert process.stdout is not None
        assert b"".join([chunk async for chunk in process.stdout]) == b""


def test_the_early_path_imports_only_the_standard_library() -> None:
    code = (
        "import sys, awaken_stdio.protocols.acp.initialize\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anyio', 'asyncio', 'pydantic', 'sniffio')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(ROOT))
    assert out.stdout.strip() == "[]"
