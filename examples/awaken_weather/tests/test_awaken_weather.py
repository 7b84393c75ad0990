"""The example package's own test: its tools work, alone and inside an agent run."""

from __future__ import annotations

import anyio
from awaken_weather import compare, forecast

from awaken_stdio import AgentRuntime, AgentSpec, ScriptedModel


def test_forecast_converts_units() -> None:
    assert forecast("Oslo", "fahrenheit").temperature == 44.6


def test_an_agent_uses_the_tools() -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "compare", "arguments": {"cities": ["Paris", "Tokyo"]}}]},
            {"tool_calls": [{"name": "forecast", "arguments": {"city": "Atlantis"}}]},
            {"text": "Tokyo."},
        ]
    }
    runtime = AgentRuntime(
        agents=[AgentSpec(id="a", model="m")], models={"m": ScriptedModel(script)}, tools=[forecast, compare]
    )
    result = anyio.run(runtime.run_to_completion, "warmest?")

    async def messages() -> list[str]:
        loaded = await runtime.store.load_thread(result.thread_id)
        assert loaded is not None
        return [m.text for m in loaded.messages if m.role == "tool"]

    tool_texts = anyio.run(messages)
    assert result.response == "Tokyo."
    assert tool_texts[0] == "Tokyo is warmest at 24.0 °C"
    assert "no forecast for 'Atlantis'" in tool_texts[1]
