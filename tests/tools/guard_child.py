"""An agent-like process for the process guard tests: ``python -m tests.tools.guard_child MODE ARG``.

``command CMD`` runs ``CMD`` through ``LocalProcessRunner``, printing its output as it comes and ``DONE`` when it
returns; ``mcp SCRIPT [ARG...]`` connects to the stdio MCP server ``SCRIPT`` and prints ``READY``. Both then wait
for the end of stdin and exit normally, or die however the test ends them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from awaken_stdio.tools.mcp import McpServerSpec, open_mcp_toolsets
from awaken_stdio.tools.runner import LocalProcessRunner


def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def wait_for_stdin_eof() -> None:
    await anyio.to_thread.run_sync(sys.stdin.read)


async def main(mode: str, arg: str, *server_args: str) -> None:
    if mode == "command":

        async def show(text: str) -> None:
            say(text)

        await LocalProcessRunner().run(arg, cwd=Path.cwd(), timeout_s=120, output_limit=10_000, on_output=show)
        say("DONE\n")
        await wait_for_stdin_eof()
        return
    spec = McpServerSpec(name="srv", transport="stdio", command=sys.executable, args=(arg, *server_args))
    async with open_mcp_toolsets([spec]) as toolsets:
        assert toolsets.status("srv").state == "ready", toolsets.status("srv")
        say("READY\n")
        await wait_for_stdin_eof()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
