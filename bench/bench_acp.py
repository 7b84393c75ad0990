"""``awaken-stdio acp`` as an editor sees it: a real process on pipes, driven by a minimal raw JSON-RPC client.

Every figure has its baseline measured in the same run, on the official ACP Python SDK: a bare agent that stores
nothing, answers ``initialize`` and ``session/new``, and answers a prompt with one ``agent_message_chunk``. Rows:
process start to the ``initialize`` answer; ``session/new``; a text turn with a zero-delay scripted model on SQLite
(median over 200 turns of one session, and its growth: the median of the last quarter over the first); the first
streamed chunk after a prompt; a tool turn with a permission round trip; the SQLite transactions (``BEGIN``s) one
text turn and one approved tool turn run, counted by ``bench/_trace``; streamed ``session/update`` notifications
per second; idle memory and memory per idle session with 1,000 sessions open. Run alone: ``python -m bench acp``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from bench._process import close_process, exit_after_eof_ms

STARTS = 10
SESSIONS = 50
TURNS = 200  # text turns on one session: the median and the growth from the first quarter to the last
PROMPTS = 100
STREAM_CHARS = 50_000
IDLE_SESSIONS = 1_000
ROOT = Path(__file__).resolve().parents[1]
TRACE = Path(__file__).resolve().parent / "_trace"
SDK = "baseline: bare agent on the official ACP Python SDK"

SDK_AGENT = """
import asyncio
from acp import run_agent, update_agent_message_text
from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

class Echo:
    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        return InitializeResponse(protocol_version=1)
    async def new_session(self, cwd, mcp_servers=None, **kw):
        return NewSessionResponse(session_id="s")
    async def prompt(self, prompt, session_id, **kw):
        await self.conn.session_update(session_id, update_agent_message_text("ok"))
        return PromptResponse(stop_reason="end_turn")
    def on_connect(self, conn):
        self.conn = conn

asyncio.run(run_agent(Echo()))
"""


class Client:
    """Just enough of an ACP client: requests, counting updates, allowing every permission at once."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.ids = 0
        self.updates = 0
        self.first_update: float | None = None  # perf_counter of the current request's first update

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
        self.first_update = None
        await self._send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        while True:
            message = await self._line()
            if message.get("method") == "session/update":
                self.updates += 1
                if self.first_update is None and message["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
                    self.first_update = time.perf_counter()
            elif message.get("method") == "session/request_permission":
                option = {"outcome": "selected", "optionId": "allow_once"}
                await self._send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": option}})
            elif message.get("id") == self.ids:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    async def initialize(self) -> None:
        await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    async def new_session(self, cwd: Path) -> str:
        return str((await self.request("session/new", {"cwd": str(cwd), "mcpServers": []}))["sessionId"])

    async def prompt(self, session_id: str, text: str = "hi") -> float:
        """One prompt; the milliseconds from sending it to its first agent_message_chunk."""
        started = time.perf_counter()
        await self.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
        return ((self.first_update or time.perf_counter()) - started) * 1000

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
        f'[agents.bench]\nmodel = "m"\nmax_rounds = {2 * TURNS + 10}\n'
    )
    return config


def _agent(directory: Path, config: Path, name: str) -> list[str]:
    store = f"sqlite:///{directory / (name + '.db')}"
    return [sys.executable, "-m", "awaken_stdio", "acp", "--config", str(config), "--store", store]


async def _spawn(command: list[str], cwd: Path, begins: Path | None = None) -> anyio.abc.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if begins is not None:  # bench/_trace/sitecustomize.py counts the process's BEGINs into that file
        env |= {"PYTHONPATH": f"{TRACE}{os.pathsep}{ROOT}", "AWAKEN_BENCH_BEGINS": str(begins)}
    return await anyio.open_process(command, cwd=cwd, env=env, stderr=None)


async def _session(command: list[str], cwd: Path, begins: Path | None = None) -> tuple[Client, str]:
    client = Client(await _spawn(command, cwd, begins))
    await client.initialize()
    return client, await client.new_session(cwd)


async def _start_ms(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    process = await _spawn(command, cwd)
    await Client(process).initialize()
    elapsed = (time.perf_counter() - started) * 1000
    await close_process(process)
    return elapsed


async def _timed(calls: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _row(benchmark: str, metric: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    return {"benchmark": benchmark, "metric": metric, "value": value, "unit": unit, **extra}


def _growth(times: list[float]) -> float:
    quarter = len(times) // 4
    return statistics.median(times[-quarter:]) / statistics.median(times[:quarter])


async def _turns(client: Client, sid: str) -> tuple[list[float], list[float]]:
    """TURNS text turns: each one's milliseconds, and each one's to its first streamed chunk."""
    total, first = [], []
    for _ in range(TURNS):
        started = time.perf_counter()
        first.append(await client.prompt(sid))
        total.append((time.perf_counter() - started) * 1000)
    return total, first


def _begins(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _begins_per(client: Client, path: Path, calls: int, call: Callable[[], Awaitable[Any]]) -> float:
    await call()  # the first may load what later ones reuse
    before = _begins(path)
    for _ in range(calls):
        await call()
    await anyio.sleep(0.05)
    return (_begins(path) - before) / calls


async def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        work = d / "work"
        work.mkdir()
        (d / "sdk.py").write_text(SDK_AGENT)
        sdk = [sys.executable, str(d / "sdk.py")]
        config = _config(d, [{"text": "ok"} for _ in range(TURNS + 30)])
        ours = [await _start_ms(_agent(d, config, "start"), work) for _ in range(STARTS)]
        theirs = [await _start_ms(sdk, work) for _ in range(STARTS)]
        rows.append(_row("acp start", "process start -> initialize answer (median)", statistics.median(ours), "ms",
                         baseline=statistics.median(theirs), note=f"goal <= 0.15x; {SDK}"))  # fmt: skip

        client, sid = await _session(_agent(d, config, "text"), work)
        news = await _timed(SESSIONS, lambda: client.new_session(work))
        rows.append(_row("acp session/new", "latency (median, SQLite)", statistics.median(news), "ms"))
        total, first = await _turns(client, sid)
        await close_process(client.process)
        client, sid = await _session(sdk, work)
        sdk_total, sdk_first = await _turns(client, sid)
        await close_process(client.process)
        rows += [
            _row("acp prompt", f"text turn (median of {TURNS}, zero-delay model, SQLite)", statistics.median(total),
                 "ms", baseline=statistics.median(sdk_total), note=f"goal <= 3 ms (<= 12x); {SDK}, stores nothing"),
            _row("acp prompt", f"growth over {TURNS} turns (last quarter / first quarter)", _growth(total), "x",
                 baseline=_growth(sdk_total), note="goal <= 1.2"),
            _row("acp prompt", "prompt -> first agent_message_chunk (median)", statistics.median(first), "ms",
                 baseline=statistics.median(sdk_first), note=f"goal <= 3 ms; {SDK}"),
        ]  # fmt: skip

        begins = d / "text.begins"
        client, sid = await _session(_agent(d, config, "count"), work, begins)
        per_turn = await _begins_per(client, begins, 20, lambda: client.prompt(sid))
        await close_process(client.process)
        rows.append(_row("acp prompt", "SQLite transactions per text turn", per_turn, "BEGINs",
                         note="goal <= 4; bench/_trace counts them"))  # fmt: skip

        tool_turns: list[dict[str, Any]] = []
        for i in range(PROMPTS + 30):
            call = {"name": "write_file", "arguments": {"path": f"f{i}.txt", "content": "x"}}
            tool_turns += [{"tool_calls": [call]}, {"text": "done"}]
        config = _config(d, tool_turns)
        client, sid = await _session(_agent(d, config, "tool"), work)
        tool_ms = await _timed(PROMPTS, lambda: client.prompt(sid, "write"))
        await close_process(client.process)
        rows.append(_row("acp prompt", "tool turn + permission round trip (median, SQLite)", statistics.median(tool_ms),
                         "ms", note="two model calls, one write_file"))  # fmt: skip
        begins = d / "tool.begins"
        client, sid = await _session(_agent(d, config, "toolcount"), work, begins)
        per_tool = await _begins_per(client, begins, 20, lambda: client.prompt(sid, "write"))
        await close_process(client.process)
        rows.append(_row("acp prompt", "SQLite transactions per approved tool turn", per_tool, "BEGINs",
                         note="goal <= 7 (an approval cycle)"))  # fmt: skip

        config = _config(d, [{"text": "x" * STREAM_CHARS, "chunk_chars": 1}])
        client, sid = await _session(_agent(d, config, "stream"), work)
        client.updates = 0
        started = time.perf_counter()
        await client.prompt(sid, "go")
        rate = client.updates / (time.perf_counter() - started)
        await close_process(client.process)
        rows.append(_row("acp stream", "session/update notifications per second", rate, "1/s",
                         note=f"{client.updates} agent_message_chunk"))  # fmt: skip

        config = _config(d, [{"text": "ok"}])
        client, _ = await _session(_agent(d, config, "idle"), work)
        await anyio.sleep(0.2)
        idle, files = client.rss_kb(), _data_bytes(d, "idle")
        rows.append(_row("acp memory", "idle RSS (one session)", idle / 1024, "MB"))
        for _ in range(IDLE_SESSIONS - 1):
            await client.new_session(work)
        await anyio.sleep(0.2)
        per = (client.rss_kb() - idle) / (IDLE_SESSIONS - 1)
        rows.append(_row("acp memory", f"RSS per idle session ({IDLE_SESSIONS} open)", per, "KB",
                         note="goal <= 2.5 KB"))  # fmt: skip
        await anyio.sleep(0.3)  # the idle store's checkpoint
        running = (_data_bytes(d, "idle") - files) / 1e6
        exit_ms = await exit_after_eof_ms(client.process)
        after = (_data_bytes(d, "idle") - files) / 1e6
        for when, grown in (("server running", running), ("after its exit", after)):
            rows.append(_row("acp files", f"data directory growth over {IDLE_SESSIONS - 1} session/new, {when}",
                             grown, "MB", note="database, WAL and shared-memory files; goal <= 5 MB"))  # fmt: skip
        client, _ = await _session(sdk, work)
        sdk_exit_ms = await exit_after_eof_ms(client.process)
        rows.append(_row("acp exit", "idle server: stdin EOF -> exit", exit_ms, "ms", baseline=sdk_exit_ms,
                         note=f"goal <= 100 ms; {SDK}"))  # fmt: skip
    return rows


def _data_bytes(directory: Path, name: str) -> int:
    """The bytes of a store's files: the database, its WAL and its shared-memory index."""
    files = [directory / f"{name}.db{suffix}" for suffix in ("", "-wal", "-shm")]
    return sum(f.stat().st_size for f in files if f.exists())


if __name__ == "__main__":
    for row in anyio.run(run):
        print(row)
