"""The ``awaken-stdio`` command line's grammar: every command and option (``build_parser``), and which command an
argument list names before it is parsed (``command_of``: the protocol servers get a parser holding only ``acp`` and
``mcp``, which starts sooner). No imports beyond the standard library: ``--help`` and the servers start fast."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from awaken_stdio._version import __version__

__all__ = ["GLOBAL_OPTIONS", "LOG_ENV", "PROG", "SHELLS", "build_parser", "command_of"]

PROG = "awaken-stdio"
LOG_ENV = "AWAKEN_STDIO_LOG_LEVEL"
RUN_STATUSES = ("running", "waiting", "completed", "failed", "cancelled")


SHELLS = ("bash", "zsh", "fish")
GLOBAL_OPTIONS = ("config", "store", "log_level", "log_file", "debug")


def _add_global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """The options every command takes. Subcommands declare them with ``default=SUPPRESS``: argparse copies a
    subparser's defaults over what an outer level parsed, so ``runs --store URL list`` would otherwise lose URL."""
    parser.add_argument(
        "--config", metavar="FILE", default=default, help="config file (default: $AWAKEN_STDIO_CONFIG, else the user's)"
    )
    parser.add_argument(
        "--store", metavar="URL", default=default, help="store URL (default: $AWAKEN_STDIO_STORE, else the config's)"
    )
    parser.add_argument(
        "--log-level", metavar="L", default=default, help="debug | info | warning | error (default: warning)"
    )
    parser.add_argument("--log-file", metavar="F", default=default, help="also write logs to this file")
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show the traceback of an unexpected failure"
    )


def build_parser(*, servers_only: bool = False) -> argparse.ArgumentParser:
    """The whole command line; ``servers_only``: just ``acp`` and ``mcp`` (what an editor or MCP host launches
    starts sooner without the other twenty subparsers, and parses the same)."""
    common = argparse.ArgumentParser(add_help=False)
    _add_global_options(common, argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="An agent runtime for ACP editors and MCP clients, with durable human-in-the-loop.",
    )
    _add_global_options(parser, None)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "acp", help="serve the Agent Client Protocol on stdin/stdout (what editors launch)", parents=[common]
    )
    # `acp login`: an editor's terminal authentication that appends the method's args to the agent's command
    p.add_argument("auth", nargs="?", choices=["login"], help=argparse.SUPPRESS)
    p = sub.add_parser(
        "mcp", help="serve the Model Context Protocol on stdin/stdout (what MCP clients launch)", parents=[common]
    )
    p.add_argument("--cwd", metavar="DIR", help="working directory of the tools (default: the current directory)")
    if not servers_only:
        _add_serve(sub, common)
        _add_commands(sub, common)
    return parser


def _add_serve(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "serve", help="serve ACP (/acp, HTTP and WebSocket) and MCP (/mcp) to network clients", parents=[common]
    )
    p.add_argument("--listen", metavar="HOST:PORT", help="where to listen (default: 127.0.0.1:8765, loopback only)")
    p.add_argument("--cwd", metavar="DIR", help="working directory of the tools (default: the current directory)")
    p.add_argument(
        "--allow-host", metavar="NAME", action="append", help="a host name clients may use besides loopback (repeat)"
    )
    p.add_argument(
        "--allow-origin", metavar="URL", action="append", help="a browser origin allowed besides loopback (repeat)"
    )
    p.add_argument(
        "--no-token", action="store_true", help="ask no bearer token (loopback only; for test kits that send none)"
    )
    p = sub.add_parser(
        "connect",
        help="speak ACP on stdin/stdout to an `awaken-stdio serve` elsewhere (for editors that launch agents)",
        parents=[common],
    )
    p.add_argument("url", help="the server, e.g. ws://127.0.0.1:8765/acp (token: AWAKEN_STDIO_TOKEN or serve's file)")


def _add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Every command but the servers."""
    p = sub.add_parser(
        "chat", help="talk to the agent in this terminal (an ACP client of `awaken-stdio acp`)", parents=[common]
    )
    p.add_argument("--demo", action="store_true", help="use the bundled scripted demo agent (no API key needed)")

    runs = sub.add_parser("runs", help="list and inspect agent runs", parents=[common]).add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    p = runs.add_parser("list", help="list runs, newest first", parents=[common])
    p.add_argument("--status", choices=RUN_STATUSES, help="only runs with this status")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p = runs.add_parser("show", help="show one run", parents=[common])
    p.add_argument("id", help="the run id (or a unique prefix of it)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = runs.add_parser("approve", help="approve a waiting run's pending calls; the run resumes once", parents=[common])
    p.add_argument("id", help="the run id (or a unique prefix of it)")
    p.add_argument("--call", metavar="C", help="only this pending call (default: every pending call)")
    p.add_argument("--always", action="store_true", help="remember the approval for this tool in this workspace")
    unknown = p.add_mutually_exclusive_group()
    unknown.add_argument(
        "--rerun", action="store_true", help="a call whose earlier attempt's outcome is unknown: run it again"
    )
    unknown.add_argument(
        "--done", action="store_true", help="a call whose earlier attempt's outcome is unknown: record it as done"
    )
    p = runs.add_parser(
        "reject", help="reject a waiting run's pending calls; the run goes on without them", parents=[common]
    )
    p.add_argument("id", help="the run id (or a unique prefix of it)")
    p.add_argument("--call", metavar="C", help="only this pending call (default: every pending call)")
    p.add_argument("--reason", metavar="R", help="told to the model")
    p = runs.add_parser("cancel", help="cancel a running or waiting run", parents=[common])
    p.add_argument("id", help="the run id (or a unique prefix of it)")

    sessions = sub.add_parser("sessions", help="list, show and delete sessions", parents=[common]).add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    p = sessions.add_parser("list", help="list sessions, most recent first", parents=[common])
    p.add_argument("--cwd", metavar="D", help="only sessions of this working directory")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p = sessions.add_parser("show", help="show a session and its conversation", parents=[common])
    p.add_argument("id", help="the session id (or a unique prefix of it)")
    p = sessions.add_parser("delete", help="delete a session and its conversation", parents=[common])
    p.add_argument("id", help="the session id (or a unique prefix of it)")

    tools = sub.add_parser("tools", help="list the tools agents can use", parents=[common]).add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    p = tools.add_parser("list", help="list registered tools", parents=[common])
    p.add_argument("--json", action="store_true", help="print a JSON array")

    p = sub.add_parser(
        "login", help="choose a model provider and save its API key (OS keyring or a private file)", parents=[common]
    )
    p.add_argument("--provider", choices=["anthropic", "openai"], help="the provider (default: asked)")
    p.add_argument("--no-keyring", action="store_true", help="save in the private file even when a keyring is usable")
    sub.add_parser("logout", help="remove the API keys `login` saved", parents=[common])

    sub.add_parser("doctor", help="check the config, the store, each model and each MCP server", parents=[common])
    config = sub.add_parser("config", help="the configuration file format", parents=[common]).add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    config.add_parser("schema", help="print the JSON Schema of the config file", parents=[common])
    config.add_parser("example", help="print an example config file", parents=[common])
    p = sub.add_parser(
        "completion", help='print the shell completion script (e.g. `eval "$(awaken-stdio completion bash)"`)'
    )
    p.add_argument("shell", choices=SHELLS)


def command_of(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` when only global options, spelled out, come before it (else ``None``)."""
    args = iter(argv)
    for arg in args:
        if arg in _VALUED:
            next(args, None)
        elif arg != "--debug" and not arg.startswith(tuple(f"{option}=" for option in _VALUED)):
            return arg
    return None


_VALUED = ("--config", "--store", "--log-level", "--log-file")
