"""``find_files`` (by glob) and ``search`` (by regex): finding things in the workspace.

Both skip version-control, dependency and cache directories (``SKIPPED_DIRECTORIES``) and what ``.gitignore``
files ignore (those of the searched tree and those above it up to the workspace root, nested ones included, as git
reads them), follow no symlinks, show paths relative to the working directory (what the other tools accept back)
and cap their results with a note. A directory named as ``path`` is searched even when it is itself ignored.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.tools import ToolCallContext, ToolResult
from awaken_stdio.tools.builtin._results import location, success
from awaken_stdio.tools.function import tool
from awaken_stdio.tools.local_fs import compile_glob
from awaken_stdio.tools.workspace import get_file_system, get_workspace

__all__ = ["FIND_MAX_RESULTS", "SEARCH_MAX_LINE_CHARS", "SEARCH_MAX_MATCHES", "find_files", "search"]

FIND_MAX_RESULTS = 500
SEARCH_MAX_MATCHES = 200
SEARCH_MAX_LINE_CHARS = 300
"""A matching line is cut after this many characters: minified files would otherwise flood the result."""


@tool(kind="search", read_only=True, title="Find files")
async def find_files(ctx: ToolCallContext, pattern: str, path: str = ".") -> ToolResult:
    """Find files by glob pattern, sorted by path.

    `*.py` matches at any depth; a pattern with a `/` is matched against the whole relative path (`src/**/*.ts`,
    `tests/test_*.py`). `**` spans directories, `{a,b}` gives alternatives. Files ignored by .gitignore are skipped.

    Args:
        pattern: The glob, relative to `path`.
        path: The directory to search, relative to the working directory (default: the working directory).
    """
    _check_glob(pattern)
    workspace = await get_workspace(ctx)
    root = await workspace.resolve(path)
    found = sorted(await get_file_system(ctx).find(root, pattern, gitignore_from=workspace.root_of(root)))
    files = [workspace.display(p) for p in found[:FIND_MAX_RESULTS]]
    lines = [*files] or [f"No files match {pattern!r} under {workspace.display(root)}"]
    if len(found) > FIND_MAX_RESULTS:
        lines.append(f"... {len(found) - FIND_MAX_RESULTS} more files; narrow the pattern or the path")
    data = {"files": files, "total": len(found)}
    return success(ctx.tool_name, "\n".join(lines), data, [location(root)])


@tool(kind="search", read_only=True, title="Search")
async def search(ctx: ToolCallContext, pattern: str, path: str = ".", glob: str | None = None) -> ToolResult:
    """Search the text files of the workspace for lines matching a regular expression.

    Results are `path:line: text`. Python regex syntax, case-sensitive (prefix `(?i)` to ignore case); each
    line is matched on its own. Binary files and files ignored by .gitignore are skipped.

    Args:
        pattern: The regular expression.
        path: A directory or file to search, relative to the working directory (default: the working directory).
        glob: Only search files matching this glob (`*.py`, `src/**/*.ts`).
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolFailure(f"pattern is not a valid regular expression: {exc}", "invalid_arguments") from None
    if glob is not None:
        _check_glob(glob)
    workspace = await get_workspace(ctx)
    root = await workspace.resolve(path)
    hits = await get_file_system(ctx).search(
        root, regex, glob=glob, limit=SEARCH_MAX_MATCHES + 1, gitignore_from=workspace.root_of(root)
    )
    shown = hits[:SEARCH_MAX_MATCHES]
    matches = [{"path": workspace.display(h.path), "line": h.line, "text": _cut(h.text)} for h in shown]
    lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in matches]
    if not lines:
        lines.append(f"No matches for {pattern!r} under {workspace.display(root)}")
    if len(hits) > SEARCH_MAX_MATCHES:
        lines.append(f"... stopped after {SEARCH_MAX_MATCHES} matches; narrow the pattern, the path or the glob")
    data = {"matches": matches, "truncated": len(hits) > SEARCH_MAX_MATCHES}
    return success(ctx.tool_name, "\n".join(lines), data, [location(h.path, h.line) for h in shown])


def _check_glob(pattern: str) -> None:
    if not pattern or PurePosixPath(pattern).is_absolute() or ".." in PurePosixPath(pattern).parts:
        raise ToolFailure(
            f"glob {pattern!r} must be relative, without '..'; give the directory to search as path",
            "invalid_arguments",
        )
    try:
        compile_glob(pattern)
    except (re.error, ValueError) as exc:
        raise ToolFailure(f"glob {pattern!r} is not valid: {exc}", "invalid_arguments") from None


def _cut(text: str) -> str:
    if len(text) <= SEARCH_MAX_LINE_CHARS:
        return text
    return f"{text[:SEARCH_MAX_LINE_CHARS]}... [{len(text) - SEARCH_MAX_LINE_CHARS} more characters]"
