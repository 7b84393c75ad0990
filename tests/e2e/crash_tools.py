"""The tools of the crash tests: ``append_line`` appends one line to ``$CRASH_OUT`` (side-effecting); ``peek``
reads nothing and answers (read-only: its steps are written behind the run).

With ``$CRASH_HANG`` set it first creates that file (so the test knows the tool is running) and hangs, which is
where the test kills the process; with ``$CRASH_HANG_AFTER`` it does the same after its effect (the line is written,
its outcome not yet stored). With ``$CRASH_PAUSE`` it creates that file and waits, before its effect, until the file
``$CRASH_PAUSE.go`` exists (the test stops the process meanwhile, as a closed laptop lid or a debugger would).
"""

from __future__ import annotations

import os
import time

from awaken_stdio.tools.function import tool

# The agent these tools serve in the crash tests and the decision bench: each call of append_line is asked about.
CONFIG = """
default_agent = "default"
[models.demo]
provider = "scripted"
script = "script.json"
[agents.default]
model = "demo"
tools = ["append_line"]
[agents.default.permission]
default = "ask"
[tools]
builtin = false
modules = ["tests.e2e.crash_tools"]
"""


@tool(kind="edit", destructive=True)
def append_line(line: str) -> str:
    """Append one line to the output file."""
    _signal("CRASH_HANG")
    _signal("CRASH_PAUSE", until=os.environ.get("CRASH_PAUSE", "") + ".go")
    with open(os.environ["CRASH_OUT"], "a") as f:
        f.write(line + "\n")
    _signal("CRASH_HANG_AFTER")
    return "appended"


def _signal(variable: str, *, until: str | None = None) -> None:
    """Create the file ``$variable`` names (the test waits for it), then hang (killed there) or wait for ``until``."""
    path = os.environ.get(variable)
    if not path or os.path.exists(path):  # once: a run resumed elsewhere goes through
        return
    with open(path, "w") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (until and os.path.exists(until)):
        time.sleep(0.01)


@tool(kind="read", read_only=True)
def peek(key: str) -> str:
    """Look at a key (changes nothing)."""
    return f"seen {key}"
