"""``after_last: repeat_last``: a script that keeps answering past its end (the chat demo's closing words)."""

from __future__ import annotations

import pytest

from awaken_stdio.contract.inference import InferenceRequest, StreamAccumulator, StreamResult
from awaken_stdio.contract.messages import Message
from awaken_stdio.providers.scripted import ScriptedModel

pytestmark = pytest.mark.anyio


async def answer_after(model: ScriptedModel, assistant_turns: int) -> StreamResult:
    """The model's answer to a conversation in which it already answered ``assistant_turns`` times."""
    messages = [Message.user("start")]
    for i in range(assistant_turns):
        messages += [Message.assistant(f"answer {i}"), Message.user(f"next {i}")]
    acc = StreamAccumulator()
    async for chunk in model.stream(InferenceRequest(model="scripted", messages=messages)):
        acc.add(chunk)
    return acc.result()


async def test_repeat_last_plays_the_last_turn_for_every_call_past_the_end() -> None:
    model = ScriptedModel({"turns": [{"text": "zero"}, {"text": "one"}], "after_last": "repeat_last"})
    assert [(await answer_after(model, n)).text for n in range(5)] == ["zero", "one", "one", "one", "one"]


async def test_repeat_last_replays_tool_calls_with_their_ids() -> None:
    model = ScriptedModel({"turns": [{"tool_calls": [{"name": "t", "id": "c1"}]}], "after_last": "repeat_last"})
    assert [call.id for call in (await answer_after(model, 3)).tool_calls] == ["c1"]
