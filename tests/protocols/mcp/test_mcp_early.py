"""``awaken-stdio mcp`` answers a first ``initialize`` before the event loop starts (``protocols/mcp/initialize.py``):
the bytes the peer would have sent, the handshake era it opens kept by the server, and every other first line (the
2026-07-28 era's requests among them) left to the peer. Real process, real pipes; every message the server wrote is
checked against the pinned ``mcp_types`` models."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from ..early_talk import EARLY, LATE, answer, catches_sigterm, frame, imported_after_the_answer, talk
from .support import MODERN, Env, check_wire, make_env

pytestmark = pytest.mark.anyio

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t"}},
}
INITIALIZED = frame({"jsonrpc": "2.0", "method": "notifications/initialized"})
TOOLS = frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})


async def serve(
    env: Env, writes: list[bytes], ids: set[Any], *, python: tuple[str, ...] = ()
) -> tuple[list[bytes], str]:
    """``early_talk.talk`` with the server at debug level; everything it wrote checked against the models."""
    command = [env.command()[0], *python, *env.command()[1:], "--log-level", "debug"]
    lines, log = await talk(command, env.cwd, env.environ(), writes, ids)
    inbound = [json.loads(line) for line in b"".join(writes).splitlines() if line.strip()]
    assert check_wire(inbound, [json.loads(line) for line in lines]) == len(lines)
    return lines, log


async def test_initialize_split_in_two_writes_is_answered_early_with_the_bytes_the_peer_sends(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    data = frame(INIT)
    early, early_log = await serve(env, [data[:25], data[25:] + INITIALIZED + TOOLS], {1, 2})
    # a blank first line is the peer's to skip, so the same initialize after it is answered on the event loop
    late, late_log = await serve(env, [b"\n" + data + INITIALIZED + TOOLS], {1, 2})
    assert early[0] == late[0]
    assert answer(early, 1)["result"]["protocolVersion"] == "2025-06-18"
    assert answer(early, 2)["result"]["tools"] == answer(late, 2)["result"]["tools"]  # the handshake era, negotiated
    assert EARLY in early_log and LATE not in early_log
    assert LATE in late_log and EARLY not in late_log


async def test_asyncio_and_anyio_are_imported_only_after_the_answer(tmp_path: Path) -> None:
    lines, log = await serve(
        make_env(tmp_path), [frame(INIT) + INITIALIZED + TOOLS], {1, 2}, python=("-X", "importtime")
    )
    assert answer(lines, 2)["result"]["tools"]
    imported_after_the_answer(log, "ssl", "pydantic", "mcp", "platformdirs")  # --config and --store given


async def test_a_first_request_of_the_2026_era_is_left_to_the_peer(tmp_path: Path) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    discover = frame({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
    lines, log = await serve(make_env(tmp_path), [discover + frame({**INIT, "id": 2})], {1, 2})
    assert MODERN in answer(lines, 1)["result"]["supportedVersions"]
    assert answer(lines, 2)["error"]["code"] == -32022  # the era is the modern one: no handshake on it
    assert "serving the 2026-07-28 protocol era" in log and "(event loop: not loaded)" not in log


async def test_initialize_params_that_need_validation_are_left_to_the_peer(tmp_path: Path) -> None:
    bad = {**INIT, "params": {"protocolVersion": "2025-06-18", "capabilities": [1]}}
    lines, log = await serve(make_env(tmp_path), [frame(bad) + frame({**INIT, "id": 2})], {1, 2})
    assert answer(lines, 1)["error"]["code"] == -32602
    assert answer(lines, 2)["result"]["protocolVersion"] == "2025-06-18"
    assert EARLY not in log


async def test_sigterm_while_waiting_for_the_first_line_exits_0(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    async with await anyio.open_process(env.command(), cwd=env.cwd, env=env.environ()) as process:
        with anyio.fail_after(30):
            while not catches_sigterm(process.pid):
                await anyio.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            assert await process.wait() == 0
