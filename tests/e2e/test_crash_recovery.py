"""Crash tests with real processes, a real SQLite file and a side-effecting tool (``append_line``, asked for).

A process is killed with SIGKILL (a) while its run waits for approval, (b) after a decision was recorded but before
the tool ran, (c) while the tool runs, (d) while an allowed tool runs after steps written behind the run. After a
restart nothing is lost: the run is listed as waiting, and once approved the line is written exactly once; in (c)
and (d) the person is asked again and told the earlier attempt's outcome is unknown. And two processes sharing the
database: a decision given to one resumes the run waiting in the other.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.crash_tools import CONFIG

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = {
    "turns": [
        {"text": "", "tool_calls": [{"name": "append_line", "arguments": {"line": "hello"}, "id": "c1"}]},
        {"text": "done"},
    ]
}
TIMEOUT_S = 30


class World:
    """The files a scenario shares between its processes."""

    def __init__(self, tmp: Path) -> None:
        self.config = tmp / "config.toml"
        self.config.write_text(CONFIG)
        (tmp / "script.json").write_text(json.dumps(SCRIPT))
        self.store = f"sqlite://{tmp}/awaken.db"
        self.out = tmp / "out.txt"
        self.hang = tmp / "tool-running"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "CRASH_OUT": str(self.out)}
        self.env.pop("AWAKEN_STDIO_CONFIG", None)
        self.env.pop("AWAKEN_STDIO_STORE", None)

        self.procs: list[subprocess.Popen[str]] = []

    def child(self, mode: str, *args: str, **env: str) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "tests.e2e.crash_child", mode, str(self.config), self.store, *args]
        return self.spawn(cmd, **env)

    def spawn(self, cmd: list[str], **env: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**self.env, **env}, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(TIMEOUT_S)
            if proc.stdout is not None:
                proc.stdout.close()

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "awaken_stdio", *args, "--config", str(self.config), "--store", self.store]
        return subprocess.run(cmd, cwd=ROOT, env={**self.env, **env}, capture_output=True, text=True, timeout=TIMEOUT_S)

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines() if self.out.exists() else []

    def runs(self) -> list[dict[str, Any]]:
        done = self.cli("runs", "list", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    def waiting_run(self, proc: subprocess.Popen[str]) -> str:
        """The run id the child prints once its run waits for approval."""
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[:1] == ["WAITING"], line
        return line[1]

    def start_waiting(self) -> str:
        proc = self.child("start")
        run_id = self.waiting_run(proc)
        assert proc.wait(TIMEOUT_S) == 0
        return run_id

    def assert_listed_waiting(self, run_id: str) -> dict[str, Any]:
        (run,) = [r for r in self.runs() if r["run_id"] == run_id]
        assert run["status"] == "waiting"
        assert [p["tool_call_id"] for p in run["pending"]] == ["c1"]
        return run


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.close()


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(TIMEOUT_S) == -signal.SIGKILL


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    """Until ``path`` exists (the child's tool is running); the child's exit first is a failure."""
    import time

    deadline = time.monotonic() + TIMEOUT_S
    while not path.exists():
        assert proc.poll() is None, "the child exited before its tool ran"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def approve(world: World, run_id: str) -> subprocess.CompletedProcess[str]:
    done = world.cli("runs", "approve", run_id)
    assert done.returncode == 0, done.stderr
    return done


def test_killed_while_waiting_for_approval(world: World) -> None:
    holder = world.child("hold")  # the run waits live in this process, holding its thread
    run_id = world.waiting_run(holder)
    kill(holder)

    world.assert_listed_waiting(run_id)
    done = approve(world, run_id)  # the dead holder's claim is requeued; the CLI resumes the run itself

    assert f"run {run_id} is completed" in done.stdout
    assert world.lines() == ["hello"]
    assert [r["status"] for r in world.runs()] == ["completed"]


def test_killed_after_the_decision_was_recorded_before_the_tool_ran(world: World) -> None:
    run_id = world.start_waiting()
    kill_at = world.child("approve-and-die", run_id)
    assert kill_at.wait(TIMEOUT_S) == -signal.SIGKILL
    assert world.lines() == []
    world.assert_listed_waiting(run_id)

    worker = world.child("serve", run_id, "done")  # a restarted process finds the recorded decision and runs it
    assert worker.wait(TIMEOUT_S) == 0

    assert world.lines() == ["hello"]
    assert [r["status"] for r in world.runs()] == ["completed"]
    assert world.cli("runs", "approve", run_id).returncode == 2  # nothing left to approve


def test_killed_while_the_tool_runs_asks_again(world: World) -> None:
    run_id = world.start_waiting()
    cli = [sys.executable, "-m", "awaken_stdio", "runs", "approve", run_id]
    approving = world.spawn([*cli, "--config", str(world.config), "--store", world.store], CRASH_HANG=str(world.hang))
    wait_for(world.hang, approving)
    kill(approving)
    world.assert_listed_waiting(run_id)

    worker = world.child("serve", run_id, "reasked")  # the restart re-offers the call: its outcome is unknown
    assert worker.wait(TIMEOUT_S) == 0
    run = world.assert_listed_waiting(run_id)
    assert "outcome is unknown" in run["pending"][0]["reason"]
    assert "outcome is unknown" in world.cli("runs", "show", run_id).stdout  # the plain CLI view says so too
    assert world.lines() == []

    assert world.cli("runs", "approve", run_id).returncode == 2  # not blind: the person must choose
    assert world.cli("runs", "approve", run_id, "--rerun").returncode == 0
    assert world.lines() == ["hello"]
    assert [r["status"] for r in world.runs()] == ["completed"]


def test_a_decision_given_to_one_process_resumes_the_run_waiting_in_another_once(world: World) -> None:
    holder = world.child("hold")
    run_id = world.waiting_run(holder)

    done = approve(world, run_id)  # recorded by the CLI process, taken over by the holder

    assert "continues it" in done.stderr and done.stdout == ""
    assert holder.stdout is not None
    assert holder.stdout.readline().split() == ["DONE", "completed"]
    assert holder.wait(TIMEOUT_S) == 0
    assert world.lines() == ["hello"]
    assert [r["status"] for r in world.runs()] == ["completed"]


def test_killed_while_an_allowed_tool_runs_after_steps_written_behind(world: World) -> None:
    """Three read-only steps are written behind the run; the allowed ``append_line`` after them waits until they
    are stored, is marked, and hangs: a kill -9 there loses none of them, and a restart asks about the write (its
    outcome is unknown) instead of running it again."""
    peeks = [{"text": f"look {i}", "tool_calls": [{"name": "peek", "arguments": {"key": f"k{i}"}}]} for i in range(3)]
    write = {"text": "", "tool_calls": [{"name": "append_line", "arguments": {"line": "hello"}, "id": "c1"}]}
    (world.config.parent / "script.json").write_text(json.dumps({"turns": [*peeks, write, {"text": "done"}]}))
    world.config.write_text(
        CONFIG.replace('tools = ["append_line"]', 'tools = ["peek", "append_line"]').replace('"ask"', '"allow"')
    )
    running = world.child("start", CRASH_HANG=str(world.hang))
    wait_for(world.hang, running)
    kill(running)

    (run,) = world.runs()
    shown = world.cli("runs", "show", run["run_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    db = sqlite3.connect(world.store.removeprefix("sqlite://"))
    try:
        stored = [json.loads(body) for (body,) in db.execute("SELECT body FROM messages ORDER BY seq")]
    finally:
        db.close()
    # every step before the write, and the step that calls it (stored with the call's mark, before it ran)
    assert [m["role"] for m in stored] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]

    worker = world.child("serve", run["run_id"], "reasked")
    assert worker.wait(TIMEOUT_S) == 0
    again = world.assert_listed_waiting(run["run_id"])
    assert "outcome is unknown" in again["pending"][0]["reason"] and world.lines() == []
