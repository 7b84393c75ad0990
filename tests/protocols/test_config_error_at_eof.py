"""A config that fails validation exits 2 with one stderr line naming the problem, in both server modes, even when
stdin ends before any request came (it exited 0 in silence)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mode", ["acp", "mcp"])
def test_an_invalid_config_exits_2_with_one_line_when_no_request_comes(tmp_path: Path, mode: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[agents.coder]\nmodel = "main"\nmax_rounds = "many"\n')
    done = subprocess.run(
        [sys.executable, "-m", "awaken_stdio", mode, "--config", str(config), "--store", "memory://"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"awaken-stdio: error: {config}: ") and "max_rounds" in line, line
