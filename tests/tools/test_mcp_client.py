"""MCP servers as toolsets, against real servers over real pipes and real HTTP on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from awaken_stdio.app.assemble import configured_specs, mcp_server_spec
from awaken_stdio.app.config import McpServerConfig
from awaken_stdio.contract.errors import ConfigError, ToolError
from awaken_stdio.contract.events import ActivitySnapshot, AgentEvent
from awaken_stdio.contract.state import Snapshot
from awaken_stdio.contract.tools import Tool, ToolCallContext
from awaken_stdio.tools.mcp import (
    McpServerSpec,
    McpServerStatus,
    McpTool,
    RestartPolicy,
    open_mcp_toolsets,
    server_environment,
)
from awaken_stdio.tools.schema import check_portable

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).parent / "mcp_servers" / "server.py"
LOGGER = "awaken_stdio.tools.mcp"
FAST_RESTART = RestartPolicy(initial_s=0.05, max_s=0.2, max_failures=2)


def stdio(name: str, *mode: str, **kw: Any) -> McpServerSpec:
    return McpServerSpec(
        name=name, transport="stdio", command=sys.executable, args=(str(SERVER), *mode), **{"timeout_s": 15, **kw}
    )


class Calls:
    """Tool call contexts whose progress reports are recorded and can be awaited."""

    def __init__(self) -> None:
        self.progress: list[dict[str, Any]] = []
        self._changed = anyio.Event()

    def ctx(self, tool: Tool) -> ToolCallContext:
        return ToolCallContext(
            call_id="call-1",
            tool_name=tool.name,
            thread_id="thread",
            run_id="run",
            agent_id="agent",
            snapshot=Snapshot(revision=0),
            emit=self._emit,
        )

    async def _emit(self, event: AgentEvent) -> None:
        assert isinstance(event, ActivitySnapshot)
        self.progress.append(event.content)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_progress(self, count: int) -> None:
        while len(self.progress) < count:
            await self._changed.wait()


class LogWatch(logging.Handler):
    """The records of our logger (server stderr included), awaitable by text."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self._changed = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, text: str) -> str:
        while True:
            for line in self.lines:
                if text in line:
                    return line
            await self._changed.wait()


@pytest.fixture
def logs() -> Iterator[LogWatch]:
    watch = LogWatch()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(watch)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield watch
    logger.removeHandler(watch)
    logger.setLevel(level)


class Changes:
    """``on_change`` as a stream of statuses that tests can wait on."""

    def __init__(self) -> None:
        self.seen: list[McpServerStatus] = []
        self._changed = anyio.Event()

    async def __call__(self, status: McpServerStatus) -> None:
        self.seen.append(status)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait(self, name: str, state: str, *, after: int = 0) -> McpServerStatus:
        while True:
            for status in self.seen[after:]:
                if status.name == name and status.state == state:
                    return status
            await self._changed.wait()


def by_name(tools: list[Tool]) -> dict[str, McpTool]:
    return {t.name: t for t in tools if isinstance(t, McpTool)}


def process_alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody reaps."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


# -- specs -------------------------------------------------------------------------------------------------------


def test_specs_from_config_and_acp() -> None:
    spec = mcp_server_spec("fs", McpServerConfig(command="npx", args=["-y", "srv"], env={"K": "s3cret"}))
    assert (spec.transport, spec.command, spec.args, dict(spec.env), spec.timeout_s) == (
        "stdio", "npx", ("-y", "srv"), {"K": "s3cret"}, 30.0,
    )  # fmt: skip
    assert "s3cret" not in repr(spec)  # env values are secrets
    http = mcp_server_spec("web", McpServerConfig(url="https://x.test/mcp", headers={"A": "b"}))
    assert (http.transport, http.url, dict(http.headers)) == ("http", "https://x.test/mcp", {"A": "b"})
    assert [s.name for s in configured_specs({"a": McpServerConfig(command="a"),
                                              "b": McpServerConfig(command="b", enabled=False)})] == ["a"]  # fmt: skip

    acp = McpServerSpec.from_acp(
        {"name": "fs", "command": "/bin/srv", "args": ["x"], "env": [{"name": "K", "value": "v"}]}, cwd="/w"
    )
    assert (acp.command, acp.args, dict(acp.env), acp.cwd) == ("/bin/srv", ("x",), {"K": "v"}, "/w")
    acp_http = McpServerSpec.from_acp(
        {"type": "http", "name": "web", "url": "http://h/mcp", "headers": [{"name": "Authorization", "value": "t"}]}
    )
    assert dict(acp_http.headers) == {"Authorization": "t"}

    bad: list[Any] = [
        {"type": "sse", "name": "s", "url": "http://h"},
        {"name": "s", "command": "x", "args": "not a list"},
        {"name": "s", "command": "x", "args": [], "env": [{"name": "K"}]},
        {"name": "", "command": "x"},
        {"type": "http", "name": "s", "url": "ftp://h"},
        "nope",
    ]
    for entry in bad:
        with pytest.raises(ConfigError):
            McpServerSpec.from_acp(entry)
    with pytest.raises(ConfigError, match="unsupported MCP transport 'sse'"):
        McpServerSpec.from_acp(bad[0])
    with pytest.raises(ConfigError, match="exactly one"):
        mcp_server_spec("x", McpServerConfig())


def test_server_environment_is_an_allow_list() -> None:
    ours = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "OPENAI_API_KEY": "sk-1", "FUNC": "() { :; }", "LANG": "C"}
    assert server_environment({"GIVEN": "1"}, ours) == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "LANG": "C",
                                                         "GIVEN": "1"}  # fmt: skip


def test_importing_the_module_does_not_import_mcp() -> None:
    code = "import sys, awaken_stdio.tools.mcp; print(sorted(m for m in sys.modules if m.startswith('mcp')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.strip() == "[]"


async def test_duplicate_tool_prefixes_are_refused() -> None:
    with pytest.raises(ConfigError, match="same tool prefix"):
        async with open_mcp_toolsets([stdio("a b"), stdio("a_b")]):
            pass


# -- listing and calls -------------------------------------------------------------------------------------------


async def test_listing_calls_and_environment(logs: LogWatch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWAKEN_TEST_SECRET", "s3cret")
    calls = Calls()
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("srv", env={"GIVEN": "yes"})]) as toolsets:
            tools = by_name(toolsets.tools())
            # Every page was read (the server lists three tools a page), names are safe and at most 64 characters.
            assert len(tools) == 14
            assert {"srv__echo", "srv__weird_name_", "srv__nested"} <= set(tools)
            assert all(len(name) <= 64 for name in tools)
            assert any(name.startswith("srv__xxx") and len(name) == 64 for name in tools)
            assert toolsets.status("srv") == McpServerStatus(
                name="srv", transport="stdio", state="ready", tools=tuple(sorted(tools))
            )

            echo, delete = tools["srv__echo"].descriptor, tools["srv__delete_item"].descriptor
            assert (echo.read_only, echo.destructive, echo.title, echo.kind) == (True, False, "Echo", "other")
            assert (delete.read_only, delete.destructive, delete.title, delete.kind) == (
                False,
                True,
                "Delete",
                "delete",
            )
            assert dict(echo.metadata) == {"mcp_server": "srv", "mcp_tool": "echo"}
            assert tools["srv__weird_name_"].remote_name == "weird name!"
            for tool in tools.values():
                assert check_portable(tool.descriptor.parameters) == [], tool.name
            assert tools["srv__nested"].descriptor.parameters["properties"]["point"]["properties"]["x"] == {
                "type": "number"
            }
            assert tools["srv__add"].descriptor.output_schema == {
                "type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"],
            }  # fmt: skip

            async def call(tool_name: str, **args: Any) -> Any:
                tool = tools[f"srv__{tool_name}"]
                return await tool.execute(args, calls.ctx(tool))

            result = await call("echo", text="hi")
            assert (result.status, result.data, result.message) == ("success", "hi", "hi")
            result = await call("add", a=2, b=3)
            assert (result.status, result.data, result.message) == ("success", {"sum": 5}, "5")
            result = await call("fail")
            assert (result.status, result.message) == ("error", "it broke")

            # The environment: ours is allow-listed, the spec's is added, secrets stay here.
            assert (await call("env", name="AWAKEN_TEST_SECRET")).data == "<unset>"
            assert (await call("env", name="GIVEN")).data == "yes"
            assert (await call("env", name="PATH")).data == os.environ["PATH"]

            # stderr becomes log records, one a line, prefixed with the server's name.
            await call("shout", text="line one\nline two")
            assert await logs.wait_for("line two") == "[srv] line two"
            assert "[srv] line one" in logs.lines


async def test_progress_and_cancellation_reach_the_server(logs: LogWatch) -> None:
    calls = Calls()
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("srv")]) as toolsets:
            tools = by_name(toolsets.tools())
            slow = tools["srv__slow"]
            result = await slow.execute({"steps": 3}, calls.ctx(slow))
            assert result.data == "done"
            assert [(p["progress"], p["total"], p["message"]) for p in calls.progress] == [
                (1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3"),
            ]  # fmt: skip
            assert {p["status"] for p in calls.progress} == {"running"}

            # Cancelled with the run: the scope around the call is cancelled once the server is working on it.
            block = tools["srv__block"]
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    await block.execute({}, calls.ctx(block))

                tg.start_soon(run)
                await calls.wait_progress(4)
                tg.cancel_scope.cancel()
            await logs.wait_for("[srv] block cancelled")

            # The cooperative token (ctx.cancel) stops a call too.
            ctx = calls.ctx(block)
            async with anyio.create_task_group() as tg:

                async def cancel_when_blocking() -> None:
                    await calls.wait_progress(5)
                    ctx.cancel.cancel()

                tg.start_soon(cancel_when_blocking)
                with pytest.raises(ToolError, match="cancelled"):
                    await block.execute({}, ctx)
            logs.lines.remove("[srv] block cancelled")
            await logs.wait_for("[srv] block cancelled")

            # The connection survived both cancellations.
            assert (await tools["srv__echo"].execute({"text": "still here"}, calls.ctx(block))).data == "still here"


async def test_streamable_http_server() -> None:
    calls = Calls()
    changes = Changes()
    seen_headers: list[dict[bytes, bytes]] = []
    with anyio.fail_after(20):
        async with serve_http(seen_headers) as (url, stop_server):
            spec = McpServerSpec.from_acp(
                {"type": "http", "name": "web", "url": url, "headers": [{"name": "X-Token", "value": "t0k"}]},
                timeout_s=10,
            )
            policy = RestartPolicy(initial_s=60, max_s=60)
            async with open_mcp_toolsets([spec], on_change=changes, restart=policy) as toolsets:
                assert toolsets.status("web").state == "ready"
                tools = by_name(toolsets.tools())
                assert len(tools) == 14
                add, slow = tools["web__add"], tools["web__slow"]
                assert (await add.execute({"a": 1, "b": 1}, calls.ctx(add))).data == {"sum": 2}
                assert (await slow.execute({"steps": 2}, calls.ctx(slow))).data == "done"
                assert [p["progress"] for p in calls.progress] == [1, 2]

                # A server that went away is noticed at the next call, reported, and its tools withdrawn.
                await stop_server()
                with pytest.raises(ToolError, match="MCP server web is not connected"):
                    await add.execute({"a": 1, "b": 1}, calls.ctx(add))
                assert (await changes.wait("web", "failed")).retry_in_s == 60
                assert toolsets.tools() == []
    assert any(b"x-token" in h for h in seen_headers)
    assert all(h.get(b"x-token") == b"t0k" for h in seen_headers if b"mcp-session-id" in h)


@asynccontextmanager
async def serve_http(
    seen_headers: list[dict[bytes, bytes]],
) -> AsyncIterator[tuple[str, Callable[[], Awaitable[None]]]]:
    """The test server's streamable-HTTP app in this process, on a socket bound before anyone connects; and a
    function that stops it."""
    import uvicorn

    module_spec = importlib.util.spec_from_file_location("mcp_test_server", SERVER)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    app = module.build_server().streamable_http_app(streamable_http_path="/mcp")

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen_headers.append(dict(scope["headers"]))
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(recording, log_level="critical", lifespan="on", ws="none"))
    stopped = anyio.Event()

    async def serve() -> None:
        await server.serve([sock])
        stopped.set()

    async def stop() -> None:
        server.should_exit = True
        await stopped.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", stop
        finally:
            server.should_exit = True


# -- failures, restarts, changes ---------------------------------------------------------------------------------


async def test_a_failing_server_is_reported_and_the_others_work() -> None:
    specs = [
        stdio("ok"),
        stdio("broken", "--fail-start"),
        McpServerSpec(name="missing", transport="stdio", command="/no/such/srv"),
    ]
    with anyio.fail_after(20):
        async with open_mcp_toolsets(specs, restart=RestartPolicy(initial_s=60, max_s=60)) as toolsets:
            assert [s.state for s in toolsets.statuses()] == ["ready", "failed", "failed"]
            broken, missing = toolsets.status("broken"), toolsets.status("missing")
            assert broken.error == "it exited with code 2 (stderr: cannot start: missing configuration)"
            assert (missing.error or "").startswith("command not found: /no/such/srv")
            assert missing.retry_in_s is None  # no restart brings a missing program: not retried
            assert {t.name.split("__")[0] for t in toolsets.tools()} == {"ok"}
    assert [s.state for s in toolsets.statuses()] == ["stopped"] * 3


async def test_connect_timeout() -> None:
    with anyio.fail_after(20):
        specs = [stdio("slow", "--hang", timeout_s=0.5, stop_grace_s=0.2), stdio("ok")]
        async with open_mcp_toolsets(specs, restart=RestartPolicy(initial_s=60, max_s=60)) as toolsets:
            assert toolsets.status("slow").state == "failed"
            assert toolsets.status("slow").error == "TimeoutError: no answer within 0.5 s"
            assert toolsets.status("ok").state == "ready"


async def test_backoff_is_bounded() -> None:
    changes = Changes()
    policy = RestartPolicy(initial_s=0.01, max_s=0.02, max_failures=2)
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("broken", "--fail-start")], on_change=changes, restart=policy) as ts:
            while ts.status("broken").retry_in_s is not None or ts.status("broken").restarts < 2:
                await changes.wait("broken", "failed", after=len(changes.seen))
            # The first try and two restarts, then it gives up and says so.
            assert ts.status("broken") == McpServerStatus(
                name="broken",
                transport="stdio",
                state="failed",
                error="it exited with code 2 (stderr: cannot start: missing configuration)",
                restarts=2,
            )


async def test_a_crashed_server_is_withdrawn_and_restarted() -> None:
    changes = Changes()
    calls = Calls()
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("srv")], on_change=changes, restart=FAST_RESTART) as toolsets:
            tools = by_name(toolsets.tools())
            crash = tools["srv__crash"]
            with pytest.raises(ToolError, match="MCP server srv is not connected: the connection closed"):
                await crash.execute({}, calls.ctx(crash))
            failed = await changes.wait("srv", "failed")
            assert failed.error == "it exited with code 3"
            assert failed.tools == () and failed.retry_in_s == 0.05
            ready = await changes.wait("srv", "ready", after=changes.seen.index(failed))
            assert ready.restarts == 1 and ready.error is None
            assert set(by_name(toolsets.tools())) == set(tools)
            # A tool object from before the crash reaches the new connection.
            echo = tools["srv__echo"]
            assert (await echo.execute({"text": "back"}, calls.ctx(echo))).data == "back"


async def test_calling_a_dead_server_is_a_clear_error() -> None:
    changes = Changes()
    calls = Calls()
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("srv")], on_change=changes, restart=RestartPolicy(initial_s=60)) as ts:
            tools = by_name(ts.tools())
            crash, echo = tools["srv__crash"], tools["srv__echo"]
            with pytest.raises(ToolError):
                await crash.execute({}, calls.ctx(crash))
            await changes.wait("srv", "failed")
            assert ts.tools() == []
            with pytest.raises(ToolError, match="MCP server srv is not connected: it exited with code 3"):
                await echo.execute({"text": "x"}, calls.ctx(echo))


async def test_tool_list_changes_are_followed() -> None:
    changes = Changes()
    calls = Calls()
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("srv")], on_change=changes) as toolsets:
            grow = by_name(toolsets.tools())["srv__grow"]
            await grow.execute({}, calls.ctx(grow))
            status = await changes.wait("srv", "ready")
            assert "srv__extra" in status.tools
            assert "srv__extra" in by_name(toolsets.tools())


# -- processes ---------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("mode", ["", "--stubborn"])
async def test_no_process_outlives_the_toolsets(mode: str) -> None:
    calls = Calls()
    args = (mode,) if mode else ()
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("srv", *args, stop_grace_s=0.3)]) as toolsets:
            spawn = by_name(toolsets.tools())["srv__spawn"]
            pids = (await spawn.execute({}, calls.ctx(spawn))).data
            assert process_alive(pids["pid"]) and process_alive(pids["child"])
    assert not process_alive(pids["pid"])
    assert not process_alive(pids["child"])


def test_server_stderr_never_reaches_stdout() -> None:
    script = textwrap.dedent(
        f"""
        import logging, sys, anyio
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
        from awaken_stdio.tools.mcp import McpServerSpec, open_mcp_toolsets

        async def main():
            spec = McpServerSpec(
                name="noisy", transport="stdio", command=sys.executable, args=({str(SERVER)!r}, "--noisy")
            )
            async with open_mcp_toolsets([spec]) as toolsets:
                assert toolsets.status("noisy").state == "ready", toolsets.statuses()

        anyio.run(main)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout == b""
    assert b"[noisy] noise 0\n[noisy] noise 1\n[noisy] noise 2\n" in out.stderr
