"""``read_file``, ``write_file``, ``edit_file`` and ``list_directory``: text files of the workspace.

Paths are relative to the working directory (absolute ones must lie in the workspace). Writes and edits return
the whole old and new text as ``data["diff"]`` (``{path, old_text, new_text}``, ``old_text`` None for a new file),
which is ACP's diff content; the model only reads a one-line summary. Before a write or an edit is approved, its
preview shows the same diff, worked out by the same code; an approved one refuses to write when the file no longer
holds what that diff showed (it changed after the runtime's last check, ``runtime.run.shown``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field

from awaken_stdio.contract.errors import ToolError, ToolFailure
from awaken_stdio.contract.preview import FileChange, ToolPreview
from awaken_stdio.contract.suspension import bound_digest
from awaken_stdio.contract.tools import ToolCallContext, ToolResult
from awaken_stdio.contract.workspace import FileSystem
from awaken_stdio.tools.builtin._results import location, success
from awaken_stdio.tools.function import tool
from awaken_stdio.tools.workspace import get_file_system, get_workspace

__all__ = [
    "LIST_MAX_ENTRIES",
    "READ_DEFAULT_LIMIT",
    "READ_MAX_CHARS",
    "READ_MAX_LINE_CHARS",
    "edit_file",
    "list_directory",
    "read_file",
    "write_file",
]

READ_DEFAULT_LIMIT = 2000
"""Lines ``read_file`` returns when the call gives no ``limit``."""
READ_MAX_LINE_CHARS = 2000
"""Longer lines (minified code, data) are cut, so one line cannot fill the model's context."""
READ_MAX_CHARS = 100_000
"""``read_file`` stops before this many characters even within ``limit``, and says where to go on."""
LIST_MAX_ENTRIES = 1000

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")  # the line breaks the file system splits on


@tool(kind="read", read_only=True, title="Read file")
async def read_file(
    ctx: ToolCallContext,
    path: str,
    line: Annotated[int, Field(ge=1)] | None = None,
    limit: Annotated[int, Field(ge=1)] | None = None,
) -> ToolResult:
    """Read a UTF-8 text file of the workspace, from a line on.

    Returns the lines as they are (no line numbers). A long file is cut with a note giving the `line` to read
    next; binary files are refused.

    Args:
        path: The file, relative to the working directory.
        line: The first line to read, 1-based (default 1).
        limit: How many lines to read at most (default 2000).
    """
    workspace = await get_workspace(ctx)
    real = await workspace.resolve(path)
    shown = workspace.display(real)
    start = line or 1
    # No more lines than could be shown: a huge limit must not pull a whole log into memory.
    count = min(limit or READ_DEFAULT_LIMIT, READ_MAX_CHARS)
    window = await get_file_system(ctx).read_text(real, line=start, limit=count)
    total = window.total_lines
    if start > max(total, 1):
        raise ToolFailure(f"line {start} is past the end of {shown}, which has {_lines(total)}", "invalid_arguments")
    parts: list[str] = []
    size = 0
    for text in _LINE.findall(window.text):
        if parts and size + len(text) > READ_MAX_CHARS:
            break
        if len(text) > READ_MAX_LINE_CHARS:
            cut = len(text.rstrip("\r\n")) - READ_MAX_LINE_CHARS
            text = f"{text[:READ_MAX_LINE_CHARS]}... [{cut} more characters in this line]\n"
        parts.append(text)
        size += len(text)
    content = "".join(parts)
    end = start + len(parts) - 1
    next_line = end + 1 if end < total else None
    message = content or "(empty file)"
    if next_line is not None:
        newline = "" if message.endswith("\n") else "\n"
        message += f"{newline}... {total - end} more lines; call read_file with line={next_line}"
    data = {"path": shown, "content": content, "line": start, "end_line": end, "total_lines": total}
    return success(ctx.tool_name, message, data | {"next_line": next_line}, [location(real, start)])


@tool(kind="edit", destructive=True, title="Write file")
async def write_file(ctx: ToolCallContext, path: str, content: str) -> ToolResult:
    """Create a text file, or replace all of an existing one, in the workspace. Missing directories are created.

    To change part of a file, prefer edit_file.

    Args:
        path: The file, relative to the working directory.
        content: The whole new content of the file.
    """
    plan = await _plan_write(ctx, path, content)
    plan.check_shown(ctx)
    await plan.fs.write_text(plan.real, content)
    lines = _lines(len(_LINE.findall(content)))
    message = f"Created {plan.shown} ({lines})" if plan.old is None else f"Wrote {plan.shown} ({lines})"
    data = {"path": plan.shown, "created": plan.old is None, "diff": plan.diff()}
    return success(ctx.tool_name, message, data, [location(plan.real)])


@write_file.previewer
async def _preview_write(ctx: ToolCallContext, path: str, content: str) -> ToolPreview:
    return (await _plan_write(ctx, path, content)).preview(ctx)


@tool(kind="edit", title="Edit file")
async def edit_file(
    ctx: ToolCallContext, path: str, old_text: str, new_text: str, replace_all: bool = False
) -> ToolResult:
    """Replace exact text in a file of the workspace.

    `old_text` must match the file exactly, whitespace and indentation included, and only once unless
    `replace_all` is set: include enough surrounding lines to make it unique.

    Args:
        path: The file, relative to the working directory.
        old_text: The text to replace, copied exactly from the file.
        new_text: The text to put in its place.
        replace_all: Replace every occurrence instead of exactly one.
    """
    plan = await _plan_edit(ctx, path, old_text=old_text, new_text=new_text, replace_all=replace_all)
    plan.check_shown(ctx)
    await plan.fs.write_text(plan.real, plan.new)
    lines = plan.replaced_lines
    where = f"line {lines[0]}" if len(lines) == 1 else f"{len(lines)} places"
    data = {"path": plan.shown, "replacements": len(lines), "diff": plan.diff()}
    return success(ctx.tool_name, f"Edited {plan.shown} at {where}", data, [location(plan.real, n) for n in lines])


@edit_file.previewer
async def _preview_edit(
    ctx: ToolCallContext, path: str, old_text: str, new_text: str, replace_all: bool = False
) -> ToolPreview:
    return (await _plan_edit(ctx, path, old_text=old_text, new_text=new_text, replace_all=replace_all)).preview(ctx)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """A write or an edit worked out before it happens: shared by the call and by its preview, so what a person
    approves is what runs."""

    fs: FileSystem
    real: Path
    shown: str
    old: str | None  # None: the file does not exist yet
    new: str
    replaced_lines: list[int] = field(default_factory=list)  # an edit's replaced places, 1-based, after the edit

    def diff(self) -> dict[str, str | None]:
        """ACP diff content (without its ``type``): the whole file before (None: it did not exist) and after."""
        return {"path": str(self.real), "old_text": self.old, "new_text": self.new}

    def preview(self, ctx: ToolCallContext) -> ToolPreview:
        return ToolPreview(
            changes=(FileChange(path=str(self.real), old_text=self.old, new_text=self.new),), cwd=ctx.env.cwd
        )

    def check_shown(self, ctx: ToolCallContext) -> None:
        """Refuse an approved call whose file no longer holds the text of the diff it was approved on."""
        approved = bound_digest(ctx.resume_input)
        if approved is not None and self.preview(ctx).digest() != approved:
            raise ToolFailure(
                f"{self.shown} changed since the diff was approved, so nothing was written; read it again and "
                "propose the change anew"
            )


async def _plan_write(ctx: ToolCallContext, path: str, content: str) -> _Plan:
    workspace = await get_workspace(ctx)
    real = await workspace.resolve(path)
    fs = get_file_system(ctx)
    return _Plan(fs=fs, real=real, shown=workspace.display(real), old=await _read_if_exists(fs, real), new=content)


async def _plan_edit(ctx: ToolCallContext, path: str, old_text: str, new_text: str, replace_all: bool) -> _Plan:
    if not old_text:
        raise ToolFailure(
            "old_text is empty; to create a file or replace all of it, use write_file", "invalid_arguments"
        )
    if old_text == new_text:
        raise ToolFailure("old_text and new_text are the same; there is nothing to change", "invalid_arguments")
    workspace = await get_workspace(ctx)
    real = await workspace.resolve(path)
    shown = workspace.display(real)
    fs = get_file_system(ctx)
    text = (await fs.read_text(real)).text
    if "\r\n" in text and "\r\n" not in old_text:  # the model writes "\n" for a file's "\r\n"
        old_text, new_text = old_text.replace("\n", "\r\n"), new_text.replace("\n", "\r\n")
    lines = _occurrence_lines(text, old_text)
    if not lines:
        raise ToolFailure(
            f"old_text was not found in {shown}; read the file and copy the text exactly, whitespace included"
        )
    if len(lines) > 1 and not replace_all:
        at = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        raise ToolFailure(
            f"old_text occurs {len(lines)} times in {shown} (lines {at}); include more surrounding lines to make "
            "it unique, or set replace_all to replace every occurrence"
        )
    # Each replacement before an occurrence shifts it by the difference in line count.
    shift = new_text.count("\n") - old_text.count("\n")
    replaced = [n + i * shift for i, n in enumerate(lines)]
    return _Plan(fs=fs, real=real, shown=shown, old=text, new=text.replace(old_text, new_text), replaced_lines=replaced)


@tool(kind="read", read_only=True, title="List directory")
async def list_directory(ctx: ToolCallContext, path: str = ".") -> ToolResult:
    """List a directory of the workspace: subdirectories first (with a trailing /), then files with their sizes.

    Args:
        path: The directory, relative to the working directory (default: the working directory).
    """
    workspace = await get_workspace(ctx)
    real = await workspace.resolve(path)
    entries = sorted(await get_file_system(ctx).list_directory(real), key=lambda e: (e.kind != "directory", e.name))
    shown_entries = entries[:LIST_MAX_ENTRIES]
    lines = []
    for e in shown_entries:
        name = e.name + ("/" if e.kind == "directory" else "")
        size = f" ({e.size} bytes)" if e.size is not None else ""
        lines.append(name + size + (" [symlink]" if e.symlink else ""))
    if len(entries) > len(shown_entries):
        lines.append(f"... {len(entries) - len(shown_entries)} more entries; use find_files to narrow them down")
    data = {
        "path": workspace.display(real),
        "entries": [{"name": e.name, "kind": e.kind, "size": e.size} for e in shown_entries],
        "total": len(entries),
    }
    return success(ctx.tool_name, "\n".join(lines) or "(empty directory)", data, [location(real)])


async def _read_if_exists(fs: FileSystem, path: Path) -> str | None:
    try:
        return (await fs.read_text(path)).text
    except ToolError as exc:
        if exc.kind == "not_found":
            return None
        raise


def _lines(n: int) -> str:
    return "1 line" if n == 1 else f"{n} lines"


def _occurrence_lines(text: str, needle: str) -> list[int]:
    """The 1-based line of each non-overlapping occurrence of ``needle``."""
    lines: list[int] = []
    at = text.find(needle)
    while at != -1:
        lines.append(text.count("\n", 0, at) + 1)
        at = text.find(needle, at + len(needle))
    return lines
