"""Tools that talk back (``ctx.log``, ``progress``, ``elicit``, ``sample``) through the ``mcp`` SDK ``Client`` in both
eras: mid-call requests in the handshake era, ``InputRequiredResult`` rounds the client's driver answers in 2026."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning

from awaken_stdio.contract.messages import text_of
from awaken_stdio.stores import open_store
from tests.protocols.mcp.support import connect, make_env, turn

pytestmark = [pytest.mark.anyio]
MODES = ["legacy", "auto"]


class Client:
    """The callbacks of a client that can answer: it records what it was asked."""

    def __init__(self, action: str = "accept") -> None:
        self.action = action
        self.asked: list[str] = []
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.logs: list[tuple[str, str]] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        assert params.requested_schema["required"] == ["name"]
        content = {"name": "Ada"} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)

    async def sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Short."), model="host-model"
        )

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, str(params.data)))

    async def on_progress(self, done: float, total: float | None, message: str | None) -> None:
        self.progress.append((done, total, message))

    def kwargs(self, mode: str) -> dict[str, Any]:
        extra = {"log_level": "info"} if mode == "auto" else {}
        return {"elicitation_callback": self.elicit, "sampling_callback": self.sample, "logging_callback": self.log,
                **extra}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_logs_reports_progress_asks_the_user_and_the_model(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    client = Client()
    async with connect(env, mode, **client.kwargs(mode)) as session:
        if mode == "legacy":
            with pytest.warns(MCPDeprecationWarning):
                await session.set_logging_level("info")
        result = await session.call_tool("interview", {"topic": "owls"}, progress_callback=client.on_progress)
    assert result.is_error is False, result.content
    assert result.content[0].text == "Ada: Short. (host-model)"
    assert client.asked[-1] == "Who knows about owls?"
    (sampled,) = {p.system_prompt: p for p in client.sampled}.values()  # asked again on each 2026 round
    assert sampled.messages[0].content.text == "Summarise owls for Ada" and sampled.max_tokens == 1000
    assert ("info", "interviewing about owls") in client.logs
    assert all(level != "debug" for level, _ in client.logs)  # below the level the client set
    assert (3, 3, None) in client.progress and (2, 3, "asking the model") in client.progress


@pytest.mark.parametrize("mode", MODES)
async def test_a_declined_question(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    client = Client("decline")
    async with connect(env, mode, **client.kwargs(mode)) as session:
        result = await session.call_tool("interview", {"topic": "owls"})
    assert result.content[0].text == "no answer (decline)" and client.sampled == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_answer_gets_an_error_result(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    async with connect(env, mode) as session:
        result = await session.call_tool("interview", {"topic": "owls"})
    assert result.is_error and "cannot (no form elicitation)" in result.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_inside_an_agent_run_a_tool_asks_the_client_that_started_it(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path, [turn("Asking.", {"name": "interview", "arguments": {"topic": "owls"}}), turn("Done.")])
    client = Client()
    async with connect(env, mode, **client.kwargs(mode)) as session:
        result = await session.call_tool("agent_helper", {"message": "go"})
    assert result.structured_content["status"] == "completed", result  # a question that cannot be asked fails the call
    async with open_store(env.store) as store:
        (run,) = (await store.list_runs()).items
        thread = await store.load_thread(run.thread_id)
    assert thread is not None
    (answer,) = [text_of(m.content) for m in thread.messages if m.role == "tool"]
    if mode == "legacy":  # asked in the middle of the run, as a directly called tool would
        assert answer == "Ada: Short. (host-model)" and client.asked == ["Who knows about owls?"]
    else:
        assert "2026-07-28" in answer and client.asked == []
