"""What an approved call would do, worked out before the person is asked: the file changes, the command and where.

A tool that changes things can describe a call before it runs (``Tool.preview``); the runtime asks it when the call
is suspended for approval and keeps the answer with the suspension, so every surface shows the same thing, also
after a restart: ACP sends the changes as ``diff`` content of the permission request, MCP and the CLI print
:meth:`ToolPreview.summary`. A preview is computed through the same file system the call would use (the editor's,
when an ACP client offers one), so the person sees the editor's unsaved text, not a stale disk copy.

An approval is bound to the preview the person saw (its :meth:`ToolPreview.digest` travels in the answer), so a call
whose target changed since is asked about again (``runtime/run/shown.py``, :data:`CHANGED`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["CHANGED", "SHOWN", "FileChange", "ToolPreview"]

SUMMARY_LINES = 40
"""Lines of a shortened preview (MCP elicitation messages, ``runs show``); the rest is counted, not shown."""
SUMMARY_LINE_CHARS = 200
SHOWN = "shown"
"""The key of an approval's answer (``ToolCallResume.result``) holding the digest of the preview it was given on."""
CHANGED = (
    "The file changed after its diff was shown, so the call did not run; approve again to apply the diff as it is now."
)
"""The note of a call asked about again because its target changed after it was approved."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """One file before and after (``old_text`` None: the call creates it). ``path`` is absolute."""

    path: str
    old_text: str | None
    new_text: str

    def unified(self, cwd: str | None = None) -> list[str]:
        """The change as unified diff lines, paths shown relative to ``cwd`` when inside it."""
        import difflib
        import os.path

        shown = self.path.lstrip("/")  # outside cwd: ``a/abs/path``, as git shows it
        if cwd and os.path.isabs(self.path) and os.path.commonpath([cwd, self.path]) == cwd:
            shown = os.path.relpath(self.path, cwd)
        old = (self.old_text or "").splitlines()
        before = "/dev/null" if self.old_text is None else f"a/{shown}"
        return list(difflib.unified_diff(old, self.new_text.splitlines(), before, f"b/{shown}", lineterm=""))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPreview:
    """What a call would do: file ``changes``, or a ``command`` run in ``cwd``; ``note`` says what else to know
    (e.g. that the call would fail as things stand)."""

    changes: tuple[FileChange, ...] = ()
    command: str | None = None
    cwd: str | None = None
    note: str = ""

    def summary(self, max_lines: int = SUMMARY_LINES) -> str:
        """A plain-text rendering at most ``max_lines`` lines long (diffs as unified diffs, a command as ``$ ...``)."""
        lines: list[str] = []
        if self.command is not None:
            lines.append(f"$ {self.command}")
            if self.cwd:
                lines.append(f"(in {self.cwd})")
        for change in self.changes:
            lines.extend(change.unified(self.cwd))
        note = self.note.splitlines()  # never cut: it says why the rest is (or is not) what would happen
        room = max(max_lines - len(note), 1)
        shown = [line if len(line) <= SUMMARY_LINE_CHARS else line[: SUMMARY_LINE_CHARS - 1] + "…" for line in lines]
        if len(shown) > room:
            shown = [*shown[: room - 1], f"… {len(shown) - room + 1} more lines"]
        return "\n".join([*shown, *note])

    def digest(self) -> str:
        """What the preview assumed of its targets (each changed file's path and text before), as a short hash: an
        approval given on this preview holds while the targets still hold that text."""
        assumed = sorted(((c.path, c.old_text) for c in self.changes), key=lambda c: c[0])
        return hashlib.sha256(json.dumps(assumed, ensure_ascii=False).encode()).hexdigest()[:32]

    def changed(self) -> ToolPreview:
        """This preview, worked out again after its target changed, saying so first."""
        return replace(self, note=f"{CHANGED}\n{self.note}" if self.note else CHANGED)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.changes:
            out["changes"] = [{"path": c.path, "old_text": c.old_text, "new_text": c.new_text} for c in self.changes]
        if self.command is not None:
            out["command"] = self.command
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.note:
            out["note"] = self.note
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> ToolPreview:
        changes = tuple(
            FileChange(path=c["path"], old_text=c.get("old_text"), new_text=c["new_text"])
            for c in d.get("changes") or ()
        )
        return ToolPreview(changes=changes, command=d.get("command"), cwd=d.get("cwd"), note=d.get("note", ""))
