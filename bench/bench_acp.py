"""``awaken-stdio acp`` as an editor sees it: a real process on pipes, driven by a minimal raw JSON-RPC client.

Rows: process start to the ``initialize`` answer (baseline: a bare echo agent on the official ACP Python SDK,
measured in the same run), ``session/new``, prompt overhead with a zero-delay scripted model (a text turn; a tool
turn with a permission round trip, on SQLite), streamed ``session/update`` notifications per second, idle memory
(RSS) and memory per idle session with 1,000 sessions open. Run alone with ``.venv/bin/python -m bench acp``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from bench._process import close_process

STARTS = 10
SESSIONS = 50
PROMPTS = 100
STREAM_CHARS = 50_000
IDLE_SESSIONS = 1_000
ROOT = Path(__file__).resolve().parents[1]

ECHO_AGENT = """
import asyncio
from acp import run_agent
from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

class Echo:
    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        return InitializeResponse(protocol_version=1)
    async def new_session(self, cwd, mcp_servers=None, **kw):
        return NewSessionResponse(session_id="s")
    async def prompt(self, prompt, session_id, **kw):
        return PromptResponse(stop_reason="end_turn")
    def on_connect(self, conn):
        pass

asyncio.run(run_agent(Echo()))
"""


class Client:
    """Just enough of an ACP client: requests, counting updates, allowing every permission at once."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.ids = 0
        self.updates = 0

    async def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            self.buffer += await self.process.stdout.receive(1 << 20)
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.ids += 1
        await self._send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        while True:
            message = await self._line()
            if message.get("method") == "session/update":
                self.updates += 1
            elif message.get("method") == "session/request_permission":
                option = {"outcome": "selected", "optionId": "allow_once"}
                await self._send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": option}})
            elif message.get("id") == self.ids:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")


def _config(directory: Path, turns: list[dict[str, Any]]) -> Path:
    (directory / "script.json").write_text(json.dumps({"turns": turns}))
    config = directory / "config.toml"
    config.write_text(
        '[models.m]\nprovider = "scripted"\nscript = "script.json"\n'
        f'[agents.bench]\nmodel = "m"\nmax_rounds = {2 * PROMPTS + 10}\n'
    )
    return config


def _agent(directory: Path, config: Path, name: str) -> list[str]:
    store = f"sqlite:///{directory / (name + '.db')}"
    return [sys.executable, "-m", "awaken_stdio", "acp", "--config", str(config), "--store", store]


async def _spawn(command: list[str], cwd: Path) -> anyio.abc.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return await anyio.open_process(command, cwd=cwd, env=env, stderr=None)


async def _start_ms(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    process = await _spawn(command, cwd)
    client = Client(process)
    await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    elapsed = (time.perf_counter() - started) * 1000
    await close_process(process)
    return elapsed


async def _median_ms(calls: int, call: Any) -> float:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        work = d / "work"
        work.mkdir()
        (d / "echo.py").write_text(ECHO_AGENT)
        text_turns = [{"text": "ok"} for _ in range(PROMPTS + 1)]
        config = _config(d, text_turns)
        ours = [await _start_ms(_agent(d, config, "start"), work) for _ in range(STARTS)]
        echo = [await _start_ms([sys.executable, str(d / "echo.py")], work) for _ in range(STARTS)]
        rows.append(
            {
                "benchmark": "acp start",
                "metric": "process start -> initialize answer (median)",
                "value": statistics.median(ours),
                "unit": "ms",
                "baseline": statistics.median(echo),
                "note": "baseline: bare echo agent on the official ACP Python SDK",
            }
        )

        process = await _spawn(_agent(d, config, "text"), work)
        client = Client(process)
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = {"cwd": str(work), "mcpServers": []}
        session: dict[str, Any] = {}

        async def new_session() -> None:
            session.update(await client.request("session/new", new))

        rows.append({"benchmark": "acp session/new", "metric": "latency (median, SQLite)",
                     "value": await _median_ms(SESSIONS, new_session), "unit": "ms"})  # fmt: skip
        prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "hi"}]}
        text_ms = await _median_ms(PROMPTS, lambda: client.request("session/prompt", prompt))
        rows.append({"benchmark": "acp prompt", "metric": "text turn overhead (median, zero-delay model, SQLite)",
                     "value": text_ms, "unit": "ms"})  # fmt: skip
        await close_process(process)

        tool_turns: list[dict[str, Any]] = []
        for i in range(PROMPTS):
            call = {"name": "write_file", "arguments": {"path": f"f{i}.txt", "content": "x"}}
            tool_turns += [{"tool_calls": [call]}, {"text": "done"}]
        config = _config(d, tool_turns)
        process = await _spawn(_agent(d, config, "tool"), work)
        client = Client(process)
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        sid = (await client.request("session/new", new))["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]}
        tool_ms = await _median_ms(PROMPTS, lambda: client.request("session/prompt", prompt))
        rows.append({"benchmark": "acp prompt", "metric": "tool turn + permission round trip (median, SQLite)",
                     "value": tool_ms, "unit": "ms", "note": "two model calls, one write_file"})  # fmt: skip
        await close_process(process)

        config = _config(d, [{"text": "x" * STREAM_CHARS, "chunk_chars": 1}])
        process = await _spawn(_agent(d, config, "stream"), work)
        client = Client(process)
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        sid = (await client.request("session/new", new))["sessionId"]
        client.updates = 0
        started = time.perf_counter()
        await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        rate = client.updates / (time.perf_counter() - started)
        rows.append({"benchmark": "acp stream", "metric": "session/update notifications per second",
                     "value": rate, "unit": "1/s", "note": f"{client.updates} agent_message_chunk"})  # fmt: skip
        await close_process(process)

        config = _config(d, [{"text": "ok"}])
        process = await _spawn(_agent(d, config, "idle"), work)
        client = Client(process)
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await client.request("session/new", new)
        await anyio.sleep(0.2)
        idle = client.rss_kb()
        rows.append({"benchmark": "acp memory", "metric": "idle RSS (one session)", "value": idle / 1024, "unit": "MB"})
        for _ in range(IDLE_SESSIONS - 1):
            await client.request("session/new", new)
        await anyio.sleep(0.2)
        per = (client.rss_kb() - idle) / (IDLE_SESSIONS - 1)
        rows.append({"benchmark": "acp memory", "metric": f"RSS per idle session ({IDLE_SESSIONS} open)",
                     "value": per, "unit": "KB"})  # fmt: skip
        await close_process(process)
    return rows


if __name__ == "__main__":
    for row in anyio.run(run):
        print(row)
