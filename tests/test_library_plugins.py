"""A Python developer's plugins do what they say: through the public API only, as the README shows them.

A plugin no agent names is refused before anything runs (it would do nothing, silently); config agents name plugins
by id; a change to an agent's plugins applies to its next run; errors about keys name the plugin and the agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from awaken_stdio import (
    AgentEvent,
    AgentRuntime,
    AgentSpec,
    Block,
    ConfigError,
    Message,
    Phase,
    PhaseContext,
    Plugin,
    PluginRegistrar,
    RunActivation,
    ScriptedModel,
    StateCommand,
    StateError,
    StateKey,
    ToolOutput,
    ToolResult,
    build_runtime,
    load_config,
    tool,
)

pytestmark = pytest.mark.anyio

CALLS: StateKey[int, int] = StateKey(
    "my.tool_calls", default=0, apply=lambda n, inc: n + inc, merge="commutative", scope="thread"
)
ran: list[str] = []


@tool
def shout(text: str) -> str:
    """Shout the text."""
    ran.append(text)
    return text.upper()


@tool
def count_myself(text: str) -> ToolOutput:
    """Say the text, counting the call in a plugin's state key."""
    ran.append(text)
    return ToolOutput(result=ToolResult.success("count_myself", text), command=StateCommand().update(CALLS, 1))


class Gate(Plugin):
    name = "gate"

    def register(self, r: PluginRegistrar) -> None:
        async def refuse(ctx: PhaseContext) -> Block:
            return Block(reason=f"{ctx.tool_name} is not allowed")

        r.tool_gate(refuse)


class CountCalls(Plugin):
    name = "count_calls"

    def register(self, r: PluginRegistrar) -> None:
        r.register_key(CALLS)

        async def after_tool(ctx: PhaseContext) -> StateCommand:
            return StateCommand().update(CALLS, 1)

        r.phase_hook(Phase.AFTER_TOOL_EXECUTE, after_tool)


def calls(tool_name: str = "shout", rounds: int = 1) -> ScriptedModel:
    turn = {"tool_calls": [{"name": tool_name, "arguments": {"text": "hi"}}]}
    return ScriptedModel({"turns": [turn] * rounds + [{"text": "done"}] * 4})


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


async def states(runtime: AgentRuntime, activation: RunActivation | str) -> tuple[Any, dict[str, Any]]:
    """The run's result and the last state snapshot it streamed."""
    seen: list[dict[str, Any]] = []

    async def sink(event: AgentEvent) -> None:
        if event.event_type == "state_snapshot":
            seen.append(event.to_json()["snapshot"]["extensions"])

    return await runtime.run(activation, sink), seen[-1]


def test_a_plugin_no_agent_names_is_refused_when_the_runtime_is_built() -> None:
    with pytest.raises(ConfigError, match=r"plugin 'gate' is registered but no agent uses it.*plugins=\['gate'\]"):
        AgentRuntime(agents=[AgentSpec(id="calc", model="m")], models={"m": calls()}, tools=[shout], plugins=[Gate()])


async def test_a_plugin_added_later_that_no_agent_names_fails_the_run_before_any_tool_runs() -> None:
    runtime = AgentRuntime(agents=[AgentSpec(id="calc", model="m")], models={"m": calls()}, tools=[shout])
    runtime.add_plugin(Gate())

    with pytest.raises(ConfigError, match="plugin 'gate' is registered but no agent uses it"):
        await runtime.run_to_completion("go")
    assert ran == []


async def test_a_named_gate_blocks_and_a_named_key_counts() -> None:
    agent = AgentSpec(id="calc", model="m", plugins=["gate"])
    runtime = AgentRuntime(agents=[agent], models={"m": calls()}, tools=[shout], plugins=[Gate()])

    result = await runtime.run_to_completion("go")

    assert (result.status, result.status_reason, ran) == ("failed", "blocked: shout is not allowed", [])


async def test_a_config_agent_names_a_plugin_registered_from_python(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(
        '{"turns": [{"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]}, {"text": "done"}]}'
    )
    config = tmp_path / "config.toml"
    config.write_text(
        '[models.m]\nprovider = "scripted"\nscript = "script.json"\n\n'
        '[agents.coder]\nmodel = "m"\nplugins = ["count_calls"]\n'
    )
    runtime = build_runtime(load_config(config))
    runtime.add_tool(shout)
    runtime.add_plugin(CountCalls())

    result, state = await states(runtime, "go")

    assert (result.status, ran) == ("completed", ["hi"])
    assert state["my.tool_calls"] == 1


async def test_a_config_agent_naming_a_plugin_nobody_registered_fails_naming_both(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[models.m]\nprovider = "openai"\nmodel = "x"\n\n[agents.coder]\nmodel = "m"\nplugins = ["nope"]\n'
    )
    runtime = build_runtime(load_config(config))

    with pytest.raises(ConfigError, match=r"agent 'coder' uses plugin 'nope', which is not registered"):
        runtime.check()


async def test_changing_an_agents_plugins_after_a_run_applies_to_the_next_run() -> None:
    agent = AgentSpec(id="calc", model="m")
    runtime = AgentRuntime(agents=[agent], models={"m": calls()}, tools=[shout])
    first = await runtime.run_to_completion("go")

    runtime.add_plugin(Gate())
    agent.plugins.append("gate")  # an AgentSpec is mutable: the next run sees the change
    second = await runtime.run_to_completion("go")

    agent.plugins.remove("gate")  # the gate is now unused: refused, not silently kept or dropped
    with pytest.raises(ConfigError, match="plugin 'gate' is registered but no agent uses it"):
        await runtime.run_to_completion("go")
    runtime.remove_plugin("gate")
    third = await runtime.run_to_completion("go")

    assert [r.status for r in (first, second, third)] == ["completed", "failed", "completed"]
    assert second.status_reason == "blocked: shout is not allowed"
    assert ran == ["hi", "hi"]


async def test_a_key_of_a_plugin_the_agent_does_not_use_names_the_plugin_and_the_agent() -> None:
    agents = [AgentSpec(id="calc", model="m"), AgentSpec(id="counter", model="m", plugins=["count_calls"])]
    runtime = AgentRuntime(
        agents=agents, models={"m": calls("count_myself")}, tools=[count_myself], plugins=[CountCalls()]
    )

    with pytest.raises(StateError, match=r"my\.tool_calls \(plugin 'count_calls' registers it, and agent 'calc' "):
        await runtime.run_to_completion(RunActivation(messages=[Message.user("go")], agent_id="calc"))


async def test_two_plugins_of_an_agent_registering_one_key_are_named_with_the_agent() -> None:
    class CountToo(CountCalls):
        name = "count_too"

    agent = AgentSpec(id="calc", model="m", plugins=["count_calls", "count_too"])
    runtime = AgentRuntime(agents=[agent], models={"m": calls()}, tools=[shout], plugins=[CountCalls(), CountToo()])

    with pytest.raises(StateError, match="plugins 'count_calls' and 'count_too' both register it, for agent 'calc'"):
        runtime.check()
    with pytest.raises(StateError, match="both register it"):
        await runtime.run_to_completion("go")
    assert ran == []


def test_a_plugin_name_is_its_id_and_is_registered_once() -> None:
    runtime = AgentRuntime(plugins=[Gate()])
    with pytest.raises(ConfigError, match="a plugin named 'gate' is already registered"):
        runtime.add_plugin(Gate())


async def test_the_lifecycle_state_spells_reasons_as_the_rust_runtime_and_the_result_as_its_backend() -> None:
    agent = AgentSpec(id="calc", model="m", max_rounds=1)
    runtime = AgentRuntime(agents=[agent], models={"m": calls(rounds=3)}, tools=[shout])

    result, state = await states(runtime, "go")

    assert state["__runtime.run_lifecycle"]["status_reason"] == "stopped:max_rounds"
    assert (result.status, result.status_reason) == ("failed", "stopped: max_rounds")
