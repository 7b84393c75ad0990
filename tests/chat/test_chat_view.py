"""The chat's pieces on their own: how updates are drawn (on a plain console) and how a typed line is sorted."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from awaken_stdio.chat.commands import Commands
from awaken_stdio.chat.view import View


def view(cwd: Path) -> tuple[View, io.StringIO]:
    out = io.StringIO()
    return View(Console(file=out, width=100), str(cwd)), out


def test_a_question_shows_the_diff_the_agent_sent_with_it(tmp_path: Path) -> None:
    shown, out = view(tmp_path)
    diff = {
        "type": "diff",
        "path": str(tmp_path / "a.txt"),
        "oldText": "one\ntwo\nthree\n",
        "newText": "one\n2\nthree\n",
    }
    call = {"toolCallId": "c1", "title": "Edit file a.txt", "kind": "edit", "content": [diff],
            "rawInput": {"path": "a.txt", "old_text": "two", "new_text": "2"}}  # fmt: skip
    assert shown.question(call) == "Edit file a.txt"
    assert out.getvalue().splitlines() == [
        "--- a/a.txt",
        "+++ b/a.txt",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+2",
        " three",
    ]
    shown.update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "content": [diff]})
    assert out.getvalue().count("-two") == 1  # the diff asked about is not drawn again


def test_a_question_about_a_new_file_shows_all_of_it_added(tmp_path: Path) -> None:
    shown, out = view(tmp_path)
    diff = {"type": "diff", "path": str(tmp_path / "new.py"), "oldText": None, "newText": "x = 1\n"}
    shown.question({"toolCallId": "c1", "title": "Write file new.py", "content": [diff]})
    assert "+x = 1" in out.getvalue() and "@@ -0,0 +1 @@" in out.getvalue()


def test_a_question_about_a_command_shows_it_and_where_it_runs(tmp_path: Path) -> None:
    shown, out = view(tmp_path)
    text = f"```sh\nmake test\n```\nin `{tmp_path}`"
    shown.question({"toolCallId": "c1", "title": "Run command: make test", "kind": "execute",
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}]})  # fmt: skip
    assert "make test" in out.getvalue() and str(tmp_path) in out.getvalue()
    assert "```" not in out.getvalue()  # drawn as markdown, not shown raw


def test_long_output_is_cut_and_a_failure_says_so(tmp_path: Path) -> None:
    shown, out = view(tmp_path)
    shown.update({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run command: seq 10", "kind": "execute"})
    text = "\n".join(map(str, range(1, 11)))
    shown.update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
                  "content": [{"type": "content", "content": {"type": "text", "text": text}}]})  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines == ["✗ Run command: seq 10", *(f"  {n}" for n in range(1, 7)), "  … 4 more lines"]


def test_streamed_text_is_printed_once_as_markdown_when_its_block_ends(tmp_path: Path) -> None:
    shown, out = view(tmp_path)
    for piece in ("Hello **wor", "ld**, see `x`"):
        shown.update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": piece}})
    assert out.getvalue() == ""  # still streaming
    shown.end_turn("cancelled")
    assert [line.rstrip() for line in out.getvalue().splitlines()][:2] == ["Hello world, see x", "(turn cancelled)"]


def test_lines_are_sorted_into_the_chats_commands_the_agents_and_messages() -> None:
    commands = Commands()
    commands.advertise([{"name": "mode", "description": "Switch the mode"}, {"name": "runs", "description": "Runs"}])
    commands.options([{"category": "mode", "options": [{"value": "default"}, {"value": "plan"}]}])
    assert commands.classify("/help") == ("local", "help")
    assert commands.classify("/exit") == ("local", "quit")
    assert commands.classify("/mode plan") == ("message", "/mode plan")  # the agent runs it
    assert commands.classify("/model x") == ("unknown", "model")  # not advertised by this agent
    assert commands.classify("/tmp/a.txt is big") == ("message", "/tmp/a.txt is big")
    assert commands.arguments["mode"] == ["default", "plan"]
    assert "| `/runs` | Runs |" in commands.help()
