"""How to reach an MCP server and what is said about it: the spec (from a config table, built in
``app/assemble.py``, or an ACP ``mcpServers`` entry), the environment a stdio server inherits, its status and the
restart policy.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from awaken_stdio.contract.errors import ConfigError

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "McpServerSpec",
    "McpServerState",
    "McpServerStatus",
    "RestartPolicy",
    "missing_command",
    "server_environment",
]

McpServerState = Literal["connecting", "ready", "failed", "stopped"]

# What a stdio server inherits from us; everything else (API keys, tokens) stays here. The SDK's own default list is
# narrower (no locale, temp dir, proxies or CA bundles), which breaks servers behind a proxy or printing non-ASCII.
_ENV_ALLOW = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
        "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        # Windows: programs fail in odd ways without these.
        "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "APPDATA", "LOCALAPPDATA", "USERPROFILE",
        "USERNAME", "HOMEDRIVE", "HOMEPATH", "PROGRAMDATA", "PROGRAMFILES", "PROCESSOR_ARCHITECTURE",
    }
)  # fmt: skip
_ENV_ALLOW_PREFIXES = ("LC_",)
DEFAULT_CALL_TIMEOUT_S = 300.0  # a tool call's answer; the config's default, and the one of ACP session servers


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerSpec:
    """How to reach one MCP server: a program to start (``stdio``) or a streamable-HTTP endpoint (``http``).

    ``env`` and ``headers`` are left out of the repr: they carry tokens. ``timeout_s`` bounds connecting, the
    handshake and each full listing; ``call_timeout_s`` each tool call (then cancelled on the server);
    ``stop_grace_s`` is each step of the shutdown escalation.
    """

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = 30.0
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    stop_grace_s: float = 2.0

    def __post_init__(self) -> None:
        where = f"MCP server {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():  # pyright: ignore[reportUnnecessaryIsInstance]  # a plugin's spec may carry anything
            raise ConfigError("an MCP server needs a non-empty name")
        if self.transport == "stdio":
            if not self.command or self.url is not None:
                raise ConfigError(f"{where}: a stdio server needs a `command` and no `url`")
        elif self.transport == "http":
            if not self.url or not self.url.startswith(("http://", "https://")) or self.command is not None:
                raise ConfigError(f"{where}: an http server needs an http(s) `url` and no `command`")
        else:
            raise ConfigError(f"{where}: unsupported transport {self.transport!r} (use stdio or http)")
        if not self.timeout_s > 0 or not self.call_timeout_s > 0 or not self.stop_grace_s > 0:
            raise ConfigError(f"{where}: timeouts must be positive")

    @classmethod
    def from_acp(cls, entry: Any, *, cwd: str | None = None, timeout_s: float = 30.0) -> McpServerSpec:
        """The spec of one ACP ``session/new`` ``mcpServers`` entry.

        stdio ``{name, command, args, env: [{name, value}]}`` (``type`` absent or ``"stdio"``) or http ``{type:
        "http", name, url, headers: [{name, value}]}``. ACP gives stdio servers no working directory: the session's
        ``cwd`` is used. Anything else (``sse`` included) is a ``ConfigError`` the protocol layer answers -32602.
        """
        if not isinstance(entry, Mapping):
            raise ConfigError("mcpServers: each entry must be an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("mcpServers: each entry needs a non-empty string `name`")
        where = f"mcpServers[{name!r}]"
        kind = entry.get("type", "stdio")
        if kind == "http":
            url = entry.get("url")
            if not isinstance(url, str):
                raise ConfigError(f"{where}: an http server needs a string `url`")
            headers = _name_values(entry.get("headers", []), f"{where}.headers")
            return cls(name=name, transport="http", url=url, headers=headers, timeout_s=timeout_s)
        if kind != "stdio":
            raise ConfigError(f"{where}: unsupported MCP transport {kind!r} (stdio and http are supported)")
        command, args = entry.get("command"), entry.get("args", [])
        if not isinstance(command, str) or not command:
            raise ConfigError(f"{where}: a stdio server needs a string `command`")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{where}: `args` must be a list of strings")
        env = _name_values(entry.get("env", []), f"{where}.env")
        return cls(
            name=name, transport="stdio", command=command, args=tuple(args), env=env, cwd=cwd, timeout_s=timeout_s
        )


def _name_values(items: Any, where: str) -> dict[str, str]:
    if not isinstance(items, list):
        raise ConfigError(f"{where} must be a list of {{name, value}} objects")
    out: dict[str, str] = {}
    for item in items:
        if not (isinstance(item, Mapping) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)):
            raise ConfigError(f"{where}: each entry must be {{name: string, value: string}}")
        out[item["name"]] = item["value"]
    return out


def server_environment(extra: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a stdio server: the allow-listed variables of ours, then the spec's own.

    Shell functions exported by bash (values starting with ``()``) are not passed on.
    """
    source = os.environ if environ is None else environ
    env = {
        key: value
        for key, value in source.items()
        if (key in _ENV_ALLOW or key.startswith(_ENV_ALLOW_PREFIXES)) and not value.startswith("()")
    }
    env.update(extra)
    return env


def missing_command(spec: McpServerSpec) -> str | None:
    """Why a stdio server's program cannot be started at all (not found on its PATH, or not executable), or None."""
    if spec.command is None:
        return None
    command = spec.command
    if os.sep in command and spec.cwd:
        command = os.path.join(spec.cwd, command)  # what the child resolves it against (absolute paths stay)
    if shutil.which(command, path=server_environment(spec.env).get("PATH", os.defpath)) is not None:
        return None
    return f"command not found: {spec.command} (install it, or give its absolute path as `command`)"


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerStatus:
    """What ``doctor``, ACP and MCP report about one server.

    ``error`` is the last failure (kept while reconnecting, cleared once ready); ``retry_in_s`` is set while a
    restart is scheduled, and ``None`` in ``failed`` once the restart policy gave up. ``stopped``: closed.
    """

    name: str
    transport: str
    state: McpServerState
    error: str | None = None
    tools: tuple[str, ...] = ()
    restarts: int = 0
    retry_in_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "error": self.error,
            "tools": list(self.tools),
            "restarts": self.restarts,
            "retry_in_s": self.retry_in_s,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartPolicy:
    """When a failed server is tried again: ``initial_s`` doubling up to ``max_s``, at most ``max_failures`` in a row.

    A connection that stayed up ``stable_s`` resets the count, so a server that crashes right after starting
    cannot restart forever while one that dies once a day always comes back.
    """

    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0
    max_failures: int = 8
    stable_s: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.max_s, self.initial_s * self.factor ** max(failures - 1, 0))
