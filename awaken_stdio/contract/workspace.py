"""What a run's tools reach the disk and processes through: ``FileSystem`` and ``ProcessRunner``.

The tools layer has the local implementations (``tools/local_fs.py``, ``tools/runner.py``); an ACP client that
offers ``fs/*`` and ``terminal/*`` gets editor-backed ones (unsaved buffers, reviewed writes, embedded terminals)
without any tool changing. A run's :class:`~awaken_stdio.contract.environment.RunEnvironment` carries the ones its
surface gives.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

__all__ = [
    "TERMINAL_ACTIVITY",
    "DirEntry",
    "FileSystem",
    "OutputCallback",
    "ProcessResult",
    "ProcessRunner",
    "SearchHit",
    "TerminalCallback",
    "TextWindow",
]


# -- files -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TextWindow:
    """Some lines of a text file, and how many lines the whole file has (for "N more lines" notes)."""

    text: str
    total_lines: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DirEntry:
    name: str
    kind: Literal["file", "directory", "other"]  # symlinks followed
    size: int | None  # files only
    symlink: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    path: Path
    line: int  # 1-based
    text: str  # without the line ending


class FileSystem(Protocol):
    """File access for the built-in tools. Paths arrive absolute and confined (``Workspace.resolve``).

    Errors are ``ToolFailure``s the model can act on: ``not_found`` for a missing path, ``execution_failed`` for a
    binary file or a directory where a file is expected. An editor-backed implementation (ACP ``fs/*``) typically
    overrides ``read_text``/``write_text`` and inherits the rest from ``LocalFileSystem``, as editors offer no
    listing or search.
    """

    async def read_text(self, path: Path, *, line: int | None = None, limit: int | None = None) -> TextWindow:
        """Lines ``line`` (1-based, default 1) to ``line + limit - 1`` (default: to the end), endings kept."""
        ...

    async def write_text(self, path: Path, content: str) -> None:
        """Write ``content`` exactly, creating missing parent directories."""
        ...

    async def list_directory(self, path: Path) -> list[DirEntry]:
        """The entries of a directory, in no particular order."""
        ...

    async def find(self, root: Path, pattern: str, *, gitignore_from: Path | None = None) -> list[Path]:
        """Every file under ``root`` whose relative path matches the glob ``pattern`` (see ``compile_glob``).

        Files that ``.gitignore`` files ignore are left out: those under ``root``, and with ``gitignore_from`` (the
        workspace root above ``root``) those between it and ``root``.
        """
        ...

    async def search(
        self,
        root: Path,
        regex: re.Pattern[str],
        *,
        glob: str | None,
        limit: int,
        gitignore_from: Path | None = None,
    ) -> list[SearchHit]:
        """Up to ``limit`` lines matching ``regex`` in the text files at or under ``root``, in walk order.

        Leaves out the same files as ``find``.
        """
        ...


# -- processes -------------------------------------------------------------------------------------------------

OutputCallback = Callable[[str], Awaitable[None]]
TerminalCallback = Callable[[str], Awaitable[None]]  # given a client terminal's id as soon as it exists
TERMINAL_ACTIVITY = "terminal"  # the tool call activity naming the client terminal it runs in: ``{"terminal_id": ...}``


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessResult:
    """How a command ended. ``output`` is stdout and stderr interleaved, its beginning cut when over the limit."""

    exit_code: int | None  # None when killed by a signal or stopped at the timeout
    output: str
    omitted_chars: int = 0  # cut from the beginning of ``output``
    signal: str | None = None
    timed_out: bool = False
    terminal_id: str | None = None  # an ACP terminal the client shows; None for local processes


class ProcessRunner(Protocol):
    """Runs shell commands for ``run_command``.

    An implementation streams output to ``on_output`` as it comes, keeps at most ``output_limit`` characters (the
    end, as ACP ``terminal/output`` does), and on timeout or cancellation stops the command and everything it
    started before returning or re-raising. ``env`` adds variables to the agent's environment. One that runs the
    command in a client's terminal names it to ``on_terminal`` first, while the client can still show it.
    """

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        output_limit: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
        on_terminal: TerminalCallback | None = None,
    ) -> ProcessResult: ...
