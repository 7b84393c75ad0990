"""Shared pieces of the MCP tests: a config with scripted agents, the server spawned for the SDK ``Client`` with its
wire tapped, and the check that every message the server wrote validates against the pinned ``mcp_types`` models."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import methods

HERE = Path(__file__).parent
REPO = HERE.parents[2]
MODERN = "2026-07-28"


@dataclass
class Env:
    root: Path
    config: Path
    store: str
    cwd: Path

    def command(self) -> list[str]:
        return [sys.executable, "-m", "awaken_stdio", "mcp", "--config", str(self.config), "--store", self.store,
                "--cwd", str(self.cwd)]  # fmt: skip

    def environ(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{REPO}", "PYTHONUNBUFFERED": "1"}

    @property
    def marks(self) -> list[str]:
        path = self.cwd / "marks.txt"
        return path.read_text().split() if path.exists() else []


def turn(text: str = "", *calls: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"text": text, "tool_calls": list(calls), **extra}


def make_env(
    tmp: Path, turns: list[dict[str, Any]] | None = None, *, mcp_permission: str = "allow", extra: str = ""
) -> Env:
    """Agent ``helper`` (exposed, plays ``turns``; edits ask) and the tools of ``mcp_test_tools``."""
    turns = turns if turns is not None else [turn("Hello from the helper.")]
    (tmp / "helper.json").write_text(json.dumps({"turns": turns}))
    cwd = tmp / "work"
    cwd.mkdir(exist_ok=True)
    config = tmp / "config.toml"
    config.write_text(
        f"""
[models.helper]
provider = "scripted"
script = "helper.json"

[agents.helper]
model = "helper"
description = "A scripted helper."
expose_mcp = true

[agents.quiet]
model = "helper"

[tools]
builtin = true
modules = ["mcp_test_tools"]

[mcp]
permission = "{mcp_permission}"
{extra}
"""
    )
    return Env(tmp, config, f"sqlite:///{tmp / 'store.db'}", cwd)


class Tap:
    """The server's stdin and stdout, copied to files by ``tee`` so the test can check every line afterwards."""

    def __init__(self, env: Env, name: str) -> None:
        self.inbound = env.root / f"{name}.in.jsonl"
        self.outbound = env.root / f"{name}.out.jsonl"

    def params(self, env: Env) -> StdioServerParameters:
        server = " ".join(f"'{part}'" for part in env.command())
        script = f"tee -a '{self.inbound}' | {server} | tee -a '{self.outbound}'"
        return StdioServerParameters(command="sh", args=["-c", script], env=env.environ())

    def check(self) -> int:
        """Validate what the server wrote; returns how many messages were checked."""
        return check_wire(_lines(self.inbound), _lines(self.outbound))


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            message = json.loads(line)  # stdout purity: every line is one JSON object
            assert isinstance(message, dict), line
            out.append(message)
    return out


def check_wire(inbound: list[dict[str, Any]], outbound: list[dict[str, Any]]) -> int:
    """Every result, notification and request the server sent, against the models of its negotiated version."""
    requests = {m["id"]: m for m in inbound if "method" in m and "id" in m}
    legacy_version: str | None = None
    for message in outbound:
        assert message.get("jsonrpc") == "2.0", message
        if "method" in message:
            version = legacy_version or MODERN
            if "id" in message:
                methods.parse_server_request(message["method"], version, message.get("params"))
            else:
                methods.parse_server_notification(message["method"], version, message.get("params"))
            continue
        if "error" in message:
            error = message["error"]
            assert isinstance(error["code"], int) and isinstance(error["message"], str), message
            continue
        request = requests[message["id"]]
        meta = (request.get("params") or {}).get("_meta") or {}
        version = meta.get("io.modelcontextprotocol/protocolVersion") or legacy_version or "2025-11-25"
        if request["method"] == "initialize":
            version = legacy_version = message["result"]["protocolVersion"]
        assert version is not None, request
        methods.validate_server_result(request["method"], version, message["result"])
        if version == MODERN:
            assert message["result"]["resultType"] in ("complete", "input_required"), message
            assert message["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "awaken-stdio"
    return len(outbound)


@asynccontextmanager
async def connect(env: Env, mode: str = "legacy", name: str = "wire", **kwargs: Any) -> AsyncIterator[Client]:
    """An SDK ``Client`` on a freshly spawned server; the wire is checked when the block ends."""
    tap = Tap(env, name)
    async with Client(tap.params(env), mode=mode, read_timeout_seconds=20, **kwargs) as client:  # type: ignore[arg-type]
        yield client
    assert tap.check() > 0
