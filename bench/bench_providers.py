"""Provider overhead: our executors against the bare SDKs streaming the same response from the same local server.

Both sides talk to one :class:`FakeServer` (tests/providers/fake_servers.py) over a kept-alive connection, in
alternating rounds so drift hits both alike. Rows per provider: milliseconds per streamed turn (a 200-event answer)
and the latency from the server writing its first event to the caller receiving the first text chunk; the baseline
is the bare SDK (``create(stream=True)`` iterated, every text delta read) measured in the same run.

One more row, end to end: a real ``awaken_stdio acp`` process whose ``openai`` model points at the local server,
driven by the official ACP SDK client; the figure is the time from the server writing the first SSE event of a reply
to the client receiving the first ``session/update`` ``agent_message_chunk`` of that prompt (median of
``FIRST_CHUNK_RUNS`` prompts), against the bare SDK in this process yielding its first chunk of the same reply.
Run alone with ``.venv/bin/python -m bench providers``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from awaken_stdio.contract.inference import InferenceRequest, TextChunk
from awaken_stdio.contract.messages import Message
from tests.providers.fake_servers import DONE, FakeServer, Reply, anthropic_text, chat_chunk, chat_text, chat_usage

EVENTS = 200
TURNS = 60
ROUNDS = 5
WORDS = [f"word{i} " for i in range(EVENTS)]
REQUEST = InferenceRequest(
    model="m", messages=[Message.user("Say two hundred words.")], system="Be brief.", max_output_tokens=1024
)
_KEY = {"OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench"}
ROOT = Path(__file__).resolve().parents[1]
FIRST_CHUNK_RUNS = 100
FIRST_CHUNK_ROUNDS = 5
# The first event already carries text, so "first chunk" means the same event on every side.
SHORT_REPLY = [
    chat_chunk(role="assistant", content="word0 "),
    *(chat_chunk(content=f"word{i} ") for i in range(1, 20)),
    chat_chunk("stop"),
    chat_usage(10, 20),
    DONE,
]


async def _openai_sdk(client: Any) -> AsyncIterator[str]:
    stream = await client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say two hundred words."}],
        max_tokens=1024,
        stream=True,
        stream_options={"include_usage": True},
    )
    async with stream:
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    yield choice.delta.content


async def _anthropic_sdk(client: Any) -> AsyncIterator[str]:
    stream = await client.messages.create(
        model="claude-haiku-4-5",
        system="Be brief.",
        messages=[{"role": "user", "content": "Say two hundred words."}],
        max_tokens=1024,
        stream=True,
    )
    async with stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield event.delta.text


async def _ours(executor: Any) -> AsyncIterator[str]:
    async for chunk in executor.stream(REQUEST):
        if type(chunk) is TextChunk:
            yield chunk.text


async def _turn(server: FakeServer, texts: Callable[[], AsyncIterator[str]]) -> tuple[float, float]:
    """(seconds for the whole turn, seconds from the server's first event to the first text received)."""
    started = time.perf_counter()
    first = 0.0
    count = 0
    async for _ in texts():
        if not count:
            first = time.perf_counter() - server.first_event_at[-1]
        count += 1
    assert count == EVENTS, count
    return time.perf_counter() - started, first


async def _compare(
    name: str,
    server: FakeServer,
    bare: Callable[[], AsyncIterator[str]],
    ours: Callable[[], AsyncIterator[str]],
    close: Callable[[], Awaitable[None]],
) -> list[dict[str, Any]]:
    times: dict[str, list[tuple[float, float]]] = {"bare": [], "ours": []}
    try:
        for _ in range(3):  # warm up: imports, connection, pydantic model builds
            await _turn(server, bare)
            await _turn(server, ours)
        for _ in range(ROUNDS):
            for label, texts in (("bare", bare), ("ours", ours)):
                times[label] += [await _turn(server, texts) for _ in range(TURNS // ROUNDS)]
    finally:
        await close()
    turn = {k: statistics.median(t for t, _ in v) * 1000 for k, v in times.items()}
    first = {k: statistics.median(f for _, f in v) * 1000 for k, v in times.items()}
    note = f"{EVENTS} SSE events per turn, median of {TURNS}"
    return [
        {
            "benchmark": f"provider_{name}",
            "metric": "streamed turn",
            "value": turn["ours"],
            "unit": "ms",
            "baseline": turn["bare"],
            "note": note,
        },
        {
            "benchmark": f"provider_{name}",
            "metric": "overhead per turn",
            "value": (turn["ours"] - turn["bare"]) * 1000,
            "unit": "us",
            "note": "ours minus the bare SDK",
        },
        {
            "benchmark": f"provider_{name}",
            "metric": "server first event -> first text chunk",
            "value": first["ours"],
            "unit": "ms",
            "baseline": first["bare"],
        },
    ]


class _AcpClient:
    """Just enough of an ACP SDK client: notes when the first agent_message_chunk of a prompt arrives."""

    def __init__(self) -> None:
        self.first_chunk_at: float | None = None

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        if self.first_chunk_at is None and getattr(update, "session_update", None) == "agent_message_chunk":
            self.first_chunk_at = time.perf_counter()

    async def request_permission(self, **kw: Any) -> Any:
        from acp import RequestError

        raise RequestError.method_not_found("session/request_permission")

    async def ext_method(self, method: str, params: Any) -> Any:
        from acp import RequestError

        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        pass

    def on_connect(self, conn: Any) -> None:
        pass


async def _first_chunk_rows() -> list[dict[str, Any]]:
    """Server's first SSE event -> the ACP client's first agent_message_chunk, against the bare SDK's first chunk."""
    import openai
    from acp import spawn_agent_process, text_block
    from acp.schema import ClientCapabilities, Implementation

    times: dict[str, list[float]] = {"bare": [], "ours": []}
    with FakeServer(repeat=Reply(events=SHORT_REPLY)) as server, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(
            'default_agent = "a"\n[models.gpt]\nprovider = "openai"\nmodel = "gpt-4.1"\n'
            f'base_url = "{server.url}/v1"\napi_key_env = "AWAKEN_BENCH_KEY"\nmax_retries = 0\n'
            '[agents.a]\nmodel = "gpt"\n'
        )
        command = ["-m", "awaken_stdio", "acp", "--config", str(config), "--store", f"sqlite:///{tmp}/b.db"]
        client = _AcpClient()
        sdk = openai.AsyncOpenAI(api_key="bench", base_url=f"{server.url}/v1", max_retries=0)

        async def bare() -> float:
            stream = await sdk.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "Say twenty words."}], stream=True
            )
            first = 0.0
            async with stream:
                async for _ in stream:
                    if not first:
                        first = time.perf_counter() - server.first_event_at[-1]
            return first

        async def ours(conn: Any, session_id: str) -> float:
            client.first_chunk_at = None
            requests = len(server.requests)
            with anyio.fail_after(20):
                response = await conn.prompt(session_id=session_id, prompt=[text_block("Say twenty words.")])
            assert response.stop_reason == "end_turn", response
            assert len(server.requests) == requests + 1 and client.first_chunk_at is not None
            return client.first_chunk_at - server.first_event_at[-1]

        env = {"AWAKEN_BENCH_KEY": "bench", "PYTHONPATH": str(ROOT)}
        try:
            spawned = spawn_agent_process(
                client, sys.executable, *command, env=env, cwd=tmp, transport_kwargs={"stderr": None}
            )
            async with spawned as (conn, _):
                with anyio.fail_after(30):
                    await conn.initialize(
                        protocol_version=1,
                        client_capabilities=ClientCapabilities(),
                        client_info=Implementation(name="bench", version="0"),
                    )
                    session_id = (await conn.new_session(cwd=tmp, mcp_servers=[])).session_id
                for _ in range(5):  # warm up: imports, the kept-alive connection, pydantic model builds
                    await bare()
                    await ours(conn, session_id)
                for _ in range(FIRST_CHUNK_ROUNDS):
                    times["bare"] += [await bare() for _ in range(FIRST_CHUNK_RUNS // FIRST_CHUNK_ROUNDS)]
                    times["ours"] += [
                        await ours(conn, session_id) for _ in range(FIRST_CHUNK_RUNS // FIRST_CHUNK_ROUNDS)
                    ]
        finally:
            await sdk.close()
    ours_ms = sorted(t * 1000 for t in times["ours"])
    spread = f"p10 {ours_ms[len(ours_ms) // 10]:.1f} / p90 {ours_ms[len(ours_ms) * 9 // 10]:.1f} ms"
    return [
        {
            "benchmark": "provider_openai_acp",
            "metric": "server first event -> first session/update chunk",
            "value": statistics.median(ours_ms),
            "unit": "ms",
            "baseline": statistics.median(times["bare"]) * 1000,
            "note": f"acp process + ACP SDK client ({spread}) vs the bare SDK, median of {FIRST_CHUNK_RUNS}",
        }
    ]


async def run() -> list[dict[str, Any]]:
    import anthropic
    import openai

    from awaken_stdio.providers.anthropic import AnthropicModel
    from awaken_stdio.providers.openai import OpenAIModel

    rows: list[dict[str, Any]] = []
    with FakeServer(repeat=Reply(events=chat_text(*WORDS))) as server:
        base = f"{server.url}/v1"
        client = openai.AsyncOpenAI(api_key="bench", base_url=base, max_retries=0)
        executor = OpenAIModel("gpt-4.1", base_url=base, env=_KEY)

        async def close_openai() -> None:
            await client.close()
            await executor.aclose()

        rows += await _compare(
            "openai_chat", server, lambda: _openai_sdk(client), lambda: _ours(executor), close_openai
        )
    with FakeServer(repeat=Reply(events=anthropic_text(*WORDS))) as server:
        aclient = anthropic.AsyncAnthropic(api_key="bench", base_url=server.url, max_retries=0)
        aexecutor = AnthropicModel("claude-haiku-4-5", base_url=server.url, env=_KEY)

        async def close_anthropic() -> None:
            await aclient.close()
            await aexecutor.aclose()

        rows += await _compare(
            "anthropic", server, lambda: _anthropic_sdk(aclient), lambda: _ours(aexecutor), close_anthropic
        )
    rows += await _first_chunk_rows()
    return rows
