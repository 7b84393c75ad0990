"""``awaken-stdio mcp`` against a minimal SDK server (``mcp_sdk_baseline.py``, the same ``echo`` tool), same run.

Rows: process start to the first answer (``initialize``), sequential trivial ``tools/call`` round trips per second,
the overhead of an agent tool call with a zero-delay scripted model (its call time minus a plain tool call's), and
the idle resident memory after the first listing. Raw JSON-RPC lines over pipes, so the client costs nothing.
Run alone with ``.venv/bin/python -m bench mcp``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from bench._process import close_process, exit_after_eof_ms

HERE = Path(__file__).parent
ROUND_TRIPS = 500
AGENT_CALLS = 50
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
CONFIG = """
[models.zero]
provider = "scripted"
script = "zero.json"

[agents.zero]
model = "zero"
expose_mcp = true
tools = []

[tools]
builtin = false
modules = ["mcp_test_tools"]
"""


class _Peer:
    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.ids = 0

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.ids += 1
        frame = {"jsonrpc": "2.0", "id": self.ids, "method": method, **({"params": params} if params else {})}
        await self.process.stdin.send((json.dumps(frame) + "\n").encode())
        while True:
            while b"\n" not in self.buffer:
                self.buffer += await self.process.stdout.receive()
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == self.ids:
                return message


async def _measure(command: list[str], env: dict[str, str] | None, agent: bool) -> dict[str, float]:
    started = time.perf_counter()
    process = await anyio.open_process(command, env=env, stderr=None)
    peer = _Peer(process)
    out: dict[str, float] = {}
    try:
        await peer.request("initialize", INIT)
        out["first_answer_ms"] = (time.perf_counter() - started) * 1000
        await peer.request("tools/list")
        await anyio.sleep(0.5)
        out["idle_rss_mb"] = _rss_mb(process.pid)
        echo = {"name": "echo", "arguments": {"text": "hi"}}
        begin = time.perf_counter()
        for _ in range(ROUND_TRIPS):
            await peer.request("tools/call", echo)
        out["calls_per_s"] = ROUND_TRIPS / (time.perf_counter() - begin)
        if agent:
            begin = time.perf_counter()
            for _ in range(AGENT_CALLS):
                result = await peer.request("tools/call", {"name": "agent_zero", "arguments": {"message": "hi"}})
                assert result["result"]["structuredContent"]["status"] == "completed", result
            per_call = (time.perf_counter() - begin) / AGENT_CALLS
            out["agent_overhead_ms"] = (per_call - 1 / out["calls_per_s"]) * 1000
        out["exit_ms"] = await exit_after_eof_ms(process)
    finally:
        await close_process(process)
    return out


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run() -> list[dict[str, Any]]:
    import os

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "zero.json").write_text(json.dumps({"turns": [{"text": "ok"}] * (AGENT_CALLS + 5)}))
        (root / "config.toml").write_text(CONFIG)
        tools = HERE.parent / "tests" / "protocols" / "mcp"
        env = {**os.environ, "PYTHONPATH": f"{tools}{os.pathsep}{HERE.parent}"}
        ours = await _measure(
            [sys.executable, "-m", "awaken_stdio", "mcp", "--config", str(root / "config.toml"),
             "--store", f"sqlite:///{root / 'store.db'}", "--cwd", tmp],
            env, agent=True,
        )  # fmt: skip
        base = await _measure([sys.executable, str(HERE / "mcp_sdk_baseline.py")], None, agent=False)

    def row(metric: str, unit: str, note: str = "") -> dict[str, Any]:
        return {"benchmark": "mcp", "metric": metric, "value": ours[metric], "unit": unit,
                "baseline": base.get(metric), "note": note}  # fmt: skip

    return [
        row("first_answer_ms", "ms", "process start to the initialize answer; aim <= 1/4 of the SDK server's"),
        row("calls_per_s", "1/s", "sequential trivial tools/call round trips; aim >= the SDK server's"),
        row("agent_overhead_ms", "ms", "agent call (zero-delay scripted model, SQLite) minus a tool call; aim <= 5"),
        row("idle_rss_mb", "MB", "resident memory after the first tools/list"),
        row("exit_ms", "ms", "idle server: stdin EOF to the process's exit; goal <= 100"),
    ]
