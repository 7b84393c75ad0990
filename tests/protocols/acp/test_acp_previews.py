"""Approve with your eyes open: a permission request shows what approving would do, worked out before asking.

Edits carry ACP ``diff`` content (``oldText``/``newText``) read through the session's file system (the editor's
buffer when the client offers ``fs``), commands their command line and working directory; the same preview is kept
with the waiting run, so the question asked again after kill -9 and ``session/load`` shows it too. Driven with the
real agent process and the official ACP SDK client; every message is checked against the ACP schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import Agent, Harness

pytestmark = pytest.mark.anyio

EDITOR = "one\ntwo\nthree\n"  # the editor's unsaved buffer
DISK = "stale disk copy\n"


def asked(agent: Agent) -> list[dict[str, Any]]:
    """The ``toolCall`` of each ``session/request_permission`` the agent sent, in order."""
    return [
        m["params"]["toolCall"]
        for d, m in agent.wire.messages
        if d == "incoming" and m.get("method") == "session/request_permission"
    ]


def position(agent: Agent, method: str) -> int:
    return next(i for i, (d, m) in enumerate(agent.wire.messages) if d == "incoming" and m.get("method") == method)


def configure(harness: Harness, call: dict[str, Any]) -> None:
    turns = [{"tool_calls": [call]}, {"text": "Done."}, {"text": "Next."}]
    harness.configure(turns, agent='[agents.coder.permission]\ndefault = "ask"')


async def test_an_edit_is_asked_about_with_the_diff_of_the_editor_buffer(harness: Harness) -> None:
    (harness.workspace / "a.txt").write_text(DISK)
    configure(harness, {"name": "edit_file", "arguments": {"path": "a.txt", "old_text": "two", "new_text": "2"}})
    async with harness.spawn(fs=True) as agent:
        path = str(harness.workspace / "a.txt")
        agent.client.files[path] = EDITOR
        session = await agent.new_session()
        assert await agent.prompt(session, "edit it") == "end_turn"
        (call,) = asked(agent)
        diff = {"type": "diff", "path": path, "oldText": EDITOR, "newText": "one\n2\nthree\n"}
        assert call["content"] == [diff]
        assert call["locations"] == [{"path": path}]
        # asked before anything was written, and what ran is what was shown
        assert position(agent, "session/request_permission") < position(agent, "fs/write_text_file")
        assert agent.client.files[path] == diff["newText"]
        assert (harness.workspace / "a.txt").read_text() == DISK


async def test_a_new_file_is_asked_about_with_all_of_it_added(harness: Harness) -> None:
    configure(harness, {"name": "write_file", "arguments": {"path": "new.py", "content": "x = 1\n"}})
    async with harness.spawn() as agent:
        session = await agent.new_session()
        agent.client.answers = ["reject_once"]
        assert await agent.prompt(session, "write it") == "end_turn"
        (call,) = asked(agent)
        path = str(harness.workspace / "new.py")
        assert call["content"] == [{"type": "diff", "path": path, "oldText": None, "newText": "x = 1\n"}]
        assert not (harness.workspace / "new.py").exists()  # rejected: the preview changed nothing


async def test_a_command_is_asked_about_with_its_command_line_and_working_directory(harness: Harness) -> None:
    configure(harness, {"name": "run_command", "arguments": {"command": "echo hi > hi.txt"}})
    async with harness.spawn() as agent:
        session = await agent.new_session()
        assert await agent.prompt(session, "run it") == "end_turn"
        (call,) = asked(agent)
        (text,) = [c["content"]["text"] for c in call["content"] if c["type"] == "content"]
        assert "echo hi > hi.txt" in text and str(harness.workspace) in text
        assert {"path": str(harness.workspace)} in call["locations"]
        assert (harness.workspace / "hi.txt").read_text() == "hi\n"


async def test_an_edit_that_cannot_apply_says_so_before_asking(harness: Harness) -> None:
    (harness.workspace / "a.txt").write_text(EDITOR)
    configure(harness, {"name": "edit_file", "arguments": {"path": "a.txt", "old_text": "four", "new_text": "4"}})
    async with harness.spawn() as agent:
        session = await agent.new_session()
        agent.client.answers = ["reject_once"]
        assert await agent.prompt(session, "edit it") == "end_turn"
        (call,) = asked(agent)
        (text,) = [c["content"]["text"] for c in call["content"]]
        assert text.startswith("As things stand, this call would fail") and "old_text was not found" in text


async def test_the_question_asked_again_after_kill_and_load_shows_the_file_as_it_is_then(harness: Harness) -> None:
    (harness.workspace / "a.txt").write_text(EDITOR)
    configure(harness, {"name": "edit_file", "arguments": {"path": "a.txt", "old_text": "two", "new_text": "2"}})
    async with harness.spawn() as first:
        session = await first.new_session()
        await first.killed_while_asked(session, "edit it")
        (before,) = asked(first)
    assert before["content"][0]["oldText"] == EDITOR
    (harness.workspace / "a.txt").write_text(EDITOR + "four\n")  # changed while no agent ran
    async with harness.spawn() as second:
        with anyio.fail_after(20):
            await second.conn.load_session(session_id=session, cwd=str(harness.workspace), mcp_servers=[])
        assert await second.prompt(session, "go on") == "end_turn"
        ((diff,),) = [call["content"] for call in asked(second)]  # approved on the diff shown: not asked twice
    assert (diff["oldText"], diff["newText"]) == (EDITOR + "four\n", "one\n2\nthree\nfour\n")
    assert (harness.workspace / "a.txt").read_text() == diff["newText"]  # what was shown is what ran


async def test_a_write_in_an_additional_directory_is_previewed_within_the_session_roots(
    harness: Harness, tmp_path: Path
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    target = str(extra / "b.txt")
    configure(harness, {"name": "write_file", "arguments": {"path": target, "content": "in\n"}})
    async with harness.spawn(fs=True) as agent:
        session = await agent.new_session(additional_directories=[str(extra)])
        assert await agent.prompt(session, "write it") == "end_turn"
        (call,) = asked(agent)
        assert call["content"] == [{"type": "diff", "path": target, "oldText": None, "newText": "in\n"}]
        assert agent.client.files[target] == "in\n"  # approved: through the editor, as an allowed write would be
