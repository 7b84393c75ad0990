"""``awaken-stdio chat``: an approved command is shown as an allowed one is (its output, not the result's JSON)."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import Terminal

PROMPT = r"(?m)^>$"


def test_an_approved_command_shows_its_output_as_an_allowed_one_does(terminal, tmp_path: Path) -> None:
    calls = [{"tool_calls": [{"name": "run_command", "arguments": {"command": f"echo {w}"}}]} for w in ("one", "two")]
    (tmp_path / "script.json").write_text(json.dumps({"turns": [*calls, {"text": "Both ran."}]}))
    (tmp_path / "config.toml").write_text(
        '[models.m]\nprovider = "scripted"\nscript = "script.json"\n\n[agents.a]\nmodel = "m"\n\n'
        '[agents.a.permission]\ndefault = "ask"\nrules = [{ tool = "run_command(echo one*)", behavior = "allow" }]\n'
    )
    term: Terminal = terminal("--config", str(tmp_path / "config.toml"), "--store", "memory://")
    term.expect(PROMPT)
    term.line("run both")
    allowed = term.expect(r"Allow Run command: echo two\? \[y\]es / \[a\]lways / \[n\]o:")
    assert "✓ Run command: echo one\n  one\n  (exit code 0)" in allowed
    term.line("y")
    approved = term.expect("Both ran.")
    assert "✓ Run command: echo two\n  two\n  (exit code 0)" in approved, approved
    assert '"exit_code"' not in approved
