"""The README's examples are code: they must run as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_first_lines_give_install_and_test_commands() -> None:
    head = README.read_text(encoding="utf-8").splitlines()[:5]
    assert any(line.startswith("Install:") and "make install" in line for line in head)
    assert any(line.startswith("Test:") and "make test" in line for line in head)


def test_quick_example_runs_and_prints_the_answer() -> None:
    example = _blocks("python")[0]
    assert len([line for line in example.splitlines() if line.strip()]) <= 12
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "2 + 3 = 5"


def test_other_python_blocks_compile() -> None:
    for block in _blocks("python")[1:]:
        compile(block, "README.md", "exec")


def test_every_toml_snippet_is_a_valid_config() -> None:
    import tomllib

    from awaken_stdio.config import parse_config

    snippets = _blocks("toml")
    assert len(snippets) >= 3
    for snippet in snippets:
        parse_config(tomllib.loads(snippet), "README.md")


def test_every_json_snippet_parses() -> None:
    import json

    snippets = _blocks("json")
    assert len(snippets) >= 5
    for snippet in snippets:
        json.loads(snippet)
