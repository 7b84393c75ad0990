"""``awaken-stdio chat`` on a terminal: the demo tour and past it, Ctrl-C and Ctrl-D, local slash commands, history.

Each test drives the real command in a pseudo-terminal (see ``conftest.Terminal``) against the real agent process.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from .conftest import Terminal

CTRL_C, CTRL_D, TAB = "\x03", "\x04", "\t"
QUESTION = r"Allow Edit file hello\.py\? \[y\]es / \[a\]lways / \[n\]o:"
TOUR_PAUSE = "Send any message to go on."
THE_END = "The demo is over."
ORIGINAL = 'print("Hello, world!")\n'
PROMPT = r"(?m)^>$"  # an empty prompt line


def workspace(term: Terminal) -> Path:
    """The demo's directory, from the banner."""
    return Path(re.search(r"working in (\S+)", term.expect(r"working in \S+\n")).group(1))


def send(term: Terminal, text: str) -> None:
    """Type a message once the chat shows its prompt (as a person waits for it)."""
    term.expect(PROMPT)
    term.line(text)


def assert_no_traceback(term: Terminal) -> None:
    assert "Traceback" not in term.text and "agent error" not in term.text, term.text[-3000:]


def test_the_whole_tour_then_five_more_messages_without_a_traceback(terminal) -> None:
    term = terminal("--demo")
    root = workspace(term)
    send(term, "show me around")
    shown = term.expect(TOUR_PAUSE)
    assert "Welcome to the awaken-stdio tour!" in shown
    assert "▸ Read hello.py" in shown  # the plan
    assert '✓ Read file hello.py\n  print("Hello, world!")' in shown
    send(term, "go on")
    shown = term.expect(QUESTION)
    assert '-print("Hello, world!")\n+import sys' in shown  # the diff, before the question
    term.line("y")
    shown = term.expect(THE_END)
    assert "✓ Edit file hello.py" in shown
    assert "✓ Run command: python hello.py Ada\n  Hello, Ada!" in shown
    assert "✓ Run python hello.py Ada" in shown  # the plan, all done
    assert "Hello, {name}!" in (root / "hello.py").read_text()
    for n in range(5):
        send(term, f"and now {n}?")
        assert "set `ANTHROPIC_API_KEY`" not in term.expect(THE_END)  # markdown rendered, not raw
    term.expect(PROMPT)
    term.type(CTRL_D)
    assert term.exit_code() == 0
    assert_no_traceback(term)
    assert not root.exists()  # the tour's copy of its project goes when the chat does


def test_a_custom_tools_question_shows_its_arguments(terminal, tmp_path: Path) -> None:
    (tmp_path / "shout_tools.py").write_text(
        "from awaken_stdio import tool\n\n@tool\ndef shout(text: str, times: int = 1) -> str:\n"
        '    """Shout the text."""\n    return text.upper() * times\n'
    )
    call = {"name": "shout", "arguments": {"text": "hello there", "times": 2}}
    (tmp_path / "script.json").write_text(json.dumps({"turns": [{"tool_calls": [call]}, {"text": "Shouted."}]}))
    (tmp_path / "config.toml").write_text(
        '[tools]\nmodules = ["shout_tools"]\n\n[models.m]\nprovider = "scripted"\nscript = "script.json"\n\n'
        '[agents.a]\nmodel = "m"\n'
    )
    term = terminal("--config", str(tmp_path / "config.toml"), "--store", "memory://")
    send(term, "shout")
    shown = term.expect(r"Allow shout\? \[y\]es / \[a\]lways / \[n\]o:")
    assert '  text: "hello there"\n  times: 2\nAllow shout?' in shown
    term.line("y")
    assert "Shouted." in term.expect(PROMPT)
    term.type(CTRL_D)
    assert term.exit_code() == 0


def test_ctrl_c_at_the_question_refuses_it_and_the_chat_goes_on(terminal) -> None:
    term = terminal("--demo")
    root = workspace(term)
    send(term, "hi")
    term.expect(TOUR_PAUSE)
    send(term, "edit it")
    term.expect(QUESTION)
    term.type(CTRL_C)
    term.expect(r"\(turn cancelled\)")
    send(term, "what now?")
    shown = term.expect(THE_END)
    assert "Hello, world!" in shown  # the command ran the file as it was
    assert "✓ Edit file" not in term.text and (root / "hello.py").read_text() == ORIGINAL
    term.expect(PROMPT)
    term.type(CTRL_D)  # the interrupted question left nothing reading: Ctrl-D leaves at once
    assert term.exit_code(timeout=5) == 0
    assert_no_traceback(term)


def test_n_refuses_the_edit(terminal) -> None:
    term = terminal("--demo")
    root = workspace(term)
    send(term, "hi")
    term.expect(TOUR_PAUSE)
    send(term, "go on")
    term.expect(QUESTION)
    term.line("n")
    assert "✗ Edit file hello.py" in term.expect(THE_END)
    assert (root / "hello.py").read_text() == ORIGINAL
    term.expect(PROMPT)
    term.type(CTRL_D)
    assert term.exit_code() == 0


def test_ctrl_d_at_the_first_prompt_leaves_with_exit_0(terminal) -> None:
    term = terminal("--demo")
    term.expect(PROMPT)
    term.type(CTRL_D)
    assert term.exit_code(timeout=5) == 0
    assert_no_traceback(term)


def test_help_is_answered_here_and_uses_no_model_turn(terminal) -> None:
    term = terminal("--demo")
    term.expect(PROMPT)
    term.type("/he")
    term.expect("help +Show the commands and keys")  # the completion menu, as you type
    term.type(TAB)
    term.expect(r"(?m)^> /help$", anywhere=True)
    term.type("\r")
    shown = term.expect(r"Ctrl-D\s+leave")
    for command in ("/help", "/quit", "/mode", "/model", "/runs", "/compact"):
        assert command in shown
    send(term, "/nonsense")
    term.expect("unknown command /nonsense; /help lists the commands")
    send(term, "hi")
    assert "Welcome to the awaken-stdio tour!" in term.expect(TOUR_PAUSE)  # still the tour's first turn
    send(term, "/quit")
    assert term.exit_code() == 0


def test_ctrl_c_while_the_agent_works_stops_the_turn(terminal, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [{"text": "too late", "delay_ms": 60_000}]}))
    config = tmp_path / "config.toml"
    config.write_text(f'[models.slow]\nprovider = "scripted"\nscript = "{script}"\n[agents.a]\nmodel = "slow"\n')
    term = terminal("--config", str(config), "--store", "memory://")
    send(term, "hello")
    term.expect("working")  # the spinner
    started = time.monotonic()
    term.type(CTRL_C)
    term.expect(r"\(turn cancelled\)", timeout=5)
    assert time.monotonic() - started < 5
    send(term, "/runs")  # the agent still answers
    term.expect("cancelled")
    term.expect(PROMPT)
    term.type(CTRL_D)
    assert term.exit_code() == 0
    assert "too late" not in term.text
    assert_no_traceback(term)


def test_messages_are_kept_in_the_history_between_chats(terminal, data_home: Path) -> None:
    first = terminal("--demo")
    send(first, "/help")
    first.expect(r"Ctrl-D\s+leave")
    first.expect(PROMPT)
    first.type(CTRL_D)
    assert first.exit_code() == 0
    assert "/help" in (data_home / "awaken-stdio" / "chat-history").read_text()
    second = terminal("--demo")
    second.expect(PROMPT)
    second.type("\x1b[A\r")  # Up, Enter: the last message again
    second.expect(r"Ctrl-D\s+leave")
    second.expect(PROMPT)
    second.type(CTRL_D)
    assert second.exit_code() == 0
