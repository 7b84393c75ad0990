"""The workspace seam: where the built-in tools may reach, and the file system and processes they use.

A run's tools see one ``Workspace`` (the session ``cwd`` plus any additional directories) and two small async
interfaces, ``FileSystem`` and ``ProcessRunner`` (``contract/workspace.py``), instead of the OS. The run's
environment (``ctx.env``) may carry its host's own implementations; an ACP client that offers ``fs/*`` and
``terminal/*`` gets editor-backed ones (unsaved buffers, reviewed writes, embedded terminals) without any tool
changing. Without them, ``LocalFileSystem`` / ``LocalProcessRunner`` on a workspace built from ``ctx.env.cwd``.

What this module does not do: decide whether a call may run (the permission gate), or format results for the
model (the tools in ``tools/builtin``). Every path a tool touches goes through ``Workspace.resolve`` first, so an
implementation receives absolute, confined paths only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.workspace import FileSystem, ProcessRunner
from awaken_stdio.tools.local_fs import LocalFileSystem
from awaken_stdio.tools.runner import LocalProcessRunner

if TYPE_CHECKING:
    from awaken_stdio.contract.tools import ToolCallContext

__all__ = ["Workspace", "get_file_system", "get_process_runner", "get_workspace"]

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

    def root_of(self, path: Path) -> Path:
        """The innermost root that ``path`` (resolved, in the workspace) lies in."""
        return max((r for r in self.roots if path.is_relative_to(r)), key=lambda r: len(r.parts))

    async def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real absolute path of ``path`` (relative to the root), or ``ToolFailure(kind="denied")``.

        Symlinks are resolved before the check, so a link inside the workspace cannot lead out of it. The path
        need not exist (``write_file`` creates files).
        """
        try:
            real = await anyio.to_thread.run_sync((self.root / path).resolve)
        except OSError as exc:  # e.g. EINVAL: a link replaced by a directory while it was being read
            raise ToolFailure(f"{os.fspath(path)!r} could not be resolved: {exc.strerror or exc}") from None
        if not self.contains(real):
            allowed = ", ".join(map(str, self.roots))
            raise ToolFailure(
                f"{os.fspath(path)!r} is outside the workspace (resolves to {real}); allowed: {allowed}", "denied"
            )
        return real

    def display(self, path: Path) -> str:
        """How to show ``path`` to the model: relative to the root when inside it (what the tools accept back)."""
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)

    def __repr__(self) -> str:
        return f"Workspace({', '.join(map(str, self.roots))})"


# -- what a call uses --------------------------------------------------------------------------------------------

_LOCAL_FILE_SYSTEM = LocalFileSystem()
_LOCAL_PROCESS_RUNNER = LocalProcessRunner()


async def get_workspace(ctx: ToolCallContext) -> Workspace:
    """The run's workspace: rooted at ``ctx.env.cwd`` (default: the process's), widened by ``ctx.env.roots``."""
    return await Workspace.create(ctx.env.cwd, ctx.env.roots)


def get_file_system(ctx: ToolCallContext) -> FileSystem:
    """``ctx.env.fs``, else the local disk."""
    return ctx.env.fs or _LOCAL_FILE_SYSTEM


def get_process_runner(ctx: ToolCallContext) -> ProcessRunner:
    """``ctx.env.runner``, else local subprocesses."""
    return ctx.env.runner or _LOCAL_PROCESS_RUNNER
