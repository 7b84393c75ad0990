"""The baseline of ``bench_runtime.py``'s in-memory figure: the same ten-turn scripted run on agno (the fastest peer
measured), from the ``bench`` extra.

An agno ``Agent`` with one async tool ``lookup`` and a scripted ``Model`` that answers with no network: turn ``i``
(counted, like ours, from the assistant messages so far) is the text "Step i: looking up." and one call
``lookup(key="k<i>")`` for nine turns, then "All done.". agno runs the tool calls itself (each run checks the tool
ran nine times and the answer), with no db, no storage and telemetry off (``telemetry=False`` and
``AGNO_TELEMETRY=false``), one run per session, one after another.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from agno.agent import Agent
from agno.models.base import Model
from agno.models.response import ModelResponse

TURNS = 10
_calls = [0]  # lookups executed, so a run proves agno called the tool
_sessions = itertools.count()  # a new session for every run


async def lookup(key: str) -> str:
    """Look a key up."""
    _calls[0] += 1
    return f"value of {key}"


class _Script(Model):
    """Plays turn ``i`` = the assistant messages so far: a text and one ``lookup`` call, the last turn text only."""

    def __init__(self) -> None:
        super().__init__(id="scripted", name="scripted", provider="bench")

    def _turn(self, messages: list[Any]) -> ModelResponse:
        i = sum(1 for m in messages if m.role == "assistant")
        if i >= TURNS - 1:
            return ModelResponse(role="assistant", content="All done.")
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"key": f"k{i}"})},
        }
        return ModelResponse(role="assistant", content=f"Step {i}: looking up.", tool_calls=[call])

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._turn(kwargs["messages"])

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._turn(kwargs["messages"])

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._turn(kwargs["messages"])

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self._turn(kwargs["messages"])

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response


def agent() -> Agent:
    """A new agent (no db: nothing kept between runs); telemetry off, as the env var overrides the parameter."""
    os.environ["AGNO_TELEMETRY"] = "false"
    return Agent(model=_Script(), tools=[lookup], telemetry=False)


async def rate(runner: Agent, n: int) -> float:
    """Runs per second of ``n`` runs, each in its own session, one after another (as ``bench_runtime._rate``)."""
    return (await rates(runner, n))[0]


async def rates(runner: Agent, n: int) -> tuple[float, float]:
    """Runs per second wall-clock and per CPU-second of ``n`` runs, each in its own session, one after another."""
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        before = _calls[0]
        result = await runner.arun(f"conversation {i}", session_id=f"s{next(_sessions)}")
        last = result.messages[-1] if result.messages else None
        assert _calls[0] - before == TURNS - 1 and last is not None and last.content == "All done.", result
    return n / (time.perf_counter() - started), n / (time.process_time() - cpu)
