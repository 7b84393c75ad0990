"""Which plugins an agent's runs use, and what a request transform may do to the request it is given.

As in the docs, an agent uses the plugins it lists (``AgentSpec.plugins``, the docs' ``plugin_ids``) plus the
runtime's always-active ones; only those contribute hooks, gates, transforms and tools, and a non-empty
``active_hook_filter`` narrows the contributions further.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.inference import InferenceRequest
from awaken_stdio.contract.messages import Message, TextBlock
from awaken_stdio.contract.state import StateCommand
from awaken_stdio.runtime.plugins import Phase, PhaseContext, Plugin, PluginRegistrar
from tests.runtime.helpers import FnTool, RequestLog, call, make_runtime, tool_messages, turn

pytestmark = pytest.mark.anyio


class Shout(Plugin):
    """A request transform (and a tool, and a hook) that marks every request it touches."""

    def __init__(self, name: str = "shout", *, always: bool = False) -> None:
        self.name = name
        self.always_active = always
        self.hook_runs: list[str] = []

    def register(self, registrar: PluginRegistrar) -> None:
        def transform(request: InferenceRequest, ctx: PhaseContext) -> InferenceRequest:
            request.system = f"{request.system or ''}[{self.name}]"
            return request

        async def hook(ctx: PhaseContext) -> StateCommand | None:
            self.hook_runs.append(ctx.agent.id)
            return None

        registrar.request_transform(transform)
        registrar.phase_hook(Phase.STEP_START, hook)
        registrar.register_tool(FnTool(f"{self.name}_tool"))


def two_agents(*plugins: Plugin, **other: Any) -> tuple[Any, RequestLog, RequestLog]:
    """``default`` uses ``plugins``; ``other`` (built from ``other``) lists none."""
    mine, theirs = RequestLog([turn("mine")]), RequestLog([turn("theirs")])
    runtime = make_runtime(
        mine, plugins=plugins, agents=[(AgentSpec(id="other", model="other-model", **other), theirs)]
    )
    return runtime, mine, theirs


async def test_an_inactive_plugins_transform_hooks_and_tools_never_reach_another_agents_run() -> None:
    shout = Shout()
    runtime, mine, theirs = two_agents(shout)

    await runtime.run_to_completion(RunActivation(messages=[Message.user("a")], agent_id="default"))
    await runtime.run_to_completion(RunActivation(messages=[Message.user("b")], agent_id="other"))

    assert mine.requests[0].system == "[shout]"
    assert theirs.requests[0].system is None
    assert "shout_tool" in {t["name"] for t in mine.requests[0].tools}
    assert "shout_tool" not in {t["name"] for t in theirs.requests[0].tools}
    assert shout.hook_runs == ["default"]


async def test_an_always_active_plugin_applies_to_every_agent() -> None:
    shout = Shout("everyone", always=True)
    runtime, mine, theirs = two_agents(shout)

    await runtime.run_to_completion(RunActivation(messages=[Message.user("a")], agent_id="default"))
    await runtime.run_to_completion(RunActivation(messages=[Message.user("b")], agent_id="other"))

    assert (mine.requests[0].system, theirs.requests[0].system) == ("[everyone]", "[everyone]")


async def test_the_hook_filter_narrows_transforms_and_tools_too() -> None:
    a, b = Shout("a"), Shout("b")
    runtime, mine, _ = two_agents(a, b, active_hook_filter=[])
    runtime.agents["default"] = replace(runtime.agents["default"], active_hook_filter=["b"])

    await runtime.run_to_completion(RunActivation(messages=[Message.user("a")], agent_id="default"))

    assert mine.requests[0].system == "[b]"
    assert {t["name"] for t in mine.requests[0].tools} >= {"b_tool"}
    assert "a_tool" not in {t["name"] for t in mine.requests[0].tools}
    assert (a.hook_runs, b.hook_runs) == ([], ["default"])


async def test_an_agent_listing_an_unregistered_plugin_is_a_configuration_error() -> None:
    runtime = make_runtime([turn("x")])
    runtime.add_agent(replace(runtime.agents["default"], plugins=["ghost"]))

    with pytest.raises(ConfigError, match="plugin 'ghost'"):
        await runtime.run("go")


async def test_a_transform_editing_the_request_in_place_leaves_the_stored_conversation_alone() -> None:
    class Meddle(Plugin):
        name = "meddle"

        def register(self, registrar: PluginRegistrar) -> None:
            def transform(request: InferenceRequest, ctx: PhaseContext) -> InferenceRequest:
                request.messages.append(Message.user("injected context"))
                request.messages[0] = Message(
                    role="user", content=(TextBlock(text="rewritten"),), id=request.messages[0].id
                )
                request.tools.append({"name": "ghost", "description": "", "input_schema": {}})
                for t in request.tools:
                    t["description"] = "mangled"
                return request

            registrar.request_transform(transform)

    log = RequestLog([turn("", call("ok", id="c1")), turn("done"), turn("again")])
    runtime = make_runtime(log, plugins=[Meddle()], tools=[FnTool("ok")])

    await runtime.run_to_completion(RunActivation(messages=[Message.user("hello")], thread_id="t"))
    await runtime.run_to_completion(RunActivation(messages=[Message.user("more")], thread_id="t"))

    loaded = await runtime.store.load_thread("t")
    assert loaded is not None
    assert [(m.role, m.text) for m in loaded.messages if m.role != "tool"] == [
        ("user", "hello"),
        ("assistant", ""),
        ("assistant", "done"),
        ("user", "more"),
        ("assistant", "again"),
    ]
    assert [t["description"] for t in runtime.resolve("default").tool_json] == ["The ok tool."]
    assert tool_messages(log.requests[1]) == {"c1": '{"ok": true, "args": {}}'}
    # every request starts from the stored conversation, not from the previous request's edits
    assert [m.text for m in log.requests[2].messages if m.role == "user"] == ["rewritten", "more", "injected context"]
    assert [t["description"] for t in log.requests[2].tools] == ["mangled", "mangled"]
