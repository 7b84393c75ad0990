"""The raw-pipe client of the early-answer tests (``tests/protocols/*/test_*_early.py``): a server process fed in
separate writes, its answers awaited, its stderr (debug logs, import traces) kept in a file so it never blocks."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import anyio

__all__ = ["EARLY", "LATE", "answer", "catches_sigterm", "frame", "imported_after_the_answer", "talk"]

# the servers' debug line at a first initialize answered before the event loop, and on it
EARLY = "answering initialize; heavy modules loaded: none (event loop: not loaded)"
LATE = "answering initialize; heavy modules loaded: none (event loop: asyncio, anyio)"


def frame(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def answer(lines: list[bytes], request_id: Any) -> dict[str, Any]:
    """The response to ``request_id`` among ``lines``."""
    return next(m for m in map(json.loads, lines) if m.get("id") == request_id and "method" not in m)


async def talk(
    command: list[str], cwd: Path, env: dict[str, str], writes: list[bytes], ids: set[Any], *, eof: bool = False
) -> tuple[list[bytes], str]:
    """Run ``command``, write each of ``writes`` (a pause between them), read until the answers to ``ids`` are in,
    then close stdin (``eof``: right after the writes instead): every stdout line, and stderr. It must exit 0."""
    err = cwd / "stderr.txt"
    with err.open("wb") as stderr:
        process = await anyio.open_process(command, cwd=cwd, env=env, stderr=stderr)
    assert process.stdin is not None and process.stdout is not None
    buffer, lines, answered = b"", [], set()
    async with process:
        for i, data in enumerate(writes):
            if i:
                await anyio.sleep(0.2)
            await process.stdin.send(data)
        if eof:
            await process.stdin.aclose()
        with anyio.fail_after(30):
            while not ids <= answered:
                while b"\n" not in buffer:
                    buffer += await process.stdout.receive()
                line, buffer = buffer.split(b"\n", 1)
                lines.append(line)
                message = json.loads(line)
                if "id" in message and "method" not in message:
                    answered.add(message["id"])
        await process.stdin.aclose()
        with anyio.fail_after(10):
            assert await process.wait() == 0
    return lines, err.read_text()


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler (the early read installs one while it waits)."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.MULTILINE)
    return found is not None and bool(int(found.group(1), 16) & 1 << (signal.SIGTERM - 1))


def imported_after_the_answer(log: str, *modules: str) -> None:
    """In the debug log of a ``-X importtime`` run: asyncio, anyio and ``modules`` were imported only after the early
    answer, and asyncio and anyio were imported then."""
    before, _, after = log.partition(EARLY)
    assert after, "no early initialize answer logged"
    assert re.search(r"\| +awaken_stdio\.protocols\.early\n", before)  # importtime lines are there
    assert not re.search(rf"\| +({'|'.join(('asyncio', 'anyio', *modules))})\b", before)
    assert re.search(r"\| +asyncio\n", after) and re.search(r"\| +anyio\n", after)
