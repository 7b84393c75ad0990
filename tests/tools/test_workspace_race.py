"""The file tools against a directory swapped for a symlink while they work (issue 13): whenever the swap falls
between the check of a path and its use, nothing outside the workspace is read or written.

The attacker is anything running in the workspace (a command, a build script): it exchanges a directory of the
workspace with a symlink to a directory outside, atomically (``renameat2(RENAME_EXCHANGE)``), as fast as it can.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.errors import ToolError
from awaken_stdio.contract.tools import Tool
from awaken_stdio.tools.builtin import edit_file, find_files, list_directory, read_file, search, write_file
from tests.tools.test_builtin_tools import make_ctx

pytestmark = pytest.mark.anyio

SECRET = "SECRET-OUTSIDE-3f9c1e"
SWAP_SECONDS = 3.0
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a: Path, b: Path) -> None:
    """Swap two names atomically: there is no moment when either is missing."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a))


def renameat2_works(tmp: Path) -> bool:
    if not sys.platform.startswith("linux") or not hasattr(_libc, "renameat2"):
        return False
    (tmp / "x").touch()
    (tmp / "y").touch()
    try:
        exchange(tmp / "x", tmp / "y")
    except OSError as exc:
        return exc.errno not in (errno.ENOSYS, errno.EINVAL)
    finally:
        (tmp / "x").unlink()
        (tmp / "y").unlink()
    return True


def contents(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


class Swapper(threading.Thread):
    """Exchanges ``root/d`` (a real directory) and ``root/d.swap`` (a symlink to ``outside``) until stopped."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.d, self.other = root / "d", root / "d.swap"
        self.stop = threading.Event()
        self.flips = 0

    def run(self) -> None:
        while not self.stop.is_set():
            exchange(self.d, self.other)
            self.flips += 1
        if self.d.is_symlink():  # leave the real directory in place
            exchange(self.d, self.other)


@pytest.fixture
def setup(root: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The workspace ``root`` with ``d/`` inside, and a directory outside holding the same names, with secrets."""
    if not renameat2_works(tmp_path):
        pytest.skip("needs Linux renameat2(RENAME_EXCHANGE) to swap a directory and a symlink atomically")
    outside = tmp_path / "outside"
    outside.mkdir()
    for parent in (root / "d", outside):
        parent.mkdir(exist_ok=True)
        (parent / "sub").mkdir()
    (root / "d" / "f.txt").write_text("inside\n")
    (root / "d" / "e.txt").write_text("alpha\n")
    (root / "d" / "sub" / "g.txt").write_text("inside too\n")
    (outside / "f.txt").write_text(f"{SECRET}\n")
    (outside / "e.txt").write_text(f"alpha {SECRET}\n")
    (outside / "sub" / "g.txt").write_text(f"{SECRET}\n")
    (outside / f"{SECRET}.txt").write_text(f"{SECRET}\n")
    (root / "d.swap").symlink_to(outside)
    return root, outside


async def hammer(root: Path, seconds: float) -> tuple[list[str], int]:
    """Every file tool on paths under ``d/``, over and over for ``seconds``: what they returned, and how many of
    the calls succeeded."""
    calls: list[tuple[Tool, dict[str, Any]]] = [
        (read_file, {"path": "d/f.txt"}),
        (read_file, {"path": "d/sub/g.txt"}),
        (write_file, {"path": "d/w.txt", "content": "written\n"}),
        (write_file, {"path": "d/sub/w.txt", "content": "written\n"}),
        (edit_file, {"path": "d/e.txt", "old_text": "alpha", "new_text": "beta"}),
        (edit_file, {"path": "d/e.txt", "old_text": "beta", "new_text": "alpha"}),
        (list_directory, {"path": "d"}),
        (list_directory, {"path": "d/sub"}),
        (find_files, {"pattern": "*.txt", "path": "d"}),
        (search, {"pattern": ".", "path": "d"}),
        (search, {"pattern": ".", "path": "d/sub/g.txt"}),
    ]
    seen: list[str] = []
    successes = 0
    deadline = anyio.current_time() + seconds
    while anyio.current_time() < deadline:
        for tool, args in calls:
            try:
                result = await tool.execute(tool.validate_args(args), make_ctx(tool, root))
            except ToolError as exc:
                seen.append(str(exc))
            else:
                successes += 1
                seen.append(result.message + json.dumps(result.data, default=str))
    return seen, successes


async def run_attack(root: Path, outside: Path) -> tuple[list[str], int, dict[str, bytes]]:
    before = contents(outside)
    swapper = Swapper(root)
    swapper.start()
    try:
        seen, successes = await hammer(root, SWAP_SECONDS)
    finally:
        swapper.stop.set()
        await anyio.to_thread.run_sync(swapper.join)
    assert swapper.flips > 1000, "the swapper hardly ran: the test proves nothing"
    return seen, successes, before


async def test_a_directory_swapped_for_a_symlink_never_leads_a_tool_outside(setup: tuple[Path, Path]) -> None:
    root, outside = setup
    seen, successes, before = await run_attack(root, outside)
    leaked = [text for text in seen if SECRET in text]
    assert leaked == [], f"{len(leaked)} of {len(seen)} calls returned text from outside the workspace"
    assert contents(outside) == before, "a tool wrote outside the workspace"
    assert successes > 100  # the tools kept working whenever the directory was the real one
    assert any("symbolic link" in text for text in seen)  # and said why when it was not
