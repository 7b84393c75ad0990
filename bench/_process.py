"""What the process benchmarks share: stopping the server process they drive over its pipes, and timing that."""

from __future__ import annotations

import time

import anyio
import anyio.abc

IDLE_BEFORE_EOF_S = 0.5  # "nothing running": what the last request started (a background checkpoint) is over


async def close_process(process: anyio.abc.Process) -> None:
    """Close its stdin (a stdio server's cue to exit), wait up to 5 s, then kill it."""
    assert process.stdin is not None
    await process.stdin.aclose()
    with anyio.move_on_after(5):
        await process.wait()
    if process.returncode is None:
        process.kill()
    await process.aclose()


async def exit_after_eof_ms(process: anyio.abc.Process) -> float:
    """Milliseconds from closing an idle server's stdin to its exit (``close_process``), after
    ``IDLE_BEFORE_EOF_S`` with nothing asked of it."""
    await anyio.sleep(IDLE_BEFORE_EOF_S)
    started = time.perf_counter()
    await close_process(process)
    return (time.perf_counter() - started) * 1000
