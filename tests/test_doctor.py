"""``awaken-stdio doctor``: one line per check, a non-zero exit naming what failed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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
    lines = out.stdout.splitlines()
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
        ('[mcp_servers.broken]\ncommand = "/nonexistent/server"\n', "FAIL  mcp server broken: "),
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


def test_a_broken_config_is_the_first_and_only_line(tmp_path: Path) -> None:
    out = doctor(tmp_path, "[agents.a]\nmodel = 'missing'\n")
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        f"FAIL  config: {tmp_path / 'config.toml'}: agents.a.model: no model 'missing' in [models]"
    ]
