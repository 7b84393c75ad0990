"""``awaken-stdio chat --demo`` whose terminal goes away: the tour's copy of its project goes with it."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from .conftest import Terminal


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_hung_up_demo_removes_its_workspace(terminal, signum: int) -> None:
    term: Terminal = terminal("--demo")
    root = Path(re.search(r"working in (\S+)", term.expect(r"working in \S+\n")).group(1))  # type: ignore[union-attr]
    term.expect(r"(?m)^>$")
    assert root.is_dir()
    os.killpg(term.process.pid, signum)  # the window closed (SIGHUP), or `kill` (SIGTERM)
    assert term.exit_code() == 128 + signum
    assert not root.exists()
