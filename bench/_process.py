"""What the process benchmarks share: stopping the server process they drive over its pipes."""

from __future__ import annotations

import anyio
import anyio.abc


async def close_process(process: anyio.abc.Process) -> None:
    """Close its stdin (a stdio server's cue to exit), wait up to 5 s, then kill it."""
    assert process.stdin is not None
    await process.stdin.aclose()
    with anyio.move_on_after(5):
        await process.wait()
    if process.returncode is None:
        process.kill()
    await process.aclose()
