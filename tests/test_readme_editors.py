"""The README's editor snippets follow what each editor documents today, and the README's own advice (an absolute
command: editors start agents without the shell's ``PATH``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_jetbrains_snippet_is_an_acp_json_agent_with_an_absolute_command() -> None:
    [jetbrains] = [json.loads(b) for b in _blocks("json") if "agent_servers" in b and '"type"' not in b]
    [(name, server)] = jetbrains["agent_servers"].items()
    assert name == "awaken-stdio" and set(server) == {"command", "args", "env"}  # acp.json's documented keys
    assert Path(server["command"]).is_absolute() and server["args"] == ["acp"]
    assert "~/.jetbrains/acp.json" in README.read_text(encoding="utf-8")


def test_the_codecompanion_adapter_is_its_own_and_uses_interactions() -> None:
    [snippet] = [b for b in _blocks("lua") if "codecompanion" in b]
    assert 'interactions = { chat = { adapter = "awaken_stdio" } }' in snippet
    assert "strategies" not in snippet  # the old name of `interactions`
    assert ".extend(" not in snippet and "CLAUDE_CODE" not in snippet and "auth =" not in snippet
    assert 'type = "acp"' in snippet and "vision = false" in snippet
    [command] = re.findall(r"commands = \{ default = \{ \"([^\"]+)\", \"acp\" \} \}", snippet)
    assert Path(command).is_absolute()


def test_every_lua_snippet_starts_an_absolute_command() -> None:
    commands = re.findall(r'(?:command = |default = \{ )"([^"]+)"', "".join(_blocks("lua")))
    assert len(commands) >= 2 and all(Path(c).is_absolute() for c in commands), commands
