"""The ``awaken-stdio`` command line.

Exit codes: 0 on success; 2 for usage, configuration and store errors, whose last stderr line names the problem
(nothing is printed on stdout then); 1 for an unexpected failure, also one line (``--debug`` shows the traceback).
The global options work before or after any subcommand. Imports are deferred into each command so ``--help`` and
the protocol servers start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from awaken_stdio.cli_parser import LOG_ENV, PROG, build_parser, command_of
from awaken_stdio.contract.ids import iso_ms

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.contract.preview import ToolPreview
    from awaken_stdio.contract.stores import RunRecord, SessionRecord, Store

__all__ = ["main"]

T = TypeVar("T")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(servers_only=command_of(argv) in ("acp", "mcp")).parse_args(argv)
    if getattr(args, "cwd", None):
        args.cwd = os.path.abspath(args.cwd)
    handler = _COMMANDS[(args.command, getattr(args, "action", None))]
    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.logs import setup_logging

    try:
        setup_logging(args.log_level or os.environ.get(LOG_ENV) or "warning", args.log_file)
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line for the user whatever broke; the traceback only when asked for
        error = _leaf(exc)
        if isinstance(error, AwakenError):
            _fail(str(error))
            return 2
        if args.debug:
            raise
        _fail(f"unexpected {type(error).__name__}: {error} (run again with --debug for the traceback)")
        return 1


def _leaf(exc: BaseException) -> BaseException:
    """The one error inside nested one-leaf exception groups (task groups wrap what their tasks raise)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _fail(message: str) -> None:
    print(f"{PROG}: error: {message.strip().splitlines()[0] if message.strip() else 'failed'}", file=sys.stderr)


# -- helpers ------------------------------------------------------------------------------------------------------


def _with_store(fn: Callable[[argparse.Namespace, Store], Awaitable[int]]) -> Callable[[argparse.Namespace], int]:
    """Run ``fn`` with the store only; the config is still validated, so a wrong field exits 2 here too."""

    def run(args: argparse.Namespace) -> int:
        import anyio

        from awaken_stdio.app.app import load_settings
        from awaken_stdio.stores import open_store

        url = load_settings(args.config, args.store).store_url

        async def go() -> int:
            async with open_store(url) as store:
                await _resolve_id(args, store)
                return await fn(args, store)

        return anyio.run(go)

    return run


async def _resolve_id(args: argparse.Namespace, store: Store) -> None:
    """Replace ``args.id``, a run or session id, by the one id it is a prefix of (git-style).

    An exact id is taken as it is; a prefix of several ids is a usage error listing them; a prefix of none is left
    for the command to report as not found.
    """
    from awaken_stdio.contract.errors import UsageError

    kind = {"runs": "run", "sessions": "session"}.get(args.command)
    prefix = getattr(args, "id", None)
    if kind is None or prefix is None:
        return
    load = store.load_run if kind == "run" else store.load_session
    if await load(prefix) is not None:
        return
    matches = sorted(i for i in await _all_ids(store, kind) if i.startswith(prefix))
    if len(matches) > 1:
        shown = ", ".join(matches[:_MAX_CANDIDATES]) + (" ..." if len(matches) > _MAX_CANDIDATES else "")
        raise UsageError(f"{kind} id prefix {prefix!r} is ambiguous: {len(matches)} candidates: {shown}")
    if matches:
        args.id = matches[0]


_MAX_CANDIDATES = 10


async def _all_ids(store: Store, kind: str) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        if kind == "run":
            runs = await store.list_runs(limit=500, cursor=cursor)
            ids.extend(r.run_id for r in runs.items)
            cursor = runs.next_cursor
        else:
            sessions = await store.list_sessions(limit=500, cursor=cursor)
            ids.extend(s.session_id for s in sessions.items)
            cursor = sessions.next_cursor
        if cursor is None:
            return ids


def _found(record: T | None, what: str) -> T:
    """``record``, or ``NotFound(what)`` when the store has none."""
    from awaken_stdio.contract.errors import NotFound

    if record is None:
        raise NotFound(what)
    return record


def _print_field(key: str, value: object) -> None:
    print(f"{key:<11} {value if value is not None else '-'}")


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def run_json(run: RunRecord, unknown: Collection[str] = ()) -> dict[str, Any]:
    """The stable JSON form of ``runs list --json`` (DESIGN section 5); ``unknown``: the pending calls whose earlier
    attempt's outcome is unknown (``outcome_unknown``), marked ``"outcome": "unknown"``."""
    pending = []
    if run.waiting is not None:
        pending = [
            {
                "tool_call_id": t.tool_call_id,
                "tool": t.tool_name,
                "arguments": t.arguments,
                "reason": t.message or t.reason,
                **({"outcome": "unknown"} if t.tool_call_id in unknown else {}),
            }
            for t in run.waiting.tickets
        ]
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "session_id": run.session_id,
        "agent_id": run.agent_id,
        "status": run.display_status,
        "created_at": iso_ms(run.created_at),
        "updated_at": iso_ms(run.updated_at),
        "pending": pending,
    }


def session_json(s: SessionRecord) -> dict[str, Any]:
    return {"session_id": s.session_id, "cwd": s.cwd, "title": s.title, "updated_at": iso_ms(s.updated_at)}


_STATUS_FILTER: dict[str, list[Any]] = {
    "running": ["created", "running"],
    "waiting": ["waiting"],
    "completed": ["done"],
    "failed": ["done"],
    "cancelled": ["done"],
}

# -- commands -----------------------------------------------------------------------------------------------------


@_with_store
async def _runs_list(args: argparse.Namespace, store: Store) -> int:
    wanted = args.status
    runs: list[RunRecord] = []
    cursor = None
    while len(runs) < args.limit:
        page = await store.list_runs(statuses=_STATUS_FILTER[wanted] if wanted else None, limit=100, cursor=cursor)
        runs.extend(r for r in page.items if wanted is None or r.display_status == wanted)
        cursor = page.next_cursor
        if cursor is None:
            break
    runs = runs[: args.limit]
    if args.json:
        _print_json([run_json(r, await _unknown(store, r)) for r in runs])
        return 0
    rows = [
        [r.run_id, r.display_status, r.agent_id, iso_ms(r.updated_at), str(len(run_json(r)["pending"]))] for r in runs
    ]
    _table(rows, ["RUN", "STATUS", "AGENT", "UPDATED", "PENDING"])
    return 0


async def _unknown(store: Store, run: RunRecord) -> list[str]:
    """The run's pending calls whose outcome is unknown, by the rule every decider reads."""
    from awaken_stdio.app.verdicts import unknown_calls
    from awaken_stdio.contract.ids import now_ms

    return await unknown_calls(store.mailbox, run, now_ms())


@_with_store
async def _runs_show(args: argparse.Namespace, store: Store) -> int:
    run = _found(await store.load_run(args.id), f"run {args.id}")
    data = run_json(run, await _unknown(store, run))
    previews = [t.preview for t in run.waiting.tickets] if run.waiting else []
    stale = [await _stale(p) if p is not None else None for p in previews]
    if args.json:  # each pending call with what approving it would do (its whole diff), when the tool could tell
        for pending, preview, why in zip(data["pending"], previews, stale, strict=True):
            if preview is not None:
                pending["preview"] = preview.to_json() | ({"stale": why} if why else {})
        _print_json({**data, "steps": run.steps, "usage": run.usage.to_json(), "response": run.response})
        return 0
    for key in ("run_id", "thread_id", "session_id", "agent_id", "status", "created_at", "updated_at"):
        _print_field(key, data[key])
    _print_field("steps", run.steps)
    if run.response:
        _print_field("response", run.response)
    if run.error:
        _print_field("error", run.error)
    for p, preview, why in zip(data["pending"], previews, stale, strict=True):
        args_text = json.dumps(p["arguments"], ensure_ascii=False)
        print(f"pending     {p['tool_call_id']}  {p['tool']} {args_text}  ({p['reason']})")
        if p.get("outcome") == "unknown":
            print(f"            {UNKNOWN_HINT.format(run=run.run_id)}")
        summary = f"stale: {why}" if why else preview.summary() if preview is not None else ""
        if summary:
            print("\n".join(f"            {line}" for line in summary.splitlines()))
    return 0


async def _stale(preview: ToolPreview) -> str | None:
    """Why ``preview`` no longer shows what approving would do (a file it changes holds other text now, on this
    machine's disk), or ``None``: its diff is printed only while it is current."""
    from pathlib import Path

    from awaken_stdio.contract.errors import ToolError
    from awaken_stdio.tools.local_fs import LocalFileSystem

    fs = LocalFileSystem()
    changed: list[str] = []
    for change in preview.changes:
        path = Path(change.path)
        try:
            same = (await fs.read_text(path)).text == change.old_text
        except ToolError as exc:  # gone (the diff assumed it was there), or unreadable now
            same = exc.kind == "not_found" and change.old_text is None
        if not same:
            cwd = preview.cwd
            changed.append(str(path.relative_to(cwd)) if cwd and path.is_relative_to(cwd) else change.path)
    if not changed:
        return None
    files = ", ".join(changed)
    return f"{files} changed since this diff was shown; approving will ask again with the diff as it is then"


@_with_store
async def _sessions_list(args: argparse.Namespace, store: Store) -> int:
    from awaken_stdio.app.sessions import Sessions

    page = await Sessions(store=store).list(cwd=args.cwd, limit=args.limit)
    if args.json:
        _print_json([session_json(s) for s in page.items])
        return 0
    _table(
        [[s.session_id, iso_ms(s.updated_at), s.cwd, s.title or ""] for s in page.items],
        ["SESSION", "UPDATED", "CWD", "TITLE"],
    )
    return 0


@_with_store
async def _sessions_show(args: argparse.Namespace, store: Store) -> int:
    from awaken_stdio.app.sessions import Sessions

    sessions = Sessions(store=store)
    session = _found(await sessions.load(args.id), f"session {args.id}")
    for key, value in session_json(session).items():
        _print_field(key, value)
    for message in await sessions.history(session):
        if message.internal or message.role == "system":
            continue
        text = message.text or ", ".join(
            f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in message.tool_calls
        )
        print(f"\n[{message.role}] {text}")
    return 0


@_with_store
async def _sessions_delete(args: argparse.Namespace, store: Store) -> int:
    from awaken_stdio.app.sessions import Sessions

    _found(await Sessions(store=store).delete(args.id), f"session {args.id}")
    print(f"deleted session {args.id}", file=sys.stderr)
    return 0


def _with_app(fn: Callable[[argparse.Namespace, App], Awaitable[int]]) -> Callable[[argparse.Namespace], int]:
    """Run ``fn`` with the whole app (runtime, tools, the mailbox for this process's own work only)."""

    def run(args: argparse.Namespace) -> int:
        import anyio

        from awaken_stdio.app.app import load_settings, open_app

        settings = load_settings(args.config, args.store)

        async def go() -> int:
            async with open_app(settings, serve=False) as app:
                await _resolve_id(args, app.store)
                return await fn(args, app)

        return anyio.run(go)

    return run


UNKNOWN_HINT = (
    "its outcome is unknown: `awaken-stdio runs approve {run} --rerun` runs it again, `--done` records it as "
    "done without running it, `awaken-stdio runs reject {run}` skips it"
)


async def _decide(args: argparse.Namespace, app: App, approve: bool) -> int:
    from awaken_stdio.contract.errors import DecisionTargetNotFound, InvalidResume, OutcomeUnknown, RunError
    from awaken_stdio.contract.suspension import ToolCallResume

    run = await app.waiting_run(args.id)  # says who decided it, when a decision did
    pending = run.waiting.tickets if run.waiting else ()
    if not pending:  # e.g. an MCP client's model answers its next turn: nobody here has anything to decide
        why = run.waiting.message if run.waiting and run.waiting.message else "nothing a person decides"
        raise InvalidResume(
            f"run {args.id} waits for no tool call ({why}); its client goes on with it, "
            f"or `awaken-stdio runs cancel {args.id}` ends it"
        )
    tickets = [t for t in pending if args.call in (None, t.tool_call_id, t.ticket_id)]
    if not tickets:
        raise DecisionTargetNotFound(str(args.call))
    if approve:
        unknown = "rerun" if args.rerun else "done" if args.done else None
        decisions = [(t.ticket_id, ToolCallResume.approve(always=args.always, unknown=unknown)) for t in tickets]
    else:
        decisions = [(t.ticket_id, ToolCallResume.reject(args.reason)) for t in tickets]
    try:  # DecisionSuperseded (exit 2) names the winner
        result = await app.decide(args.id, decisions, origin="cli")
    except OutcomeUnknown as exc:
        raise OutcomeUnknown(exc.run_id, exc.calls, UNKNOWN_HINT.format(run=exc.run_id)) from None
    verb = "approved" if approve else "rejected"
    calls = ", ".join(t.tool_call_id for t in tickets)
    if result is None:
        holder = await app.holder(run.thread_id)
        who = f" ({holder})" if holder else ""
        print(f"{verb} {calls}; the process holding run {args.id}{who} continues it", file=sys.stderr)
        return 0
    decided = {t.tool_call_id for t in tickets}
    if again := [t for t in result.pending if t.tool_call_id in decided]:  # it did not run: it is asked again
        if approve and any(t.outcome_unknown for t in again):  # its outcome became unknown meanwhile
            raise OutcomeUnknown(args.id, [t.tool_call_id for t in again], UNKNOWN_HINT.format(run=args.id))
        raise RunError(f"run {args.id} waits again for {again[0].tool_call_id}: {again[0].message}")
    print(f"{verb} {calls}; run {args.id} is {result.status}")
    if result.response:
        print(result.response)
    return 0


@_with_app
async def _runs_approve(args: argparse.Namespace, app: App) -> int:
    return await _decide(args, app, True)


@_with_app
async def _runs_reject(args: argparse.Namespace, app: App) -> int:
    return await _decide(args, app, False)


@_with_app
async def _runs_cancel(args: argparse.Namespace, app: App) -> int:
    from awaken_stdio.contract.errors import InvalidResume

    if not await app.cancel(args.id):
        await app.waiting_run(args.id)  # over already: names the decision that ended it, and who gave it
        run = await app.store.load_run(args.id)
        raise InvalidResume(f"run {args.id} is not running or waiting ({run.display_status if run else 'unknown'})")
    print(f"cancelled run {args.id}", file=sys.stderr)
    return 0


def _tools_list(args: argparse.Namespace) -> int:
    """Every tool an agent can be given: built-ins, ``@tool`` modules, entry points, configured MCP servers; those
    ready within the loading bound (``app/loading.py``), and one stderr line for each module or server that is not."""
    import anyio

    from awaken_stdio.app.app import load_settings, open_app

    settings = load_settings(args.config, "memory://")

    async def collect() -> tuple[list[Any], list[str]]:
        async with open_app(settings, serve=False) as app:
            await app.loading.settle()
            tools = sorted((t.descriptor for t in app.runtime.tools.values()), key=lambda d: d.name)
            return tools, list(app.loading.problems)

    descriptors, problems = anyio.run(collect)
    for problem in problems:
        print(f"{PROG}: warning: {problem}", file=sys.stderr)
    if args.json:
        _print_json(
            [
                {"name": d.name, "description": d.description, "input_schema": d.parameters, "kind": d.kind}
                for d in descriptors
            ]
        )
        return 0
    rows = [[d.name, d.kind, d.description.splitlines()[0] if d.description else ""] for d in descriptors]
    _table(rows, ["TOOL", "KIND", "DESCRIPTION"])
    return 0


def _doctor(args: argparse.Namespace) -> int:
    """One line per check as it finishes (stdout), what it waits for meanwhile (stderr); exit 1 when one fails."""
    import anyio

    from awaken_stdio.doctor import checks

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    async def run() -> bool:
        ok = True
        async for check in checks(args.config, args.store, progress):
            print(f"{'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}", flush=True)
            for note in check.notes:
                print(f"        {note}", flush=True)
            ok = ok and check.ok
        return ok

    return 0 if anyio.run(run) else 1


def _config_schema(args: argparse.Namespace) -> int:
    from awaken_stdio.app.config import config_json_schema

    _print_json(config_json_schema())
    return 0


def _config_example(args: argparse.Namespace) -> int:
    from awaken_stdio.app.config import example_config

    sys.stdout.write(example_config())
    return 0


def _completion(args: argparse.Namespace) -> int:
    """The completion script of ``args.shell``, generated from the parser itself (so it never goes stale)."""
    import shtab

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0


def _serve_acp(args: argparse.Namespace) -> int:
    if getattr(args, "auth", None) == "login":  # `acp login`: terminal authentication appended to the command
        return _login(args)
    from awaken_stdio.protocols.acp.entry import serve

    return serve(args)


def _serve_mcp(args: argparse.Namespace) -> int:
    from awaken_stdio.protocols.mcp.entry import serve

    return serve(args)


def _serve_http(args: argparse.Namespace) -> int:
    from awaken_stdio.protocols.http.serve import serve

    return serve(args)


def _connect(args: argparse.Namespace) -> int:
    from awaken_stdio.protocols.http.connect import connect

    return connect(args)


def _chat(args: argparse.Namespace) -> int:
    from awaken_stdio.chat import main as chat_main

    return chat_main(args)


def _login(args: argparse.Namespace) -> int:
    from awaken_stdio.login import login

    return login(args)


def _logout(args: argparse.Namespace) -> int:
    from awaken_stdio.login import logout

    return logout(args)


_COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {
    ("acp", None): _serve_acp,
    ("mcp", None): _serve_mcp,
    ("serve", None): _serve_http,
    ("connect", None): _connect,
    ("chat", None): _chat,
    ("runs", "list"): _runs_list,
    ("runs", "show"): _runs_show,
    ("runs", "approve"): _runs_approve,
    ("runs", "reject"): _runs_reject,
    ("runs", "cancel"): _runs_cancel,
    ("sessions", "list"): _sessions_list,
    ("sessions", "show"): _sessions_show,
    ("sessions", "delete"): _sessions_delete,
    ("tools", "list"): _tools_list,
    ("login", None): _login,
    ("logout", None): _logout,
    ("doctor", None): _doctor,
    ("config", "schema"): _config_schema,
    ("config", "example"): _config_example,
    ("completion", None): _completion,
}
