"""What the person sees of a turn, drawn with ``rich``: markdown, thoughts, tool calls, diffs, the plan, a spinner.

Updates arrive as ACP ``session/update`` payloads. Text streams into a live area under a spinner and is printed for
good (rendered as markdown) when its block ends; a finished tool call is one ``✓``/``✗`` line with what it produced
under it (a diff, or the first lines of its output). On a pipe or a dumb terminal there is no live area: each block
is printed once, complete, without colour.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.spinner import Spinner
from rich.syntax import Syntax
from rich.text import Text

from awaken_stdio.contract.preview import FileChange

__all__ = ["View"]

_DIFF_LINES = 40
_OUTPUT_LINES = 6
_PLAN_MARKS = {"completed": ("✓", "green"), "in_progress": ("▸", "bold yellow"), "pending": ("○", "dim")}
_CODE_THEME = "ansi_dark"  # the terminal's own palette: readable on light and dark backgrounds


@dataclass(slots=True, kw_only=True)
class _Call:
    title: str
    kind: str
    diff_shown: bool = False  # at the permission question; not repeated when the call completes


class View:
    """Renders one session's updates; :meth:`start_turn` / :meth:`end_turn` bracket a prompt turn."""

    def __init__(self, console: Console, cwd: str) -> None:
        self.console = console
        self.cwd = Path(cwd)
        self._live: Live | None = None
        self._block_kind: str | None = None  # "agent_message_chunk" / "agent_thought_chunk" while text flows
        self._block: list[str] = []
        self._calls: dict[str, _Call] = {}
        self._spinner = Spinner("dots", text=Text("working…", style="dim"), style="cyan")

    # -- the live area ---------------------------------------------------------------------------------------

    def start_turn(self) -> None:
        self._set_status("working…")
        self.resume()

    def end_turn(self, stop_reason: str | None) -> None:
        self.pause()
        if stop_reason == "cancelled":
            self.note("(turn cancelled)")
        elif stop_reason not in (None, "end_turn"):
            self.note(f"(turn ended: {stop_reason})")
        self.console.print()  # a turn's output stands apart from the next message

    def pause(self) -> None:
        """Print the text so far and take the spinner away (before a question, or at the end of a turn)."""
        self._end_block()
        if self._live is not None:
            self._live.stop()
            self._live = None

    def resume(self) -> None:
        if self._live is None and self.console.is_terminal and not self.console.is_dumb_terminal:
            self._live = Live(self, console=self.console, transient=True, refresh_per_second=12)
            self._live.start()

    def __rich__(self) -> RenderableType:
        """The live area: the block streaming in, then the spinner."""
        if self._block_kind is None:
            return self._spinner
        return Group(self._block_renderable(), self._spinner)

    def _set_status(self, text: str) -> None:
        self._spinner.update(text=Text(text, style="dim"))

    # -- printed for good ------------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        self.console.print(Text(text, style="dim"), soft_wrap=True)

    def error(self, text: str) -> None:
        self.console.print(Text(text, style="bold red"), soft_wrap=True)

    def markdown(self, text: str) -> None:
        self.console.print(Markdown(text, code_theme=_CODE_THEME))

    def agent_log(self, line: str) -> None:
        """A line the agent wrote to its stderr (a log record), kept apart from the conversation."""
        self.console.print(Text(f"agent: {line}", style="dim"), soft_wrap=True)

    def _block_renderable(self) -> RenderableType:
        text = "".join(self._block)
        if self._block_kind == "agent_thought_chunk":
            return Text.assemble(("thinking: ", "dim"), (text, "dim italic"))
        return Markdown(text, code_theme=_CODE_THEME)

    def _end_block(self) -> None:
        if self._block_kind is not None:
            # out of the live area before it is printed for good: printing redraws the live area under it, which
            # would show the block twice and leave the live area's height out of step with the screen
            finished = self._block_renderable() if "".join(self._block).strip() else None
            self._block_kind, self._block = None, []
            if finished is not None:
                self.console.print(finished)

    # -- updates ---------------------------------------------------------------------------------------------

    def update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            if kind != self._block_kind:
                self._end_block()
                self._block_kind = kind
                self._set_status("thinking…" if kind == "agent_thought_chunk" else "writing…")
            self._block.append(update.get("content", {}).get("text", ""))
            return
        self._end_block()
        if kind == "tool_call":
            call = self._calls[update["toolCallId"]] = _Call(
                title=update.get("title", ""), kind=update.get("kind", "other")
            )
            self._set_status(f"{call.title}…")
        elif kind == "tool_call_update":
            self._call_update(update)
        elif kind == "plan":
            self._plan(update.get("entries", []))
        elif kind == "current_mode_update":
            self.note(f"(mode: {update.get('currentModeId')})")

    def _call_update(self, update: dict[str, Any]) -> None:
        call = self._calls.setdefault(update["toolCallId"], _Call(title=update["toolCallId"], kind="other"))
        if update.get("title"):
            call.title = update["title"]
        status = update.get("status")
        if status not in ("completed", "failed"):
            self._set_status(f"{call.title}…")
            return
        self._set_status("working…")
        failed = status == "failed"
        if call.kind == "think" and not failed:
            return  # the plan update that follows shows it
        mark, style = ("✗", "red") if failed else ("✓", "green")
        self.console.print(Text.assemble((f"{mark} ", style), (call.title, "bold")))
        for item in update.get("content") or []:
            if item.get("type") == "diff" and not call.diff_shown:
                self.diff(item)
            elif item.get("type") == "content":
                self._output(item.get("content", {}).get("text", ""), failed)

    def _output(self, text: str, failed: bool) -> None:
        lines = text.splitlines()
        shown = Text("\n".join(f"  {line}" for line in lines[:_OUTPUT_LINES]), style="red" if failed else "dim")
        if len(lines) > _OUTPUT_LINES:
            shown.append(f"\n  … {len(lines) - _OUTPUT_LINES} more lines", style="dim")
        self.console.print(shown)

    def diff(self, diff: dict[str, Any]) -> None:
        """A file change as a coloured unified diff (at most :data:`_DIFF_LINES` lines)."""
        old, new = diff.get("oldText"), diff.get("newText") or ""
        lines = FileChange(path=diff.get("path", ""), old_text=old, new_text=new).unified(str(self.cwd))
        self.console.print(
            Syntax("\n".join(lines[:_DIFF_LINES]), "diff", theme=_CODE_THEME, background_color="default")
        )
        if len(lines) > _DIFF_LINES:
            self.note(f"… {len(lines) - _DIFF_LINES} more diff lines")

    def question(self, call: dict[str, Any]) -> str:
        """Show what a permission request is about (the diffs the agent worked out before asking, the command and
        where it runs); the title to ask about."""
        self.pause()
        known = self._calls.setdefault(
            call.get("toolCallId", ""), _Call(title=call.get("title") or "a tool call", kind=call.get("kind", "other"))
        )
        shown = False
        for item in call.get("content") or []:
            if item.get("type") == "diff":
                self.diff(item)
                known.diff_shown = shown = True
            elif item.get("type") == "content":
                self.console.print(Markdown(item.get("content", {}).get("text", ""), code_theme=_CODE_THEME))
        arguments = call.get("rawInput")
        if not shown and isinstance(arguments, dict) and arguments:  # a diff says it all; a bare title does not
            self.console.print(Text("\n".join(_argument(k, v) for k, v in arguments.items()), style="dim"))
        return call.get("title") or known.title

    def _plan(self, entries: list[dict[str, Any]]) -> None:
        lines = Text("Plan", style="bold")
        for entry in entries:
            mark, style = _PLAN_MARKS.get(entry.get("status", ""), _PLAN_MARKS["pending"])
            lines.append(f"\n  {mark} ", style=style)
            lines.append_text(Text.from_markup(_inline_code(entry.get("content", "")), style=style))
        self.console.print(lines)


def _argument(name: str, value: Any, width: int = 200) -> str:
    """One argument of a call being asked about, as JSON, shortened past ``width`` characters."""
    text = json.dumps(value, ensure_ascii=False)
    return f"  {name}: {text if len(text) <= width else text[: width - 1] + '…'}"


def _inline_code(text: str) -> str:
    """Plan entries are short markdown-ish lines: show `code` spans in cyan, everything else literally."""
    parts = escape(text).split("`")
    return "".join(f"[cyan]{p}[/]" if i % 2 else p for i, p in enumerate(parts))
