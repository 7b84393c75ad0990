"""The README's examples are code: they must run as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_first_lines_give_install_and_test_commands() -> None:
    head = README.read_text(encoding="utf-8").splitlines()[:5]
    assert any(line.startswith("Install:") and "make install" in line for line in head)
    assert any(line.startswith("Test:") and "make test" in line for line in head)


def test_quick_example_runs_and_prints_the_answer() -> None:
    example = _python_blocks()[0]
    assert len([line for line in example.splitlines() if line.strip()]) <= 12
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "2 + 3 = 5"


def test_other_python_blocks_compile() -> None:
    for block in _python_blocks()[1:]:
        compile(block, "README.md", "exec")
