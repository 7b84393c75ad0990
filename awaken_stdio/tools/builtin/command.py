"""``run_command``: a shell command in the working directory, through the run's ``ProcessRunner``.

Output streams to the client as it comes (``ctx.stream_output``); the model gets the end of it (at most
``COMMAND_MAX_OUTPUT_CHARS``) and the exit code. A timeout or a cancellation stops the command and everything it
started (the runner's job), then fails the call. ``data["terminal_id"]`` names the client's terminal when the
runner is an ACP one (for terminal content), also in the data of a timeout error; the terminal is reported as soon
as it exists (``ctx.report_activity("terminal", ...)``), so the client embeds it in the call while it still runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import anyio
from pydantic import Field

from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.preview import ToolPreview
from awaken_stdio.contract.tools import CancelToken, ToolCallContext, ToolResult
from awaken_stdio.contract.workspace import TERMINAL_ACTIVITY, ProcessResult, ProcessRunner
from awaken_stdio.tools.builtin._results import location, success
from awaken_stdio.tools.function import tool
from awaken_stdio.tools.workspace import get_process_runner, get_workspace

__all__ = [
    "COMMAND_DEFAULT_TIMEOUT_S",
    "COMMAND_ENV",
    "COMMAND_MAX_OUTPUT_CHARS",
    "COMMAND_MAX_TIMEOUT_S",
    "run_command",
]

COMMAND_DEFAULT_TIMEOUT_S = 120.0
COMMAND_MAX_TIMEOUT_S = 600.0
COMMAND_MAX_OUTPUT_CHARS = 30_000
COMMAND_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
"""Nobody can answer a pager or a password prompt: stdin is closed, and these keep git and friends from waiting."""


@tool(kind="execute", destructive=True, title="Run command")
async def run_command(
    ctx: ToolCallContext,
    command: str,
    timeout_s: Annotated[float, Field(gt=0, le=COMMAND_MAX_TIMEOUT_S)] | None = None,
) -> ToolResult:
    """Run a shell command (bash) in the working directory and return its output (stdout and stderr) and exit code.

    Stdin is closed, so interactive programs fail: pass flags that avoid prompts. For long output, redirect it to
    a file and read or search that. Background jobs (`cmd &`) must redirect their output too.

    Args:
        command: The command line, as typed in a shell.
        timeout_s: Stop the command after this many seconds (default 120, at most 600).
    """
    workspace = await get_workspace(ctx)
    timeout = timeout_s or COMMAND_DEFAULT_TIMEOUT_S
    runner = get_process_runner(ctx)
    result = await _run_unless_cancelled(runner, command, cwd=workspace.root, seconds=timeout, ctx=ctx)
    if result is None:
        raise ToolFailure(f"the command was stopped: {command}", "cancelled")
    output = result.output
    if result.omitted_chars:
        output = (
            f"[... {result.omitted_chars} earlier characters omitted; redirect the output to a file and read it "
            f"with read_file or search to see all of it]\n{output}"
        )
    data = {
        "command": command,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "output": output,
        "truncated": result.omitted_chars > 0,
        "terminal_id": result.terminal_id,
    }
    if result.timed_out:
        stopped = f"the command did not finish within {timeout:g} s and was stopped"
        raise ToolFailure(f"{stopped}; its output:\n{output}" if output else stopped, "timeout", data=data)
    ending = f"(exit code {result.exit_code})" if result.signal is None else f"(killed by {result.signal})"
    message = ending if not output else output.removesuffix("\n") + "\n" + ending
    return success(ctx.tool_name, message, data, [location(workspace.root)])


@run_command.previewer
async def _preview_command(ctx: ToolCallContext, command: str, timeout_s: float | None = None) -> ToolPreview:
    return ToolPreview(command=command, cwd=str((await get_workspace(ctx)).root))


async def _run_unless_cancelled(
    runner: ProcessRunner, command: str, cwd: Path, seconds: float, ctx: ToolCallContext
) -> ProcessResult | None:
    """The runner's result, or None when ``ctx.cancel`` fired first (the runner stops the process then)."""
    result: ProcessResult | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_scope_on, ctx.cancel, tg.cancel_scope)
        result = await runner.run(
            command,
            cwd=cwd,
            timeout_s=seconds,
            output_limit=COMMAND_MAX_OUTPUT_CHARS,
            env=COMMAND_ENV,
            on_output=ctx.stream_output,
            on_terminal=lambda terminal_id: ctx.report_activity(TERMINAL_ACTIVITY, {"terminal_id": terminal_id}),
        )
        tg.cancel_scope.cancel()
    return result


async def _cancel_scope_on(token: CancelToken, scope: anyio.CancelScope) -> None:
    await token.wait()
    scope.cancel()
