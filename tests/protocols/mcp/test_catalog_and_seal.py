"""Unit checks of the published names, cursors and the sealed ``requestState``."""

from __future__ import annotations

import re
import time

import pytest

from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor
from awaken_stdio.protocols.mcp.approvals import InvalidState, StateSeal, decision_from_answer
from awaken_stdio.protocols.mcp.catalog import Catalog, InvalidCursor


class Named(Tool):
    def __init__(self, name: str, **hints: bool) -> None:
        self.descriptor = ToolDescriptor(name=name, **hints)

    async def execute(self, args: dict, ctx: ToolCallContext) -> str:
        return "ok"


def catalog(*names: str) -> Catalog:
    agents = {"coder": AgentSpec(id="coder", expose_mcp=True), "hidden": AgentSpec(id="hidden")}
    return Catalog.build({n: Named(n) for n in names}, agents)


def test_names_are_safe_short_unique_and_map_back() -> None:
    long = "server__" + "x" * 70
    cat = catalog("read_file", "weird name!", long, "resume_run", "agent_coder")
    names = [e.name for e in cat.entries]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", n) for n in names)
    targets = {e.target: e.name for e in cat.entries if e.kind == "tool"}
    assert targets["weird name!"] == "weird_name_"
    assert len(targets[long]) == 40 and targets[long].startswith("server__xxx")
    assert targets["resume_run"] != "resume_run" and cat.by_name["resume_run"].kind == "resume"  # ours wins
    assert cat.by_name["agent_coder"].kind == "agent" and targets["agent_coder"] != "agent_coder"
    assert "agent_hidden" not in cat.by_name


def test_pages_walk_every_tool_once() -> None:
    cat = catalog(*(f"t{i:02}" for i in range(7)))
    seen, cursor = [], None
    while True:
        page, cursor = cat.page(cursor, 3)
        seen += [t["name"] for t in page]
        if cursor is None:
            break
    assert seen == [e.name for e in cat.entries]
    assert cat.page("", 3)[0] == cat.page(None, 3)[0]
    for bad in ("garbage!", "Zm9v", "\u00e9"):
        with pytest.raises(InvalidCursor):
            cat.page(bad, 3)


def test_seal_binds_call_and_expires() -> None:
    seal = StateSeal(b"k" * 32)
    token = seal.seal("agent_x", {"message": "m"}, {"run": "r1"})
    assert seal.unseal(token, "agent_x", {"message": "m"}) == {"run": "r1"}
    for tool, args, tok in [("agent_y", {"message": "m"}, token), ("agent_x", {"message": "n"}, token),
                            ("agent_x", {"message": "m"}, token[:-3] + "abc"), ("agent_x", {}, "nodot")]:  # fmt: skip
        with pytest.raises(InvalidState):
            seal.unseal(tok, tool, args)
    with pytest.raises(InvalidState):
        StateSeal(b"other" * 8).unseal(token, "agent_x", {"message": "m"})
    expired = StateSeal(b"k" * 32, ttl_s=-1).seal("agent_x", None, {})
    time.sleep(0.01)
    with pytest.raises(InvalidState):
        seal.unseal(expired, "agent_x", None)


@pytest.mark.parametrize(
    ("answer", "action", "policy"),
    [
        ({"action": "accept", "content": {"decision": "allow_once"}}, "resume", "allow_once"),
        ({"action": "accept", "content": {"decision": "allow_always"}}, "resume", "allow_always"),
        ({"action": "accept", "content": {"decision": "reject_always"}}, "cancel", "reject_always"),
        ({"action": "decline"}, "cancel", "reject_once"),
        ({"action": "cancel"}, "cancel", "reject_once"),
        (None, "cancel", "reject_once"),
    ],
)
def test_decisions(answer: object, action: str, policy: str) -> None:
    decision = decision_from_answer(answer)
    assert decision.action == action and decision.result["policy"] == policy


def test_a_call_asked_again_after_a_crash_says_its_outcome_is_unknown() -> None:
    from awaken_stdio.contract.activation import AgentRunResult
    from awaken_stdio.contract.lifecycle import TerminationReason
    from awaken_stdio.contract.stores import WaitingTicket
    from awaken_stdio.contract.suspension import OUTCOME_UNKNOWN_ACTION, PERMISSION_ACTION
    from awaken_stdio.protocols.mcp.calls import _ticket_question, run_result

    note = "The earlier attempt of tool 'run_command' was interrupted and its outcome is unknown"
    again = WaitingTicket(
        ticket_id="perm_c1",
        tool_call_id="c1",
        tool_name="run_command",
        arguments={"command": "make"},
        resume_mode="replay_tool_call",
        reason=OUTCOME_UNKNOWN_ACTION,
        message=note,
    )
    first = WaitingTicket(
        ticket_id="perm_c2",
        tool_call_id="c2",
        tool_name="run_command",
        arguments={"command": "ls"},
        resume_mode="replay_tool_call",
        reason=PERMISSION_ACTION,
    )
    result = AgentRunResult(
        run_id="r1",
        thread_id="t1",
        agent_id="coder",
        response="",
        termination=TerminationReason.suspended(),
        steps=1,
        status="waiting",
        pending=[again, first],
    )
    assert _ticket_question(again, result).startswith(f"Outcome unknown: {note}.")
    assert "unknown" not in _ticket_question(first, result)
    wire = run_result(result)
    assert wire["structuredContent"]["pending"][0]["reason"] == note
    text = wire["content"][0]["text"]
    assert note in text and text.count(note) == 1  # said once, beside its call
    assert [p.get("outcome") for p in wire["structuredContent"]["pending"]] == ["unknown", None]
    # the example decision chooses explicitly for the unknown call, and the text says a choice is needed
    assert '"if_unknown": "rerun"' in text and "needs if_unknown: rerun or done" in text


def test_a_failed_run_says_why() -> None:
    from awaken_stdio.contract.activation import AgentRunResult
    from awaken_stdio.contract.lifecycle import TerminationReason
    from awaken_stdio.protocols.mcp.calls import run_result

    result = AgentRunResult(
        run_id="r1",
        thread_id="t1",
        agent_id="coder",
        response="",
        termination=TerminationReason.error("explode: the disk is on fire"),
        steps=1,
        status="failed",
        status_reason="explode: the disk is on fire",
    )
    wire = run_result(result)
    assert wire["isError"] is True and wire["structuredContent"]["reason"] == "explode: the disk is on fire"
    assert "The run failed: explode: the disk is on fire" in wire["content"][0]["text"]
