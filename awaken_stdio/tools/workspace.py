"""The workspace seam: where the built-in tools may reach, and the file system and processes they use.

A run's tools see one ``Workspace`` (the session ``cwd`` plus any additional directories) and two small async
interfaces, ``FileSystem`` and ``ProcessRunner``, instead of the OS. The host puts its own implementations into
``ToolCallContext.services`` under the keys below; an ACP client that offers ``fs/*`` and ``terminal/*`` gets
editor-backed ones (unsaved buffers, reviewed writes, embedded terminals) without any tool changing. Absent keys
fall back to ``LocalFileSystem`` / ``LocalProcessRunner`` on a workspace built from ``ctx.cwd``.

What this module does not do: decide whether a call may run (the permission gate), or format results for the
model (the tools in ``tools/builtin``). Every path a tool touches goes through ``Workspace.resolve`` first, so an
implementation receives absolute, confined paths only.
"""

from __future__ import annotations

import codecs
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.abc
import anyio.to_thread

from awaken_stdio.contract.errors import ToolError
from awaken_stdio.tools._processes import open_session_process, release_session, signal_group

if TYPE_CHECKING:
    from awaken_stdio.contract.tools import ToolCallContext

__all__ = [
    "ADDITIONAL_DIRECTORIES",
    "FILE_SYSTEM",
    "PROCESS_RUNNER",
    "SKIPPED_DIRECTORIES",
    "WORKSPACE",
    "DirEntry",
    "FileSystem",
    "LocalFileSystem",
    "LocalProcessRunner",
    "OutputCallback",
    "ProcessResult",
    "ProcessRunner",
    "SearchHit",
    "TextWindow",
    "Workspace",
    "compile_glob",
    "default_shell",
    "get_file_system",
    "get_process_runner",
    "get_workspace",
]

# -- ToolCallContext.services keys -----------------------------------------------------------------------------

WORKSPACE = "workspace"
"""A ``Workspace``: the roots every path is confined to. Default: ``ctx.cwd`` plus ``ADDITIONAL_DIRECTORIES``."""
ADDITIONAL_DIRECTORIES = "additional_directories"
"""Directories (absolute, or relative to ``ctx.cwd``) that widen the default workspace (ACP ``additionalDirectories``).
"""
FILE_SYSTEM = "fs"
"""A ``FileSystem``. Default: ``LocalFileSystem()``."""
PROCESS_RUNNER = "process"
"""A ``ProcessRunner``. Default: ``LocalProcessRunner()``."""

SKIPPED_DIRECTORIES = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache",
     ".ruff_cache", ".tox", ".nox"}
)  # fmt: skip
"""Directories ``find`` and ``search`` never enter: version control, dependencies and caches drown real matches."""

_BINARY_SNIFF_BYTES = 8192
# After the shell exits, background jobs it started may hold the output pipe open for ever: read this long, then stop.
_DRAIN_S = 0.3


# -- the workspace ---------------------------------------------------------------------------------------------


class Workspace:
    """The directories a run's tools may touch: the root (the session ``cwd``) and any additional directories.

    Build one with ``await Workspace.create(cwd, additional)``, which resolves the roots (``/tmp`` may be a
    symlink), or pass already resolved absolute roots to the constructor.
    """

    __slots__ = ("roots",)

    def __init__(self, root: Path, additional_directories: Iterable[Path] = ()) -> None:
        roots = (root, *additional_directories)
        if not all(r.is_absolute() for r in roots):
            raise ValueError(f"workspace roots must be absolute: {', '.join(map(str, roots))}")
        self.roots: tuple[Path, ...] = roots

    @classmethod
    async def create(
        cls, cwd: str | os.PathLike[str] | None, additional_directories: Iterable[str | os.PathLike[str]] = ()
    ) -> Workspace:
        """A workspace rooted at ``cwd`` (default: the process's), extra directories relative to it."""

        def build() -> Workspace:
            root = Path(cwd if cwd is not None else os.getcwd()).resolve()
            return cls(root, [(root / d).resolve() for d in additional_directories])

        return await anyio.to_thread.run_sync(build)

    @property
    def root(self) -> Path:
        return self.roots[0]

    def contains(self, path: Path) -> bool:
        """Whether a resolved absolute path lies in one of the roots."""
        return any(path.is_relative_to(r) for r in self.roots)

    async def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real absolute path of ``path`` (relative to the root), or ``ToolError(kind="denied")``.

        Symlinks are resolved before the check, so a link inside the workspace cannot lead out of it. The path
        need not exist (``write_file`` creates files).
        """
        real = await anyio.to_thread.run_sync((self.root / path).resolve)
        if not self.contains(real):
            allowed = ", ".join(map(str, self.roots))
            raise ToolError(
                f"{os.fspath(path)!r} is outside the workspace (resolves to {real}); allowed: {allowed}", "denied"
            )
        return real

    def display(self, path: Path) -> str:
        """How to show ``path`` to the model: relative to the root when inside it (what the tools accept back)."""
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)

    def __repr__(self) -> str:
        return f"Workspace({', '.join(map(str, self.roots))})"


# -- the file system -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextWindow:
    """Some lines of a text file, and how many lines the whole file has (for "N more lines" notes)."""

    text: str
    total_lines: int


@dataclass(frozen=True, slots=True)
class DirEntry:
    name: str
    kind: Literal["file", "directory", "other"]  # symlinks followed
    size: int | None  # files only
    symlink: bool = False


@dataclass(frozen=True, slots=True)
class SearchHit:
    path: Path
    line: int  # 1-based
    text: str  # without the line ending


class FileSystem(Protocol):
    """File access for the built-in tools. Paths arrive absolute and confined (``Workspace.resolve``).

    Errors are ``ToolError``s the model can act on: ``not_found`` for a missing path, ``execution_failed`` for a
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

    async def find(self, root: Path, pattern: str) -> list[Path]:
        """Every file under ``root`` whose relative path matches the glob ``pattern`` (see ``compile_glob``)."""
        ...

    async def search(self, root: Path, regex: re.Pattern[str], *, glob: str | None, limit: int) -> list[SearchHit]:
        """Up to ``limit`` lines matching ``regex`` in the text files at or under ``root``, in walk order."""
        ...


class LocalFileSystem(FileSystem):
    """``FileSystem`` on the local disk; every operation runs in a worker thread, off the event loop.

    UTF-8 only: a file with a NUL byte or invalid UTF-8 is binary. ``find`` and ``search`` skip
    ``SKIPPED_DIRECTORIES`` and follow no symlinks, so they never read outside the tree they were given.
    """

    async def read_text(self, path: Path, *, line: int | None = None, limit: int | None = None) -> TextWindow:
        return await anyio.to_thread.run_sync(_read_window, path, line or 1, limit, abandon_on_cancel=True)

    async def write_text(self, path: Path, content: str) -> None:
        await anyio.to_thread.run_sync(_write, path, content)

    async def list_directory(self, path: Path) -> list[DirEntry]:
        return await anyio.to_thread.run_sync(_list, path, abandon_on_cancel=True)

    async def find(self, root: Path, pattern: str) -> list[Path]:
        match = compile_glob(pattern).fullmatch
        return await anyio.to_thread.run_sync(
            lambda: [p for p in _walk_files(root) if match(p.relative_to(root).as_posix())], abandon_on_cancel=True
        )

    async def search(self, root: Path, regex: re.Pattern[str], *, glob: str | None, limit: int) -> list[SearchHit]:
        return await anyio.to_thread.run_sync(_search, root, regex, glob, limit, abandon_on_cancel=True)


def _check_file(path: Path) -> None:
    if not path.exists():
        raise ToolError(f"{path} does not exist", "not_found")
    if path.is_dir():
        raise ToolError(f"{path} is a directory, not a file; use list_directory or find_files")


def _is_binary(path: Path) -> bool:
    with path.open("rb") as f:
        return b"\0" in f.read(_BINARY_SNIFF_BYTES)


def _read_window(path: Path, line: int, limit: int | None) -> TextWindow:
    _check_file(path)
    binary = ToolError(f"{path} is a binary file (not UTF-8 text); it cannot be read as text")
    if _is_binary(path):
        raise binary
    end = None if limit is None else line - 1 + limit
    kept: list[str] = []
    total = 0
    try:
        with path.open(encoding="utf-8", newline="") as f:  # newline="": line endings come back as they are
            for total, text in enumerate(f, 1):
                if total >= line and (end is None or total <= end):
                    kept.append(text)
    except UnicodeDecodeError:
        raise binary from None
    return TextWindow("".join(kept), total)


def _write(path: Path, content: str) -> None:
    if path.is_dir():
        raise ToolError(f"{path} is a directory, not a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8", newline="")


def _list(path: Path) -> list[DirEntry]:
    if not path.exists():
        raise ToolError(f"{path} does not exist", "not_found")
    if not path.is_dir():
        raise ToolError(f"{path} is a file, not a directory; use read_file")
    entries: list[DirEntry] = []
    with os.scandir(path) as it:
        for e in it:
            if e.is_dir():
                entries.append(DirEntry(e.name, "directory", None, e.is_symlink()))
            elif e.is_file():
                entries.append(DirEntry(e.name, "file", e.stat().st_size, e.is_symlink()))
            else:
                entries.append(DirEntry(e.name, "other", None, e.is_symlink()))
    return entries


def _walk_files(root: Path) -> Iterator[Path]:
    """Files under ``root`` (or ``root`` itself when it is a file), sorted per directory, symlinks left out."""
    if root.is_file():
        yield root
        return
    if not root.is_dir():
        raise ToolError(f"{root} does not exist", "not_found")
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRECTORIES and not (here / d).is_symlink())
        for name in sorted(filenames):
            path = here / name
            if not path.is_symlink():
                yield path


def _search(root: Path, regex: re.Pattern[str], glob: str | None, limit: int) -> list[SearchHit]:
    match = compile_glob(glob).fullmatch if glob else None
    hits: list[SearchHit] = []
    for path in _walk_files(root):
        if match is not None and not match(path.name if path == root else path.relative_to(root).as_posix()):
            continue
        try:
            if _is_binary(path):
                continue
            found: list[SearchHit] = []  # kept only if the whole file decodes: a binary file matches nothing
            with path.open(encoding="utf-8") as f:
                for number, text in enumerate(f, 1):
                    if regex.search(text):
                        found.append(SearchHit(path, number, text.rstrip("\r\n")))
                        if len(hits) + len(found) >= limit:
                            break
        except (UnicodeDecodeError, OSError):
            continue
        hits.extend(found)
        if len(hits) >= limit:
            break
    return hits


_GLOB_TOKEN = re.compile(r"\*\*/|\*\*|\*|\?|\[[^\]]+\]|\{[^}]*\}|[^*?\[{]+|.")


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over relative ``/`` paths: ``*``, ``?``, ``[abc]``, ``**`` (any depth), ``{a,b}``.

    A pattern without ``/`` matches file names at any depth (``*.py``), like ripgrep and fd, because that is what
    models mean; ``src/*.py`` matches only directly in ``src``.
    """
    pattern = pattern.removeprefix("./")
    body = _translate_glob(pattern)
    return re.compile(body if "/" in pattern else f"(?:.*/)?{body}")


def _translate_glob(pattern: str) -> str:
    out: list[str] = []
    for token in _GLOB_TOKEN.findall(pattern):
        if token == "**/":
            out.append("(?:.*/)?")
        elif token == "**":
            out.append(".*")
        elif token == "*":
            out.append("[^/]*")
        elif token == "?":
            out.append("[^/]")
        elif token.startswith("[") and len(token) > 2:
            inner = token[1:-1]
            out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]")
        elif token.startswith("{") and token.endswith("}"):
            out.append("(?:" + "|".join(_translate_glob(alt) for alt in token[1:-1].split(",")) + ")")
        else:
            out.append(re.escape(token))
    return "".join(out)


# -- processes -------------------------------------------------------------------------------------------------

OutputCallback = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """How a command ended. ``output`` is stdout and stderr interleaved, its beginning cut when over the limit."""

    exit_code: int | None  # None when killed by a signal or stopped at the timeout
    output: str
    omitted_chars: int = 0  # cut from the beginning of ``output``
    signal: str | None = None
    timed_out: bool = False
    terminal_id: str | None = None  # an ACP terminal the client shows; None for local processes


async def default_shell() -> str:
    """The shell that runs commands: ``bash`` when it is on the PATH, else ``/bin/sh``."""
    return await anyio.to_thread.run_sync(lambda: shutil.which("bash") or "/bin/sh")


class ProcessRunner(Protocol):
    """Runs shell commands for ``run_command``.

    An implementation streams output to ``on_output`` as it comes, keeps at most ``output_limit`` characters (the
    end, as ACP ``terminal/output`` does), and on timeout or cancellation stops the command and everything it
    started before returning or re-raising. ``env`` adds variables to the agent's environment.
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
    ) -> ProcessResult: ...


class LocalProcessRunner(ProcessRunner):
    """``ProcessRunner`` on local subprocesses: ``bash -c`` (else ``sh -c``) in a new session, stdin closed.

    The command leads its own session and process group, so a timeout or a cancellation signals the whole group
    (SIGTERM, then SIGKILL after a grace period): a ``sleep`` a script started in the background dies with it.
    Background jobs still running when the shell exits normally are left alone, their output no longer read, until
    the agent ends: the process guard (``tools/_processes.py``) then ends everything left in the session, on any
    exit, kill -9 included. POSIX only.

    Args:
        shell: The shell that runs commands, default ``bash`` when on the PATH, else ``/bin/sh``.
        kill_grace_s: How long a stopped command has between SIGTERM and SIGKILL.
    """

    def __init__(self, shell: str | None = None, *, kill_grace_s: float = 2.0) -> None:
        self._shell = shell
        self._kill_grace_s = kill_grace_s

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        output_limit: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ProcessResult:
        if self._shell is None:
            self._shell = await default_shell()
        process = await open_session_process(
            [self._shell, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **env} if env else None,
        )
        output = _TailBuffer(output_limit)
        try:
            with anyio.move_on_after(timeout_s) as deadline:
                await _pump_until_exit(process, output, on_output)
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    await _stop_group(process, self._kill_grace_s)
                await process.aclose()
            release_session(process.pid)
        code = process.returncode
        return ProcessResult(
            exit_code=None if deadline.cancelled_caught or code is None or code < 0 else code,
            output=output.text,
            omitted_chars=output.omitted,
            signal=signal.Signals(-code).name if code is not None and code < 0 else None,
            timed_out=deadline.cancelled_caught,
        )


async def _pump_until_exit(process: anyio.abc.Process, output: _TailBuffer, on_output: OutputCallback | None) -> None:
    assert process.stdout is not None
    stdout = process.stdout
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    drained = anyio.Event()

    async def pump() -> None:
        async for data in stdout:
            text = decoder.decode(data)
            output.append(text)
            if text and on_output is not None:
                await on_output(text)
        output.append(decoder.decode(b"", final=True))
        drained.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        await process.wait()
        with anyio.move_on_after(_DRAIN_S):
            await drained.wait()
        tg.cancel_scope.cancel()


async def _stop_group(process: anyio.abc.Process, grace_s: float) -> None:
    """SIGTERM the command's process group, SIGKILL it if the leader is still there after ``grace_s``."""
    signal_group(process, signal.SIGTERM)
    with anyio.move_on_after(grace_s):
        await process.wait()
    signal_group(process, signal.SIGKILL)  # also reaches children that outlived the shell
    await process.wait()


class _TailBuffer:
    """Keeps the last ``limit`` characters of a stream and counts what it dropped."""

    __slots__ = ("_chunks", "_size", "limit", "omitted")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.omitted = 0
        self._chunks: list[str] = []
        self._size = 0

    def append(self, text: str) -> None:
        self._chunks.append(text)
        self._size += len(text)
        if self._size > 2 * self.limit:  # compact now and then, not on every chunk
            self._trim()

    def _trim(self) -> None:
        if self._size > self.limit:
            joined = "".join(self._chunks)
            self.omitted += self._size - self.limit
            self._chunks, self._size = [joined[-self.limit :]], self.limit

    @property
    def text(self) -> str:
        self._trim()
        return "".join(self._chunks)


# -- services --------------------------------------------------------------------------------------------------

_LOCAL_FILE_SYSTEM = LocalFileSystem()
_LOCAL_PROCESS_RUNNER = LocalProcessRunner()


async def get_workspace(ctx: ToolCallContext) -> Workspace:
    """``ctx.services[WORKSPACE]``, else one rooted at ``ctx.cwd`` with ``ctx.services[ADDITIONAL_DIRECTORIES]``."""
    given: Any = ctx.services.get(WORKSPACE)
    if given is not None:
        return given
    return await Workspace.create(ctx.cwd, ctx.services.get(ADDITIONAL_DIRECTORIES) or ())


def get_file_system(ctx: ToolCallContext) -> FileSystem:
    """``ctx.services[FILE_SYSTEM]``, else the local disk."""
    return ctx.services.get(FILE_SYSTEM) or _LOCAL_FILE_SYSTEM


def get_process_runner(ctx: ToolCallContext) -> ProcessRunner:
    """``ctx.services[PROCESS_RUNNER]``, else local subprocesses."""
    return ctx.services.get(PROCESS_RUNNER) or _LOCAL_PROCESS_RUNNER
