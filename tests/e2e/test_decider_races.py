"""Deciders racing for a run whose holder died, across processes and machines, on SQLite and PostgreSQL.

A holder process keeps a run waiting live (``crash_child hold``) and is killed with SIGKILL; then two or three
``awaken-stdio runs approve`` processes race. Exactly one of them runs the call (the line is written once), and
every one says the truth: the winner that the run completed, each loser that the run was already decided, by whom.
A holder on "another machine" (its own UTS namespace, another hostname: no pid check can see it die) is taken over
once its short lease lapses, within 10 s.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.test_crash_recovery import World, kill

pytestmark = pytest.mark.slow
RACES = 20


def world_in(where: Path, new_store: Callable[[Path], str]) -> World:
    where.mkdir(exist_ok=True)
    world = World(where)
    world.store = new_store(where)
    return world


def race(world: World, run_id: str, deciders: int) -> list[subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(deciders) as pool:
        return list(pool.map(lambda _: world.cli("runs", "approve", run_id), range(deciders)))


@pytest.mark.timeout(300)
def test_racing_deciders_after_the_holder_dies_run_the_call_once_and_say_who_won(
    tmp_path: Path, new_store: Callable[[Path], str]
) -> None:
    for i in range(RACES):
        world = world_in(tmp_path / f"race{i}", new_store)
        try:
            holder = world.child("hold")
            run_id = world.waiting_run(holder)
            kill(holder)
            done = race(world, run_id, 2 + i % 2)
            winners = [d for d in done if d.returncode == 0]
            assert len(winners) == 1, [(d.returncode, d.stdout, d.stderr) for d in done]
            assert f"run {run_id} is completed" in winners[0].stdout, winners[0].stderr
            for loser in (d for d in done if d.returncode != 0):
                assert loser.returncode == 2 and "was already decided from cli by process" in loser.stderr, loser.stderr
            assert world.lines() == ["hello"], f"race {i}: {world.lines()}"
        finally:
            world.close()


def test_a_dead_holder_on_another_machine_is_taken_over_within_10_s(
    tmp_path: Path, new_store: Callable[[Path], str]
) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--uts", "true"], check=False).returncode != 0:
        pytest.skip("no UTS namespaces here (needs unshare and CAP_SYS_ADMIN)")
    world = world_in(tmp_path / "w", new_store)
    child = [sys.executable, "-m", "tests.e2e.crash_child", "hold", str(world.config), world.store]
    holder = world.spawn(["unshare", "--uts", "sh", "-c", 'hostname elsewhere && exec "$0" "$@"', *child])
    try:
        run_id = world.waiting_run(holder)
        kill(holder)
        started = time.monotonic()
        done = world.cli("runs", "approve", run_id)
        elapsed = time.monotonic() - started
        assert done.returncode == 0 and f"run {run_id} is completed" in done.stdout, done.stderr
        assert elapsed < 10, elapsed
        assert world.lines() == ["hello"]
    finally:
        world.close()
