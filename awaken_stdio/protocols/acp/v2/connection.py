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
from awaken_stdio.protocols.jsonrpc import ConnectionClosedError, JsonRpcError, RequestContext

if TYPE_CHECKING:
    from awaken_stdio.protocols.acp.server import AcpServer
    from awaken_stdio.protocols.acp.sessions import Session
    from awaken_stdio.protocols.acp.wire import (
        AuthenticateParams,
        ListSessionsParams,
        PromptParams,
        ResumeSessionV2Params,
        SessionIdParams,
        SessionSetupParams,
        SetConfigOptionV2Params,
    )

__all__ = ["ERROR_STOP", "V2Connection"]

ERROR_STOP = "_error"  # the stop reason of a turn that failed (v2 stop reasons are open; ``_`` is ours)


class V2Connection:
    """The ``Dialect`` of a v2 connection and the handlers of its methods (``v2.REQUESTS``, ``acp/methods.py``)."""

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

    def _server(self) -> AcpServer:
        assert self.server is not None  # set by the front before any method is forwarded
        return self.server

    async def prompt(self, p: PromptParams, request: RequestContext) -> dict[str, Any]:
        server = self._server()
        session, blocks = server.take_prompt(p)
        message_id = new_id("msg_")

        accepted = {"sessionUpdate": "user_message", "messageId": message_id, "content": p.prompt}

        async def turn() -> None:
            await self.update({"sessionId": session.id, "update": accepted})
            await self._turn(server, session, blocks, message_id)

        server.background(turn)  # starts after this answer is queued: the receipt comes first
        return {"_meta": {"messageId": message_id}}

    async def cancel(self, p: SessionIdParams, request: RequestContext) -> None:
        await self._server().cancel(p, request)

    # -- sessions ---------------------------------------------------------------------------------------------

    async def new_session(self, p: SessionSetupParams, request: RequestContext) -> dict[str, Any]:
        result = _setup_v2(await self._server().new_session(p, request))
        self._state[result["sessionId"]] = "idle"
        return result

    async def resume_session(self, p: ResumeSessionV2Params, request: RequestContext) -> dict[str, Any]:
        from awaken_stdio.protocols.acp.v2.replay import replayed_from

        server = self._server()
        app = server.app
        record = await app.sessions.load(p.session_id)
        if record is None:
            sid = p.session_id
            raise JsonRpcError(RESOURCE_NOT_FOUND, f"Resource not found: session {sid}", {"sessionId": sid})
        if p.replay_from is not None:
            for update in await replayed_from(app, record, p.replay_from):
                await self.update({"sessionId": record.session_id, "update": update})
        result = _setup_v2(await server.resume_session(p, request))
        session = server.sessions[record.session_id]
        waiting = await app.sessions.runs(record, statuses=["waiting"], limit=1)
        self._state.pop(session.id, None)
        if waiting.items and not self._busy.get(session.id):
            await self._tell_state(session.id, "requires_action")  # durable: it survived the process that asked
            server.background(lambda: self._turn(server, session, None, None))
        elif not self._busy.get(session.id):
            await self._tell_state(session.id, "idle")
        return result

    async def list_sessions(self, p: ListSessionsParams, request: RequestContext) -> dict[str, Any]:
        return await self._server().list_sessions(p, request)

    async def close_session(self, p: SessionIdParams, request: RequestContext) -> dict[str, Any]:
        return await self._server().close_session(p, request)

    async def delete_session(self, p: SessionIdParams, request: RequestContext) -> dict[str, Any]:
        return await self._server().delete_session(p, request)

    async def set_config_option(self, p: SetConfigOptionV2Params, request: RequestContext) -> dict[str, Any]:
        from awaken_stdio.protocols.acp.wire import SetConfigOptionParams

        v1 = SetConfigOptionParams(session_id=p.session_id, config_id=p.config_id, value=p.value)  # untagged
        result = await self._server().set_config_option(v1, request)
        return {"configOptions": config_options_v2(result["configOptions"])}

    # -- auth -------------------------------------------------------------------------------------------------

    async def login(self, p: AuthenticateParams, request: RequestContext) -> dict[str, Any]:
        """v1's ``authenticate``: re-read the configuration and adopt a model set since start-up."""
        await self._server().authenticate(p, request)
        return {}

    async def logout(self, params: dict[str, Any], request: RequestContext) -> dict[str, Any]:
        """Nothing to forget: the model's credentials are the configuration's and the environment's, never kept."""
        return {}


def _setup_v2(result: dict[str, Any]) -> dict[str, Any]:
    """A v1 session/new or session/resume result in v2: no modes (mode is a config option), v2 config options."""
    out = {k: v for k, v in result.items() if k not in ("modes", "configOptions")}
    out["configOptions"] = config_options_v2(result["configOptions"])
    return out
