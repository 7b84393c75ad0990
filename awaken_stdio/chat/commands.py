"""Slash commands in the chat: ``/help`` and ``/quit`` are the chat's own; the agent's (``/mode``, ``/model``,
``/runs``, ``/compact``, whatever its ``available_commands_update`` lists) are sent to it as prompt text, as ACP says.
"""

from __future__ import annotations

import re
from typing import Any, Literal

__all__ = ["LOCAL", "Commands"]

LOCAL = {"help": "Show the commands and keys", "quit": "Leave the chat (also Ctrl-D)"}
_ALIASES = {"exit": "quit", "?": "help"}
_COMMAND = re.compile(r"/([A-Za-z?][\w-]*)(?:\s|$)")  # "/word ..."; "/tmp/x is big" is a message
_ARGUMENT_OPTIONS = {"mode": "mode", "model": "model"}  # command -> the config option category its argument picks
_KEYS = [
    ("Enter", "send the message"),
    ("Ctrl-C", "stop the running turn, or refuse the question being asked"),
    ("Ctrl-D", "leave"),
    ("Up / Down", "earlier messages (kept between chats)"),
    ("Tab", "complete a /command and its argument"),
]


class Commands:
    """What the agent advertises (names, descriptions, argument values) and how a line is dispatched."""

    def __init__(self) -> None:
        self.agent: dict[str, str] = {}
        self.arguments: dict[str, list[str]] = {}

    def advertise(self, commands: list[dict[str, Any]]) -> None:
        """``available_commands_update``: the agent's commands replace the previous list."""
        self.agent = {c["name"]: c.get("description", "") for c in commands if isinstance(c.get("name"), str)}

    def options(self, config_options: list[dict[str, Any]]) -> None:
        """Session config options (``session/new``, ``config_option_update``): the values ``/mode`` and ``/model``
        complete to."""
        for option in config_options:
            for command, category in _ARGUMENT_OPTIONS.items():
                if option.get("category") == category:
                    self.arguments[command] = [str(o.get("value")) for o in option.get("options", [])]

    def names(self) -> dict[str, str]:
        """Every command with its description, local ones first."""
        return LOCAL | {name: text for name, text in self.agent.items() if name not in LOCAL}

    def classify(self, line: str) -> tuple[Literal["local", "unknown", "message"], str]:
        """``("local", name)`` for the chat's own commands, ``("unknown", name)`` for a ``/word`` nobody knows,
        else ``("message", line)`` (the agent's commands are messages it recognises)."""
        match = _COMMAND.match(line)
        if match is None:
            return "message", line
        name = _ALIASES.get(match.group(1), match.group(1))
        if name in LOCAL:
            return "local", name
        return ("message", line) if name in self.agent else ("unknown", name)

    def help(self) -> str:
        """The ``/help`` text, markdown."""
        rows = [f"| `/{name}` | {text} |" for name, text in self.names().items()]
        keys = [f"| {key} | {text} |" for key, text in _KEYS]
        return "\n".join(
            ["| Command | What it does |", "|---|---|", *rows, "", "| Key | What it does |", "|---|---|", *keys]
        )
