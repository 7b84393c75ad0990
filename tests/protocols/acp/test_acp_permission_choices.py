"""What ``session/request_permission`` offers and what each answer decides: a real ``JsonRpcPeer`` asks, the test
answers as the editor on the far end of the pipe, and every request is checked against the pinned ACP schema.

A call whose earlier attempt's outcome is unknown (a crash interrupted it) offers run it again / record it as done /
skip it, and the decision says which (``ToolCallResume.unknown``); an error answer, or a choice that was not offered,
is ``Unanswered``: nobody decided.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.protocols.acp.permissions import Question, Unanswered, ask_permission
from awaken_stdio.protocols.jsonrpc import JsonRpcPeer

from ..conftest import Serve
from .conftest import validate_def

pytestmark = pytest.mark.anyio

PLAIN = Question(call_id="call_1", tool_name="run_command", arguments={"command": "echo x >> count.txt"})
UNKNOWN = Question(
    call_id="call_1",
    tool_name="run_command",
    arguments={"command": "echo x >> count.txt"},
    unknown="it was running at a crash",
)


async def asked(serve: Serve, question: Question, answer: Any) -> tuple[dict[str, Any], ToolCallResume | None]:
    """Ask ``question``; the editor answers ``answer`` (a result, or ``{"error": ...}``). The request and decision."""
    peer = JsonRpcPeer()
    decision: list[ToolCallResume | None] = []
    request: dict[str, Any] = {}
    async with serve(peer) as wire:

        async def ask() -> None:
            decision.append(await ask_permission(peer, "sess_1", question, None))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            request.update(await wire.receive())
            assert request["method"] == "session/request_permission"
            validate_def("RequestPermissionRequest", request["params"])
            reply = answer if "error" in answer else {"result": answer}
            await wire.send({"jsonrpc": "2.0", "id": request["id"], **reply})
    return request["params"], decision[0]


def chose(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


async def test_an_unknown_outcome_offers_run_again_record_as_done_or_skip(serve: Serve) -> None:
    params, _ = await asked(serve, UNKNOWN, chose("reject_once"))
    options = {o["optionId"]: (o["kind"], o["name"]) for o in params["options"]}
    assert options == {
        "rerun": ("allow_once", "Run it again"),
        "done": ("allow_once", "It already ran: record as done"),
        "reject_once": ("reject_once", "Skip it"),
    }
    assert "outcome is unknown" in params["toolCall"]["title"]


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("rerun", ToolCallResume.approve(unknown="rerun")),
        ("done", ToolCallResume.approve(unknown="done")),
        ("reject_once", ToolCallResume.reject("rejected by the user")),
    ],
)
async def test_each_unknown_outcome_choice_is_its_decision(serve: Serve, option: str, expected: ToolCallResume) -> None:
    _, decision = await asked(serve, UNKNOWN, chose(option))
    assert decision is not None
    assert (decision.action, decision.result, decision.unknown) == (expected.action, expected.result, expected.unknown)


async def test_a_plain_question_keeps_its_four_choices_and_approves_without_an_unknown_choice(serve: Serve) -> None:
    params, decision = await asked(serve, PLAIN, chose("allow_once"))
    assert [o["optionId"] for o in params["options"]] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert decision is not None and decision.action == "resume" and decision.unknown is None


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (PLAIN, {"error": {"code": -32601, "message": "Method not found"}}),  # an editor without the dialog
        (PLAIN, chose("rerun")),  # not offered for a plain question
        (UNKNOWN, chose("allow_once")),  # a plain approve of an unknown outcome: not one of its choices
        (PLAIN, {"outcome": "selected"}),  # unreadable
    ],
)
async def test_an_error_or_a_choice_not_offered_is_unanswered(serve: Serve, question: Question, answer: Any) -> None:
    with pytest.raises(ExceptionGroup) as info:  # raised inside the task group that asks
        await asked(serve, question, answer)
    assert info.group_contains(Unanswered)


async def test_a_cancelled_answer_is_no_decision(serve: Serve) -> None:
    _, decision = await asked(serve, UNKNOWN, {"outcome": {"outcome": "cancelled"}})
    assert decision is None
