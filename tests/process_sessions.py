"""What still runs in a process session, read from ``/proc`` (Linux): for the tests that nothing outlives the agent."""

from __future__ import annotations

import os
import time
from pathlib import Path

GONE_WITHIN_S = 4.0


def session_members(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if int(fields[3]) == sid and fields[0] not in (b"Z", b"X"):
            members.append(int(name))
    return members


def wait_until_gone(sid: int) -> list[int]:
    """The session's members left after ``GONE_WITHIN_S`` (none, once it emptied earlier)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while (members := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return members
