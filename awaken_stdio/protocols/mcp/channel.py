"""``ctx.log``/``progress``/``elicit``/``sample`` of a tool an MCP client's call runs (``contract/channel.py``).

Log messages go out as ``notifications/message`` at or above the level the client set (a handshake-era client that
set none gets them all; a 2026-era one only with ``logLevel`` in the request's ``_meta``), progress as
``notifications/progress`` on the call's token. Elicitation and sampling are asked only of a client that declared
them (form elicitation; sampling), else a ``ToolFailure`` says so (the call fails; a run goes on). In the handshake
era they are requests to the client in the middle of the call; the 2026 era has no such requests, so the first
question ends the call with an ``InputRequiredResult`` and the client's retry, carrying the answers, runs the tool
again: each question already answered (in order, sealed into ``requestState``) returns its answer at once, and the
next one asks. The tools of an agent run the call started talk back the same way, but their progress is the agent
tool's, and in the 2026 era their questions fail (the run cannot be replayed from the start with the answers).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from awaken_stdio.contract.channel import Elicited, LogLevel, Sampled
from awaken_stdio.contract.errors import ModelAnswerPending, ProviderError, ToolFailure
from awaken_stdio.protocols.jsonrpc import JsonRpcError, JsonRpcPeer
from awaken_stdio.protocols.mcp.approvals import can_elicit

if TYPE_CHECKING:
    from awaken_stdio.protocols.mcp.wire import Request

__all__ = [
    "ASK_TIMEOUT_S",
    "CURRENT_ROUND",
    "CallSide",
    "ClientModel",
    "InputRequired",
    "McpChannel",
    "Round",
    "digest",
]

ASK_TIMEOUT_S = 600.0  # a person answering a form, or a host's model answering


class InputRequired(Exception):
    """A 2026-era question: answer the call with ``InputRequiredResult`` asking ``requests``; ``answers`` so far."""

    def __init__(self, requests: dict[str, dict[str, Any]], answers: dict[str, Any]) -> None:
        super().__init__("input required")
        self.requests = requests
        self.answers = answers


class CallSide(Protocol):
    """The ``tools/call`` a channel talks back through (``calls.ToolCall``): its request, its log and progress."""

    @property
    def request(self) -> Request: ...

    async def log(self, level: LogLevel, text: str, *, unset: LogLevel | None = None) -> None: ...

    async def report(self, done: float, total: float | None, message: str | None) -> None: ...


class McpChannel:
    """The client of one ``tools/call``. ``in_run``: for the tools of the agent run that call started, whose progress
    is the agent tool's own (so theirs stays theirs) and whose questions cannot be 2026-era rounds (the run cannot be
    re-run from the start to replay the answers)."""

    def __init__(
        self,
        peer: JsonRpcPeer,
        call: CallSide,
        tool: str,
        answers: dict[str, Any] | None = None,
        *,
        in_run: bool = False,
    ) -> None:
        self.peer = peer
        self.call = call
        self.tool = tool
        self.answers = dict(answers or {})  # 2026 era: the answers of the questions asked so far, by key
        self.in_run = in_run
        self._asked = 0

    async def log(self, level: LogLevel, message: str) -> bool:
        await self.call.log(level, message, unset="debug" if self.call.request.era == "legacy" else None)
        return True

    async def progress(self, done: float, total: float | None, message: str | None) -> bool:
        if self.in_run:
            return False
        await self.call.report(done, total, message)
        return True

    async def elicit(self, call_id: str, message: str, schema: dict[str, Any]) -> Elicited:
        if not can_elicit(self.call.request.client_capabilities):
            raise ToolFailure(f"{self.tool} needs to ask the user, but this MCP client cannot (no form elicitation)")
        result = await self._ask("elicitation/create", {"message": message, "requestedSchema": schema})
        action = result.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise ToolFailure(f"{self.tool}: the client answered the question with an unknown action {action!r}")
        content = result.get("content")
        return Elicited(action=action, content=content if isinstance(content, dict) else None)

    async def sample(self, params: dict[str, Any]) -> Sampled:
        capabilities = self.call.request.client_capabilities
        if not isinstance(capabilities.get("sampling"), dict):
            raise ToolFailure(f"{self.tool} needs the client's model, but this MCP client offers none (no sampling)")
        result = await self._ask("sampling/createMessage", params)
        content = result.get("content")
        blocks = content if isinstance(content, list) else [content]
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        return Sampled(text=text, model=result.get("model"), stop_reason=result.get("stopReason"), raw=result)

    async def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.call.request.era == "modern" and self.in_run:
            raise ToolFailure(
                f"{self.tool} needs to ask the client ({method}) in the middle of an agent run, which the 2026-07-28 "
                "protocol cannot do (the client can only answer at the end of a call)"
            )
        if self.call.request.era == "modern":
            key = f"ask{self._asked}"
            self._asked += 1
            if key in self.answers:
                answer = self.answers[key]
                return answer if isinstance(answer, dict) else {}
            raise InputRequired({key: {"method": method, "params": params}}, self.answers)
        try:
            result = await self.peer.request(method, params, timeout=ASK_TIMEOUT_S)
        except JsonRpcError as exc:
            raise ToolFailure(f"{self.tool}: the client did not answer {method}: {exc.message}") from None
        return result if isinstance(result, dict) else {}


@dataclass(slots=True, kw_only=True)
class Round:
    """One 2026-era call of a client: whether it samples (with tools), the answers it brought (by ``digest`` of the
    request each answers), and the request a turn found unanswered (``asked``), for the call's ``input_required``."""

    sampling: dict[str, Any] | None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    asked: dict[str, Any] | None = None


CURRENT_ROUND: ContextVar[Round | None] = ContextVar("mcp_sampling_round", default=None)
"""The round of the call a task works for (set by ``calls.py`` and ``tasks.py`` around the runs a call drives)."""


def digest(params: dict[str, Any]) -> str:
    """What identifies a sampling request: a digest of its canonical JSON."""
    text = json.dumps(params, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str)
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:12]).decode()


class ClientModel:
    """The MCP client's model, as the runs this server serves get it (``RunEnvironment.sampling``, through
    ``App.sampling``) for the ``mcp_sampling`` provider.

    A 2026-era call has no requests to the client in the middle of it: each model turn is one round of the call
    (``CURRENT_ROUND``). A turn whose answer the round does not carry records its request in the round and raises
    ``ModelAnswerPending``: the run waits durably, the call ends ``input_required`` with that request, and the
    client's retry resumes the run with the answer, keyed by a digest of the request it answers (an answer to
    another request, e.g. one asked before a crash lost a step, is not used). Outside a round, the handshake-era
    client is asked: ``capabilities`` returns its declared capabilities, or None before ``initialize``, in the 2026
    era, and for a server whose app other connections share (``peer`` None: no connection's client serves it).
    """

    def __init__(self, peer: JsonRpcPeer | None, capabilities: Callable[[], dict[str, Any] | None]) -> None:
        self.peer = peer
        self._capabilities = capabilities

    def _sampling(self) -> dict[str, Any] | None:
        current = CURRENT_ROUND.get()
        if current is not None and current.sampling is not None:
            return current.sampling
        sampling = (self._capabilities() or {}).get("sampling")
        return sampling if isinstance(sampling, dict) else None

    def can_sample(self) -> bool:
        return self._sampling() is not None

    def can_use_tools(self) -> bool:
        sampling = self._sampling()
        return sampling is not None and "tools" in sampling

    async def create_message(self, params: dict[str, Any]) -> dict[str, Any]:
        current = CURRENT_ROUND.get()
        if current is not None and current.sampling is not None:
            answer = current.answers.get(digest(params))
            if answer is None:
                current.asked = params
                raise ModelAnswerPending("waiting for the MCP client's model to answer (a 2026-07-28 round)")
            return answer
        assert self.peer is not None  # without one there are no capabilities: the provider asks only if can_sample()
        try:
            result = await self.peer.request("sampling/createMessage", params, timeout=ASK_TIMEOUT_S)
        except JsonRpcError as exc:
            raise ProviderError("provider", f"mcp_sampling: the MCP client's model failed: {exc.message}") from None
        return result if isinstance(result, dict) else {}
