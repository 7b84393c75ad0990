"""The tools of the crash tests: ``append_line`` appends one line to ``$CRASH_OUT`` (side-effecting); ``peek``
reads nothing and answers (read-only: its steps are written behind the run).

With ``$CRASH_HANG`` set it first creates that file (so the test knows the tool is running) and hangs, which is
where the test kills the process.
"""

from __future__ import annotations

import os
import time

from awaken_stdio.tools.function import tool


@tool(kind="edit", destructive=True)
def append_line(line: str) -> str:
    """Append one line to the output file."""
    hang = os.environ.get("CRASH_HANG")
    if hang:
        with open(hang, "w") as f:
            f.write("running\n")
        time.sleep(60)  # killed here
    with open(os.environ["CRASH_OUT"], "a") as f:
        f.write(line + "\n")
    return "appended"


@tool(kind="read", read_only=True)
def peek(key: str) -> str:
    """Look at a key (changes nothing)."""
    return f"seen {key}"
