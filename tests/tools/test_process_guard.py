"""Nothing a tool starts outlives the agent: real agent-like processes (``guard_child.py``) ended by kill -9, by
SIGTERM's default action and by a clean exit, with commands, background jobs and a stdio MCP server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.process_sessions import session_members, wait_until_gone

ROOT = Path(__file__).resolve().parents[2]
MCP_SERVER = Path(__file__).parent / "mcp_servers" / "server.py"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def children_running(pid: int, program: Path) -> list[int]:
    """The children of ``pid`` whose command line names ``program``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == pid and str(program).encode() in cmdline:
                found.append(int(name))
    return found


class Child:
    def __init__(self, *args: str, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.tools.guard_child", *args],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def end(self, how: str) -> None:
        if how == "eof":
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            assert self.proc.wait(10) == 0
        else:
            self.proc.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
            self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def children(tmp_path: Path) -> Iterator[list[Child]]:
    made: list[Child] = []
    yield made
    for child in made:
        child.close()


def test_a_running_command_dies_with_the_agent_on_kill_9(tmp_path: Path, children: list[Child]) -> None:
    child = Child("command", "echo $$; sleep 2; echo x >> f", cwd=tmp_path)
    children.append(child)
    sid = int(child.line())
    assert session_members(sid)
    child.end("kill")
    assert wait_until_gone(sid) == []  # an empty session writes nothing later
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("how", ["eof", "term", "kill"])
def test_a_background_job_dies_with_the_agent(tmp_path: Path, children: list[Child], how: str) -> None:
    child = Child("command", "sleep 60 >/dev/null 2>&1 & echo $$", cwd=tmp_path)
    children.append(child)
    sid = int(child.line())
    assert child.line() == "DONE"  # the shell is done, its background job is not
    assert session_members(sid)
    child.end(how)
    assert wait_until_gone(sid) == []


def test_a_stdio_mcp_server_dies_with_the_agent_on_kill_9(tmp_path: Path, children: list[Child]) -> None:
    """A server that ignores both its stdin's end and SIGTERM: the guard's SIGKILL ends it."""
    child = Child("mcp", str(MCP_SERVER), "--stubborn", cwd=tmp_path)
    children.append(child)
    assert child.line() == "READY"
    (server,) = children_running(child.proc.pid, MCP_SERVER)
    child.end("kill")
    assert wait_until_gone(server) == []
