"""Tool calls outside any agent run (an MCP client's direct ``tools/call``), through the ``App`` facade: judged by
the permission rules with this workspace's remembered answers, and run the way a run's calls run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from awaken_stdio.app.app import App, Settings, load_settings, open_app
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor

pytestmark = pytest.mark.anyio


def settings(tmp_path: Path, cwd: Path) -> Settings:
    config = tmp_path / "awaken.toml"
    config.touch()
    cwd.mkdir(exist_ok=True)
    return load_settings(str(config), f"sqlite:///{tmp_path}/awaken.db", str(cwd))


async def verdicts(app: App) -> tuple[str, str]:
    tools = app.runtime.tools
    write = await app.check_direct_call(tools["write_file"].descriptor, {"path": "a.txt", "content": "x"})
    read = await app.check_direct_call(tools["read_file"].descriptor, {"path": "a.txt"})
    return write, read


async def test_a_remembered_answer_decides_direct_calls_of_its_workspace_only(tmp_path: Path) -> None:
    async with open_app(settings(tmp_path, tmp_path / "one"), serve=False) as app:
        assert await verdicts(app) == ("ask", "allow")  # no rules: read-only tools run, the rest asks
        write_file = app.runtime.tools["write_file"].descriptor
        await app.remember(write_file, {"path": "a.txt"}, ToolCallResume.approve())  # once: not remembered
        assert await verdicts(app) == ("ask", "allow")
        await app.remember(write_file, {"path": "a.txt"}, ToolCallResume.reject(always=True))
        assert await verdicts(app) == ("deny", "allow")
    async with open_app(settings(tmp_path, tmp_path / "two"), serve=False) as app:
        assert await verdicts(app) == ("ask", "allow")  # another workspace: nothing remembered there


class Flaky(Tool):
    """Returns its argument, refuses ``bad`` as a tool failure, and raises the caller's own signal on ``ask``."""

    descriptor = ToolDescriptor(name="flaky", description="test tool")

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> Any:
        if args["value"] == "bad":
            raise ToolFailure("value must not be bad", "invalid_arguments")
        if args["value"] == "ask":
            raise LookupError("a question for the client")
        return {"value": args["value"], "cwd": ctx.env.cwd, "thread": ctx.thread_id}


async def test_a_direct_call_runs_as_a_runs_call_does(tmp_path: Path) -> None:
    async with open_app(settings(tmp_path, tmp_path / "ws"), serve=False) as app:
        tool = Flaky()
        ctx = app.direct_context(tool)
        ok = await app.call_tool(tool, {"value": "v"}, ctx)
        assert ok.data == {"value": "v", "cwd": str(tmp_path / "ws"), "thread": "mcp-direct"} and not ok.is_error
        failed = await app.call_tool(tool, {"value": "bad"}, ctx)
        assert failed.is_error and failed.message == "Invalid arguments: value must not be bad"
        raised = await app.call_tool(tool, {"value": "ask"}, ctx)  # any other exception is a failed result...
        assert raised.is_error and raised.message == "Execution failed: a question for the client"
        with pytest.raises(LookupError):  # ...unless it is the caller's signal
            await app.call_tool(tool, {"value": "ask"}, ctx, passing=(LookupError,))
