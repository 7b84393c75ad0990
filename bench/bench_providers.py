"""Provider overhead: our executors against the bare SDKs streaming the same response from the same local server.

Both sides talk to one :class:`FakeServer` (tests/providers/fake_servers.py) over a kept-alive connection, in
alternating rounds so drift hits both alike. Rows per provider: milliseconds per streamed turn (a 200-event answer)
and the latency from the server writing its first event to the caller receiving the first text chunk; the baseline
is the bare SDK (``create(stream=True)`` iterated, every text delta read) measured in the same run.
Run alone with ``.venv/bin/python -m bench providers``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from awaken_stdio.contract.inference import InferenceRequest, TextChunk
from awaken_stdio.contract.messages import Message
from tests.providers.fake_servers import FakeServer, Reply, anthropic_text, chat_text

EVENTS = 200
TURNS = 60
ROUNDS = 5
WORDS = [f"word{i} " for i in range(EVENTS)]
REQUEST = InferenceRequest("m", [Message.user("Say two hundred words.")], system="Be brief.", max_output_tokens=1024)
_KEY = {"OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench"}


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
    return rows
