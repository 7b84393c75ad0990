"""Tool patterns: the forms, the primary argument, command segments and specificity."""

from __future__ import annotations

from typing import Any

import pytest

from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.runtime.tool_pattern import ToolPattern, argument_values, command_segments, primary_argument

GH_SCHEMA = {
    "type": "object",
    "properties": {"owner": {"type": "integer"}, "query": {"type": "string"}, "label": {"type": "string"}},
    "required": ["owner", "query"],
}


@pytest.mark.parametrize(
    ("pattern", "tool", "value", "expected"),
    [
        ("read_file", "read_file", None, True),
        ("read_file", "read_files", None, False),
        ("file_*", "file_read", None, True),
        ("file_*", "read_file", None, False),
        ("mcp__github__*", "mcp__github__search", None, True),
        ("everything__*", "everything__echo", None, True),
        ("everything__*", "other__echo", None, False),
        ("/(read|list)_.*/", "list_directory", None, True),
        ("/read/", "read_file", None, False),  # a regex matches the whole name
        ("run_command(git status*)", "run_command", "git status --short", True),
        ("run_command(git status*)", "run_command", "git push", False),
        ("run_command(git status*)", "run_command", None, False),  # no primary argument, no match
        ("run_command(git *)", "run_command", "git", True),  # "prog *" covers the bare program
        ("run_command(git *)", "run_command", "gitk", False),
        ("Bash(npm *)", "Bash", "npm test", True),
        ("*(npm *)", "run_command", "npm test", True),
        ("/run_.*/(ls*)", "run_command", "ls -la", True),
        ("/run_.*/(ls*)", "read_file", "ls", False),
        ("write_file(src/*)", "write_file", "src/a/b.py", True),
        ("write_file(src/*)", "write_file", "tests/a.py", False),
    ],
)
def test_pattern_forms_match_names_and_primary_arguments(pattern: str, tool: str, value: str | None, expected: bool):
    assert ToolPattern.parse(pattern).matches(tool, value) is expected


def test_parse_splits_tool_and_argument_parts() -> None:
    p = ToolPattern.parse("run_command(git status*)")
    assert (p.tool, p.argument, p.kind) == ("run_command", "git status*", "exact")
    r = ToolPattern.parse("/(a|b)/(x *)")
    assert (r.tool, r.argument, r.kind) == ("/(a|b)/", "x *", "regex")
    assert ToolPattern.parse("/a(b)/").argument is None
    assert ToolPattern.parse("run_command", argument="git *").argument == "git *"  # a stored grant
    assert str(ToolPattern.parse("run_command", argument="git *")) == "run_command(git *)"


@pytest.mark.parametrize(
    ("pattern", "message"), [("", "empty"), ("(x)", "empty"), ("/[/", "regular"), ("a)", "without")]
)
def test_bad_patterns_are_config_errors(pattern: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ToolPattern.parse(pattern)


def test_specificity_orders_exact_then_argument_forms_then_globs_then_regexes() -> None:
    ranked = [
        "run_command(git status)",  # exact tool, literal argument
        "run_command(git status*)",
        "run_command(git *)",  # fewer literal characters
        "run_command",  # exact tool, bare
        "run_*(git *)",  # glob tool, argument form
        "run_comm*",  # glob, one wildcard, more literal characters
        "run_*",
        "r*_*",  # more wildcards
        "/run_command/",  # regex last, however precise
    ]
    scores = [ToolPattern.parse(p).specificity for p in ranked]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(scores)


def test_primary_argument_of_builtins_and_of_other_tools_schemas() -> None:
    assert primary_argument("run_command") == "command"
    assert [primary_argument(t) for t in ("read_file", "write_file", "edit_file", "list_directory")] == ["path"] * 4
    assert primary_argument("find_files") == primary_argument("search") == "pattern"
    assert primary_argument("gh__search", GH_SCHEMA) == "query"  # first *required* string property
    assert primary_argument("gh__search", {"type": "object", "properties": {"q": {"type": "string"}}}) is None
    assert primary_argument("custom") is None


@pytest.mark.parametrize(
    ("command", "segments"),
    [
        ("git status", ["git status"]),
        ("git status && rm -rf x", ["git status", "rm -rf x"]),
        ("a; b || c | d & e\nf", ["a", "b", "c", "d", "e", "f"]),
        ("echo $(curl x) `id`", ["echo", "curl x", "id"]),
        ("  ", [""]),
    ],
)
def test_command_segments_split_at_shell_operators(command: str, segments: list[str]) -> None:
    assert command_segments(command) == segments


@pytest.mark.parametrize(
    ("tool", "args", "values"),
    [
        ("run_command", {"command": "cd x && make"}, ["cd x", "make"]),
        ("write_file", {"path": "./src/../.env"}, [".env"]),
        ("gh__search", {"query": "is:open", "owner": 1}, ["is:open"]),
        ("run_command", {}, [None]),
        ("run_command", {"command": 3}, [None]),
        ("custom", {"x": "y"}, [None]),
    ],
)
def test_argument_values(tool: str, args: dict[str, Any], values: list[str | None]) -> None:
    assert argument_values(tool, args, GH_SCHEMA) == values
