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

    from awaken_stdio.app.config import parse_config

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


def test_the_zed_snippet_is_a_custom_agent_with_an_absolute_command() -> None:
    import json

    zed = next(json.loads(b) for b in _blocks("json") if "agent_servers" in b and '"type"' in b)
    [server] = zed["agent_servers"].values()
    assert server["type"] == "custom" and Path(server["command"]).is_absolute() and server["args"] == ["acp"]
    assert "which awaken-stdio" in README.read_text(encoding="utf-8")


def test_every_file_a_config_snippet_names_exists() -> None:
    """A TOML snippet naming a file (a model's ``script``) is a config in ``examples/``, its files beside it."""
    import tomllib

    examples = {p: p.read_text(encoding="utf-8") for p in (README.parent / "examples").rglob("*.toml")}
    for snippet in _blocks("toml"):
        scripts = [m["script"] for m in tomllib.loads(snippet).get("models", {}).values() if "script" in m]
        if not scripts:
            continue
        [home] = [path for path, text in examples.items() if text == snippet]  # the snippet is that file, verbatim
        assert f"`{home.relative_to(README.parent)}`" in README.read_text(encoding="utf-8")
        for script in scripts:
            assert (home.parent / script).is_file(), script


def test_every_environment_variable_the_program_reads_is_documented() -> None:
    pattern = re.compile(
        r"""(?:environ|env|getenv)(?:\.get\(|\[|\()\s*["']([A-Z][A-Z0-9_]+)["']|\b[A-Z_]*ENV\s*=\s*["']([A-Z][A-Z0-9_]+)["']"""
    )
    read = {a or b for f in (README.parent / "awaken_stdio").rglob("*.py") for a, b in pattern.findall(f.read_text())}
    assert {"AWAKEN_STDIO_CONFIG", "AWAKEN_STDIO_STORE", "OPENAI_BASE_URL"} <= read  # the scan finds them
    text = README.read_text(encoding="utf-8")
    assert sorted(name for name in read if f"`{name}`" not in text) == []


def test_debugging_names_the_tools_to_reach_for() -> None:
    section = README.read_text(encoding="utf-8").split("## Debugging", 1)[1].split("\n## ", 1)[0]
    for needle in ("dev: open acp logs", "--log-file", "--log-level debug", "modelcontextprotocol/inspector", "doctor"):
        assert needle in section, needle
