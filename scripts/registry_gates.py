#!/usr/bin/env python3
"""The gates the ACP and MCP registries put an agent through, run here before a release instead of in their CI.

What each registry checks, and where it says so (agentclientprotocol/registry, modelcontextprotocol/registry):

- ``icon.svg``: 16x16 (width/height or viewBox), square, monochrome: every ``fill``/``stroke`` (attribute or
  style) is ``currentColor``, ``none`` or ``inherit``, and ``currentColor`` is used (CONTRIBUTING.md, "Icon
  Validation"; ``build_registry.py``).
- ``agent.json``: the registry's schema, then its own rules: id lowercase with hyphens, starting with a letter, equal
  to the directory name (ours: the PyPI name); semver version; ``uvx.package`` pinned to that version, never
  ``latest`` (CONTRIBUTING.md, "Validation").
- ``server.json``: the MCP registry's schema; PyPI ownership by the line ``mcp-name: <name>`` in the README (the
  package's long description).
- Versions: ``pyproject.toml``, ``awaken_stdio/_version.py``, both manifests and their package pins agree.
- Launch (``verify_agents.py``): ``uvx --cache-dir <empty> <package> <args>`` in a sandbox whose HOME is empty; we run
  the built wheel the same way (``--from <wheel>``) and ask more: it answers ``initialize`` within 10 s, cold cache
  included, and exits 0 when stdin closes.
- Auth (``verify_agents.py --auth-check``, AUTHENTICATION.md): the ``initialize`` answer lists at least one auth
  method of type ``agent`` or ``terminal`` (a method without ``type`` counts as ``agent``, as ``client.py`` reads
  it), with no model configured and with one ("even when keys come from the environment"). A ``terminal`` method's
  ``args`` replace the agent's: they must be a command the CLI accepts.
- Protocol matrix (``protocol_matrix.py``, daily): with a model configured ``session/new`` succeeds (not
  ``auth_required``, i.e. not -32000), and ``session/list``, ``session/fork``, ``session/resume`` are advertised in
  ``sessionCapabilities`` and answer (a result, -32602 or -32002 count as support), and ``session/close`` (stop) is
  advertised and answers with an object. Without a model ``session/new`` answers -32000 (auth required).

``make registry-gates`` builds the sdist and the wheel from it once and runs every gate against that wheel;
``tests/test_registry_gates.py`` runs the same checks against the source tree. Exit 1 when a gate fails.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_TIMEOUT = 10.0  # verify_agents.py DEFAULT_TIMEOUT
RPC_TIMEOUT = 5.0  # protocol_matrix.py DEFAULT_RPC_TIMEOUT
HANDSHAKE_TIMEOUT = 120.0  # verify_agents.py DEFAULT_AUTH_TIMEOUT: a download may come first
_ALLOWED_PAINT = {"currentcolor", "none", "inherit"}
_SUPPORT = {"success", "invalid_params", "resource_not_found"}  # protocol_matrix.py SUCCESS_STATUSES
_INITIALIZE = {  # what the registry's checkers send
    "protocolVersion": 1,
    "clientInfo": {"name": "awaken-stdio registry gates", "version": "1.0.0"},
    "clientCapabilities": {
        "terminal": True,
        "fs": {"readTextFile": True, "writeTextFile": True},
        "_meta": {"terminal_output": True, "terminal-auth": True},
    },
}


@dataclass(frozen=True, slots=True)
class Gate:
    name: str
    problems: tuple[str, ...]
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def _gate(name: str, problems: Sequence[str], note: str = "") -> Gate:
    return Gate(name, tuple(problems), note)


# -- static gates -------------------------------------------------------------------------------------------------


def icon_problems(svg: str) -> list[str]:
    """The ACP registry's icon rules."""
    problems: list[str] = []
    tag = re.search(r"<svg\b[^>]*>", svg, re.DOTALL)
    if tag is None:
        return ["no <svg> element"]
    width = re.search(r'\swidth=["\']([\d.]+)', tag.group())
    height = re.search(r'\sheight=["\']([\d.]+)', tag.group())
    box = re.search(r'viewBox=["\'][\d.\-]+[\s,]+[\d.\-]+[\s,]+([\d.]+)[\s,]+([\d.]+)', tag.group())
    if width and height:
        size = (float(width.group(1)), float(height.group(1)))
    elif box:
        size = (float(box.group(1)), float(box.group(2)))
    else:
        return ["neither width/height nor a viewBox on <svg>"]
    if size != (16.0, 16.0):
        problems.append(f"icon is {size[0]:g}x{size[1]:g}, the registry wants 16x16")
    paints = re.findall(r'\b(fill|stroke)\s*=\s*["\']([^"\']+)["\']', svg, re.IGNORECASE)
    for style in re.findall(r'\bstyle\s*=\s*["\']([^"\']+)["\']', svg, re.IGNORECASE):
        paints += re.findall(r"\b(fill|stroke)\s*:\s*([^;]+)", style, re.IGNORECASE)
    problems += [
        f"hard-coded {kind}={value.strip()!r}" for kind, value in paints if value.strip().lower() not in _ALLOWED_PAINT
    ]
    if not re.search("currentColor", svg, re.IGNORECASE):
        problems.append("currentColor is not used (the icon would not follow the editor's theme)")
    return problems


def _validate(schema_file: str, instance: Any) -> list[str]:
    import jsonschema

    schema = json.loads((ROOT / "schemas" / "registry" / schema_file).read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(instance)]


def agent_problems(agent: dict[str, Any], directory: str) -> list[str]:
    """The ACP registry's schema and the rules its build script adds."""
    problems = _validate("acp-agent.schema.json", agent)
    agent_id, version = str(agent.get("id", "")), str(agent.get("version", ""))
    if not re.fullmatch(r"[a-z][a-z0-9-]*", agent_id):
        problems.append(f"id {agent_id!r}: lowercase letters, digits and hyphens, starting with a letter")
    if agent_id != directory:
        problems.append(f"id {agent_id!r} must equal the registry directory {directory!r}")
    if not re.fullmatch(r"\d+\.\d+\.\d+(?:[-+].*)?", version):
        problems.append(f"version {version!r} is not semver")
    uvx = agent.get("distribution", {}).get("uvx")
    if not isinstance(uvx, dict) or not uvx.get("package"):
        return [*problems, "distribution.uvx.package is missing"]
    package = str(uvx["package"])
    if "latest" in package.lower():
        problems.append(f"uvx package {package!r} uses latest")
    pin = re.search(r"[=@]+([\d.]+)", package)
    if pin is None or pin.group(1) != version:
        problems.append(f"uvx package {package!r} is not pinned to the version {version}")
    return problems


def _versions(root: Path) -> dict[str, str]:
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    agent = json.loads((root / "agent.json").read_text(encoding="utf-8"))
    server = json.loads((root / "server.json").read_text(encoding="utf-8"))
    source = re.search(r'__version__\s*=\s*"([^"]+)"', (root / "awaken_stdio" / "_version.py").read_text())
    found = {
        "pyproject.toml": project["version"],
        "awaken_stdio/_version.py": source.group(1) if source else "?",
        "agent.json version": agent.get("version", "?"),
        "agent.json uvx package": str(agent.get("distribution", {}).get("uvx", {}).get("package", "?")).split("==")[-1],
        "server.json version": server.get("version", "?"),
    }
    found |= {f"server.json package {p.get('identifier')}": p.get("version", "?") for p in server.get("packages", [])}
    return found


def static_gates(root: Path = ROOT) -> list[Gate]:
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    icon = root / "icon.svg"
    gates = [_gate("icon.svg", icon_problems(icon.read_text(encoding="utf-8")) if icon.is_file() else ["missing"])]
    agent = json.loads((root / "agent.json").read_text(encoding="utf-8"))
    gates.append(_gate("agent.json (ACP registry)", agent_problems(agent, project["name"])))
    server = json.loads((root / "server.json").read_text(encoding="utf-8"))
    server_problems = _validate("mcp-server.schema.json", server)
    line = f"mcp-name: {server.get('name')}"
    if line not in (root / "README.md").read_text(encoding="utf-8"):
        server_problems.append(f"README.md lacks the line {line!r} (PyPI ownership for the MCP registry)")
    gates.append(_gate("server.json (MCP registry)", server_problems))
    versions = _versions(root)
    wanted = project["version"]
    gates.append(
        _gate(
            "versions agree",
            [f"{k} is {v}, pyproject.toml {wanted}" for k, v in versions.items() if v != wanted],
            wanted,
        )
    )
    return gates


# -- the process, as the registry's checkers drive it -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Launch:
    """How the agent is started: ``program`` (a registry's launcher with the package) and agent.json's ``args``."""

    program: tuple[str, ...]
    args: tuple[str, ...]

    @property
    def command(self) -> list[str]:
        return [*self.program, *self.args]


def agent_args(root: Path = ROOT) -> tuple[str, ...]:
    agent = json.loads((root / "agent.json").read_text(encoding="utf-8"))
    return tuple(agent["distribution"]["uvx"].get("args", []))


class Agent:
    """One agent process on newline-delimited JSON-RPC over pipes (the registry's checkers speak it raw)."""

    def __init__(self, command: Sequence[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            list(command), cwd=cwd, env=env, text=True, bufsize=1, start_new_session=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self._next_id = 0
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def request(self, method: str, params: dict[str, Any], timeout: float = RPC_TIMEOUT) -> dict[str, Any] | None:
        """The answer to ``method``, skipping notifications; None when none comes within ``timeout``."""
        assert self.proc.stdin is not None
        self._next_id += 1
        frame = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                return None
            message = json.loads(line)
            if message.get("id") == self._next_id and ("result" in message or "error" in message):
                return message
        return None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def close(self, grace: float = 2.0) -> int | None:
        """Close stdin (an editor going away) and return the exit code, or None if it had to be killed."""
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        if self.proc.stdout.closed:
            return self.proc.returncode
        self.proc.stdin.close()
        try:
            code = self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            code = None
        self.stderr = self.proc.stderr.read()
        self.proc.stderr.close()
        self._reader.join()
        self.proc.stdout.close()
        return code

    def stderr_tail(self) -> str:
        """The last lines of what it logged (after ``close``)."""
        return " | ".join(self.stderr.strip().splitlines()[-3:])


def sandbox_env(home: Path, model: bool) -> dict[str, str]:
    """The caller's environment with an empty HOME and nothing of ours; ``model``: a key in the environment."""
    drop = ("AWAKEN_STDIO_", "XDG_", "ANTHROPIC_", "OPENAI_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env |= {"HOME": str(home), "TERM": "dumb"}
    if model:
        env["ANTHROPIC_API_KEY"] = "registry-gate-placeholder"  # never used: no prompt is sent
    return env


def _status(answer: dict[str, Any] | None) -> str:
    """protocol_matrix.py's classification of an answer."""
    if answer is None:
        return "no_response"
    if "result" in answer:
        return "success"
    code = answer["error"].get("code")
    message = str(answer["error"].get("message", "")).lower()
    if code == -32601:
        return "method_not_found"
    if code == -32000 or "auth_required" in message or "authentication" in message:
        return "auth_required"
    return {-32602: "invalid_params", -32002: "resource_not_found"}.get(code, f"error {code}")


def auth_types(initialize: dict[str, Any]) -> list[str]:
    """The auth method types as the registry's ``client.py`` infers them."""
    return [_auth_type(method) for method in initialize.get("authMethods", [])]


def _auth_type(method: dict[str, Any]) -> str:
    meta = method.get("_meta") if isinstance(method.get("_meta"), dict) else {}
    return method.get("type") or ("terminal" if "terminal-auth" in meta else "agent")


def _terminal_args(method: dict[str, Any]) -> list[str]:
    """The args a terminal method starts the agent with: its own, or (the older form) in ``_meta.terminal-auth``."""
    meta = method.get("_meta") if isinstance(method.get("_meta"), dict) else {}
    legacy = meta.get("terminal-auth") if isinstance(meta.get("terminal-auth"), dict) else {}
    return list(method.get("args") or legacy.get("args") or [])


def _terminal_args_problems(initialize: dict[str, Any], launch: Launch, cwd: Path, env: dict[str, str]) -> list[str]:
    """A terminal method's ``args`` replace the agent's: ``<cmd> <args> --help`` must be a command we accept."""
    problems: list[str] = []
    for method in initialize.get("authMethods", []):
        if _auth_type(method) != "terminal":
            continue
        args = _terminal_args(method)
        run = subprocess.run([*launch.program, *args, "--help"], cwd=cwd, env=env, capture_output=True, timeout=30)
        if not args or run.returncode != 0:
            problems.append(f"terminal auth {method.get('id')}: `{' '.join(args)} --help` exited {run.returncode}")
    return problems


def launch_gate(launch: Launch, sandbox: Path, timeout: float = LAUNCH_TIMEOUT) -> Gate:
    """Cold start: the first ``initialize`` answer within ``timeout``, then a clean exit when stdin closes."""
    home = sandbox / "launch-home"
    home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    agent = Agent(launch.command, sandbox, sandbox_env(home, model=False))
    answer = agent.request("initialize", _INITIALIZE, timeout)
    took = time.monotonic() - started
    code = agent.close(grace=LAUNCH_TIMEOUT)  # the registry's launch check waits as long for an exit
    problems = [] if answer and "result" in answer else [f"no initialize answer within {timeout:g} s"]
    if code != 0:
        problems.append(f"on EOF it exited {code}, not 0 within {LAUNCH_TIMEOUT:g} s")
    if problems:
        problems.append(agent.stderr_tail())
    return _gate("launch (verify_agents.py)", problems, f"initialize answered after {took:.1f} s")


def protocol_gates(launch: Launch, sandbox: Path) -> Iterator[Gate]:
    """The auth check and the protocol matrix, without and with a model configured."""
    workspace = sandbox / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    for model in (False, True):
        label = "a model configured" if model else "no model"
        home = sandbox / f"home-{'model' if model else 'none'}"
        home.mkdir(parents=True, exist_ok=True)
        env = sandbox_env(home, model)
        agent = Agent(launch.command, workspace, env)
        try:
            answer = agent.request("initialize", _INITIALIZE, HANDSHAKE_TIMEOUT)
            if answer is None or "result" not in answer:
                agent.close()
                yield _gate(f"initialize ({label})", [f"no answer: {answer or agent.stderr_tail()}"])
                continue
            init = answer["result"]
            types = auth_types(init)
            auth = (
                []
                if {"agent", "terminal"} & set(types)
                else [f"no auth method of type agent or terminal (types: {types})"]
            )
            auth += _terminal_args_problems(init, launch, workspace, env)
            yield _gate(f"auth check ({label})", auth, ", ".join(types))
            new = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})
            if not model:
                status = _status(new)
                yield _gate("session/new asks for auth (no model)", [] if status == "auth_required" else [status])
                continue
            yield from _matrix(agent, init, new, workspace)
        finally:
            agent.close()


def _matrix(agent: Agent, init: dict[str, Any], new: dict[str, Any] | None, workspace: Path) -> Iterator[Gate]:
    status = _status(new)
    yield _gate("session/new (a model configured)", [] if status == "success" else [status])
    session_id = (new or {}).get("result", {}).get("sessionId", "sess_matrix_probe")
    advertised = init.get("agentCapabilities", {}).get("sessionCapabilities", {}) or {}
    probes = {
        "session/list": {},
        "session/fork": {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []},
        "session/resume": {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []},
        "session/close": {"sessionId": session_id},
    }
    for method, params in probes.items():
        capability = method.removeprefix("session/")
        answer = agent.request(method, params)
        status = _status(answer)
        problems = (
            [] if advertised.get(capability) is not None else [f"sessionCapabilities.{capability} not advertised"]
        )
        if method == "session/close":
            ok = status == "success" and isinstance((answer or {}).get("result"), dict)
        else:
            ok = status in _SUPPORT
        yield _gate(f"{method} (matrix)", problems if ok else [*problems, status])


# -- the wheel ----------------------------------------------------------------------------------------------------


def build_wheel(out: Path) -> Path:
    """The sdist, then the wheel from it (what PyPI users install; no stale ``build/`` in the tree leaks in)."""
    subprocess.run([_uv(), "build", "--quiet", "--out-dir", str(out), str(ROOT)], check=True)
    [wheel] = out.glob("*.whl")
    return wheel


def _uv() -> str:
    """uv on PATH, else the one the ``uv`` package (the ``dev`` extra) installed next to this Python."""
    found = shutil.which("uv")
    if found is None:
        try:
            from uv import find_uv_bin  # pyright: ignore[reportMissingImports]

            found = find_uv_bin()
        except (ImportError, FileNotFoundError):
            raise SystemExit(
                "uv is not installed: pip install uv (the registry launches Python agents with uvx)"
            ) from None
    return found


def wheel_launch(wheel: Path, sandbox: Path) -> Launch:
    """``uvx --cache-dir <empty> <package> acp`` as verify_agents.py runs it, with the package from ``wheel``."""
    agent = json.loads((ROOT / "agent.json").read_text(encoding="utf-8"))
    uvx = agent["distribution"]["uvx"]
    package = re.split(r"[<>=!@]", uvx["package"])[0]
    cache = sandbox / "uv-cache"
    cache.mkdir(parents=True, exist_ok=True)
    uvx_bin = str(Path(_uv()).with_name("uvx"))
    return Launch((uvx_bin, "--cache-dir", str(cache), "--from", str(wheel), uvx.get("cmd", package)), agent_args())


def report(gates: Sequence[Gate]) -> str:
    width = max(len(g.name) for g in gates)
    lines = []
    for g in gates:
        detail = "; ".join(g.problems) if g.problems else g.note
        lines.append(f"{'ok  ' if g.ok else 'FAIL'}  {g.name:<{width}}  {detail}".rstrip())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--wheel", type=Path, help="a built wheel (default: build one from this tree)")
    parser.add_argument(
        "--launch-timeout", type=float, default=LAUNCH_TIMEOUT,
        help="seconds a cold start (download included) may take to answer initialize (default: %(default)s)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="awaken-registry-gates-") as tmp:
        sandbox = Path(tmp)
        gates = static_gates()
        wheel = args.wheel or build_wheel(sandbox / "dist")
        launch = wheel_launch(wheel, sandbox)
        gates.append(launch_gate(launch, sandbox, args.launch_timeout))  # first: the cache is still empty
        gates += protocol_gates(launch, sandbox)
    failed = [g.name for g in gates if not g.ok]
    summary = f"{len(gates) - len(failed)} of {len(gates)} registry gates pass"
    sys.stdout.write(f"{report(gates)}\n\n{summary}{'; failing: ' + ', '.join(failed) if failed else ''}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
