"""Exactly once under every fault, from outside, with real processes, on SQLite and PostgreSQL.

- kill -9 at the instant after an approved effect (the line is written, its outcome not stored): every decider that
  comes next (the CLI, an MCP client's ``resume_run``) says the outcome is unknown and runs nothing unless the person
  chooses to run it again or to record it as done;
- a holder paused (SIGSTOP) past its lease, right before its effect or inside it, while another decider takes the run
  over: the effect happens once, the run ends as the decider left it, and the paused process stands down on SIGCONT
  (fencing: its claim token is stale, so it can neither write nor start the effect);
- ``runs cancel`` racing ``runs approve``: exactly one of them wins and the other is told who did.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import anyio
import pytest

from tests.e2e.test_crash_recovery import TIMEOUT_S, World, kill, wait_for
from tests.e2e.test_decider_races import world_in

pytestmark = pytest.mark.slow
LEASE_S = 6.0  # MailboxConfig.lease_ms: a paused holder's claim lapses after this


def approving(world: World, run_id: str, *flags: str, **env: str) -> subprocess.Popen[str]:
    cli = ["-m", "awaken_stdio", "runs", "approve", run_id, *flags, "--config", str(world.config)]
    return world.spawn([sys.executable, *cli, "--store", world.store], **env)


def decide(world: World, run_id: str, verb: str) -> subprocess.CompletedProcess[str]:
    return world.cli("runs", verb, run_id)


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def wait_stopped(pid: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not stopped(pid):
        assert time.monotonic() < deadline, f"process {pid} never stopped"
        time.sleep(0.02)


def pending_of(world: World, run_id: str) -> list[dict[str, object]]:
    shown = world.cli("runs", "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["pending"]  # type: ignore[no-any-return]


def status_of(world: World, run_id: str) -> str:
    (run,) = [r for r in world.runs() if r["run_id"] == run_id]
    return str(run["status"])


def killed_after_the_effect(world: World) -> str:
    """A run approved from the CLI whose process is killed right after the line is written."""
    run_id = world.start_waiting()
    after = world.config.parent / "effect-done"
    proc = approving(world, run_id, CRASH_HANG_AFTER=str(after))
    wait_for(after, proc)
    kill(proc)
    assert world.lines() == ["hello"]
    return run_id


@pytest.mark.timeout(180)
def test_killed_after_an_approved_effect_the_cli_asks_instead_of_running_it_again(
    tmp_path: Path, new_store: Callable[[Path], str]
) -> None:
    world = world_in(tmp_path / "w", new_store)
    try:
        run_id = killed_after_the_effect(world)
        (pending,) = pending_of(world, run_id)
        assert pending["outcome"] == "unknown"  # runs show --json says so before anyone re-asks
        assert "outcome is unknown" in world.cli("runs", "show", run_id).stdout

        blind = world.cli("runs", "approve", run_id)
        assert blind.returncode == 2 and world.lines() == ["hello"]
        last = blind.stderr.strip().splitlines()[-1]
        assert "outcome of c1 (append_line) is unknown" in last and "--rerun" in last and "--done" in last

        done = world.cli("runs", "approve", run_id, "--done")
        assert done.returncode == 0 and f"run {run_id} is completed" in done.stdout, done.stderr
        assert world.lines() == ["hello"]  # recorded as done, not run again
        assert status_of(world, run_id) == "completed"
    finally:
        world.close()


@pytest.mark.timeout(180)
def test_the_person_may_choose_to_run_an_unknown_call_again(tmp_path: Path) -> None:
    world = World(tmp_path)
    try:
        run_id = killed_after_the_effect(world)
        again = world.cli("runs", "approve", run_id, "--rerun")
        assert again.returncode == 0 and f"run {run_id} is completed" in again.stdout, again.stderr
        assert world.lines() == ["hello", "hello"]  # twice, because the person said so
    finally:
        world.close()


@pytest.mark.timeout(180)
@pytest.mark.anyio
async def test_killed_after_an_approved_effect_resume_run_over_mcp_asks_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.protocols.mcp.support import Env, connect

    world = World(tmp_path)
    try:
        run_id = killed_after_the_effect(world)
        monkeypatch.setenv("CRASH_OUT", str(world.out))
        env = Env(tmp_path, world.config, world.store, tmp_path)
        async with connect(env) as client:
            blind = await client.call_tool(
                "resume_run", {"run_id": run_id, "decisions": [{"tool_call_id": "c1", "approve": True}]}
            )
            assert blind.is_error and "unknown" in blind.content[0].text and "if_unknown" in blind.content[0].text
            assert world.lines() == ["hello"]
            done = await client.call_tool(
                "resume_run",
                {"run_id": run_id, "decisions": [{"tool_call_id": "c1", "approve": True, "if_unknown": "done"}]},
            )
            assert not done.is_error and done.structured_content["status"] == "completed"
        assert world.lines() == ["hello"]
    finally:
        world.close()


def approve_over_mcp(world: World, run_id: str) -> str:
    """``resume_run`` from an MCP client on a fresh ``awaken-stdio mcp`` process; the run's status after it."""
    from tests.protocols.mcp.support import Env, connect

    async def go() -> str:
        env = Env(world.config.parent, world.config, world.store, world.config.parent)
        async with connect(env) as client:
            done = await client.call_tool(
                "resume_run", {"run_id": run_id, "decisions": [{"tool_call_id": "c1", "approve": True}]}
            )
            if done.is_error:  # the MCP process's worker took the first decision over first: it says so
                text = done.content[0].text  # type: ignore[union-attr]
                assert "already decided from cli" in text and "completed" in text, text
                return "completed"
            return str(done.structured_content["status"])

    os.environ["CRASH_OUT"] = str(world.out)  # the MCP process runs the tool too
    return anyio.run(go)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("decider", ["cli", "mcp"])
def test_a_holder_paused_before_its_effect_stands_down_and_the_effect_runs_once(
    tmp_path: Path, new_store: Callable[[Path], str], decider: str
) -> None:
    world = world_in(tmp_path / "w", new_store)
    flag = world.config.parent / "paused"
    try:
        holder = world.child("hold", CRASH_PAUSE_MARK=str(flag))
        run_id = world.waiting_run(holder)
        first = world.cli("runs", "approve", run_id)  # the holder takes it over and stops at its effect mark
        assert first.returncode == 0 and "continues it" in first.stderr, first.stderr
        wait_for(flag, holder)
        wait_stopped(holder.pid)
        time.sleep(LEASE_S + 0.5)  # past the lease: a laptop lid closed, a debugger, a frozen disk

        if decider == "cli":  # takes the run over and runs the call
            second = world.cli("runs", "approve", run_id)
            assert second.returncode == 0 and f"run {run_id} is completed" in second.stdout, second.stderr
        else:
            assert approve_over_mcp(world, run_id) == "completed"
        assert world.lines() == ["hello"]

        os.kill(holder.pid, signal.SIGCONT)
        assert holder.stdout is not None
        said = holder.stdout.readline()
        assert said.startswith("STOOD DOWN") and "continued elsewhere" in said, said
        assert holder.wait(TIMEOUT_S) == 0
        assert world.lines() == ["hello"]  # once: the stale holder could not mark, so it never ran the call
        assert status_of(world, run_id) == "completed"  # not overwritten as cancelled by the stale holder
    finally:
        world.close()


@pytest.mark.timeout(180)
def test_a_holder_paused_inside_its_effect_leaves_an_unknown_outcome_for_the_person(
    tmp_path: Path, new_store: Callable[[Path], str]
) -> None:
    world = world_in(tmp_path / "w", new_store)
    flag = world.config.parent / "paused"
    try:
        holder = world.child("hold", CRASH_PAUSE=str(flag))
        run_id = world.waiting_run(holder)
        assert world.cli("runs", "approve", run_id).returncode == 0
        wait_for(flag, holder)  # marked started, about to write: stopped there
        os.kill(holder.pid, signal.SIGSTOP)
        wait_stopped(holder.pid)
        Path(f"{flag}.go").touch()
        time.sleep(LEASE_S + 0.5)

        assert [p["outcome"] for p in pending_of(world, run_id)] == ["unknown"]
        blind = world.cli("runs", "approve", run_id)
        assert blind.returncode == 2 and "unknown" in blind.stderr and world.lines() == []
        done = world.cli("runs", "approve", run_id, "--done")  # the person knows it will finish: record it done
        assert done.returncode == 0 and f"run {run_id} is completed" in done.stdout, done.stderr

        os.kill(holder.pid, signal.SIGCONT)  # the stopped effect completes; nothing after it is written
        assert holder.stdout is not None
        assert holder.stdout.readline().startswith("STOOD DOWN")
        assert holder.wait(TIMEOUT_S) == 0
        assert world.lines() == ["hello"]
        assert status_of(world, run_id) == "completed"
    finally:
        world.close()


@pytest.mark.timeout(300)
def test_cancel_racing_approve_has_one_winner_and_tells_the_other(
    tmp_path: Path, new_store: Callable[[Path], str]
) -> None:
    for i in range(6):
        world = world_in(tmp_path / f"race{i}", new_store)
        try:
            holder = world.child("hold")
            run_id = world.waiting_run(holder)
            kill(holder)
            verbs = ["approve", "cancel"] if i % 2 else ["cancel", "approve"]
            with ThreadPoolExecutor(2) as pool:
                decided = pool.map(partial(decide, world, run_id), verbs)
                done = dict(zip(verbs, decided, strict=True))
            winners = [v for v, d in done.items() if d.returncode == 0]
            assert len(winners) == 1, {v: (d.returncode, d.stdout, d.stderr) for v, d in done.items()}
            loser = done["cancel" if winners == ["approve"] else "approve"]
            assert loser.returncode == 2 and "by process" in loser.stderr, loser.stderr
            if winners == ["approve"]:
                assert world.lines() == ["hello"] and status_of(world, run_id) == "completed"
            else:
                assert world.lines() == [] and status_of(world, run_id) == "cancelled"
        finally:
            world.close()


ROUNDS = 8
STEPS = 4


def steps_world(where: Path, rng: random.Random, new_store: Callable[[Path], str]) -> World:
    """An allowed ``append_line`` called at each of ``STEPS`` steps (lines s0..s3), the model taking a few ms."""
    world = world_in(where, new_store)
    turns = [
        {"text": "", "delay_ms": rng.randint(0, 40),
         "tool_calls": [{"name": "append_line", "arguments": {"line": f"s{i}"}, "id": f"c{i}"}]}
        for i in range(STEPS)
    ]  # fmt: skip
    (where / "script.json").write_text(json.dumps({"turns": [*turns, {"text": "done"}]}))
    world.config.write_text(world.config.read_text().replace('default = "ask"', 'default = "allow"'))
    return world


def settle_by_the_truth(world: World, run_id: str) -> None:
    """Until the run completes: restart a worker when nobody runs it, and answer each call asked about (its outcome
    unknown) as a person who looked would: done if its line is in the file, run it again if not."""
    for _ in range(3 * STEPS):
        (run,) = [r for r in world.runs() if r["run_id"] == run_id]
        if run["status"] == "completed":
            return
        if run["status"] != "waiting":
            worker = world.child("serve", run_id, "settled")
            assert worker.wait(TIMEOUT_S) == 0
            continue
        for p in run["pending"]:
            assert p["outcome"] == "unknown", p  # nothing else asks here: every call is allowed
            line = p["arguments"]["line"]
            choice = "--done" if line in world.lines() else "--rerun"
            decided = world.cli("runs", "approve", run_id, "--call", str(p["tool_call_id"]), choice)
            assert decided.returncode == 0, decided.stderr
    raise AssertionError(f"run {run_id} never completed: {world.runs()}")


@pytest.mark.timeout(600)
def test_kill_9_at_random_points_of_multi_step_runs_never_runs_an_effect_twice(
    tmp_path: Path, new_store: Callable[[Path], str]
) -> None:
    """Seeded: a kill at a random instant, or right after (or before) a random step's effect, then recovery by a
    restarted worker and a person answering by what they see. Every line ends up written exactly once."""
    rng = random.Random(20261128)
    for i in range(ROUNDS):
        world = steps_world(tmp_path / f"round{i}", rng, new_store)
        try:
            fault = ("CRASH_HANG_AFTER", "CRASH_HANG", None)[i % 3]
            env = {fault: str(tmp_path / f"round{i}" / "at-the-effect")} if fault else {}
            running = world.child("start", **env)
            if fault:
                wait_for(tmp_path / f"round{i}" / "at-the-effect", running)
            else:
                time.sleep(rng.uniform(0.2, 1.2))
            if running.poll() is None:
                kill(running)
            runs = world.runs()
            if not runs:  # killed before its first step was stored: no effect can have started before that
                assert fault is None and world.lines() == []
                continue
            (run,) = runs
            settle_by_the_truth(world, str(run["run_id"]))
            assert sorted(world.lines()) == [f"s{s}" for s in range(STEPS)], f"round {i} ({fault}): {world.lines()}"
        finally:
            world.close()
