"""Hints that send a newcomer the right way: a config with only models, an OpenAI-compatible server with no config.

Through the real commands (``doctor``, ``chat`` with piped input) and, for the server, a local HTTP server that
answers ``/models`` and streams Chat Completions as an OpenAI-compatible server does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(tmp_path: Path, *args: str, typed: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """``awaken-stdio ARGS`` with no API key, user config or store from the developer's environment."""
    base = {
        k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith(("AWAKEN_", "OPENAI_"))
    }
    base |= {"PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    command = [sys.executable, "-m", "awaken_stdio", *args, "--store", "memory://"]
    return subprocess.run(command, input=typed, capture_output=True, text=True, timeout=60, env=base | env)


def config(tmp_path: Path, *models: str) -> str:
    (tmp_path / "hello.json").write_text('{"turns": [{"text": "Hello from the only model."}]}')
    path = tmp_path / "config.toml"
    path.write_text("".join(f'[models.{m}]\nprovider = "scripted"\nscript = "hello.json"\n\n' for m in models))
    return str(path)


def test_a_config_with_one_model_and_no_agents_serves_it_as_the_default_agent(tmp_path: Path) -> None:
    path = config(tmp_path, "mine")

    doctor = run(tmp_path, "doctor", "--config", path)
    chat = run(tmp_path, "chat", "--config", path, typed="hi\n")

    assert doctor.returncode == 0, doctor.stdout
    assert "agents" not in doctor.stdout
    assert chat.returncode == 0, chat.stderr
    assert "Hello from the only model." in chat.stdout


def test_a_config_with_several_models_and_no_agents_says_exactly_what_to_add(tmp_path: Path) -> None:
    path = config(tmp_path, "fast", "smart")
    hint = (
        f"no agent: {path} defines the models 'fast' and 'smart' and no [agents]: add [agents.default] with "
        'model = "fast" (or another of them)'
    )

    doctor = run(tmp_path, "doctor", "--config", path)
    chat = run(tmp_path, "chat", "--config", path, typed="hi\n")

    assert doctor.returncode == 1
    assert f"FAIL  agents: {hint}" in doctor.stdout
    assert hint in chat.stderr


class _Server(BaseHTTPRequestHandler):
    """GET /v1/models (and /v1/models/<id>) lists ``served``; POST /v1/chat/completions streams one answer."""

    served: tuple[str, ...] = ()
    asked: list[str] = []

    def do_GET(self) -> None:
        models = [{"id": m, "object": "model", "created": 0, "owned_by": "me"} for m in self.served]
        if self.path.endswith("/models"):
            self._json({"object": "list", "data": models})
        else:
            self._json(next(m for m in models if self.path.endswith(f"/models/{m['id']}")))

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.asked.append(request["model"])
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": request["model"]}
        events = [
            chunk | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Served by the only model."}}]},
            chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(body.encode())

    def _json(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str]]]:
    handler = type("Handler", (_Server,), {"served": tuple(request.param), "asked": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", handler.asked
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("server", [["qwen-test"]], indirect=True)
def test_openai_base_url_without_a_config_uses_the_servers_only_model(
    tmp_path: Path, server: tuple[str, list[str]]
) -> None:
    url, asked = server
    env = {"OPENAI_API_KEY": "sk-local", "OPENAI_BASE_URL": url}

    doctor = run(tmp_path, "doctor", **env)
    chat = run(tmp_path, "chat", typed="hi\n", **env)

    assert f"ok    model default: openai qwen-test at {url}" in doctor.stdout, doctor.stdout
    assert chat.returncode == 0, chat.stderr
    assert "Served by the only model." in chat.stdout
    assert asked == ["qwen-test"]


@pytest.mark.parametrize("server", [["llama3", "qwen-test"]], indirect=True)
def test_openai_base_url_serving_several_models_says_which_to_set(
    tmp_path: Path, server: tuple[str, list[str]]
) -> None:
    url, asked = server

    doctor = run(tmp_path, "doctor", OPENAI_API_KEY="sk-local", OPENAI_BASE_URL=url)

    assert doctor.returncode == 1
    assert (
        f"FAIL  model default: no model is set and {url} serves 2 models (llama3, qwen-test): name one as `model` "
        f'beside base_url = "{url}"'
    ) in doctor.stdout
    assert asked == []
