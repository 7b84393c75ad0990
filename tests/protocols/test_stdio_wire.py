"""Raw wire: ``stdio_server.py`` in a real subprocess on real pipes (and files, and a terminal)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import tty
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import anyio
import anyio.abc
import pytest

SERVER = str(Path(__file__).with_name("stdio_server.py"))
# Without PYTHONUNBUFFERED a print() sits in a buffer until exit: the case the stdout guard must survive.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


class Server:
    def __init__(self, process: anyio.abc.Process, stderr: Path) -> None:
        self.process = process
        self.stderr = stderr
        self._buffer = b""

    async def send(self, message: Any) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def receive(self, timeout: float = 5.0) -> dict[str, Any]:
        assert self.process.stdout is not None
        with anyio.fail_after(timeout):
            while b"\n" not in self._buffer:
                self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line
        return message

    async def close_stdin(self) -> float:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        return time.monotonic()

    async def rest_of_stdout(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Read to EOF; every line must be one JSON-RPC object."""
        assert self.process.stdout is not None
        with anyio.fail_after(timeout):
            async for chunk in self.process.stdout:
                self._buffer += chunk
        lines, self._buffer = self._buffer.split(b"\n"), b""
        assert lines[-1] == b"", "output must end with a newline"
        messages = [json.loads(line) for line in lines[:-1]]
        assert all(isinstance(m, dict) and m["jsonrpc"] == "2.0" for m in messages)
        return messages


@asynccontextmanager
async def start(tmp_path: Path) -> AsyncIterator[Server]:
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        process = await anyio.open_process([sys.executable, SERVER], stderr=err, env=ENV)
    async with process:
        try:
            yield Server(process, stderr)
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


@pytest.mark.anyio
async def test_stdout_carries_only_protocol_lines(tmp_path: Path) -> None:
    async with start(tmp_path) as server:
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "pollute"})
        assert await server.receive() == {"jsonrpc": "2.0", "id": 1, "result": "polluted"}
        await server.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"ü": "\n"}})
        assert await server.receive() == {"jsonrpc": "2.0", "id": 2, "result": {"ü": "\n"}}
        await server.close_stdin()
        assert await server.rest_of_stdout() == []
        assert await server.process.wait() == 0
    stderr = server.stderr.read_text()
    for text in ("stray print", "buffered print without newline", "child stdout", "libc printf"):
        assert text in stderr


@pytest.mark.anyio
async def test_bad_frames_are_answered_and_the_process_lives(tmp_path: Path) -> None:
    async with start(tmp_path) as server:
        frames = [
            (b"garbage{", -32700),
            (b'[{"jsonrpc":"2.0","id":1,"method":"echo"}]', -32600),
            (b'{"jsonrpc":"2.0","id":null,"method":"echo"}', -32600),
            (b"x" * (32 * 1024 * 1024 + 1), -32600),
        ]
        for frame, code in frames:
            await server.send_raw(frame + b"\n")
            answer = await server.receive()
            assert answer["id"] is None and answer["error"]["code"] == code
        assert "33554432 bytes" in answer["error"]["message"]
        await server.send({"jsonrpc": "2.0", "id": 9, "method": "echo", "params": [9]})
        assert await server.receive() == {"jsonrpc": "2.0", "id": 9, "result": [9]}
        assert server.process.returncode is None


@pytest.mark.anyio
async def test_slow_request_does_not_delay_a_fast_one_and_eof_cancels_it(tmp_path: Path) -> None:
    async with start(tmp_path) as server:
        await server.send({"jsonrpc": "2.0", "id": "slow", "method": "sleep", "params": {"seconds": 30}})
        sent = time.monotonic()
        await server.send({"jsonrpc": "2.0", "id": "fast", "method": "echo", "params": ["fast"]})
        assert (await server.receive())["id"] == "fast"
        assert time.monotonic() - sent < 0.5
        closed = await server.close_stdin()
        assert await server.rest_of_stdout() == []  # the cancelled request is never answered
        await server.process.wait()
        assert time.monotonic() - closed < 1.0


@pytest.mark.anyio
async def test_idle_server_exits_promptly_on_eof(tmp_path: Path) -> None:
    async with start(tmp_path) as server:
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "echo"})
        await server.receive()
        closed = await server.close_stdin()
        assert await server.process.wait() == 0
        assert time.monotonic() - closed < 0.5


@pytest.mark.anyio
async def test_outbound_request_is_answered_by_the_client(tmp_path: Path) -> None:
    async with start(tmp_path) as server:
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": {"q": "allow?"}})
        question = await server.receive()
        assert question["method"] == "client/question" and question["params"] == {"q": "allow?"}
        await server.send({"jsonrpc": "2.0", "id": question["id"], "result": {"outcome": "allow_once"}})
        assert await server.receive() == {"jsonrpc": "2.0", "id": 1, "result": {"outcome": "allow_once"}}


def test_exits_when_its_parent_dies() -> None:
    """The parent dies but our stdin stays open (a grandchild could hold it): the ppid watch must end us."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, sys.argv[1]], stdin=int(sys.argv[2]), stdout=int(sys.argv[3]),"
            " stderr=subprocess.DEVNULL, pass_fds=(int(sys.argv[2]), int(sys.argv[3])))\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n",
            SERVER,
            str(stdin_r),
            str(stdout_w),
        ],
        stdout=subprocess.PIPE,
        pass_fds=(stdin_r, stdout_w),
        env=ENV,
    )
    os.close(stdin_r)
    os.close(stdout_w)
    try:
        assert launcher.stdout is not None
        server_pid = int(launcher.stdout.readline())
        with os.fdopen(stdout_r, "rb") as stdout, os.fdopen(stdin_w, "wb", buffering=0) as stdin:
            stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}\n')
            assert json.loads(stdout.readline())["result"] == [1]
            launcher.send_signal(signal.SIGKILL)
            launcher.wait()
            killed = time.monotonic()
            assert select.select([stdout], [], [], 3)[0], "the server outlived its parent"
            assert stdout.read() == b""  # EOF: the server exited although its stdin is still open
            assert time.monotonic() - killed < 1.5
    finally:
        launcher.kill()
        launcher.wait()
        if launcher.stdout is not None:
            launcher.stdout.close()
        with contextlib.suppress(ProcessLookupError, UnboundLocalError):
            os.kill(server_pid, signal.SIGKILL)


def test_regular_files_for_stdin_and_stdout(tmp_path: Path) -> None:
    requests = tmp_path / "in.jsonl"
    requests.write_bytes(
        b'{"jsonrpc":"2.0","id":1,"method":"echo","params":["from a file"]}\n'
        b"not json\n"
        b'{"jsonrpc":"2.0","id":2,"method":"pollute"}\n'
    )
    out = tmp_path / "out.jsonl"
    with requests.open("rb") as stdin, out.open("wb") as stdout:
        subprocess.run(
            [sys.executable, SERVER], stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, env=ENV, timeout=5
        )
    answers = [json.loads(line) for line in out.read_bytes().splitlines()]
    # Requests run concurrently, so the parse error (answered by the reader itself) may come first.
    assert sorted(answers, key=lambda a: str(a["id"])) == [
        {"jsonrpc": "2.0", "id": 1, "result": ["from a file"]},
        {"jsonrpc": "2.0", "id": 2, "result": "polluted"},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": ANY}},
    ]


def test_socketpair_stdio_as_node_spawns_it() -> None:
    """Node (libuv) gives a child a socketpair, not a pipe, for stdin and stdout."""
    ours, theirs = socket.socketpair()
    with (
        ours,
        subprocess.Popen(
            [sys.executable, SERVER], stdin=theirs, stdout=theirs, stderr=subprocess.DEVNULL, env=ENV
        ) as process,
    ):
        theirs.close()
        try:
            ours.sendall(b'{"jsonrpc":"2.0","id":1,"method":"pollute"}\n')
            reply = ours.makefile("rb")
            assert json.loads(reply.readline()) == {"jsonrpc": "2.0", "id": 1, "result": "polluted"}
            ours.shutdown(socket.SHUT_WR)  # EOF on the server's stdin
            assert reply.read() == b""
            reply.close()
            assert process.wait(timeout=2) == 0
        finally:
            process.kill()


def test_dev_null_for_stdin_and_stdout() -> None:
    """``/dev/null`` is a character device epoll refuses: it must take the thread path, not hang."""
    started = time.monotonic()
    subprocess.run([sys.executable, SERVER], stdin=subprocess.DEVNULL, env=ENV, timeout=5, check=True)
    subprocess.run(
        [sys.executable, SERVER],
        input=b'{"jsonrpc":"2.0","id":1,"method":"pollute"}\n',
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
        timeout=5,
        check=True,
    )
    assert time.monotonic() - started < 3


def test_terminal_stdin(tmp_path: Path) -> None:
    """A terminal is read by a thread (never made non-blocking); hanging up the terminal ends the server."""
    master, slave = os.openpty()
    tty.setraw(slave)
    with subprocess.Popen(
        [sys.executable, SERVER], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV
    ) as process:
        os.close(slave)
        try:
            assert process.stdout is not None
            os.write(master, b'{"jsonrpc":"2.0","id":1,"method":"echo","params":["tty"]}\n')
            assert json.loads(process.stdout.readline()) == {"jsonrpc": "2.0", "id": 1, "result": ["tty"]}
            os.close(master)
            assert process.wait(timeout=2) == 0
        finally:
            process.kill()
