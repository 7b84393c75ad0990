"""The README's examples are code: they must run as printed."""

from __future__ import annotations

import os
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


def test_every_python_example_imports_only_the_public_api() -> None:
    """``awaken_stdio``'s ``__all__`` and the documented submodule ``awaken_stdio.contract.content``: nothing else."""
    import ast

    import awaken_stdio
    import awaken_stdio.contract.content as content

    public = {"awaken_stdio": set(awaken_stdio.__all__), "awaken_stdio.contract.content": set(content.__all__)}
    text = README.read_text(encoding="utf-8")
    assert all(f"`{module}`" in text for module in public)
    imported: list[tuple[str, str]] = []
    for block in _blocks("python") + _blocks("py"):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported += [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                imported += [(alias.name, "") for alias in node.names]
    ours = [(module, name) for module, name in imported if module.split(".")[0] == "awaken_stdio"]
    assert len(ours) >= 8
    assert [(m, n) for m, n in ours if m not in public or (n and n not in public[m])] == []


def test_the_plugin_example_runs_a_config_agent_with_its_own_plugin(tmp_path: Path) -> None:
    [example] = [b for b in _blocks("python") if "add_plugin(" in b and "open_runtime" in b]
    (tmp_path / "script.json").write_text('{"turns": [{"text": "Fixed."}]}')
    (tmp_path / "config.toml").write_text(
        '[store]\nurl = "memory://"\n\n[models.main]\nprovider = "scripted"\nscript = "script.json"\n\n'
        '[agents.coder]\nmodel = "main"\nplugins = ["count_calls"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWAKEN_STDIO_")}
    out = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert (out.returncode, out.stderr, out.stdout) == (0, "", "completed Fixed.\n")


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


def test_the_postgres_server_is_started_as_the_tests_need_it() -> None:
    """``make pg-up`` prints an export: run bare, it starts a server the tests never hear of."""
    text = README.read_text(encoding="utf-8")
    assert 'eval "$(make -s pg-up)"' in text
    assert "`make pg-up`" not in text
    assert "AWAKEN_STDIO_TEST_PG" in (README.parent / "tests" / "contract" / "conftest.py").read_text(encoding="utf-8")


def test_debugging_names_the_tools_to_reach_for() -> None:
    section = README.read_text(encoding="utf-8").split("## Debugging", 1)[1].split("\n## ", 1)[0]
    for needle in ("dev: open acp logs", "--log-file", "--log-level debug", "modelcontextprotocol/inspector", "doctor"):
        assert needle in section, needle


def test_every_command_line_the_readme_shows_parses() -> None:
    """The indented ``awaken-stdio ...`` lines are what people paste: each must be a command the CLI accepts."""
    import shlex

    from awaken_stdio.cli import build_parser

    lines = [
        line.strip().split("  #")[0]
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith("    awaken-stdio ")
    ]
    assert any("--rerun" in line for line in lines) and any("--done" in line for line in lines)
    parser = build_parser()
    for line in lines:
        parser.parse_args(shlex.split(line)[1:])  # SystemExit (a failure here) for a command the CLI does not know
