"""Ids are UUIDv7 strings (RFC 9562): time-ordered and monotonic within a process, unique across processes that share
a database, a forked child included (its generator is seeded again, not copied)."""

from __future__ import annotations

import os
import uuid

from awaken_stdio.contract.ids import new_id


def test_ids_are_uuid7_unique_and_ordered() -> None:
    ids = [new_id() for _ in range(20_000)]  # thousands within one millisecond: the counter orders them
    assert len(set(ids)) == len(ids) and sorted(ids) == ids
    parsed = uuid.UUID(ids[0])
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122 and str(parsed) == ids[0]
    assert new_id("call_").startswith("call_")


def test_a_forked_child_draws_other_random_bits_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_id() for _ in range(50)).encode())
        finally:
            os._exit(0)
    os.close(write)
    ours = [new_id() for _ in range(50)]
    with os.fdopen(read) as pipe:
        theirs = pipe.read().split()
    os.waitpid(pid, 0)
    assert len(theirs) == 50
    assert not {i[-12:] for i in ours} & {i[-12:] for i in theirs}  # a copied generator would repeat them
