"""``awaken-stdio chat`` with piped input: the tour from a script, one-line errors, nothing chat-only in the servers."""

from __future__ import annotations

import json
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from .conftest import ROOT, chat_env


def chat(typed: str, *args: str, data_home: Path) -> subprocess.CompletedProcess[str]:
    """``awaken-stdio chat ARGS`` in a fresh process with ``typed`` as its input."""
    return subprocess.run(
        [sys.executable, "-m", "awaken_stdio", "chat", *args],
        input=typed,
        capture_output=True,
        text=True,
        timeout=30,
        env=chat_env(data_home),
        check=False,
    )


def test_the_tour_from_a_pipe_edits_after_asking_and_keeps_answering(tmp_path: Path) -> None:
    done = chat("hi\ngo on\ny\nmore\nmore\n", "--demo", data_home=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Allow Edit file hello.py? [y]es / [a]lways / [n]o:" in out
    assert '+print(f"Hello, {name}!")' in out  # the diff
    assert "✓ Run command: python hello.py Ada\n  Hello, Ada!" in out
    assert out.count("The demo is over.") == 3
    assert "\x1b[" not in out  # no colours or cursor moves on a pipe
    assert "✓ Edit file hello.py" in out
    workspace = Path(re.search(r"working in (\S+)", out).group(1))
    assert not workspace.exists()  # the tour's copy goes when the chat does


def test_end_of_input_at_the_question_leaves_without_editing(tmp_path: Path) -> None:
    done = chat("hi\ngo on\n", "--demo", data_home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "(turn cancelled)" in done.stdout
    assert "✓ Edit file" not in done.stdout
    assert not Path(re.search(r"working in (\S+)", done.stdout).group(1)).exists()


def test_an_agent_that_cannot_start_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("x = [\n")
    done = chat("hi\n", "--config", str(bad), data_home=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"awaken-stdio chat: the agent stopped: awaken-stdio: error: {bad}: "
                                        "invalid TOML: Invalid value (at end of document)"]  # fmt: skip


def test_a_failing_turn_is_one_line_and_the_chat_goes_on(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "first"}]}))  # a second message has no turn
    config = tmp_path / "config.toml"
    config.write_text(f'[models.m]\nprovider = "scripted"\nscript = "{script}"\n[agents.a]\nmodel = "m"\n')
    done = chat("one\ntwo\n/runs\n", "--config", str(config), *MEMORY, data_home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "first" in done.stdout
    assert "agent error: Internal error: scripted model" in done.stdout and "has no turn 1" in done.stdout
    assert "failed" in done.stdout  # /runs still answered, the failed run listed
    assert "Traceback" not in done.stdout + done.stderr


MEMORY = ("--store", "memory://")
MCP_INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _imported_by_server(command: str, frames: list[dict], tmp_path: Path) -> str:
    """``-X importtime`` of a server process that answered ``frames``: every module it imported. Input stays open
    until every request is answered, as a client's does (at EOF a server gives unfinished requests only a grace)."""
    config = ROOT / "awaken_stdio" / "data" / "demo-config.toml"
    wanted = {f["id"] for f in frames if "id" in f}
    with (tmp_path / f"{command}.err").open("w+") as err, subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "awaken_stdio", command, "--config", str(config), *MEMORY],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp_path, env=chat_env(tmp_path),
    ) as process:  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(json.dumps(frame) + "\n" for frame in frames))
        process.stdin.flush()
        answered: set[object] = set()
        deadline = time.monotonic() + 60
        while answered < wanted and time.monotonic() < deadline:
            if select.select([process.stdout], [], [], 1)[0]:
                line = process.stdout.readline()
                assert line, f"the {command} server ended before answering: {answered} of {wanted}"
                answer = json.loads(line)
                if "result" in answer:
                    answered.add(answer.get("id"))
        process.stdin.close()
        process.wait(timeout=30)
        assert answered >= wanted, f"{command}: answered {answered} of {wanted} within 60 s"
        err.seek(0)
        return err.read()


def test_the_servers_never_import_the_chat_libraries(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text("print('hi')\n")
    acp = _imported_by_server(
        "acp",
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
        ],
        tmp_path,
    )
    mcp = _imported_by_server(
        "mcp",
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": MCP_INIT},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ],
        tmp_path,
    )
    for stderr in (acp, mcp):
        assert "| awaken_stdio.protocols" in stderr  # importtime lines are there
        assert not re.search(r"\| +(rich|prompt_toolkit|pygments|awaken_stdio\.chat)\b", stderr)
