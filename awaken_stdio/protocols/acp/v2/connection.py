"""A v2 connection: the v2 methods over the v1 ``AcpServer``, and each session's state as v2 reports it.

``session/prompt`` is answered once the prompt is accepted (its content checked, the session open), with the id its
message gets in ``_meta.messageId``; the accepted ``user_message`` (that id, the source of truth) and the turn
follow as updates: ``state_update`` ``running`` when work starts, ``requires_action`` while a permission question
is open (live, or re-offered after a restart: the run waits durably in the mailbox), ``running`` again once it is
answered, and ``idle`` with the stop reason when the session's last queued prompt is done. A turn that fails ends
``idle`` with the custom stop reason ``_error`` after an ``agent_message`` saying what went wrong (v2 has no
response left to carry an error). ``session/resume`` replays from ``replayFrom`` before its answer and tells the
session's state last; an approval left waiting is then asked again at once, not at the next prompt.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.contract.ids import new_id
from awaken_stdio.protocols.acp.codes import RESOURCE_NOT_FOUND
from awaken_stdio.protocols.acp.v2.peer import AcpPeer
from awaken_stdio.protocols.acp.v2.permissions import permission_request
from awaken_stdio.protocols.acp.v2.updates import config_options_v2, to_v2
from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, ConnectionClosedError, JsonRpcError

if TYPE_CHECKING:
    from awaken_stdio.protocols.acp.server import AcpServer
    from awaken_stdio.protocols.acp.sessions import Session

__all__ = ["ERROR_STOP", "V2Connection"]

ERROR_STOP = "_error"  # the stop reason of a turn that failed (v2 stop reasons are open; ``_`` is ours)


class V2Connection:
    """The ``Dialect`` of a v2 connection and the handlers of its methods (``v2.REQUESTS``)."""

    def __init__(self, peer: AcpPeer) -> None:
        self.peer = peer
        self.server: AcpServer | None = None
        self._busy: dict[str, int] = {}  # session id -> its prompts (and re-offers) not yet done
        self._state: dict[str, str] = {}  # session id -> the last state told

    # -- the dialect: the v1 machinery's outbound messages ------------------------------------------------------

    async def update(self, params: dict[str, Any]) -> None:
        for update in to_v2(params["update"]):
            await self.peer.raw_notify("session/update", {**params, "update": update})

    async def ask(self, method: str, params: dict[str, Any], cancel_method: str | None) -> Any:
        """A question to the person (a permission, a tool's form): the session ``requires_action`` until answered."""
        session_id = params["sessionId"]
        if method == "session/request_permission":
            session = self.server.sessions.get(session_id) if self.server else None
            params = permission_request(params, session.record.cwd if session is not None else "/")
        await self._tell_state(session_id, "requires_action")
        try:
            return await self.peer.raw_request(method, params, cancel_method=cancel_method)
        finally:
            if self._busy.get(session_id):
                with anyio.CancelScope(shield=True), suppress(ConnectionClosedError):
                    await self._tell_state(session_id, "running")

    async def _tell_state(self, session_id: str, state: str, stop_reason: str | None = None) -> None:
        if state == self._state.get(session_id) and stop_reason is None:
            return
        self._state[session_id] = state
        update: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
        if stop_reason is not None:
            update["stopReason"] = stop_reason
        await self.peer.raw_notify("session/update", {"sessionId": session_id, "update": update})

    # -- turns ------------------------------------------------------------------------------------------------

    async def _turn(
        self, server: AcpServer, session: Session, blocks: list[Any] | None, message_id: str | None
    ) -> None:
        """One prompt's turn (or, with no ``blocks``, the re-offer of approvals left waiting), told as states."""
        sid = session.id
        self._busy[sid] = self._busy.get(sid, 0) + 1
        reason = "end_turn"
        try:
            if blocks is not None:
                await self._tell_state(sid, "running")
            reason = await server.run_turn(session, blocks, message_id)
        except Exception as exc:
            reason = ERROR_STOP
            text = f"The turn failed: {getattr(exc, 'message', None) or exc}"
            await self.update({"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk",
                                                            "content": {"type": "text", "text": text}}})  # fmt: skip
        finally:
            self._busy[sid] -= 1
            if not self._busy[sid]:
                del self._busy[sid]
                with anyio.CancelScope(shield=True), suppress(ConnectionClosedError):  # none left to tell
                    await self._tell_state(sid, "idle", reason)

    async def prompt(self, server: AcpServer, params: Any) -> dict[str, Any]:
        session, blocks = server.take_prompt(params)
        message_id = new_id("msg_")
        prompt = params["prompt"]

        accepted = {"sessionUpdate": "user_message", "messageId": message_id, "content": prompt}

        async def turn() -> None:
            await self.update({"sessionId": session.id, "update": accepted})
            await self._turn(server, session, blocks, message_id)

        server.background(turn)  # starts after this answer is queued: the receipt comes first
        return {"_meta": {"messageId": message_id}}

    async def cancel(self, server: AcpServer, params: Any) -> None:
        await server.cancel(params)

    # -- sessions ---------------------------------------------------------------------------------------------

    async def new_session(self, server: AcpServer, params: Any) -> dict[str, Any]:
        result = _setup_v2(await server.new_session(params))
        self._state[result["sessionId"]] = "idle"
        return result

    async def resume_session(self, server: AcpServer, params: Any) -> dict[str, Any]:
        from awaken_stdio.protocols.acp.v2.replay import replayed_from

        if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: sessionId is required")
        cursor = params.get("replayFrom")
        if cursor is not None and not (isinstance(cursor, dict) and isinstance(cursor.get("type"), str)):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: replayFrom must be an object with a type, or null")
        app = server.app
        record = await app.sessions.load(params["sessionId"])
        if record is None:
            sid = params["sessionId"]
            raise JsonRpcError(RESOURCE_NOT_FOUND, f"Resource not found: session {sid}", {"sessionId": sid})
        if cursor is not None:
            for update in await replayed_from(app, record, cursor):
                await self.update({"sessionId": record.session_id, "update": update})
        result = _setup_v2(await server.resume_session(params))
        session = server.sessions[record.session_id]
        waiting = await app.sessions.runs(record, statuses=["waiting"], limit=1)
        self._state.pop(session.id, None)
        if waiting.items and not self._busy.get(session.id):
            await self._tell_state(session.id, "requires_action")  # durable: it survived the process that asked
            server.background(lambda: self._turn(server, session, None, None))
        elif not self._busy.get(session.id):
            await self._tell_state(session.id, "idle")
        return result

    async def list_sessions(self, server: AcpServer, params: Any) -> dict[str, Any]:
        return await server.list_sessions(params)

    async def close_session(self, server: AcpServer, params: Any) -> dict[str, Any]:
        return await server.close_session(params)

    async def delete_session(self, server: AcpServer, params: Any) -> dict[str, Any]:
        return await server.delete_session(params)

    async def set_config_option(self, server: AcpServer, params: Any) -> dict[str, Any]:
        if isinstance(params, dict) and params.get("type") == "id":  # v2's tag of a select's value
            params = {k: v for k, v in params.items() if k != "type"}
        result = await server.set_config_option(params)
        return {"configOptions": config_options_v2(result["configOptions"])}

    # -- auth -------------------------------------------------------------------------------------------------

    async def login(self, server: AcpServer, params: Any) -> dict[str, Any]:
        """v1's ``authenticate``: re-read the configuration and adopt a model set since start-up."""
        await server.authenticate(params)
        return {}

    async def logout(self, server: AcpServer, params: Any) -> dict[str, Any]:
        """Nothing to forget: the model's credentials are the configuration's and the environment's, never kept."""
        return {}


def _setup_v2(result: dict[str, Any]) -> dict[str, Any]:
    """A v1 session/new or session/resume result in v2: no modes (mode is a config option), v2 config options."""
    out = {k: v for k, v in result.items() if k not in ("modes", "configOptions")}
    out["configOptions"] = config_options_v2(result["configOptions"])
    return out
