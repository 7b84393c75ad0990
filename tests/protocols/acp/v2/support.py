"""A raw ACP v2 client over the real process's pipes (no SDK speaks v2 yet), validating every message the agent
sends against the pinned v2 schema (``schemas/acp/v2/``): the whole message, and its params or result against the
definition of its method."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import jsonschema

from bench._process import close_process

ROOT = Path(__file__).resolve().parents[4]
SCHEMA = json.loads((ROOT / "schemas" / "acp" / "v2" / "schema.json").read_text())
_DEFS = {"$defs": SCHEMA["$defs"]}
_ROOT = jsonschema.Draft202012Validator(SCHEMA)
RESPONSES = {
    "initialize": "InitializeResponse",
    "auth/login": "LoginAuthResponse",
    "auth/logout": "LogoutAuthResponse",
    "session/new": "NewSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/close": "CloseSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
}
_VALIDATORS: dict[str, jsonschema.Draft202012Validator] = {}


def validate_def(definition: str, value: Any) -> None:
    if definition not in _VALIDATORS:
        _VALIDATORS[definition] = jsonschema.Draft202012Validator({**_DEFS, "$ref": f"#/$defs/{definition}"})
    _VALIDATORS[definition].validate(value)


class V2Client:
    """One agent process: ``request`` sends and waits for the answer; everything the agent sends is in ``incoming``
    (batches flattened), validated as it arrives (failures in ``errors``). Permission requests are answered with
    ``answers`` (option kinds) while ``hold`` is unset, else left open."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.incoming: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.answers: list[str] = []
        self.hold = False
        self.form_answer: dict[str, Any] = {"action": "decline"}  # the answer to ``elicitation/create``
        self.batches = 0  # arrays the agent sent (its answers to our batches)
        self._ids = 0
        self._idles: int | None = None  # idle states seen when the last prompt was sent
        self._methods: dict[Any, str] = {}
        self._changed = anyio.Event()

    async def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def request(self, method: str, params: dict[str, Any], timeout: float = 20) -> dict[str, Any]:
        self._ids += 1
        rid = self._ids
        self._methods[rid] = method
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        answer = await self.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)
        return answer

    async def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float = 20) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while True:
                for message in self.incoming:
                    if match(message):
                        return message
                self._changed = anyio.Event()
                await self._changed.wait()

    def updates(self) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.incoming if m.get("method") == "session/update"]

    def states(self) -> list[tuple[str, str | None]]:
        return [(u["state"], u.get("stopReason")) for u in self.updates() if u["sessionUpdate"] == "state_update"]

    async def read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                await self._received(json.loads(line))

    async def _received(self, message: Any) -> None:
        self.batches += isinstance(message, list)
        try:
            _ROOT.validate(message)
        except jsonschema.ValidationError as exc:
            self.errors.append(f"{exc.message} in {json.dumps(message)[:400]}")
        for one in message if isinstance(message, list) else [message]:
            self._check(one)
            self.incoming.append(one)
            if one.get("method") == "elicitation/create":
                await self.send({"jsonrpc": "2.0", "id": one["id"], "result": self.form_answer})
            if one.get("method") == "session/request_permission" and not self.hold:
                kind = self.answers.pop(0) if self.answers else "allow_once"
                option = next(o for o in one["params"]["options"] if o["kind"] == kind)
                outcome = {"outcome": "selected", "optionId": option["optionId"]}
                await self.send({"jsonrpc": "2.0", "id": one["id"], "result": {"outcome": outcome}})
        self._changed.set()

    def _check(self, message: dict[str, Any]) -> None:
        try:
            method = message.get("method")
            if method == "session/update":
                validate_def("UpdateSessionNotification", message["params"])
            elif method == "session/request_permission":
                validate_def("RequestPermissionRequest", message["params"])
            elif method == "elicitation/create":
                validate_def("CreateElicitationRequest", message["params"])
            elif method is not None:
                raise jsonschema.ValidationError(f"the agent sent an unexpected method {method}")
            elif "error" in message:
                validate_def("Error", message["error"])
            elif (asked := self._methods.get(message["id"])) in RESPONSES:
                validate_def(RESPONSES[asked], message["result"])
        except jsonschema.ValidationError as exc:
            self.errors.append(f"{exc.message} in {json.dumps(message)[:400]}")

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        info = {"name": "v2-test", "version": "0.1"}
        params = {"protocolVersion": 2, "capabilities": capabilities or {}, "info": info}
        return await self.request("initialize", params)

    async def new_session(self, cwd: Path) -> str:
        return (await self.request("session/new", {"cwd": str(cwd)}))["result"]["sessionId"]

    async def prompt(self, sid: str, text: str) -> str:
        """Send a prompt; its message id (the receipt's). ``idle`` then waits for the first idle after it."""
        self._idles = self._count_idles()
        answer = await self.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        return answer["result"]["_meta"]["messageId"]

    def _count_idles(self) -> int:
        return len([s for s in self.states() if s[0] == "idle"])

    async def idle(self, timeout: float = 20) -> tuple[str, str | None]:
        """Wait for the first ``idle`` state after the last prompt was sent (or after those seen so far)."""
        seen = self._count_idles() if self._idles is None else self._idles
        self._idles = None
        with anyio.fail_after(timeout):
            while len(idles := [s for s in self.states() if s[0] == "idle"]) <= seen:
                self._changed = anyio.Event()
                await self._changed.wait()
        return idles[seen]

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)


@asynccontextmanager
async def spawn_v2(command: list[str], cwd: Path, *, initialize: bool = True) -> AsyncGenerator[V2Client]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"PYTHONPATH": str(ROOT)}
    async with await anyio.open_process(command, cwd=cwd, env=env, stderr=sys.stderr) as process:
        client = V2Client(process)
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.read)
            if initialize:
                answer = await client.initialize()
                assert answer["result"]["protocolVersion"] == 2, answer
            try:
                yield client
            finally:
                if process.returncode is None:
                    await close_process(process)
                tg.cancel_scope.cancel()
        assert not client.errors, "\n".join(client.errors)
