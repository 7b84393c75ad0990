"""The permission plugin: rule precedence, defaults, modes, remembered answers, the tools offered to the model, and
the ask -> approve/reject round trip through ``AgentRuntime``."""

from __future__ import annotations

from typing import Any

import pytest

from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.environment import ModeRef, RunEnvironment
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import PermissionGrant
from awaken_stdio.contract.suspension import PERMISSION_ACTION, ToolCallResume
from awaken_stdio.contract.tools import ToolDescriptor
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.permission import (
    GLOBAL_WORKSPACE,
    PermissionMode,
    PermissionPlugin,
    PermissionPolicy,
    remembered_scopes,
    workspace_key,
)
from awaken_stdio.runtime.plugins import Phase, PhaseContext
from awaken_stdio.runtime.state_store import StateStore
from awaken_stdio.stores.memory import MemoryStore
from tests.runtime.helpers import FnTool, RequestLog, call, make_runtime, tool_messages, turn

pytestmark = pytest.mark.anyio

WS = RunActivation(env=RunEnvironment(cwd="/ws"))  # where a resume runs

READ = ToolDescriptor(name="read_file", kind="read", read_only=True)
WRITE = ToolDescriptor(name="write_file", kind="edit")
CMD = ToolDescriptor(name="run_command", kind="execute")
MCP_READ = ToolDescriptor(name="gh__get_issue", kind="read", read_only=True, metadata={"mcp_server": "gh"})


def policy(*rules: tuple[str, str], default: str | None = None) -> PermissionPolicy:
    return PermissionPolicy.from_agent(AgentSpec(id="a", sections={"permission": section(*rules, default=default)}))


def section(*rules: tuple[str, str], default: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"rules": [{"tool": t, "behavior": b} for t, b in rules]}
    if default is not None:
        out["default"] = default
    return out


def git(command: str) -> dict[str, str]:
    return {"command": command}


# -- rule choice -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ([("run_command(git push*)", "ask"), ("run_command(git *)", "allow"), ("run_*", "deny")], "deny"),
        ([("run_*", "deny"), ("run_command(git push origin main)", "allow")], "deny"),  # specificity cannot beat deny
        ([("run_command(git push*)", "ask"), ("run_*", "allow")], "allow"),  # allow beats a more specific ask
        ([("run_command(git push*)", "ask")], "ask"),
        ([("run_command(npm *)", "deny")], "ask"),  # no match: the default
    ],
)
def test_deny_beats_allow_beats_ask_then_specificity(rules: list[tuple[str, str]], expected: str) -> None:
    assert policy(*rules).decide("run_command", git("git push origin main"), CMD).behavior == expected


def test_the_most_specific_matching_rule_decides() -> None:
    p = policy(("/run.*/", "allow"), ("run_*", "allow"), ("run_command(git *)", "allow"), ("run_command", "allow"))
    decision = p.decide("run_command", git("git log"), CMD)
    assert decision.rule is not None and decision.rule.pattern.text == "run_command(git *)"


@pytest.mark.parametrize(("default", "expected"), [("deny", "deny"), ("allow", "allow"), ("ask", "ask")])
def test_with_no_matching_rule_the_agent_default_applies_even_to_read_only_tools(default: str, expected: str) -> None:
    p = policy(("other", "allow"), default=default)
    assert p.decide("read_file", {"path": "a"}, READ).behavior == expected
    assert p.decide("write_file", {"path": "a"}, WRITE).behavior == expected


@pytest.mark.parametrize(
    ("descriptor", "expected"),
    [(READ, "allow"), (WRITE, "ask"), (CMD, "ask"), (MCP_READ, "ask"), (None, "ask")],
)
def test_without_a_default_only_trusted_read_only_tools_are_allowed(
    descriptor: ToolDescriptor | None, expected: str
) -> None:
    name = descriptor.name if descriptor else "unknown"
    assert policy().decide(name, {}, descriptor).behavior == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status", "allow"),
        ("git status && git log", "allow"),
        ("git status && curl x | sh", "ask"),  # an allow must cover every segment
        ("ls; rm -rf x", "deny"),  # a deny needs only one
        ("echo $(rm -rf x)", "deny"),
    ],
)
def test_a_command_is_judged_segment_by_segment(command: str, expected: str) -> None:
    p = policy(("run_command(git *)", "allow"), ("run_command(ls*)", "allow"), ("run_command(rm *)", "deny"))
    assert p.decide("run_command", git(command), CMD).behavior == expected


def test_path_arguments_are_normalised_before_matching() -> None:
    p = policy(("write_file(.env)", "deny"), ("write_file", "allow"))
    assert p.decide("write_file", {"path": "./src/../.env"}, WRITE).behavior == "deny"
    assert p.decide("write_file", {"path": "src/a.py"}, WRITE).behavior == "allow"


@pytest.mark.parametrize("section_", [{"default": "maybe"}, {"rules": [{"tool": "x", "behavior": "yes"}]}])
def test_invalid_sections_are_config_errors(section_: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="not allow, ask or deny"):
        PermissionPolicy.from_agent(AgentSpec(id="a", sections={"permission": section_}))


# -- modes -----------------------------------------------------------------------------------------------------

MODE_TABLE: list[tuple[PermissionMode, str, str, str]] = [
    # mode, write_file, run_command, write_file with a deny rule
    ("default", "ask", "ask", "deny"),
    ("accept_edits", "allow", "ask", "deny"),
    ("bypass", "allow", "allow", "deny"),
]


@pytest.mark.parametrize(("mode", "write", "command", "denied"), MODE_TABLE)
def test_modes_lift_asks_but_never_denies(mode: PermissionMode, write: str, command: str, denied: str) -> None:
    assert policy().decide("write_file", {"path": "a"}, WRITE, mode).behavior == write
    assert policy().decide("run_command", git("make"), CMD, mode).behavior == command
    assert policy(("write_file", "deny")).decide("write_file", {"path": "a"}, WRITE, mode).behavior == denied


def test_accept_edits_also_lifts_an_explicit_ask_rule_for_edits() -> None:
    p = policy(("write_file", "ask"), ("run_command", "ask"))
    assert p.decide("write_file", {"path": "a"}, WRITE, "accept_edits").behavior == "allow"
    assert p.decide("run_command", git("ls"), CMD, "accept_edits").behavior == "ask"


# -- remembered answers (pure) ---------------------------------------------------------------------------------


def grant(tool: str, behavior: Any, pattern: str | None = None, workspace: str = "/ws", **kw: Any) -> PermissionGrant:
    return PermissionGrant(
        grant_id=f"g_{tool}_{behavior}_{pattern}",
        workspace=workspace,
        tool=tool,
        behavior=behavior,
        pattern=pattern,
        **kw,
    )


@pytest.mark.parametrize(
    ("rules", "grants", "expected"),
    [
        ([("write_file", "deny")], [grant("write_file", "allow")], "deny"),  # configured deny > remembered allow
        ([("write_file", "allow")], [grant("write_file", "deny")], "deny"),  # remembered deny > configured allow
        ([("write_file", "ask")], [grant("write_file", "allow")], "allow"),  # remembered allow > configured ask
        ([], [grant("write_file", "allow", "src/*")], "ask"),  # the grant's argument part does not match
    ],
)
def test_grants_act_as_rules_after_the_configured_ones(
    rules: list[tuple[str, str]], grants: list[PermissionGrant], expected: str
) -> None:
    decision = policy(*rules).with_grants(grants).decide("write_file", {"path": "a.txt"}, WRITE)
    assert decision.behavior == expected


def test_a_configured_rule_is_reported_before_an_equal_remembered_one() -> None:
    decision = policy(("write_file", "deny")).with_grants([grant("write_file", "deny")]).decide("write_file", {}, WRITE)
    assert decision.rule is not None and not decision.rule.remembered


@pytest.mark.parametrize(
    ("tool", "args", "scopes"),
    [
        ("write_file", {"path": "a"}, [("write_file", None)]),
        ("gh__create_issue", {"title": "x"}, [("gh__create_issue", None)]),
        ("run_command", git("git push origin main"), [("run_command", "git *")]),
        ("run_command", git("cd x && make && cd y"), [("run_command", "cd *"), ("run_command", "make *")]),
        ("run_command", git("FOO=1 make"), [("run_command", "FOO=1 make")]),  # never "FOO=1 *"
        ("run_command", git("rm* x"), [("run_command", "rm[*] *")]),  # wildcards in a program are literal
        ("run_command", {}, []),
    ],
)
def test_what_an_always_answer_remembers(tool: str, args: dict[str, Any], scopes: list[tuple[str, str | None]]):
    assert remembered_scopes(tool, args) == scopes


def test_workspace_keys() -> None:
    assert workspace_key("/ws/a/../b/") == "/ws/b"
    assert workspace_key(None) == workspace_key("") == GLOBAL_WORKSPACE


# -- end to end through AgentRuntime ---------------------------------------------------------------------------


def tool(descriptor: ToolDescriptor) -> FnTool:
    t = FnTool(descriptor.name)
    t.descriptor = descriptor
    return t


def one_call(name: str, args: dict[str, Any], call_id: str = "c1") -> list[dict[str, Any]]:
    """A model that makes one call, then answers "done" (per thread: each new thread starts over)."""
    return [turn("", call(name, args, call_id)), turn("done")]


def runtime(
    turns: Any,
    *tools: FnTool,
    store: MemoryStore,
    rules: tuple[tuple[str, str], ...] = (),
    default: str | None = None,
    **plugin: Any,
) -> AgentRuntime:
    return make_runtime(
        turns,
        tools=tools,
        plugins=[PermissionPlugin(store, **plugin)],
        store=store,
        sections={"permission": section(*rules, default=default)},
    )


async def start(rt: AgentRuntime, thread: str, cwd: str | None = "/ws", mode: str | None = None) -> AgentRunResult:
    env = RunEnvironment(cwd=cwd, mode=ModeRef(mode or "default"))
    return await rt.run(RunActivation(messages=[Message.user("go")], thread_id=thread, env=env))


async def test_ask_suspends_and_an_always_approval_runs_the_call_once_and_is_remembered() -> None:
    store = MemoryStore()
    cmd = tool(CMD)
    turns = [
        turn("", call("run_command", git("git push origin main"), "c1")),
        turn("pushed"),
        turn("", call("run_command", git("git status"), "c2")),
        turn("clean"),
    ]
    rt = runtime(turns, cmd, store=store)

    result = await start(rt, "t")
    assert result.status == "waiting" and cmd.calls == []
    (ticket,) = result.pending
    assert (ticket.ticket_id, ticket.tool_call_id, ticket.reason) == ("perm_c1", "c1", PERMISSION_ACTION)
    assert ticket.message == "Permission required for tool 'run_command'"

    resumed = await rt.resume(result.run_id, [("perm_c1", ToolCallResume.approve(always=True))], context=WS)
    assert (resumed.status, resumed.response) == ("completed", "pushed")
    assert cmd.calls == [git("git push origin main")]
    (remembered,) = await store.list_grants("/ws")
    assert (remembered.tool, remembered.pattern, remembered.behavior) == ("run_command", "git *", "allow")

    again = await start(rt, "t")  # the same thread, a later call of the same program: no question
    assert (again.status, again.response) == ("completed", "clean")
    assert cmd.calls[-1] == git("git status")

    fresh = runtime(one_call("run_command", git("git log")), tool(CMD), store=store)  # a new process, same store
    assert (await start(fresh, "t2")).status == "completed"
    other_program = runtime(one_call("run_command", git("rm -rf build")), tool(CMD), store=store)
    assert (await start(other_program, "t3")).status == "waiting"


async def test_a_call_id_approves_too_and_once_answers_are_not_remembered() -> None:
    store = MemoryStore()
    write = tool(WRITE)
    rt = runtime(one_call("write_file", {"path": "a"}), write, store=store)
    result = await start(rt, "t")
    resumed = await rt.resume(result.run_id, [("c1", ToolCallResume.approve())], context=WS)
    assert resumed.status == "completed" and len(write.calls) == 1
    assert await store.list_grants("/ws") == []
    assert (await start(runtime(one_call("write_file", {"path": "a"}), write, store=store), "t2")).status == "waiting"


async def test_reject_once_fails_the_call_and_the_model_continues() -> None:
    store = MemoryStore()
    write = tool(WRITE)
    log = RequestLog(one_call("write_file", {"path": "a"}))
    rt = runtime(log, write, store=store)
    result = await start(rt, "t")

    resumed = await rt.resume(result.run_id, [("perm_c1", ToolCallResume.reject("not now"))], context=WS)

    assert (resumed.status, resumed.response, write.calls) == ("completed", "done", [])
    assert tool_messages(log.requests[-1])["c1"] == "The user rejected the call to 'write_file': not now"
    assert await store.list_grants("/ws") == []


async def test_a_remembered_reject_blocks_later_calls() -> None:
    store = MemoryStore()
    write = tool(WRITE)
    result = await start(runtime(one_call("write_file", {"path": "a"}), write, store=store), "t")
    rt = runtime(one_call("write_file", {"path": "a"}), write, store=store)
    await rt.resume(result.run_id, [("perm_c1", ToolCallResume.reject(always=True))], context=WS)

    later = await start(rt, "t2")

    assert later.termination == TerminationReason.blocked("Tool 'write_file' denied by permission rules")
    assert write.calls == []
    assert [(g.tool, g.pattern, g.behavior) for g in await store.list_grants("/ws")] == [("write_file", None, "deny")]


async def test_grants_are_per_workspace_and_runs_without_cwd_share_the_global_one() -> None:
    store = MemoryStore()
    await store.add_grant(grant("write_file", "allow", workspace="/ws/a"))
    await store.add_grant(grant("run_command", "allow", workspace=GLOBAL_WORKSPACE))

    def status(name: str, args: dict[str, Any], descriptor: ToolDescriptor) -> Any:
        return runtime(one_call(name, args), tool(descriptor), store=store)

    assert (await start(status("write_file", {"path": "x"}, WRITE), "t1", cwd="/ws/a/")).status == "completed"
    assert (await start(status("write_file", {"path": "x"}, WRITE), "t2", cwd="/ws/b")).status == "waiting"
    assert (await start(status("write_file", {"path": "x"}, WRITE), "t3", cwd=None)).status == "waiting"
    assert (await start(status("run_command", git("ls"), CMD), "t4", cwd=None)).status == "completed"
    assert (await start(status("run_command", git("ls"), CMD), "t5", cwd="/ws/a")).status == "waiting"


async def test_expired_grants_are_ignored_and_remember_for_s_sets_the_expiry() -> None:
    store = MemoryStore()
    await store.add_grant(grant("write_file", "allow", expires_at=now_ms() - 1))
    rt = runtime(one_call("write_file", {"path": "a"}), tool(WRITE), store=store, remember_for_s=60)

    result = await start(rt, "t")
    assert result.status == "waiting"

    before = now_ms()
    await rt.resume(result.run_id, [("perm_c1", ToolCallResume.approve(always=True))], context=WS)
    (fresh,) = await store.list_grants("/ws")
    assert fresh.expires_at is not None and before + 59_000 <= fresh.expires_at <= now_ms() + 60_000
    assert await store.list_grants("/ws", now=fresh.expires_at) == []


async def test_a_repeated_decision_leaves_one_grant() -> None:
    store = MemoryStore()
    plugin = PermissionPlugin(store)
    ctx = PhaseContext(
        phase=Phase.TOOL_GATE,
        snapshot=StateStore().snapshot(),
        thread_id="t",
        run_id="r",
        agent=AgentSpec(id="a"),
        messages=[],
        tool_name="write_file",
        tool_call_id="c1",
        tool_args={"path": "a"},
        env=RunEnvironment(cwd="/ws"),
    )
    decision = ToolCallResume.approve(always=True)
    await plugin.on_decision(ctx, decision)
    await plugin.on_decision(ctx, decision)  # delivered twice
    await plugin.on_decision(ctx, ToolCallResume.approve(always=True))  # answered twice
    assert len(await store.list_grants("/ws")) == 1


async def test_always_denied_tools_are_not_offered_and_their_calls_are_blocked() -> None:
    store = MemoryStore()
    write, read, cmd = tool(WRITE), tool(READ), tool(CMD)
    log = RequestLog([turn("", call("write_file", {"path": "a"}, "c1")), turn("done")])
    rules = (("write_*", "deny"), ("run_command(rm *)", "deny"))
    rt = runtime(log, read, write, cmd, store=store, rules=rules)

    result = await start(rt, "t")

    offered = [t["name"] for t in log.requests[0].tools]
    assert offered == ["read_file", "run_command"]  # a deny with an argument part leaves the tool offered
    assert result.termination == TerminationReason.blocked("Tool 'write_file' denied by permission rules")
    assert write.calls == []


async def test_plan_mode_offers_read_only_tools_and_refuses_other_calls_without_ending_the_run() -> None:
    store = MemoryStore()
    write, read, cmd = tool(WRITE), tool(READ), tool(CMD)
    log = RequestLog(
        [turn("", call("write_file", {"path": "a"}, "c1"), call("read_file", {"path": "a"}, "c2")), turn("ok")]
    )
    rt = runtime(log, read, write, cmd, store=store, rules=(("write_file", "allow"),))

    result = await start(rt, "t", mode="plan")

    assert [t["name"] for t in log.requests[0].tools] == ["read_file"]
    assert (result.status, result.response) == ("completed", "ok")
    assert write.calls == [] and read.calls == [{"path": "a"}]
    assert "not available in plan mode" in tool_messages(log.requests[1])["c1"]


@pytest.mark.parametrize(("mode", "write", "command", "denied"), MODE_TABLE)
async def test_modes_through_a_run(mode: PermissionMode, write: str, command: str, denied: str) -> None:
    store = MemoryStore()

    async def behavior(thread: str, descriptor: ToolDescriptor, args: dict[str, Any], rules: Any = ()) -> str:
        rt = runtime(one_call(descriptor.name, args), tool(descriptor), store=store, rules=rules)
        result = await start(rt, thread, mode=mode)
        return {"blocked": "deny", "suspended": "ask"}.get(result.termination.type, "allow")

    assert await behavior("t1", WRITE, {"path": "a"}) == write
    assert await behavior("t2", CMD, git("make")) == command
    assert await behavior("t3", WRITE, {"path": "a"}, (("write_file", "deny"),)) == denied


async def test_an_unknown_mode_fails_the_run() -> None:
    rt = runtime(one_call("read_file", {"path": "a"}), tool(READ), store=MemoryStore())
    with pytest.raises(ConfigError, match="unknown permission mode 'yolo'"):
        await start(rt, "t", mode="yolo")
