"""Resources, prompts and completion of ``awaken-stdio mcp``, through the ``mcp`` SDK ``Client`` in both eras.

Every message the server writes is checked against the pinned ``mcp_types`` models when a connection ends.
"""

from __future__ import annotations

import base64
import json
import os
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import ResourceTemplateReference

from awaken_stdio.contract.stores import SessionRecord
from awaken_stdio.stores import open_store
from tests.protocols.mcp.support import Env, connect, make_env, turn

pytestmark = [pytest.mark.anyio]
MODES = ["legacy", "auto"]
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PROMPTS = """
[mcp.prompts.review]
title = "Review a file"
description = "Review one file of the project."
arguments = [
    { name = "path", description = "The file", values = ["src/app.py", "src/cli.py", "README.md"] },
    { name = "focus", description = "What to look at", required = false },
]
messages = [
    { resource = "file://{cwd}/notes.txt" },
    { text = "Review {path} for {focus}. {Not an argument}" },
    { role = "assistant", image = "pixel.png" },
]

[mcp.resources."memo://today"]
description = "Today's memo."
text = "Ship it."

[mcp.resources."memo://day/{day}"]
mime_type = "text/markdown"
text = "# Memo for {day}"
"""


def library_env(tmp_path: Path, turns: list[dict[str, Any]] | None = None) -> Env:
    env = make_env(tmp_path, turns, extra=PROMPTS.replace("{cwd}", str(tmp_path / "work")))
    (tmp_path / "pixel.png").write_bytes(PIXEL)
    (env.cwd / "notes.txt").write_text("Remember the tests.\n")
    (env.cwd / "sub").mkdir()
    (env.cwd / "sub" / "pixel.png").write_bytes(PIXEL)
    (env.cwd / "sub" / "raw.bin").write_bytes(bytes(range(256)))
    (env.cwd / ".gitignore").write_text("ignored.txt\n")
    (env.cwd / "ignored.txt").write_text("not listed")
    (tmp_path / "secret.txt").write_text("outside the workspace")
    os.symlink(tmp_path / "secret.txt", env.cwd / "escape.txt")
    return env


def not_found_code(mode: str) -> int:
    return -32002 if mode == "legacy" else -32602


@pytest.mark.parametrize("mode", MODES)
async def test_file_resources(tmp_path: Path, mode: str) -> None:
    env = library_env(tmp_path)
    root = env.cwd.resolve()
    async with connect(env, mode) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert (root / "notes.txt").as_uri() in listed and "memo://today" in listed
        assert listed[(root / "sub" / "pixel.png").as_uri()].mime_type == "image/png"
        assert (root / "ignored.txt").as_uri() not in listed  # .gitignore, as find_files
        assert (root / "escape.txt").as_uri() not in listed  # links are not followed
        text = (await client.read_resource((root / "notes.txt").as_uri())).contents[0]
        assert text.text == "Remember the tests.\n" and text.mime_type == "text/plain"
        blob = (await client.read_resource((root / "sub" / "raw.bin").as_uri())).contents[0]
        assert base64.b64decode(blob.blob) == bytes(range(256)) and blob.mime_type == "application/octet-stream"
        for outside in ((root / "escape.txt").as_uri(), (tmp_path / "secret.txt").as_uri(), "file:///etc/passwd"):
            with pytest.raises(MCPError) as raised:
                await client.read_resource(outside)
            assert raised.value.error.code == not_found_code(mode), outside
        assert "outside the workspace" in str(raised.value)
        memo = (await client.read_resource("memo://day/monday")).contents[0]
        assert (memo.text, memo.mime_type) == ("# Memo for monday", "text/markdown")
        with pytest.raises(MCPError) as raised:
            await client.read_resource("memo://nothing")
        assert raised.value.error.code == not_found_code(mode)


@pytest.mark.parametrize("mode", MODES)
async def test_session_and_run_resources(tmp_path: Path, mode: str) -> None:
    env = library_env(tmp_path)
    async with open_store(env.store) as store:
        await store.save_session(
            SessionRecord(session_id="acp-session-1", thread_id="acp-thread-1", cwd=str(env.cwd), agent_id="helper")
        )
    async with connect(env, mode) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {"awaken://sessions/{id}", "awaken://runs/{id}", "memo://day/{day}"} <= templates
        assert f"{env.cwd.resolve().as_uri()}/{{+path}}" in templates
        result = await client.call_tool("agent_helper", {"message": "hi", "session_id": "acp-session-1"})
        run_id = result.structured_content["run_id"]
        run = json.loads((await client.read_resource(f"awaken://runs/{run_id}")).contents[0].text)
        assert (run["run_id"], run["status"], run["response"]) == (run_id, "done", "Hello from the helper.")
        for session_uri in ("awaken://sessions/acp-session-1", "awaken://sessions/acp-thread-1"):
            transcript = json.loads((await client.read_resource(session_uri)).contents[0].text)
            assert transcript["thread_id"] == "acp-thread-1"
            texts = [c["text"] for m in transcript["messages"] for c in m["content"] if c["type"] == "text"]
            assert texts == ["hi", "Hello from the helper."]
        with pytest.raises(MCPError) as raised:
            await client.read_resource("awaken://runs/nope")
        assert raised.value.error.code == not_found_code(mode) and "runs list" in str(raised.value)


@pytest.mark.parametrize("mode", MODES)
async def test_prompts(tmp_path: Path, mode: str) -> None:
    env = library_env(tmp_path)
    async with connect(env, mode) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"agent_helper", "review"}  # agent_quiet is not exposed
        assert [(a.name, a.required) for a in prompts["agent_helper"].arguments] == [("message", True)]
        assert [(a.name, a.required) for a in prompts["review"].arguments] == [("path", True), ("focus", False)]
        agent = await client.get_prompt("agent_helper", {"message": "Tidy the tests."})
        assert agent.messages[0].role == "user" and agent.messages[0].content.text == "Tidy the tests."
        review = await client.get_prompt("review", {"path": "src/app.py", "focus": "errors"})
        resource, text, image = (m.content for m in review.messages)
        assert resource.type == "resource" and resource.resource.text == "Remember the tests.\n"
        assert text.text == "Review src/app.py for errors. {Not an argument}"
        assert (review.messages[2].role, image.type, image.mime_type) == ("assistant", "image", "image/png")
        assert base64.b64decode(image.data) == PIXEL
        for name, arguments in (("review", {"focus": "x"}), ("nope", {})):
            with pytest.raises(MCPError) as raised:
                await client.get_prompt(name, arguments)
            assert raised.value.error.code == -32602
        assert "path" in str(raised.value) or "nope" in str(raised.value)


@pytest.mark.parametrize("mode", MODES)
async def test_completion(tmp_path: Path, mode: str) -> None:
    env = library_env(tmp_path)
    async with connect(env, mode) as client:
        result = await client.call_tool("agent_helper", {"message": "hi"})
        run_id = result.structured_content["run_id"]

        async def values(ref: Any, name: str, value: str) -> list[str]:
            return (await client.complete(ref, {"name": name, "value": value})).completion.values

        prompt = {"type": "ref/prompt", "name": "review"}
        assert await values(prompt, "path", "src/") == ["src/app.py", "src/cli.py"]
        assert await values({"type": "ref/prompt", "name": "agent_helper"}, "message", "") == []
        runs = ResourceTemplateReference(type="ref/resource", uri="awaken://runs/{id}")
        assert await values(runs, "id", run_id[:6]) == [run_id]
        files = ResourceTemplateReference(type="ref/resource", uri=f"{env.cwd.resolve().as_uri()}/{{+path}}")
        assert await values(files, "path", "") == [".gitignore", "escape.txt", "ignored.txt", "notes.txt", "sub/"]
        assert await values(files, "path", "sub/r") == ["sub/raw.bin"]
        assert await values(files, "path", "../") == []  # nothing outside --cwd


MARK = {"name": "mark", "arguments": {"label": "one"}}


async def waiting_run(client: Any) -> tuple[str, str]:
    waiting = await client.call_tool("agent_helper", {"message": "mark it"})
    data = waiting.structured_content
    assert data["status"] == "waiting"
    return data["run_id"], data["pending"][0]["tool_call_id"]


async def test_subscribe_to_a_waiting_run_legacy(tmp_path: Path) -> None:
    env = library_env(tmp_path, [turn("Marking.", MARK), turn("Done.")])
    updated: list[str] = []
    got = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            updated.append(message.params.uri)
            got.set()

    async with connect(env, "legacy", message_handler=on_message) as client:
        run_id, call_id = await waiting_run(client)
        uri = f"awaken://runs/{run_id}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)
            with pytest.raises(MCPError) as raised:
                await client.subscribe_resource("awaken://runs/nope")
            assert raised.value.error.code == -32002
        await anyio.sleep(1.5)
        assert updated == []  # nothing changed yet
        decisions = [{"tool_call_id": call_id, "approve": True}]
        await client.call_tool("resume_run", {"run_id": run_id, "decisions": decisions})
        with anyio.fail_after(10):
            await got.wait()
        assert updated[0] == uri
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.unsubscribe_resource(uri)


async def test_listen_to_a_waiting_run_modern(tmp_path: Path) -> None:
    env = library_env(tmp_path, [turn("Marking.", MARK), turn("Done.")])
    async with connect(env, "auto") as client:
        run_id, call_id = await waiting_run(client)
        uri = f"awaken://runs/{run_id}"
        async with client.listen(resource_subscriptions=[uri, "awaken://runs/nope"]) as sub:
            assert sub.honored.resource_subscriptions == [uri]
            decisions = [{"tool_call_id": call_id, "approve": True}]
            await client.call_tool("resume_run", {"run_id": run_id, "decisions": decisions})
            with anyio.fail_after(10):
                event = await sub.__anext__()
        assert event == ResourceUpdated(uri)
