"""A model turn answered from outside the process (``mcp_sampling`` in a 2026-07-28 round), in-process: the run waits
durably with nothing to decide, and a resume without decisions infers again, now with the answer for that request."""

from __future__ import annotations

import pytest

from awaken_stdio import AgentRuntime, AgentSpec, tool
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.messages import Message
from awaken_stdio.protocols.mcp.channel import CURRENT_ROUND, ClientModel, Round, digest
from awaken_stdio.providers.mcp_sampling import McpSamplingModel

pytestmark = [pytest.mark.anyio]
DONE: list[str] = []
HERE = RunActivation(env=RunEnvironment(sampling=ClientModel(None, lambda: None)))  # the client's model, rounds only


@tool(read_only=True)
def note(text: str) -> str:
    """Note something."""
    DONE.append(text)
    return f"noted {text}"


def answer(*content: dict[str, object], stop: str) -> dict[str, object]:
    return {"role": "assistant", "content": list(content), "model": "host", "stopReason": stop}


async def test_each_turn_waits_in_the_store_and_a_resume_brings_the_answer() -> None:
    DONE.clear()
    runtime = AgentRuntime(agents=[AgentSpec(id="a", model="m", tools=["note"])], models={"m": McpSamplingModel()},
                           tools=[note])  # fmt: skip
    model_round = Round(sampling={"tools": {}})
    token = CURRENT_ROUND.set(model_round)
    try:
        await _three_turns(runtime, model_round)
    finally:
        CURRENT_ROUND.reset(token)


async def _three_turns(runtime: AgentRuntime, model_round: Round) -> None:
    first = await runtime.run_to_completion(RunActivation(messages=[Message.user("Note hi.")], env=HERE.env))
    assert first.status == "waiting" and first.pending == [] and model_round.asked is not None
    stored = await runtime.store.load_run(first.run_id)
    assert stored is not None and stored.status == "waiting" and stored.waiting is not None
    assert stored.waiting.reason == "external_event" and stored.waiting.tickets == ()

    use = {"type": "tool_use", "id": "u1", "name": "note", "input": {"text": "hi"}}
    model_round.answers["stale"] = answer({"type": "text", "text": "not this one"}, stop="endTurn")
    model_round.answers[digest(model_round.asked)] = answer(use, stop="toolUse")
    second = await runtime.resume(first.run_id, [], context=HERE)
    assert second.run_id == first.run_id and second.status == "waiting" and DONE == ["hi"]
    last = model_round.asked["messages"][-1]["content"][0]
    assert last["type"] == "tool_result" and last["toolUseId"] == "u1"

    model_round.answers[digest(model_round.asked)] = answer({"type": "text", "text": "Noted."}, stop="endTurn")
    third = await runtime.resume(first.run_id, [], context=HERE)
    assert third.status == "completed" and third.response == "Noted." and DONE == ["hi"]
