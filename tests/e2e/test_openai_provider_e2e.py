"""The ``openai`` provider end to end: the real ``awaken_stdio acp`` and ``awaken_stdio mcp`` processes over real
pipes, driven by the official SDK clients, with the model served by a local HTTP server on 127.0.0.1 that streams
Chat Completions as server-sent events chunk by chunk (tests/providers/fake_servers.py). The agent process reaches
the server through the real ``openai`` SDK; its key comes from the variable named by ``api_key_env``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.protocols.acp.conftest import Harness
from tests.protocols.mcp.support import Env, connect
from tests.providers.fake_servers import DONE, FakeServer, Reply, chat_chunk, chat_text, chat_usage

pytestmark = pytest.mark.anyio

KEY_ENV = "AWAKEN_E2E_OPENAI_KEY"
KEY = "sk-e2e-0123456789abcdef"
WRITE_ARGS = {"path": "hello.py", "content": "print('hi')\n"}


def model_toml(server: FakeServer) -> str:
    return (
        "[models.gpt]\n"
        'provider = "openai"\n'
        'model = "gpt-4.1"\n'
        f'base_url = "{server.url}/v1"\n'
        f'api_key_env = "{KEY_ENV}"\n'
        "max_retries = 0\n"
        "timeout_s = 20\n"
    )


def tool_call_stream(call_id: str, name: str, arguments: dict[str, Any], *, text: tuple[str, ...] = ()) -> list[bytes]:
    """Text deltas, then one tool call whose arguments arrive in three pieces, as OpenAI streams them."""
    raw = json.dumps(arguments)
    cuts = itertools.pairwise([0, len(raw) // 3, 2 * len(raw) // 3, len(raw)])
    head = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    return [
        chat_chunk(role="assistant", content=""),
        *(chat_chunk(content=part) for part in text),
        chat_chunk(tool_calls=[head]),
        *(chat_chunk(tool_calls=[{"index": 0, "function": {"arguments": raw[a:b]}}]) for a, b in cuts),
        chat_chunk("tool_calls"),
        chat_usage(40, 12),
        DONE,
    ]


def assert_openai_requests(server: FakeServer, call_id: str, tool: str) -> dict[str, Any]:
    """Two streamed Chat Completions requests with our key; the second carries the call and its result back.
    Returns the tool message of the second."""
    assert len(server.requests) == 2, [r.body for r in server.requests]
    for seen in server.requests:
        assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert seen.body["model"] == "gpt-4.1" and seen.body["stream"] is True
        assert tool in {t["function"]["name"] for t in seen.body["tools"]}
    messages = server.requests[1].body["messages"]
    assistant = next(m for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
    [call] = assistant["tool_calls"]
    assert call["id"] == call_id and call["function"]["name"] == tool
    [result] = [m for m in messages if m["role"] == "tool"]
    assert result["tool_call_id"] == call_id
    return result


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


# -- ACP --------------------------------------------------------------------------------------------------------


async def test_acp_prompt_streams_text_then_a_permitted_edit_then_the_answer(tmp_path: Path, server: FakeServer):
    server.push(
        Reply(events=tool_call_stream("call_w1", "write_file", WRITE_ARGS, text=("I'll write ", "the file."))),
        Reply(events=chat_text("The file ", "is written.")),
    )
    harness = Harness(tmp_path)
    harness.config = harness.dir / "config.toml"
    harness.config.write_text(f'default_agent = "coder"\n{model_toml(server)}\n[agents.coder]\nmodel = "gpt"\n')
    async with harness.spawn(env={KEY_ENV: KEY}) as agent:  # the SDK trims the rest: no key from the shell
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write hello.py") == "end_turn"
        assert (agent.workspace / "hello.py").read_text() == WRITE_ARGS["content"]

        [asked] = agent.client.permissions
        assert asked["session_id"] == sid and "allow_once" in asked["kinds"]
        updates = agent.updates(sid)
        kinds = [u["sessionUpdate"] for u in updates]
        call = next(u for u in updates if u["sessionUpdate"] == "tool_call")
        assert call["toolCallId"] == asked["tool_call_id"] and call["kind"] == "edit"
        ready = next(u for u in updates if u["sessionUpdate"] == "tool_call_update" and "rawInput" in u)
        assert ready["rawInput"] == WRITE_ARGS  # the arguments reassembled from three deltas
        done = next(
            i
            for i, u in enumerate(updates)
            if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
        )
        assert updates[done]["content"][0]["newText"] == WRITE_ARGS["content"]

        # text streamed chunk by chunk before the call, the final answer after its result
        called = kinds.index("tool_call")
        before = [u for u in updates[:called] if u["sessionUpdate"] == "agent_message_chunk"]
        after = [u for u in updates[done:] if u["sessionUpdate"] == "agent_message_chunk"]
        assert [c["content"]["text"] for c in before] == ["I'll write ", "the file."]
        assert [c["content"]["text"] for c in after] == ["The file ", "is written."]
        assert len({c["messageId"] for c in before}) == 1 and len({c["messageId"] for c in after}) == 1
        assert kinds.count("agent_message_chunk") == 4
        assert "usage_update" in kinds

    result = assert_openai_requests(server, "call_w1", "write_file")
    assert "hello.py" in json.dumps(result["content"])
    assert not server.errors


# -- MCP --------------------------------------------------------------------------------------------------------


class OpenAIEnv(Env):
    def environ(self) -> dict[str, str]:
        clean = {k: v for k, v in super().environ().items() if not k.endswith("_API_KEY")}
        return {**clean, KEY_ENV: KEY}


def mcp_env(tmp_path: Path, server: FakeServer) -> Env:
    cwd = tmp_path / "work"
    cwd.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(
        f"{model_toml(server)}\n"
        '[agents.helper]\nmodel = "gpt"\ndescription = "A helper on an OpenAI-compatible model."\nexpose_mcp = true\n'
    )
    return OpenAIEnv(tmp_path, config, f"sqlite:///{tmp_path / 'store.db'}", cwd)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_agent_tool_answers_through_the_openai_provider(tmp_path: Path, server: FakeServer, mode: str):
    server.push(
        Reply(events=tool_call_stream("call_r1", "read_file", {"path": "notes.txt"}, text=("Reading.",))),
        Reply(events=chat_text("The notes say: ", "buy milk.")),
    )
    env = mcp_env(tmp_path, server)
    (env.cwd / "notes.txt").write_text("buy milk\n")
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with connect(env, mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "agent_helper" in names
        result = await client.call_tool(
            "agent_helper", {"message": "what do my notes say?"}, progress_callback=on_progress
        )
    assert not result.is_error, result
    assert result.structured_content["status"] == "completed"
    assert result.structured_content["response"] == "The notes say: buy milk."
    assert result.content[0].text == "The notes say: buy milk."
    assert any("read_file" in m for m in progress), progress

    tool_result = assert_openai_requests(server, "call_r1", "read_file")
    assert "buy milk" in json.dumps(tool_result["content"])
    wire = [path.read_text() for path in tmp_path.glob("*.jsonl")]
    assert wire and not any(KEY in text for text in wire)  # the key went to the model server only
