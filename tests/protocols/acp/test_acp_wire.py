"""The raw wire of ``awaken-stdio acp``: only protocol lines on stdout, bad frames, EOF, and what is loaded when
``initialize`` is answered."""

from __future__ import annotations

import json
import subprocess

import anyio
import pytest

from awaken_stdio.app.startup import HEAVY_MODULES

from .conftest import ROOT, validate_def

pytestmark = pytest.mark.anyio


class RawAgent:
    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.lines: list[bytes] = []

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def request(self, id: int, method: str, params: dict) -> dict:
        await self.send(json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).encode() + b"\n")
        return await self.receive()

    async def receive(self) -> dict:
        assert self.process.stdout is not None
        with anyio.fail_after(20):
            while b"\n" not in self.buffer:
                self.buffer += await self.process.stdout.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.lines.append(line)
        return json.loads(line)


async def _spawn(harness, *extra: str) -> anyio.abc.Process:
    return await anyio.open_process(
        [*harness.command(), *extra],
        cwd=harness.workspace,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stderr=subprocess.PIPE,
    )


async def test_stdout_carries_only_protocol_lines_bad_frames_are_answered_and_eof_exits(harness):
    harness.configure([{"text": "hi"}])
    async with await _spawn(harness, "--log-level", "debug") as process:
        agent = RawAgent(process)
        await agent.send(b"this is not json\n")
        assert (await agent.receive())["error"]["code"] == -32700
        await agent.send(b"[]\n")
        answer = await agent.receive()
        assert answer["id"] is None and answer["error"]["code"] == -32600
        init = await agent.request(1, "initialize", {"protocolVersion": 65535, "clientCapabilities": {}})
        validate_def("InitializeResponse", init["result"])
        assert init["result"]["protocolVersion"] == 1
        assert (await agent.request(2, "no/such_method", {}))["error"]["code"] == -32601
        assert "error" in await agent.request(3, "_vendor/thing", {})
        new = await agent.request(4, "session/new", {"cwd": str(harness.workspace), "mcpServers": []})
        sid = new["result"]["sessionId"]
        await agent.send(
            json.dumps({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
                "sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}).encode() + b"\n"
        )  # fmt: skip
        while "result" not in (message := await agent.receive()) or message.get("id") != 5:
            assert message.get("method") == "session/update"
        assert message["result"] == {"stopReason": "end_turn"}
        await agent.send(
            json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}).encode()
        )
        await agent.send(b"\n")
        assert process.stdin is not None
        await process.stdin.aclose()
        started = anyio.current_time()
        with anyio.fail_after(5):
            assert await process.wait() == 0
        assert anyio.current_time() - started < 3
        assert process.stdout is not None and process.stderr is not None
        rest = agent.buffer + b"".join([chunk async for chunk in process.stdout])
        stderr = b"".join([chunk async for chunk in process.stderr]).decode()
    for line in agent.lines + [line for line in rest.split(b"\n") if line]:
        assert json.loads(line)["jsonrpc"] == "2.0"  # every stdout line is one JSON-RPC message
    assert "DEBUG" in stderr  # logs went to stderr
    # initialize was answered before pydantic, the config models, any provider SDK, MCP client code or database
    # driver was imported
    assert {"pydantic", "awaken_stdio.app.config", "sqlite3", "mcp", "openai"} <= set(HEAVY_MODULES)
    assert "answering initialize; heavy modules loaded: none" in stderr


async def test_a_session_update_before_initialize_is_not_needed_for_session_new(harness):
    """Clients that skip ``initialize`` still get working sessions (the app opens on first use)."""
    harness.configure([{"text": "hi"}])
    async with await _spawn(harness) as process:
        agent = RawAgent(process)
        new = await agent.request(1, "session/new", {"cwd": str(harness.workspace), "mcpServers": []})
        validate_def("NewSessionResponse", new["result"])
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(5):
            await process.wait()


async def test_a_config_that_fails_validation_exits_2_after_the_first_answer(harness):
    """Valid TOML, wrong schema: initialize still answers (from the raw file), then one stderr line and exit 2."""
    config = harness.dir / "config.toml"
    config.write_text('[models.m]\nprovider = "scripted"\nscript = "s.json"\n[agents.a]\nmodel = "m"\nmax_rounds = 0\n')
    harness.config = config
    async with await _spawn(harness) as process:
        agent = RawAgent(process)
        init = await agent.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        validate_def("InitializeResponse", init["result"])
        with anyio.fail_after(10):
            assert await process.wait() == 2  # by itself: stdin is still open
        assert process.stdout is not None and process.stderr is not None
        assert agent.buffer + b"".join([chunk async for chunk in process.stdout]) == b""
        stderr = b"".join([chunk async for chunk in process.stderr]).decode()
    (line,) = stderr.splitlines()
    assert f"{config}: agents.a.max_rounds" in line


async def test_a_config_that_is_not_toml_exits_2_before_serving(harness):
    harness.config = harness.dir / "config.toml"
    harness.config.write_text("[models\n")
    async with await _spawn(harness) as process:
        assert process.stdout is not None and process.stderr is not None
        with anyio.fail_after(10):
            assert await process.wait() == 2
        assert b"".join([chunk async for chunk in process.stdout]) == b""
        assert "invalid TOML" in b"".join([chunk async for chunk in process.stderr]).decode()
