"""Run identity: every run knows its run, thread, parent run, parent thread, parent tool call and origin.

The identity is stored with the run (and a delegate's thread names its parent thread) and reaches hooks and tools
as ``ctx.run_identity``, so the docs' "Use Shared State" example works as written: a delegate shares a
``TeamContext`` with its parent through ``StateScope.parent_thread(parent_thread_id)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.identity import RunIdentity
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.profile import ProfileAccess, ProfileKey, StateScope
from awaken_stdio.contract.state import StateCommand
from awaken_stdio.contract.tools import ToolCallContext
from awaken_stdio.runtime.plugins import Phase, PhaseContext, Plugin, PluginRegistrar
from awaken_stdio.stores import open_store
from tests.runtime.helpers import FnTool, call, make_runtime, turn

pytestmark = pytest.mark.anyio


async def test_a_delegate_run_knows_and_stores_its_parent(tmp_path: Path) -> None:
    seen: list[tuple[str, RunIdentity | None]] = []

    async def whoami(args: dict[str, Any], ctx: ToolCallContext) -> str:
        seen.append(("tool", ctx.run_identity))
        return "noted"

    class Watch(Plugin):
        name = "watch"
        always_active = True

        def register(self, registrar: PluginRegistrar) -> None:
            async def run_start(ctx: PhaseContext) -> StateCommand | None:
                seen.append(("hook", ctx.run_identity))
                return None

            registrar.phase_hook(Phase.RUN_START, run_start)

    helper = AgentSpec(id="helper", model="helper-model")
    async with open_store(f"sqlite://{tmp_path}/awaken.db") as store:
        runtime = make_runtime(
            [turn("", call("agent_run_helper", {"prompt": "who am I?"}, id="d1")), turn("done")],
            tools=[FnTool("whoami", whoami)],
            plugins=[Watch()],
            delegates=["helper"],
            agents=[(helper, [turn("", call("whoami")), turn("a helper")])],
            store=store,
        )

        result = await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="parent", session_id="s1"))

        parent_hook, child_hook, child_tool = seen
        assert parent_hook[1] == RunIdentity(
            run_id=result.run_id, thread_id="parent", agent_id="default", origin="user", session_id="s1"
        )
        child = child_tool[1]
        assert child is not None and child == child_hook[1]
        assert (child.parent_run_id, child.parent_thread_id, child.parent_tool_call_id) == (
            result.run_id,
            "parent",
            "d1",
        )
        assert (child.agent_id, child.origin) == ("helper", "delegate") and child.thread_id != "parent"
        record = await store.load_run(child.run_id)
        assert record is not None
        assert (record.parent_run_id, record.parent_thread_id, record.parent_tool_call_id, record.origin) == (
            result.run_id,
            "parent",
            "d1",
            "delegate",
        )
        thread = await store.load_thread(child.thread_id)
        assert thread is not None and thread.thread.parent_thread_id == "parent"


# -- the docs' example: how-to/use-shared-state.md, translated ---------------------------------------------------


@dataclass
class TeamContext:
    goal: str = ""
    constraints: list[str] = field(default_factory=list)


TeamContextKey: ProfileKey[TeamContext] = ProfileKey("team_context", default=TeamContext, value_type=TeamContext)


class TeamPlugin(Plugin):
    name = "team"

    def __init__(self) -> None:
        self.read: list[TeamContext] = []

    def register(self, r: PluginRegistrar) -> None:
        r.register_profile_key(TeamContextKey)

        async def execute(ctx: PhaseContext) -> None:
            profile = ctx.profile
            assert profile is not None, "ProfileStore not configured"
            identity = ctx.run_identity
            assert identity is not None

            # Build a scope key from the current agent's parent thread
            scope = (
                StateScope.parent_thread(identity.parent_thread_id)
                if identity.parent_thread_id is not None
                else StateScope.global_()
            )

            # Read (returns TeamContext() if missing)
            team = await profile.read(TeamContextKey, scope)
            self.read.append(replace(team))  # as read, before the docs' mutation

            # Mutate and write back
            team.goal = "Ship the feature"
            await profile.write(TeamContextKey, scope, team)

        r.phase_hook(Phase.RUN_START, execute)  # type: ignore[arg-type]


async def test_delegates_share_a_team_context_through_their_parent_thread_as_in_the_docs() -> None:
    async def brief(args: dict[str, Any], ctx: ToolCallContext) -> str:
        # the parent files the team's context under its own thread: its delegates' parent thread
        assert ctx.profile is not None
        team = TeamContext("Plan the release", ["no Fridays"])
        await ctx.profile.write(TeamContextKey, StateScope.parent_thread(ctx.thread_id), team)
        return "briefed"

    team = TeamPlugin()
    worker = AgentSpec(id="worker", model="worker-model", plugins=["team"])
    runtime = make_runtime(
        [turn("", call("brief"), call("agent_run_worker", {"prompt": "work"})), turn("done")],
        tools=[FnTool("brief", brief)],
        plugins=[team],
        delegates=["worker"],
        agents=[(worker, [turn("working")])],
    )
    runtime.agents["default"].plugins = ["team"]

    await runtime.run_to_completion(RunActivation(messages=[Message.user("go")], thread_id="lead"))

    root, delegate = team.read
    assert root == TeamContext()  # the root run has no parent: the docs' code falls back to ``global``
    assert delegate == TeamContext("Plan the release", ["no Fridays"])  # the parent's, through parent_thread
    shared = await ProfileAccess(runtime.store, [TeamContextKey]).read(TeamContextKey, StateScope.parent_thread("lead"))
    assert shared == TeamContext("Ship the feature", ["no Fridays"])  # the delegate's write, seen by the parent
