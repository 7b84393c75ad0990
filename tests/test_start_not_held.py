"""``tools list`` and ``chat`` with a configured MCP server that never answers: ``tools list`` prints what is ready
within the loading bound and names the server on stderr, ``chat`` starts and leaves at the end of its input. Both
waited for the server's whole timeout (here 120 s) before; the bounds asserted are generous.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SILENT = ROOT / "tests" / "protocols" / "silent_mcp_server.py"


def config(tmp_path: Path) -> Path:
    (tmp_path / "script.json").write_text('{"turns": [{"text": "Hello."}]}')
    path = tmp_path / "config.toml"
    path.write_text(
        'default_agent = "coder"\n'
        '[models.main]\nprovider = "scripted"\nscript = "script.json"\n'
        '[agents.coder]\nmodel = "main"\n'
        f'[mcp_servers.silent]\ncommand = "{sys.executable}"\nargs = ["{SILENT}"]\ntimeout_s = 120\n'
    )
    return path


def awaken(tmp_path: Path, *args: str, typed: str = "") -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path / "data")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "awaken_stdio", *args, "--config", str(config(tmp_path))],
        input=typed,
        capture_output=True,
        text=True,
        timeout=150,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    return done, time.monotonic() - started


def test_tools_list_prints_what_is_ready_and_names_the_silent_server(tmp_path: Path) -> None:
    done, took = awaken(tmp_path, "tools", "list")
    assert done.returncode == 0, done.stderr
    assert took < 60  # the server's whole timeout and more (123 s)
    assert "read_file" in done.stdout
    assert "MCP server 'silent' is not ready after 10 s" in done.stderr, done.stderr


def test_chat_leaves_at_the_end_of_its_input_while_a_server_is_silent(tmp_path: Path) -> None:
    done, took = awaken(tmp_path, "chat", "--store", "memory://")
    assert done.returncode == 0, done.stderr
    assert took < 15  # it gave up starting after 30 s
