"""The Tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28): an agent run waiting for a person, as a task.

A 2026-era client that declares the extension (and form elicitation) and calls an agent whose run must wait for an
approval gets a ``CreateTaskResult`` instead of an ``input_required`` round. The task is the run (the task id is the
run id), so it is exactly as durable: it outlives the client's connection and this process, and ``tasks/get`` in a
process started later reads the same store. Its status is the run's: running is ``working``; waiting for approval is
``input_required``, with one ``elicitation/create`` per pending call in ``inputRequests`` (the same question as the
elicitation of the other paths); ended is ``completed`` with the agent tool's result (a failed run is a result with
``isError``: the extension keeps ``failed`` for JSON-RPC errors), or ``cancelled``.

``tasks/update`` answers those questions through ``App.decide`` (recorded first, then the run resumes exactly once,
from any process); the run goes on in this process's background and the update is acknowledged once the decision
is taken. ``tasks/cancel`` cancels the run durably (``App.cancel``).

An agent on the client's model (``mcp_sampling``) that the update resumed asks that model through the task too: the
run waits in the store for the turn, the sampling request is kept beside it (a profile entry, so any process can
show it) and is the task's ``inputRequests``; ``tasks/update`` with the model's answer resumes the run again.

Keys of ``inputRequests`` name the call and when it was asked (``<call id>@<ms>``), or the model's request by its
digest (``model-<digest>``), so a question asked again (after a crash, or with a new diff) gets a new key: the
extension wants keys unique over a task's life, and answers to stale keys are ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.contract.errors import AwakenError, InvalidResume
from awaken_stdio.contract.events import AgentEvent, RunStart
from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, JsonRpcError
from awaken_stdio.protocols.mcp.approvals import approval_message, decision_from_answer, elicitation_params
from awaken_stdio.protocols.mcp.resources import RUNS
from awaken_stdio.protocols.mcp.wire import TASKS_EXTENSION as TASKS
from awaken_stdio.protocols.mcp.wire import Request, text_block
from awaken_stdio.providers.mcp_sampling import CURRENT_ROUND, Round, digest

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from awaken_stdio.app.app import App
    from awaken_stdio.contract.stores import RunRecord, WaitingTicket
    from awaken_stdio.contract.suspension import Decisions
    from awaken_stdio.protocols.mcp.library import Library

__all__ = ["TaskBoard", "created", "declares_tasks", "require_tasks", "task_of"]

log = logging.getLogger(__name__)

MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
POLL_INTERVAL_MS = 1000
_OWNER = "awaken-stdio:mcp"  # the profile owner of the model requests tasks wait for: ``model_request:<run id>``


def declares_tasks(capabilities: dict[str, Any]) -> bool:
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS), dict)


def created(record: RunRecord) -> dict[str, Any]:
    """The ``CreateTaskResult`` of a run: the task as it is now (the run is stored already, so it resolves)."""
    return {**task_of(record), "resultType": "task"}


def task_of(record: RunRecord, model_request: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run as a ``DetailedTask``; ``model_request``: the turn of the client's model it waits for, if any."""
    task: dict[str, Any] = {
        "taskId": record.run_id,
        "status": "working",
        "createdAt": _iso(record.created_at),
        "lastUpdatedAt": _iso(record.updated_at),
        "ttlMs": None,  # kept as long as the run is
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    waiting = record.waiting
    if record.status == "waiting" and waiting is not None and waiting.tickets:
        task["status"] = "input_required"
        task["statusMessage"] = f"Agent {record.agent_id} waits for approval of {len(waiting.tickets)} tool call(s)."
        task["inputRequests"] = {
            _key(t): {"method": "elicitation/create", "params": _question(record, t)} for t in waiting.tickets
        }
    elif record.status == "waiting" and model_request is not None:
        task["status"] = "input_required"
        task["statusMessage"] = f"Agent {record.agent_id} waits for a turn of the client's model."
        request = {"method": "sampling/createMessage", "params": model_request["params"]}
        task["inputRequests"] = {model_request["key"]: request}
    elif record.status == "waiting":
        task["statusMessage"] = (waiting.message if waiting else "") or "The run is waiting."
    elif record.status == "done" and record.display_status == "cancelled":
        task["status"] = "cancelled"
        task["statusMessage"] = f"The run was cancelled ({record.status_reason or 'cancelled'})."
    elif record.status == "done":
        task["status"] = "completed"
        task["result"] = _result(record)
    return task


def require_tasks(request: Request, what: str) -> None:
    """-32021 naming the extension, for a request of a client that did not declare it."""
    if not declares_tasks(request.client_capabilities):
        raise JsonRpcError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Missing required client capability: {what} needs the {TASKS} extension",
            {"requiredCapabilities": {"extensions": {TASKS: {}}}},
        )


class TaskBoard:
    """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` on the app's runs, and ``notifications/tasks`` for a
    listen stream (through the run resources' watch); resumed runs go on in ``background``."""

    def __init__(self, app: App, library: Library, background: TaskGroup) -> None:
        self.app = app
        self.library = library
        self.background = background
        self._answered: set[str] = set()  # keys answered here: not shown again while the run takes them

    def _task(self, record: RunRecord, model_request: dict[str, Any] | None) -> dict[str, Any]:
        """The task, without the questions this process has answers for (the store catches up when the resumed
        run reaches its next checkpoint: keys are unique over a task's life, so an answered one never comes back)."""
        task = task_of(record, model_request)
        requests = task.get("inputRequests")
        if requests:
            left = {key: ask for key, ask in requests.items() if key not in self._answered}
            task["inputRequests"] = left
            if not left:
                del task["inputRequests"]
                task["status"], task["statusMessage"] = "working", "The run goes on with the answers."
        return task

    async def listen(self, task_ids: list[str], key: object, send: Callable[[str, dict[str, Any]], None]) -> list[str]:
        """Send each change of these tasks as ``notifications/tasks`` (the whole task); the ids of known tasks."""

        async def changed(uri: str) -> None:
            record = await self.app.store.load_run(uri.removeprefix(RUNS))
            if record is not None:
                send("notifications/tasks", self._task(record, await self._model_request(record)))

        watched = await self.library.listen([RUNS + t for t in task_ids], (key, TASKS), changed)
        return [uri.removeprefix(RUNS) for uri in watched]

    def unlisten(self, task_ids: list[str], key: object) -> None:
        self.library.unlisten([RUNS + t for t in task_ids], (key, TASKS))

    async def handle(self, method: str, params: dict[str, Any], request: Request) -> dict[str, Any]:
        from awaken_stdio.protocols.mcp.params import TaskParams

        require_tasks(request, method)
        p = TaskParams.model_validate(params)
        record = await self.app.store.load_run(p.task_id)
        if record is None:
            raise JsonRpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
        model_request = await self._model_request(record)
        if method == "tasks/get":
            return self._task(record, model_request)
        if method == "tasks/cancel":
            await self._cancel(record)
            return {}
        await self._update(record, p.input_responses or {}, request, model_request)
        return {}

    async def _model_request(self, record: RunRecord) -> dict[str, Any] | None:
        """The turn of the client's model the run waits for, when a task's resume left it waiting for one."""
        if record.status != "waiting" or (record.waiting is not None and record.waiting.tickets):
            return None
        entry = await self.app.store.get_profile(_OWNER, f"model_request:{record.run_id}")
        return entry.value if entry is not None and isinstance(entry.value, dict) else None

    async def _update(
        self, record: RunRecord, responses: dict[str, Any], request: Request, model_request: dict[str, Any] | None
    ) -> None:
        """Decide the calls whose outstanding keys were answered (others are ignored, as the extension says), or
        give the model its answer; the run resumes in the background, and this returns once it has taken them."""
        tickets = {_key(t): t for t in record.waiting.tickets} if record.status == "waiting" and record.waiting else {}
        decisions: Decisions = [
            (tickets[key].tool_call_id, decision_from_answer(answer))
            for key, answer in responses.items()
            if key in tickets
        ]
        sampling = request.client_capabilities.get("sampling")
        model_round = Round(sampling=sampling if isinstance(sampling, dict) else None)
        answer = responses.get(model_request["key"]) if model_request is not None else None
        if model_request is not None and isinstance(answer, dict):
            model_round.answers[digest(model_request["params"])] = answer
        elif not decisions:
            return
        taken = anyio.Event()
        failures: list[AwakenError] = []

        async def started(event: AgentEvent) -> None:
            if isinstance(event, RunStart):
                taken.set()

        async def resume() -> None:
            CURRENT_ROUND.set(model_round)  # this background task's own context: its model turns ask the task
            try:
                result = await self.app.decide(record.run_id, decisions, started, origin="mcp")
                asked = model_round.asked
                if result is not None and result.status == "waiting" and not result.pending and asked is not None:
                    value = {"key": f"model-{digest(asked)}", "params": asked}
                    await self.app.store.set_profile(_OWNER, f"model_request:{record.run_id}", value)
            except AwakenError as exc:
                if not taken.is_set():
                    failures.append(exc)
                log.info("task %s: %s", record.run_id, exc)
            finally:
                taken.set()

        self.background.start_soon(resume)
        await taken.wait()
        if not failures:
            self._answered.update(key for key in responses if key in tickets or key == (model_request or {}).get("key"))
        if failures:
            raise JsonRpcError(INVALID_PARAMS, f"Cannot update task {record.run_id}: {failures[0]}")

    async def _cancel(self, record: RunRecord) -> None:
        """Cancel the run, durably; one that ended first (or was decided first) keeps its end, as cancellation of a
        task is cooperative."""
        try:
            await self.app.cancel(record.run_id)
        except InvalidResume as exc:
            log.info("task %s not cancelled: %s", record.run_id, exc)


def _key(ticket: WaitingTicket) -> str:
    return f"{ticket.tool_call_id}@{ticket.updated_at}"


def _question(record: RunRecord, ticket: WaitingTicket) -> dict[str, Any]:
    who = f"Agent {record.agent_id} (run {record.run_id})"
    message = approval_message(ticket.tool_name, ticket.arguments, who, ticket.preview)
    if ticket.outcome_unknown:
        message = f"Outcome unknown: {ticket.message}. {message}"
    return {"mode": "form", **elicitation_params(message, unknown=ticket.outcome_unknown)}


def _result(record: RunRecord) -> dict[str, Any]:
    """The agent tool's result of an ended run, from its record (the shape of its output schema)."""
    structured: dict[str, Any] = {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "status": record.display_status,
        "response": record.response or "",
    }
    text = record.response or f"(the run ended {record.display_status} without an answer)"
    if record.display_status == "failed":
        structured["reason"] = record.status_reason or record.error or "failed"
        text = f"{text}\n\nThe run failed: {structured['reason']}"
    return {"content": [text_block(text)], "structuredContent": structured, "isError": structured["status"] == "failed"}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
