"""``awaken-stdio doctor``: one line per check, a non-zero exit naming what failed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest


class _Models(BaseHTTPRequestHandler):
    """GET /v1/models/<id>: 200 for gpt-test, 404 otherwise (what an OpenAI-compatible server answers)."""

    def do_GET(self) -> None:
        if self.path.endswith("/models/gpt-test"):
            body, status = {"id": "gpt-test", "object": "model", "created": 0, "owned_by": "me"}, 200
        else:
            body, status = {"error": {"message": "model not found", "type": "invalid_request_error"}}, 404
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def doctor(tmp_path: Path, toml: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "demo.json").write_text('{"turns": [{"text": "hi"}]}')
    (tmp_path / "config.toml").write_text(toml)
    command = ["doctor", "--config", str(tmp_path / "config.toml"), "--store", f"sqlite:///{tmp_path}/a.db"]
    return subprocess.run([sys.executable, "-m", "awaken_stdio", *command], capture_output=True, text=True, timeout=60)


SCRIPTED = '[models.demo]\nprovider = "scripted"\nscript = "demo.json"\n[agents.a]\nmodel = "demo"\n'


def test_a_good_installation_passes(tmp_path: Path, endpoint: str) -> None:
    out = doctor(
        tmp_path, SCRIPTED + f'[models.gpt]\nprovider = "openai"\nmodel = "gpt-test"\nbase_url = "{endpoint}"\n'
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines() if not line.startswith(" ")]  # the checks, not their notes
    assert lines[0].startswith("ok    config: ")
    assert "schema version" in lines[1]
    assert "ok    model demo: scripted, 1 turn" in lines
    assert f"ok    model gpt: openai gpt-test at {endpoint}" in lines


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            '[models.gpt]\nprovider = "openai"\nmodel = "gpt-4.1"\napi_key_env = "AWAKEN_NO_SUCH_KEY"\n',
            "FAIL  model gpt: AWAKEN_NO_SUCH_KEY is not set",
        ),
        (
            '[mcp_servers.broken]\ncommand = "/nonexistent/server"\n',
            "FAIL  mcp server broken: command not found: /nonexistent/server",
        ),
        ('[tools]\nmodules = ["h4_no_such_tools"]\n', "FAIL  tools module h4_no_such_tools: tools.modules: cannot"),
    ],
)
def test_each_fault_is_named_and_fails_the_run(tmp_path: Path, extra: str, line: str) -> None:
    out = doctor(tmp_path, SCRIPTED + extra)
    assert out.returncode == 1
    assert any(printed.startswith(line) for printed in out.stdout.splitlines()), out.stdout


def test_a_model_the_endpoint_does_not_serve_fails(tmp_path: Path, endpoint: str) -> None:
    out = doctor(tmp_path, SCRIPTED + f'[models.gpt]\nprovider = "openai"\nmodel = "nope"\nbase_url = "{endpoint}"\n')
    assert out.returncode == 1
    assert "FAIL  model gpt: model nope not found" in out.stdout


def test_a_broken_config_is_the_first_and_only_check(tmp_path: Path) -> None:
    out = doctor(tmp_path, "[agents.a]\nmodel = 'missing'\n")
    assert out.returncode == 1
    assert [line for line in out.stdout.splitlines() if not line.startswith(" ")] == [
        f"FAIL  config: {tmp_path / 'config.toml'}: agents.a.model: no model 'missing' in [models]"
    ]


def test_every_place_the_config_is_looked_for_is_printed(tmp_path: Path) -> None:
    out = doctor(tmp_path, SCRIPTED)
    notes = [line.strip() for line in out.stdout.splitlines() if line.startswith(" ")][:4]
    assert notes[0] == f"--config: {tmp_path / 'config.toml'} (used)"
    assert notes[1] == "$AWAKEN_STDIO_CONFIG: not set"
    assert notes[2].startswith("project config file (.awaken-stdio.toml in ")
    assert notes[3].startswith("user config file: ") and notes[3].endswith("(not read: --config comes first)")


def test_without_a_config_file_it_says_where_it_looked(tmp_path: Path) -> None:
    drop = ("AWAKEN_STDIO_CONFIG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    command = [sys.executable, "-m", "awaken_stdio", "doctor", "--store", "memory://"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert "ok    config: no config file: defaults from the environment" in out.stdout
    expected = tmp_path / "xdg" / "awaken-stdio" / "config.toml"
    assert f"user config file: {expected} (not found: defaults from the environment)" in out.stdout


def test_each_tool_module_is_imported_and_its_tools_counted(tmp_path: Path) -> None:
    (tmp_path / "h4_doctor_tools.py").write_text(
        'from awaken_stdio import tool\n\n@tool\ndef a() -> str:\n    """A."""\n    return "a"\n\n'
        '@tool\ndef b() -> str:\n    """B."""\n    return "b"\n'
    )
    out = doctor(tmp_path, SCRIPTED + '[tools]\nmodules = ["h4_doctor_tools"]\n')
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"ok    tools module h4_doctor_tools: 2 tools ({tmp_path / 'h4_doctor_tools.py'})" in out.stdout


@pytest.mark.anyio
async def test_a_hung_mcp_server_is_given_up_after_the_stated_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import awaken_stdio.doctor
    from awaken_stdio.doctor import checks

    monkeypatch.setattr(awaken_stdio.doctor, "MCP_TIMEOUT_S", 1.0)  # the server's own timeout_s is the default 30
    (tmp_path / "config.toml").write_text('[mcp_servers.hung]\ncommand = "sleep"\nargs = ["60"]\n')
    said: list[str] = []
    with anyio.fail_after(20):
        done = [c async for c in checks(str(tmp_path / "config.toml"), "memory://", said.append)]
    assert said == ["starting MCP servers hung (gives up on each after 1 s)..."]
    hung = next(c for c in done if c.name == "mcp server hung")
    assert not hung.ok and hung.detail == "TimeoutError: no answer within 1 s"


def test_progress_goes_to_stderr_and_the_checks_to_stdout(tmp_path: Path) -> None:
    out = doctor(tmp_path, SCRIPTED + '[mcp_servers.broken]\ncommand = "/nonexistent/server"\n')
    assert "starting MCP servers broken (gives up on each after 10 s)..." in out.stderr
    assert "starting" not in out.stdout


@pytest.mark.anyio
async def test_a_missing_server_command_is_not_retried() -> None:
    from awaken_stdio.tools.mcp import McpServerSpec, open_mcp_toolsets

    spec = McpServerSpec(name="gone", transport="stdio", command="h4-no-such-mcp-server")
    async with open_mcp_toolsets([spec]) as toolsets:
        await anyio.sleep(1.5)  # a restart would come after 0.5 s
        status = toolsets.status("gone")
    assert (status.state, status.restarts, status.retry_in_s) == ("failed", 0, None)
    assert status.error is not None and status.error.startswith("command not found: h4-no-such-mcp-server (")
