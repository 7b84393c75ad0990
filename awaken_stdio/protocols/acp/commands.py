"""Slash commands: what ``available_commands_update`` advertises, and how a prompt is recognised as one.

ACP delivers a command as ordinary prompt text starting with ``/``; the server runs it instead of the model. The
commands act through the same paths as the protocol methods (``/mode`` is ``session/set_mode``), so the client sees
the same updates either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from awaken_stdio.contract.ids import iso_ms
from awaken_stdio.contract.messages import ContentBlock, TextBlock
from awaken_stdio.contract.stores import RunRecord
from awaken_stdio.protocols.acp.sessions import MODES

__all__ = ["available_commands", "format_runs", "parse_command"]


def available_commands() -> list[dict[str, Any]]:
    return [
        {"name": "compact", "description": "Summarise the earlier conversation to free context (history is kept)"},
        {
            "name": "mode",
            "description": "Switch the permission mode (" + ", ".join(MODES) + ")",
            "input": {"hint": "mode"},
        },
        {"name": "model", "description": "Show the models, or switch to one", "input": {"hint": "model id"}},
        {"name": "runs", "description": "List this session's agent runs and any waiting for approval"},
    ]


_NAMES = frozenset(c["name"] for c in available_commands())


def parse_command(blocks: Sequence[ContentBlock]) -> tuple[str, str] | None:
    """``(name, argument)`` when the prompt is one of our commands; other ``/`` text goes to the model."""
    if len(blocks) != 1 or type(blocks[0]) is not TextBlock:
        return None
    text = blocks[0].text.strip()
    if not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    return (name, argument.strip()) if name in _NAMES else None


def format_runs(runs: list[RunRecord]) -> str:
    if not runs:
        return "No runs yet in this session."
    lines = []
    for run in runs:
        line = f"- `{run.run_id}` {run.display_status} ({iso_ms(run.updated_at)}, {run.steps} steps)"
        if run.waiting is not None:
            waiting = ", ".join(f"{t.tool_name} `{t.tool_call_id}`" for t in run.waiting.tickets)
            line += f": waiting for approval of {waiting}; send any message to be asked again"
        lines.append(line)
    return "\n".join(lines)
