"""ACP's ``initialize``: the answer (:func:`initialize`, one function for every path that gives it); ``entry.serve``,
the ``awaken-stdio acp`` entry, gives it before the event loop starts.

``entry.serve`` reads the config as TOML (``app/startup.py``), then the first line of input (``protocols/early.py``). A
plain ``initialize`` request is answered with this module and the standard library alone; then ``front.py`` starts the
event loop, the JSON-RPC peer and the app with what was read and not answered, and adopts what this answer negotiated.
Any other first line is left to the peer, whose answer it always was. Later ``initialize`` requests, and a first one
whose params need pydantic's validation, are answered by ``AcpFront`` with the same :func:`initialize`.

What the answer says is read from the raw config: whether the default agent's model is usable (the description of the
``authMethods``, which every answer has) and what it accepts (``promptCapabilities``). A request for version 2 in v2's
shape gets v2's answer (``v2/initialize.py``) and the connection speaks v2 from then on; every other request gets v1's,
as always.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from awaken_stdio.app.config_file import ConfigFile
from awaken_stdio.app.startup import loaded_heavy_modules, model_problem, prompt_capabilities, server_info
from awaken_stdio.protocols.acp.codes import AUTH_METHOD, LOGIN_METHOD, PROTOCOL_VERSION
from awaken_stdio.protocols.acp.v2.initialize import asks_v2, initialize_v2

__all__ = ["Initialized", "auth_methods", "client_capabilities", "initialize"]

log = logging.getLogger(__name__)

_SESSION_CAPABILITIES = ("list", "resume", "close", "delete", "additionalDirectories", "fork")


@dataclass(frozen=True, slots=True, kw_only=True)
class Initialized:
    """An ``initialize`` answered: the result, and what the server keeps of it."""

    result: dict[str, Any]
    client: dict[str, Any]  # the request's clientCapabilities
    prompt_caps: dict[str, bool]  # the promptCapabilities the result advertised
    version: int = PROTOCOL_VERSION  # the protocol version negotiated (2 only when the client asked for it)


def initialize(
    params: dict[str, Any] | list[Any] | None, file: ConfigFile, *, validate: bool = True
) -> Initialized | None:
    """The answer to ``initialize`` with ``params``, from the raw config ``file``.

    ``None`` only when ``validate`` is false and the params need pydantic's validation (the early path leaves them to
    the peer); a validation error is raised, to be answered with -32602.
    """
    if asks_v2(params):
        assert isinstance(params, dict)
        v2 = initialize_v2(params, file, validate=validate)
        if v2 is None:
            return None
        result, client, prompt_caps = v2
        return Initialized(result=result, client=client, prompt_caps=prompt_caps, version=2)
    client = client_capabilities(params, validate=validate)
    if client is None:
        return None
    prompt_caps = prompt_capabilities(file)
    problem = model_problem(file)
    log.debug("answering initialize; heavy modules loaded: %s", loaded_heavy_modules())
    result = {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": prompt_caps,
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {
                **{key: {} for key in _SESSION_CAPABILITIES},
                "systemPrompt": {"mode": {"override": {}}},  # unstable: append (always) and override
            },
        },
        "agentInfo": server_info(),
        "authMethods": auth_methods(problem, terminal=_terminal_auth(client)),
    }
    return Initialized(result=result, client=client, prompt_caps=prompt_caps)


def client_capabilities(params: Any, *, validate: bool = True) -> dict[str, Any] | None:
    """The ``clientCapabilities`` of ``initialize`` params, checked by hand when every field has its plain type.

    Anything else (a wrong type, or a value pydantic would coerce) goes through the wire model, whose error is the
    answer as before; only then does pydantic load before the answer. With ``validate`` false that case is ``None``.
    """
    if not params:
        return {}
    if isinstance(params, dict):
        caps: Any = params.get("clientCapabilities", {})
        fs: Any = caps.get("fs", {}) if isinstance(caps, dict) else None
        if (
            isinstance(fs, dict)
            and type(params.get("protocolVersion", PROTOCOL_VERSION)) is int
            and all(type(fs.get(key, False)) is bool for key in ("readTextFile", "writeTextFile"))
            and type(caps.get("terminal", False)) is bool
            and isinstance(caps.get("session"), dict | None)
            and isinstance(caps.get("elicitation"), dict | None)
            and isinstance(params.get("clientInfo"), dict | None)
        ):
            return caps
    if not validate:
        return None
    from awaken_stdio.protocols.acp.wire import InitializeParams

    return InitializeParams.model_validate(params).client_capabilities.model_dump(by_alias=True)


def auth_methods(problem: str | None, *, terminal: bool) -> list[dict[str, Any]]:
    """Every answer names how to authenticate (the ACP registry requires an ``agent`` or ``terminal`` method):
    ``configure-model`` (``authenticate`` re-reads the config and the keys ``awaken-stdio login`` saved), and the
    terminal login itself for clients that can run it (``auth.terminal``, or the older ``_meta["terminal-auth"]``)."""
    methods: list[dict[str, Any]] = []
    if terminal:
        methods.append(
            {
                "type": "terminal",
                "id": LOGIN_METHOD,
                "name": "Log in with an API key",
                "description": "Choose the model provider and enter its API key (saved in the OS keyring or a "
                "private file, never shown)",
                "args": ["login"],
            }
        )
    description = problem or "A model is configured; run `awaken-stdio login` in a terminal to change its API key"
    methods.append({"id": AUTH_METHOD, "name": "Configure a model", "description": description})
    return methods


def _terminal_auth(client: dict[str, Any]) -> bool:
    auth, meta = client.get("auth"), client.get("_meta")
    return (isinstance(auth, dict) and auth.get("terminal") is True) or (
        isinstance(meta, dict) and bool(meta.get("terminal-auth"))
    )
