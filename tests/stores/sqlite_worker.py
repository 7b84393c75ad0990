"""A child process for the multi-process SQLite tests (run with the venv's python, never imported by pytest).

    sqlite_worker.py concurrent DB NAME N   N checkpoints on thread-NAME, a grant each, and every 4th one an append
                                            to the shared thread (retried on VersionConflict, as the runtime does)
    sqlite_worker.py crash DB SEED          checkpoints on three threads until killed

Both print "ready" once the store is open; ``concurrent`` then waits for a line on stdin before it writes, and
prints when it wrote (``wrote START END``) so the parent can check the two really overlapped. Checkpoint ``i`` of a
thread (from 1) appends ``k`` messages whose metadata is ``{"cp": i, "j": j, "k": k}``, sets the run's ``steps``
and the thread state's revision to ``i``: the parent can then tell a checkpoint that is fully there from a torn one.
"""

from __future__ import annotations

import random
import sys
import time

import anyio

from awaken_stdio.contract.errors import VersionConflict
from awaken_stdio.contract.messages import Message, TextBlock
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import Checkpoint, PermissionGrant, RunRecord, Store
from awaken_stdio.stores import open_store


def checkpoint_of(thread_id: str, i: int, count: int, k: int, run_id: str) -> Checkpoint:
    messages = [
        Message(role="user", content=(TextBlock(text=f"{thread_id} {i}.{j}"),), metadata={"cp": i, "j": j, "k": k})
        for j in range(k)
    ]
    run = RunRecord(run_id=run_id, thread_id=thread_id, agent_id="worker", status="running", steps=i)
    return Checkpoint(
        thread_id=thread_id,
        expected_message_count=count,
        messages=messages,
        run=run,
        thread_state=PersistedState(revision=i, extensions={"cp": i}),
    )


async def next_position(store: Store, thread_id: str) -> tuple[int, int]:
    """(checkpoints committed, messages committed) of a thread, from the store."""
    loaded = await store.load_thread(thread_id)
    if loaded is None:
        return 0, 0
    return (loaded.state.revision if loaded.state else 0), loaded.thread.message_count


async def append_shared(store: Store, name: str, n: int) -> None:
    for _ in range(16):
        done, count = await next_position(store, "shared")
        cp = checkpoint_of("shared", done + 1, count, 1, f"run-shared-{name}-{n}")
        try:
            await store.checkpoint(cp)
            return
        except VersionConflict:
            await anyio.sleep(random.uniform(0, 0.005))
    raise RuntimeError("shared thread: too many version conflicts")


async def concurrent(db: str, name: str, n: int) -> None:
    async with open_store(f"sqlite://{db}") as store:
        print("ready", flush=True)
        sys.stdin.readline()  # "go": both workers start writing at the same moment
        started = time.time()
        thread_id = f"thread-{name}"
        for i in range(1, n + 1):
            await store.checkpoint(checkpoint_of(thread_id, i, 2 * (i - 1), 2, f"run-{name}"))
            await store.add_grant(
                PermissionGrant(
                    grant_id=f"grant-{name}-{i}",
                    workspace="/shared",
                    tool="run_command",
                    behavior="allow",
                    pattern=f"cmd{i}",
                )
            )
            if i % 4 == 0:
                await append_shared(store, name, i)
        print("wrote", started, time.time(), flush=True)


async def crash(db: str, seed: int) -> None:
    rng = random.Random(seed)
    async with open_store(f"sqlite://{db}") as store:
        threads = ["a", "b", "c"]
        position = {t: await next_position(store, t) for t in threads}
        print("ready", flush=True)
        while True:
            t = rng.choice(threads)
            done, count = position[t]
            k = rng.randint(1, 8)
            await store.checkpoint(checkpoint_of(t, done + 1, count, k, f"run-{t}"))
            position[t] = (done + 1, count + k)


if __name__ == "__main__":
    mode, db, *rest = sys.argv[1:]
    if mode == "concurrent":
        anyio.run(concurrent, db, rest[0], int(rest[1]))
    else:
        anyio.run(crash, db, int(rest[0]))
