"""The servers' command line is parsed by a parser with only ``acp`` and ``mcp`` (``cli.build_parser(servers_only)``,
chosen by ``cli.command_of``): the same namespace, the same help and the same errors as the whole parser gives."""

from __future__ import annotations

import contextlib
import io

import pytest

from awaken_stdio import cli

LINES = [
    ["acp"],
    ["mcp", "--cwd", "/tmp"],
    ["--log-level", "debug", "acp", "--config", "c.toml", "--store", "memory://"],
    ["--config=c.toml", "--debug", "mcp", "--log-file", "f.log"],
    ["--config", "acp", "mcp"],  # a config file named acp
    ["acp", "--help"],
    ["mcp", "--bogus"],
    ["acp", "extra"],
    ["--store", "memory://", "acp", "--cwd", "/tmp"],  # acp takes no --cwd
]


def _parse(parser_argv: list[str], servers_only: bool) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result: object = vars(cli.build_parser(servers_only=servers_only).parse_args(parser_argv))
        except SystemExit as exc:
            result = exc.code
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", LINES, ids=" ".join)
def test_the_servers_parser_answers_as_the_whole_one(argv: list[str]) -> None:
    assert cli.command_of(argv) in ("acp", "mcp")
    assert _parse(argv, True) == _parse(argv, False)


@pytest.mark.parametrize("argv", [["--conf", "x", "acp"], ["--help"], ["runs", "list"], [], ["-h", "acp"]])
def test_anything_else_gets_the_whole_parser(argv: list[str]) -> None:
    assert cli.command_of(argv) not in ("acp", "mcp")
