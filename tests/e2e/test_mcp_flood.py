"""Back-pressure on the real ``awaken-stdio mcp`` process: 30,000 requests written while nobody reads its stdout. The
server stops reading (the writer blocks), its memory stays bounded, and once stdout is read every request is answered
exactly once."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.protocols.mcp.support import make_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

REQUESTS = 30_000
UNREAD_S = 3.0
MAX_RSS_KB = 150_000  # without back-pressure the process passes 240 MB here; with it, about 60 MB
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}}


def peak_rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def test_a_flood_with_stdout_unread_stays_bounded_and_is_answered_once(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    process = subprocess.Popen(
        env.command(), env=env.environ(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}).encode())
        process.stdin.write(b'\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 0
        flood = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(1, REQUESTS + 1))

        def write() -> None:
            assert process.stdin is not None
            process.stdin.write(flood)
            process.stdin.close()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        time.sleep(UNREAD_S)
        assert writer.is_alive(), "the server read the whole flood while its answers were not read"
        rss = peak_rss_kb(process.pid)
        assert rss < MAX_RSS_KB, f"peak RSS {rss} kB under the flood"

        # until EOF (the server exits after the flood); a notification among the answers (the tools of modules
        # loaded in the background arrive as tools/list_changed) answers nothing
        messages = [json.loads(line) for line in process.stdout]
        answered = [m["id"] for m in messages if "id" in m]
        writer.join(10)
        assert sorted(answered) == list(range(1, REQUESTS + 1))
        assert process.wait(10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        process.stdout.close()
        with contextlib.suppress(BrokenPipeError):  # the flood's writer may have been cut off mid-write
            process.stdin.close()
