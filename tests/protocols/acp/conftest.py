"""End-to-end harness: the real ``python -m awaken_stdio acp`` process over real pipes, driven by the official ACP
Python SDK (``acp``) as the client, every message it emits validated against the pinned official JSON Schema.

``AgentProcess`` wraps ``acp.spawn_agent_process``: the SDK client records updates and permission requests and
answers permissions from a queue of option ids; an SDK observer keeps the raw wire and validates each message
from the agent (responses against the schema type of the request they answer).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from acp import RequestError, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "schemas" / "acp" / "schema.json").read_text())
_REGISTRY_SCHEMA = {"$defs": SCHEMA["$defs"]}
# the unstable schema of the same release: what the stable one lacks (session/fork, systemPrompt) is checked there
UNSTABLE = json.loads((ROOT / "schemas" / "acp" / "schema.unstable.json").read_text())

RESPONSES = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/delete": "DeleteSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
    "session/fork": "ForkSessionResponse",  # unstable
}
AGENT_REQUESTS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
    "elicitation/create": "CreateElicitationRequest",
}


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    defs = SCHEMA["$defs"] if definition in SCHEMA["$defs"] else UNSTABLE["$defs"]
    return jsonschema.Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{definition}"})


_ROOT_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
_VALIDATORS: dict[str, jsonschema.Draft202012Validator] = {}


def validate_def(definition: str, value: Any) -> None:
    validator = _VALIDATORS.get(definition)
    if validator is None:
        validator = _VALIDATORS[definition] = _validator(definition)
    validator.validate(value)


class WireLog:
    """Every message in both directions; validates what the agent sends as it arrives."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self._methods: dict[Any, str] = {}  # our request ids -> method
        self.errors: list[str] = []

    def observe(self, event: Any) -> None:
        direction, message = event.direction.value, event.message
        self.messages.append((direction, message))
        if direction == "outgoing":
            if "method" in message and "id" in message:
                self._methods[message["id"]] = message["method"]
            return
        try:
            self._validate(message)
        except jsonschema.ValidationError as exc:
            self.errors.append(f"{exc.message} in {json.dumps(message)[:500]}")

    def _validate(self, message: dict[str, Any]) -> None:
        _ROOT_VALIDATOR.validate(message)
        if "method" in message:
            method = message["method"]
            if method == "session/update":
                validate_def("SessionNotification", message["params"])
            elif method in AGENT_REQUESTS:
                validate_def(AGENT_REQUESTS[method], message["params"])
            elif method == "$/cancel_request":  # a question withdrawn: decided on another surface
                validate_def("CancelRequestNotification", message["params"])
            else:
                raise jsonschema.ValidationError(f"the agent sent an unexpected method {method}")
        elif "error" in message:
            validate_def("Error", message["error"])
        else:
            method = self._methods.get(message.get("id"))
            if method in RESPONSES:
                validate_def(RESPONSES[method], message["result"])

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for d, m in self.messages
            if d == "incoming"
            and m.get("method") == "session/update"
            and (session_id is None or m["params"]["sessionId"] == session_id)
        ]

    def around_answer(self, method: str, start: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The agent's notifications from ``start`` (an index into ``incoming()``) before and after its answer to
        the first ``method`` request sent since."""
        incoming = self.incoming()[start:]
        ids = {m["id"] for d, m in self.messages if d == "outgoing" and m.get("method") == method}
        answer = next(i for i, m in enumerate(incoming) if "method" not in m and m.get("id") in ids)
        notes = [i for i, m in enumerate(incoming) if m.get("method") == "session/update"]
        return [incoming[i] for i in notes if i < answer], [incoming[i] for i in notes if i > answer]

    def incoming(self) -> list[dict[str, Any]]:
        return [m for d, m in self.messages if d == "incoming"]


class TestClient:
    """The SDK client: records, answers permissions from ``answers`` (kinds, ``name:X``, ``id:X``, "cancelled", or
    "error": -32601 as an editor without the dialog answers)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.permissions: list[dict[str, Any]] = []
        self.answers: list[str] = []
        self.permission_asked = anyio.Event()
        self.hold_permission: anyio.Event | None = None
        self.files: dict[str, str] = {}  # the editor's buffers for fs/* (path -> text)
        self.calls: list[str] = []  # client methods the agent called
        self.terminals: dict[str, dict[str, Any]] = {}
        self.forms: list[tuple[str, Any]] = []  # elicitation/create: (message, mode) asked
        self.form_answer: Any = None  # the CreateElicitationResponse to give (None: the client has no forms)

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **kw: Any) -> Any:
        self.calls.append("session/request_permission")
        self.permissions.append(
            {"session_id": session_id, "tool_call_id": tool_call.tool_call_id, "kinds": [o.kind for o in options]}
        )
        self.permission_asked.set()
        if self.hold_permission is not None:
            await self.hold_permission.wait()
        answer = self.answers.pop(0) if self.answers else "allow_once"
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if answer == "error":  # an editor without the dialog
            raise RequestError.method_not_found("session/request_permission")
        if answer.startswith("id:"):  # whatever option id, offered or not
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer[3:]))
        option = next(o for o in options if o.kind == answer or f"name:{o.name}" == answer)  # a kind, or name:X
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        pass  # assertions use the raw wire (WireLog), which also sees updates the SDK would drop

    async def read_text_file(self, session_id: str, path: str, **kw: Any) -> Any:
        self.calls.append("fs/read_text_file")
        if path in self.files:
            return ReadTextFileResponse(content=self.files[path])
        if not Path(path).exists():
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=Path(path).read_text())

    async def write_text_file(self, session_id: str, path: str, content: str, **kw: Any) -> None:
        self.calls.append("fs/write_text_file")
        self.files[path] = content
        return None

    async def create_terminal(self, session_id: str, command: str, args: Any = None, cwd: Any = None, **kw: Any) -> Any:
        self.calls.append("terminal/create")
        import subprocess

        done = subprocess.run([command, *(args or [])], cwd=cwd, capture_output=True, text=True, check=False)
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = {"output": done.stdout + done.stderr, "code": done.returncode}
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.calls.append("terminal/wait_for_exit")
        return WaitForTerminalExitResponse(exit_code=self.terminals[terminal_id]["code"])

    async def terminal_output(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.calls.append("terminal/output")
        t = self.terminals[terminal_id]
        return TerminalOutputResponse(
            output=t["output"], truncated=False, exit_status=TerminalExitStatus(exit_code=t["code"])
        )

    async def release_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> None:
        self.calls.append("terminal/release")

    async def kill_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> None:
        self.calls.append("terminal/kill")

    async def create_elicitation(self, message: str, mode: Any, **kw: Any) -> Any:
        if self.form_answer is None:
            raise RequestError.method_not_found("elicitation/create")
        self.calls.append("elicitation/create")
        self.forms.append((message, mode))
        return self.form_answer

    async def ext_method(self, method: str, params: Any) -> Any:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        pass

    def on_connect(self, conn: Any) -> None:
        pass


def write_config(
    directory: Path, turns: list[dict[str, Any]], *, agent: str = "", models: str = "", capabilities: str = ""
) -> Path:
    """A config with one scripted model ``main`` (and ``models`` extra TOML) and an agent ``coder``."""
    script = {"turns": turns}
    if capabilities:
        script["capabilities"] = json.loads(capabilities)
    (directory / "script.json").write_text(json.dumps(script))
    config = directory / "config.toml"
    config.write_text(
        'default_agent = "coder"\n'
        '[models.main]\nprovider = "scripted"\nscript = "script.json"\n'
        f"{models}\n"
        '[agents.coder]\nmodel = "main"\n'
        f"{agent}\n"
    )
    return config


class Harness:
    """Where a test's agent runs: a config dir, a store, a workspace; ``spawn`` starts an agent process."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "cfg"
        self.dir.mkdir()
        self.workspace = (tmp_path / "work").resolve()
        self.workspace.mkdir()
        self.store = f"sqlite:///{tmp_path / 'awaken.db'}"
        self.config: Path | None = None

    def configure(self, turns: list[dict[str, Any]], **kw: Any) -> Path:
        self.config = write_config(self.dir, turns, **kw)
        return self.config

    def command(self) -> list[str]:
        assert self.config is not None
        return [sys.executable, "-m", "awaken_stdio", "acp", "--config", str(self.config), "--store", self.store]

    @asynccontextmanager
    async def spawn(
        self,
        *,
        fs: bool = False,
        terminal: bool = False,
        boolean_config: bool = False,
        forms: bool = False,
        env: dict[str, str] | None = None,
        initialize: bool = True,
        caps: dict[str, Any] | None = None,
        unstable: bool = False,
    ) -> AsyncIterator[Agent]:
        """``caps``: more ``clientCapabilities`` (merged one level down: ``{"session": {"notices": {}}}`` keeps the
        other session ones); ``unstable``: the SDK routes unstable methods (``session/fork``)."""
        client = TestClient(self.workspace)
        wire = WireLog()
        command = self.command()
        child_env = {"PYTHONPATH": str(ROOT), **(env or {})}
        async with spawn_agent_process(
            client,
            *command,
            env=child_env,
            cwd=str(self.workspace),
            transport_kwargs={"stderr": None},
            observers=[wire.observe],
            use_unstable_protocol=forms or unstable,  # the SDK routes elicitation/create only then
        ) as (conn, process):
            agent = Agent(conn, process, client, wire, self.workspace)
            if initialize:
                client_caps = ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=terminal
                )
                if boolean_config:
                    client_caps = ClientCapabilities.model_validate(
                        client_caps.model_dump(by_alias=True) | {"session": {"configOptions": {"boolean": {}}}}
                    )
                if forms:
                    client_caps = ClientCapabilities.model_validate(
                        client_caps.model_dump(by_alias=True) | {"elicitation": {"form": {}}}
                    )
                with anyio.fail_after(20):
                    if caps:  # as raw params: the SDK's models drop the capabilities it does not know yet
                        sent = client_caps.model_dump(by_alias=True, exclude_none=True)
                        for key, value in caps.items():
                            inner = sent.get(key)
                            both = isinstance(inner, dict) and isinstance(value, dict)
                            sent[key] = {**inner, **value} if both else value
                        info = {"name": "acp-test", "version": "0.1"}
                        params = {"protocolVersion": 1, "clientCapabilities": sent, "clientInfo": info}
                        answer = await conn._conn.send_request("initialize", params)
                        agent.init = InitializeResponse.model_validate(answer)
                    else:
                        agent.init = await conn.initialize(
                            protocol_version=1,
                            client_capabilities=client_caps,
                            client_info=Implementation(name="acp-test", version="0.1"),
                        )
            try:
                yield agent
            finally:
                assert not wire.errors, "\n".join(wire.errors)


class Agent:
    def __init__(self, conn: Any, process: Any, client: TestClient, wire: WireLog, workspace: Path) -> None:
        self.conn = conn
        self.process = process
        self.client = client
        self.wire = wire
        self.workspace = workspace
        self.init: Any = None

    async def killed_while_asked(self, session_id: str, text: str) -> None:
        """Prompt ``text``, keep the permission question open, and kill -9 the agent then: its run is left waiting."""
        from acp import text_block

        self.client.hold_permission = anyio.Event()  # never answered: the process dies first

        async def doomed() -> None:
            with pytest.raises(ConnectionError):
                await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])

        async with anyio.create_task_group() as tg:
            tg.start_soon(doomed)
            with anyio.fail_after(15):
                await self.client.permission_asked.wait()
            os.kill(self.process.pid, signal.SIGKILL)
            await self.process.wait()

    async def new_session(self, **kw: Any) -> str:
        with anyio.fail_after(20):
            response = await self.conn.new_session(cwd=str(self.workspace), mcp_servers=[], **kw)
        return response.session_id

    async def prompt(self, session_id: str, text: str, timeout: float = 20) -> str:
        from acp import text_block

        with anyio.fail_after(timeout):
            response = await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        return response.stop_reason

    async def raw(self, method: str, params: dict[str, Any]) -> Any:
        """A request the SDK has no wrapper for (``session/delete``)."""
        with anyio.fail_after(20):
            return await self.conn._conn.send_request(method, params)

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return self.wire.updates(session_id)

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates(session_id)]


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def clean_env() -> dict[str, str]:
    """No API keys leak into the agent from the developer's shell."""
    return {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
