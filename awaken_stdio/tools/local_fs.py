"""The local file system of the built-in tools: confined reads, writes, listings, walks and searches.

Checked, then opened: ``Workspace.resolve`` resolves symlinks and checks the real path against the roots, and
``LocalFileSystem`` then opens that path one component at a time from the file-system root, each directory relative
to the descriptor of its parent with ``O_NOFOLLOW | O_DIRECTORY`` and the file last with ``O_NOFOLLOW``, as
``git`` refuses to follow a path beyond a symbolic link. The path it gets has no links left in it, so a link met
while opening is one that appeared after the check (a directory swapped for a link to ``/etc`` by anything running
in the workspace): the call is refused instead of following it out of the roots. Walks (``find``, ``search``) go
on from the open descriptors and skip links. Only regular files are read or written, and none with more than one
hard link, since another name of it may lie outside the roots. Where ``os.open`` has no ``dir_fd`` (Windows), each
component is checked with ``lstat`` and then used by name: the checks of old, racy against such a swap.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import anyio.to_thread

from awaken_stdio.contract.errors import ToolError, ToolFailure
from awaken_stdio.contract.workspace import DirEntry, FileSystem, SearchHit, TextWindow

__all__ = ["SKIPPED_DIRECTORIES", "LocalFileSystem", "compile_glob", "open_file"]

SKIPPED_DIRECTORIES = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache",
     ".ruff_cache", ".tox", ".nox"}
)  # fmt: skip
"""Directories ``find`` and ``search`` never enter: version control, dependencies and caches drown real matches."""

_BINARY_SNIFF_BYTES = 8192


# -- the file system -------------------------------------------------------------------------------------------


class LocalFileSystem(FileSystem):
    """``FileSystem`` on the local disk; every operation runs in a worker thread, off the event loop.

    Paths are opened as the module docstring says: a component at a time, never through a symbolic link, regular
    files only and none with more than one hard link. UTF-8 only: a file with a NUL byte or invalid UTF-8 is
    binary. ``find`` and ``search`` skip ``SKIPPED_DIRECTORIES``, what ``.gitignore`` files ignore, and symlinks.
    """

    async def read_text(self, path: Path, *, line: int | None = None, limit: int | None = None) -> TextWindow:
        return await anyio.to_thread.run_sync(_read_window, path, line or 1, limit, abandon_on_cancel=True)

    async def write_text(self, path: Path, content: str) -> None:
        await anyio.to_thread.run_sync(_write, path, content)

    async def list_directory(self, path: Path) -> list[DirEntry]:
        return await anyio.to_thread.run_sync(_list, path, abandon_on_cancel=True)

    async def find(self, root: Path, pattern: str, *, gitignore_from: Path | None = None) -> list[Path]:
        match = compile_glob(pattern).fullmatch
        return await anyio.to_thread.run_sync(
            lambda: [p for p, _ in _walk_files(root, gitignore_from) if match(_relative(p, root))],
            abandon_on_cancel=True,
        )

    async def search(
        self,
        root: Path,
        regex: re.Pattern[str],
        *,
        glob: str | None,
        limit: int,
        gitignore_from: Path | None = None,
    ) -> list[SearchHit]:
        search = partial(_search, root, regex, glob=glob, limit=limit, gitignore_from=gitignore_from)
        return await anyio.to_thread.run_sync(search, abandon_on_cancel=True)


# An open directory: a descriptor, or without ``dir_fd`` support its path (checked, then used, by name).
_Dir = int | str

_AT = (
    {os.open, os.mkdir} <= os.supports_dir_fd
    and os.scandir in os.supports_fd
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
# O_NONBLOCK: opening a FIFO must not hang the tool (it is then refused as not a regular file).
_FILE_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | _CLOEXEC


def _at(directory: _Dir, name: str) -> tuple[str, int | None]:
    """``name`` in ``directory`` as the (path, dir_fd) arguments of an ``os`` call."""
    return (name, directory) if isinstance(directory, int) else (os.path.join(directory, name), None)


def _close(directory: _Dir) -> None:
    if isinstance(directory, int):
        os.close(directory)


def _enter(parent: _Dir, name: str, *, create: bool = False) -> _Dir:
    """The subdirectory ``name`` of ``parent``, never through a symbolic link; ``create`` makes it if missing."""
    target, dir_fd = _at(parent, name)
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(target, dir_fd=dir_fd)
    if dir_fd is not None:
        try:
            return os.open(target, _DIR_FLAGS, dir_fd=dir_fd)
        except NotADirectoryError:  # what O_DIRECTORY says of a link too: tell the two apart
            _check_directory(target, dir_fd, changed=True)
            raise
    _check_directory(target, None)  # no dir_fd: checked by name, then used by name
    return target


def _check_directory(target: str, dir_fd: int | None, *, changed: bool = False) -> None:
    """ELOOP for a link (``changed``: or a directory now, so a link a moment ago), ENOTDIR for another file."""
    mode = os.stat(target, dir_fd=dir_fd, follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode) or (changed and stat.S_ISDIR(mode)):
        raise OSError(errno.ELOOP, "a symbolic link", target)
    if not stat.S_ISDIR(mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", target)


def _open_dir(path: Path, *, create: bool = False) -> _Dir:
    """The directory ``path``, entered a component at a time from the file-system root (see the module docstring).

    On an ``OSError`` its ``filename`` is the path up to the component that failed.
    """
    here: _Dir = os.open(path.anchor, _DIR_FLAGS) if _AT else path.anchor
    try:
        for depth, name in enumerate(path.parts[1:], 2):
            try:
                child = _enter(here, name, create=create)
            except OSError as exc:
                exc.filename = str(Path(*path.parts[:depth]))
                raise
            _close(here)
            here = child
    except BaseException:
        _close(here)
        raise
    return here


def _open_regular(directory: _Dir, path: Path, flags: int) -> int:
    """A descriptor of the regular file ``path`` (``path.name`` in ``directory``), not opened through a link.

    Refuses a directory, a device, a FIFO or a socket, and a file with more than one hard link: its other names
    may lie outside the workspace, and nothing tells where.
    """
    target, dir_fd = _at(directory, path.name)
    fd = os.open(target, flags | _FILE_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolFailure(f"{path} is a directory, not a file; use list_directory or find_files")
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path)
        if info.st_nlink > 1:
            raise ToolFailure(
                f"{path} has {info.st_nlink} hard links; the file tools neither read nor write a hard-linked file, "
                "as another of its names may lie outside the workspace (copy it instead of linking it)",
                "denied",
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path, flags: int) -> int:
    """``_open_regular`` at ``path``; with ``O_CREAT`` missing parent directories are created."""
    try:
        directory = _open_dir(path.parent, create=bool(flags & os.O_CREAT))
        try:
            return _open_regular(directory, path, flags)
        finally:
            _close(directory)
    except OSError as exc:
        raise _os_error(path, exc) from None


def _os_error(path: Path, exc: OSError) -> ToolFailure:
    """What the model is told when ``path`` could not be opened (``exc.filename``: where it failed, if known)."""
    if isinstance(exc, FileNotFoundError) or (isinstance(exc, NotADirectoryError) and exc.filename != str(path)):
        return ToolFailure(f"{path} does not exist", "not_found")
    if isinstance(exc, NotADirectoryError):
        return ToolFailure(f"{path} is a file, not a directory; use read_file")
    if isinstance(exc, IsADirectoryError):
        return ToolFailure(f"{path} is a directory, not a file; use list_directory or find_files")
    if exc.errno == errno.ENXIO:  # a FIFO opened for writing, non-blocking, with no reader
        return _not_regular(path)
    if exc.errno == errno.ELOOP:
        return ToolFailure(
            f"{path} leads through a symbolic link that was not there when the path was checked; refused, as it "
            "could lead out of the workspace",
            "denied",
        )
    return ToolFailure(f"cannot open {path}: {exc.strerror or exc}")


def _not_regular(path: Path) -> ToolFailure:
    return ToolFailure(f"{path} is not a regular file (a device, FIFO or socket); it cannot be used as text")


def _text(raw: BinaryIO) -> io.TextIOWrapper | None:
    """``raw`` as UTF-8 lines, endings kept; None when a NUL in its first bytes says it is binary."""
    if b"\0" in raw.read(_BINARY_SNIFF_BYTES):
        return None
    raw.seek(0)
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")  # newline="": line endings come back as they are


def _read_window(path: Path, line: int, limit: int | None) -> TextWindow:
    binary = ToolFailure(f"{path} is a binary file (not UTF-8 text); it cannot be read as text")
    end = None if limit is None else line - 1 + limit
    kept: list[str] = []
    total = 0
    with open(open_file(path, os.O_RDONLY), "rb") as raw:
        lines = _text(raw)
        if lines is None:
            raise binary
        try:
            for total, text in enumerate(lines, 1):
                if total >= line and (end is None or total <= end):
                    kept.append(text)
        except UnicodeDecodeError:
            raise binary from None
    return TextWindow(text="".join(kept), total_lines=total)


def _write(path: Path, content: str) -> None:
    data = content.encode("utf-8")
    with open(open_file(path, os.O_WRONLY | os.O_CREAT), "wb") as f:
        f.truncate()  # only now: a refused file is left as it was
        f.write(data)


def _list(path: Path) -> list[DirEntry]:
    try:
        directory = _open_dir(path)
    except OSError as exc:
        raise _os_error(path, exc) from None
    entries: list[DirEntry] = []
    try:
        with os.scandir(directory) as it:
            for e in it:  # kind and size are the link target's (its metadata only, never its content)
                if e.is_dir():
                    entries.append(DirEntry(name=e.name, kind="directory", size=None, symlink=e.is_symlink()))
                elif e.is_file():
                    entries.append(DirEntry(name=e.name, kind="file", size=e.stat().st_size, symlink=e.is_symlink()))
                else:
                    entries.append(DirEntry(name=e.name, kind="other", size=None, symlink=e.is_symlink()))
    finally:
        _close(directory)
    return entries


def _relative(path: Path, root: Path) -> str:
    """What a glob is matched against: ``path`` relative to ``root``, or its name when it is ``root`` (a file)."""
    return path.name if path == root else path.relative_to(root).as_posix()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Ignores:
    """The ``.gitignore`` files in force during a walk, outermost first, each with the directory it is in."""

    files: tuple[tuple[Path, Any], ...] = ()  # (directory, pathspec.GitIgnoreSpec)

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Git's answer: the deepest file with a pattern matching ``path`` decides, by its last matching pattern."""
        for base, spec in reversed(self.files):
            found = spec.check_file(path.relative_to(base).as_posix() + ("/" if is_dir else ""))
            if found.include is not None:
                return bool(found.include)
        return False

    def load(self, directory: _Dir, path: Path) -> _Ignores:
        """These plus the ``.gitignore`` of ``directory`` (at ``path``), if it has a readable one."""
        from pathspec import GitIgnoreSpec  # not at import: the servers answer their first request without it

        try:
            with open(_open_regular(directory, path / ".gitignore", os.O_RDONLY), encoding="utf-8") as f:
                spec = GitIgnoreSpec.from_lines(f)
        except (OSError, ToolError, ValueError):  # missing, hard-linked, not UTF-8, a pattern pathspec refuses
            return self
        return _Ignores(files=(*self.files, (path, spec)))

    @classmethod
    def above(cls, root: Path, top: Path | None) -> _Ignores:
        """The ``.gitignore`` files from ``top`` down to the parent of the directory ``root``.

        None when they ignore ``root`` itself: a directory asked for by name is searched (as ripgrep does), with
        the ``.gitignore`` files inside it.
        """
        if top is None or root == top or not root.is_relative_to(top):
            return cls()
        ignores, path = cls(), top
        try:
            directory = _open_dir(top)
        except OSError:
            return ignores
        try:
            for name in root.relative_to(top).parts:
                ignores = ignores.load(directory, path)
                child = _enter(directory, name)
                _close(directory)
                directory, path = child, path / name
        except OSError:
            return cls()
        finally:
            _close(directory)
        return cls() if ignores.ignored(root, True) else ignores


def _walk_files(root: Path, gitignore_from: Path | None) -> Iterator[tuple[Path, _Dir]]:
    """Files at or under ``root``, each with its open directory (valid until the next one), sorted per directory.

    Leaves out symlinks, ``SKIPPED_DIRECTORIES`` and what ``.gitignore`` files ignore (from ``gitignore_from`` on).
    """
    try:
        try:
            directory, is_file = _open_dir(root), False
        except NotADirectoryError as exc:
            if exc.filename != str(root):
                raise
            directory, is_file = _open_dir(root.parent), True
    except OSError as exc:
        raise _os_error(root, exc) from None
    try:
        if is_file:
            yield root, directory
        else:
            yield from _walk(directory, root, _Ignores.above(root, gitignore_from))
    finally:
        _close(directory)


def _walk(directory: _Dir, path: Path, ignores: _Ignores) -> Iterator[tuple[Path, _Dir]]:
    with os.scandir(directory) as it:
        entries = sorted(it, key=lambda e: e.name)
    if any(e.name == ".gitignore" for e in entries):
        ignores = ignores.load(directory, path)
    subdirectories: list[str] = []
    for entry in entries:
        if entry.is_symlink():
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        if (is_dir and entry.name in SKIPPED_DIRECTORIES) or ignores.ignored(path / entry.name, is_dir):
            continue
        if is_dir:
            subdirectories.append(entry.name)
        elif entry.is_file(follow_symlinks=False):
            yield path / entry.name, directory
    for name in subdirectories:
        try:
            child = _enter(directory, name)
        except OSError:
            continue  # removed, or replaced by a link, since it was listed
        try:
            yield from _walk(child, path / name, ignores)
        finally:
            _close(child)


def _search(
    root: Path, regex: re.Pattern[str], glob: str | None, limit: int, gitignore_from: Path | None
) -> list[SearchHit]:
    match = compile_glob(glob).fullmatch if glob else None
    hits: list[SearchHit] = []
    for path, directory in _walk_files(root, gitignore_from):
        if match is not None and not match(_relative(path, root)):
            continue
        try:
            with open(_open_regular(directory, path, os.O_RDONLY), "rb") as raw:
                lines = _text(raw)
                if lines is None:
                    continue
                found: list[SearchHit] = []  # kept only if the whole file decodes: a binary file matches nothing
                for number, text in enumerate(lines, 1):
                    if regex.search(text):
                        found.append(SearchHit(path=path, line=number, text=text.rstrip("\r\n")))
                        if len(hits) + len(found) >= limit:
                            break
        except (UnicodeDecodeError, OSError, ToolError):  # binary, gone, replaced by a link, hard-linked
            continue
        hits.extend(found)
        if len(hits) >= limit:
            break
    return hits


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over relative ``/`` paths, translated by ``wcmatch``: ``*``, ``?``, ``[abc]``, ``[!a]``,
    ``**`` (any depth), ``{a,b}``; ``*`` matches names starting with a dot too.

    A pattern without ``/`` matches file names at any depth (``*.py``), like ripgrep and fd, because that is what
    models mean; ``src/*.py`` matches only directly in ``src``. ``ValueError`` for a pattern wcmatch refuses (one
    that expands to too many alternatives).
    """
    from wcmatch import glob  # not at import: the servers answer their first request without it

    pattern = pattern.removeprefix("./")
    flags = glob.GLOBSTAR | glob.BRACE | glob.DOTMATCH | glob.FORCEUNIX
    try:
        include, _ = glob.translate(pattern if "/" in pattern else f"**/{pattern}", flags=flags)
    except Exception as exc:  # wcmatch's own exception types are private
        raise ValueError(str(exc)) from exc
    return re.compile("|".join(include))
