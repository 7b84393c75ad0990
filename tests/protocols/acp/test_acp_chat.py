"""``awaken-stdio chat --demo`` from a fresh shell: no API key, piped input, the permission asked and answered."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT, clean_env


def chat_demo(typed: str) -> subprocess.CompletedProcess[str]:
    """``awaken-stdio chat --demo`` in a fresh process, ``typed`` as its input; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "awaken_stdio", "chat", "--demo"],
        input=typed,
        capture_output=True,
        text=True,
        timeout=30,
        env={**clean_env(), "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_chat_demo_writes_hello_py_after_asking():
    done = chat_demo("please write a script\ny\n")
    out = done.stdout
    assert "Allow Write file hello.py? [y]es / [a]lways / [n]o:" in out
    assert '+    print(f"Hello, {name}!")' in out  # the diff
    assert "✓ Write file hello.py" in out and "Done: `hello.py` is written." in out
    workspace = Path(re.search(r"working in (\S+)", out).group(1))
    assert "Hello, {name}!" in (workspace / "hello.py").read_text()
    shutil.rmtree(workspace)


def test_chat_demo_rejection_and_end_of_input():
    done = chat_demo("go\nn\n")
    assert "✗ Write file hello.py" in done.stdout
    workspace = Path(re.search(r"working in (\S+)", done.stdout).group(1))
    assert not (workspace / "hello.py").exists()
    shutil.rmtree(workspace)
