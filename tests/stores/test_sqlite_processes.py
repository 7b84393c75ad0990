"""Real OS processes on one SQLite file: concurrent writers lose nothing, and kill -9 never tears a checkpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = str(Path(__file__).with_name("sqlite_worker.py"))
pytestmark = pytest.mark.slow


def spawn(*args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, WORKER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"worker did not start: {line!r} {err}")
    return proc


def check_database(path: Path) -> dict[str, int]:
    """Integrity, and for each thread that every checkpoint is whole: returns checkpoints per thread."""
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        found: dict[str, int] = {}
        threads = db.execute("SELECT thread_id, message_count, state FROM threads").fetchall()
        for thread_id, count, state in threads:
            bodies = [
                json.loads(b)
                for (b,) in db.execute("SELECT body FROM messages WHERE thread_id = ? ORDER BY seq", (thread_id,))
            ]
            seqs = [s for (s,) in db.execute("SELECT seq FROM messages WHERE thread_id = ? ORDER BY seq", (thread_id,))]
            assert seqs == list(range(count)), f"{thread_id}: message_count {count} but seqs {seqs[-3:]}"
            expected_cp, j = 1, 0
            for body in bodies:
                meta = body["metadata"]
                if j == 0 and meta["cp"] != expected_cp:
                    raise AssertionError(f"{thread_id}: checkpoint {meta['cp']} where {expected_cp} was due")
                assert (meta["cp"], meta["j"]) == (expected_cp, j), f"{thread_id}: torn checkpoint {expected_cp}"
                j += 1
                if j == meta["k"]:
                    expected_cp, j = expected_cp + 1, 0
            assert j == 0, f"{thread_id}: checkpoint {expected_cp} is only partly there"
            done = expected_cp - 1
            assert json.loads(state)["revision"] == done, f"{thread_id}: state does not match its messages"
            runs = db.execute("SELECT body FROM runs WHERE thread_id = ?", (thread_id,)).fetchall()
            if not thread_id.startswith("shared"):
                assert [json.loads(b)["steps"] for (b,) in runs] == [done], f"{thread_id}: run does not match"
            found[thread_id] = done
        return found
    finally:
        db.close()


def test_two_processes_share_one_database_without_losing_anything(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    n = 200
    procs = [spawn("concurrent", str(db), name, str(n)) for name in ("one", "two")]
    for proc in procs:
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    spans = []
    for proc in procs:
        out, err = proc.communicate(timeout=50)
        assert proc.returncode == 0, err
        assert "locked" not in err
        spans.append([float(x) for x in out.split()[1:3]])
    assert max(s for s, _ in spans) < min(e for _, e in spans), f"the two workers did not overlap: {spans}"
    found = check_database(db)
    assert found["thread-one"] == found["thread-two"] == n
    assert found["shared"] == 2 * (n // 4)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM permission_grants").fetchone() == (2 * n,)
        assert conn.execute("SELECT message_count FROM threads WHERE thread_id = 'thread-one'").fetchone() == (2 * n,)
    conn.close()


def test_kill_9_at_random_moments_never_tears_a_checkpoint(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    rng = random.Random(os.getpid())
    total = 0
    kills = 22
    for round_ in range(kills):
        proc = spawn("crash", str(db), str(round_))
        time.sleep(rng.uniform(0.01, 0.25))
        assert proc.poll() is None, proc.communicate()[1]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()  # type: ignore[union-attr]
        done = sum(check_database(db).values())
        assert done >= total, "a committed checkpoint disappeared"
        total = done
    assert total > kills, "the workers made (almost) no progress between kills"
