"""``awaken-stdio mcp`` on the raw wire: era rules and errors byte by byte, stdout purity, bad frames, exit on EOF and
on parent death, kill -9 while a run waits, and tool-list changes of a configured MCP server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
import pytest

from tests.protocols.mcp.support import REPO, Env, check_wire, connect, make_env, turn

pytestmark = [pytest.mark.anyio]
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


class Raw:
    """A server process and a line-level client: every stdout line must parse, and is kept for the model check."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []

    async def send(self, message: Any) -> None:
        if isinstance(message, dict):
            self.sent.append(message)
        await self.write((json.dumps(message) + "\n").encode())

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        assert self.process.stdout is not None
        with anyio.fail_after(timeout):
            while b"\n" not in self.buffer:
                self.buffer += await self.process.stdout.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        message = json.loads(line)
        self.received.append(message)
        return message

    async def answer(self, timeout: float = 10) -> dict[str, Any]:
        """The next answer, past any notification (a late tool list change may come between)."""
        while "method" in (message := await self.receive(timeout)):
            pass
        return message

    async def request(self, id: Any, method: str, params: Any = None) -> dict[str, Any]:
        frame = {"jsonrpc": "2.0", "id": id, "method": method, **({"params": params} if params is not None else {})}
        await self.send(frame)
        while True:
            message = await self.answer()
            if message.get("id") == id:
                return message


async def spawn(env: Env) -> Raw:
    process = await anyio.open_process(env.command(), env=env.environ(), stderr=subprocess.DEVNULL)
    return Raw(process)


async def close(raw: Raw) -> float:
    """Close stdin; how long the process took to exit. Checks the rest of stdout too."""
    assert raw.process.stdin is not None and raw.process.stdout is not None
    await raw.process.stdin.aclose()
    started = time.monotonic()
    with anyio.fail_after(5):
        rest = b"".join([chunk async for chunk in raw.process.stdout])
        await raw.process.wait()
    for line in (raw.buffer + rest).split(b"\n"):
        if line.strip():
            raw.received.append(json.loads(line))
    check_wire(raw.sent, [m for m in raw.received if m.get("id") is not None or "method" in m])
    return time.monotonic() - started


async def test_legacy_handshake_rules(tmp_path: Path) -> None:
    raw = await spawn(make_env(tmp_path))
    early = await raw.request(1, "tools/list")
    assert early["error"]["code"] == -32602
    assert (await raw.request(2, "ping"))["result"] == {}
    init = await raw.request(3, "initialize", {**INIT, "protocolVersion": "2024-11-05"})
    assert init["result"]["protocolVersion"] == "2024-11-05"
    assert init["result"]["capabilities"] == {
        "tools": {"listChanged": True},
        "logging": {},
        "resources": {"subscribe": True, "listChanged": False},
        "prompts": {"listChanged": False},
        "completions": {},
    }
    await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (await raw.request(4, "initialize", {**INIT, "protocolVersion": "2099-01-01"}))["result"][
        "protocolVersion"] == "2025-11-25"  # fmt: skip
    assert (await raw.request(5, "nope"))["error"]["code"] == -32601
    assert (await raw.request(6, "server/discover", {"_meta": ENVELOPE}))["error"]["code"] == -32600
    assert (await raw.request(7, "tools/list", {"cursor": "garbage!"}))["error"]["code"] == -32602
    listed = await raw.request(8, "tools/list", {"cursor": ""})
    assert "nextCursor" not in listed["result"] and len(listed["result"]["tools"]) > 5
    assert await close(raw) < 1.0


async def test_modern_era_rules(tmp_path: Path) -> None:
    raw = await spawn(make_env(tmp_path))
    discover = (await raw.request(1, "server/discover", {"_meta": ENVELOPE}))["result"]
    assert discover["supportedVersions"] == ["2026-07-28"] and discover["resultType"] == "complete"
    assert discover["capabilities"]["tools"] == {"listChanged": True} and discover["cacheScope"] == "private"
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "awaken-stdio"
    missing = await raw.request(2, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert missing["error"]["code"] == -32602 and "clientCapabilities" in missing["error"]["message"]
    bare = await raw.request(3, "tools/list", {})
    assert bare["error"]["code"] == -32602
    old = await raw.request(4, "tools/list", {"_meta": {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "1999"}})
    assert old["error"]["code"] == -32022
    assert old["error"]["data"] == {"supported": ["2026-07-28"], "requested": "1999"}
    init = await raw.request(5, "initialize", INIT)
    assert init["error"]["code"] == -32022 and init["error"]["data"]["supported"] == ["2026-07-28"]
    assert (await raw.request(6, "ping", {"_meta": ENVELOPE}))["error"]["code"] == -32601
    listed = (await raw.request(7, "tools/list", {"_meta": ENVELOPE}))["result"]
    assert listed["ttlMs"] >= 0 and listed["resultType"] == "complete"
    assert await close(raw) < 1.0


async def test_bad_frames_are_answered_and_stdout_stays_clean(tmp_path: Path) -> None:
    raw = await spawn(make_env(tmp_path))
    await raw.request(1, "initialize", INIT)
    await raw.write(b"this is not json\n")
    assert (await raw.answer())["error"]["code"] == -32700
    await raw.write(b'[{"jsonrpc": "2.0", "id": 9, "method": "ping"}]\n')
    assert (await raw.answer())["error"]["code"] == -32600
    await raw.write(b'{"jsonrpc": "2.0", "id": null, "method": "ping"}\n')
    assert (await raw.answer())["error"]["code"] == -32600
    await raw.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": []}\n')
    assert (await raw.answer())["error"]["code"] == -32602
    huge = b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": "' + b"x" * (33 * 1024 * 1024) + b'"}}\n'
    await raw.write(huge)
    answer = await raw.answer(timeout=20)
    assert answer["error"]["code"] == -32600 and answer["id"] is None
    assert (await raw.request(4, "ping"))["result"] == {}
    assert await close(raw) < 1.0


async def test_exits_when_the_parent_dies(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    pid_file = tmp_path / "server.pid"
    command = " ".join(f"'{c}'" for c in env.command())
    # sleep holds the server's stdin open, so only the parent's death can end it.
    parent = subprocess.Popen(
        ["sh", "-c", f"sleep 60 | {command} & echo $! > '{pid_file}'; wait"],
        env=env.environ(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        with anyio.fail_after(5):
            while not pid_file.exists() or not pid_file.read_text().strip():
                await anyio.sleep(0.02)
        server = int(pid_file.read_text())
        await anyio.sleep(0.5)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        with anyio.fail_after(3):
            while _alive(server):
                await anyio.sleep(0.05)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_waiting_run_survives_kill_9(tmp_path: Path) -> None:
    env = make_env(tmp_path, [turn("Marking.", {"name": "mark", "arguments": {"label": "one"}}), turn("Done.")])
    raw = await spawn(env)
    await raw.request(1, "initialize", INIT)
    await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    waiting = (await raw.request(2, "tools/call", {"name": "agent_helper", "arguments": {"message": "m"}}))["result"]
    data = waiting["structuredContent"]
    assert data["status"] == "waiting"
    raw.process.kill()
    await raw.process.wait()
    decisions = [{"tool_call_id": data["pending"][0]["tool_call_id"], "approve": True}]
    async with connect(env, "auto") as client:  # a new process, in the other era
        done = await client.call_tool("resume_run", {"run_id": data["run_id"], "decisions": decisions})
        assert done.structured_content["status"] == "completed"
        again = await client.call_tool("resume_run", {"run_id": data["run_id"], "decisions": decisions})
        assert again.is_error
    assert env.marks == ["one"]


SERVER = REPO / "tests" / "tools" / "mcp_servers" / "server.py"
DEMO = f"""
[mcp_servers.demo]
command = "{sys.executable}"
args = ["{SERVER}"]
timeout_s = 20
"""


async def test_tools_of_a_configured_server_and_list_changed_legacy(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=DEMO)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(env, "legacy", message_handler=on_message) as client:
        names = {t.name for t in (await client.list_tools()).tools}  # complete on the first listing
        assert {"demo__echo", "demo__grow"} <= names
        changed = anyio.Event()  # not the notice of the demo server's tools arriving: the one of its growing
        echoed = await client.call_tool("demo__echo", {"text": "via demo"})
        assert "via demo" in echoed.content[0].text
        await client.call_tool("demo__grow", {})
        with anyio.fail_after(10):
            await changed.wait()
        assert len((await client.list_tools()).tools) > len(names)


async def test_list_changed_modern_listen(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=DEMO)
    async with connect(env, "auto") as client:
        before = len((await client.list_tools()).tools)
        async with client.listen(tools_list_changed=True) as events:
            await client.call_tool("demo__grow", {})
            with anyio.fail_after(10):
                async for _ in events:
                    break
        assert len((await client.list_tools()).tools) > before


async def test_first_answer_before_pydantic_and_a_config_that_fails_validation(tmp_path: Path) -> None:
    """The first answer comes before pydantic loads; a schema error then fails the waiting request with -32603, is
    written to stderr once, and the process exits 2."""
    env = make_env(tmp_path, extra="[tools.oops]\n")  # valid TOML, unknown field
    process = await anyio.open_process(
        [*env.command(), "--log-level", "debug"], env=env.environ(), stderr=subprocess.PIPE
    )
    raw = Raw(process)
    init = await raw.request(1, "initialize", INIT)
    assert init["result"]["serverInfo"]["name"] == "awaken-stdio"
    with anyio.fail_after(10):
        assert await process.wait() == 2  # by itself: stdin is still open
    assert process.stderr is not None
    stderr = b"".join([chunk async for chunk in process.stderr]).decode()
    assert "answering initialize; heavy modules loaded: none" in stderr
    assert stderr.count("tools.oops: unknown field") == 1
    assert stderr.splitlines()[-1].startswith("awaken-stdio: error: ")
    quiet = subprocess.run(  # at the default log level, that line is all there is
        env.command(), env=env.environ(), input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": INIT}) + "\n", capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert quiet.returncode == 2
    assert [json.loads(line)["id"] for line in quiet.stdout.splitlines()] == [1]
    (line,) = quiet.stderr.splitlines()
    assert f"{env.config}: tools.oops: unknown field" in line


async def test_a_config_that_is_not_toml_exits_2_before_serving(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.config.write_text("[models\n")
    done = subprocess.run(env.command(), env=env.environ(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert "invalid TOML" in done.stderr
