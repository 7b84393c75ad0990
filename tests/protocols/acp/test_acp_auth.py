"""Authentication as the ACP registry requires it, end to end: every ``initialize`` answer names an ``agent``
method (and the terminal ``login`` for clients that can run it), ``awaken-stdio login`` saves a key the runtime then
finds, ``authenticate`` succeeds once it is there and otherwise says to run the login, and ``session/new`` asks for
authentication only while no model can answer.

The real agent process and the real CLI; the key goes to a credentials file in the test's directory
(``AWAKEN_STDIO_CREDENTIALS``), or to a stand-in ``keyring`` package.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from .conftest import ROOT, Harness, clean_env

pytestmark = pytest.mark.anyio

KEY_ENV = "AWAKEN_E2E_LOGIN_KEY"
KEY = "sk-login-0123456789abcdef"

FAKE_KEYRING = """
import json, os

class _Backend:
    priority = 1

def get_keyring():
    return _Backend()

def _load():
    try:
        with open(os.environ["FAKE_KEYRING_FILE"]) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}

def _save(data):
    with open(os.environ["FAKE_KEYRING_FILE"], "w") as f:
        json.dump(data, f)

def set_password(service, name, value):
    data = _load(); data[f"{service}/{name}"] = value; _save(data)

def get_password(service, name):
    return _load().get(f"{service}/{name}")

def delete_password(service, name):
    data = _load(); data.pop(f"{service}/{name}", None); _save(data)
"""


class Login:
    """Where the test keeps keys, and the environment every process of the test gets."""

    def __init__(self, tmp_path: Path, *, keyring: bool = False) -> None:
        self.credentials = tmp_path / "credentials.json"
        self.env = {"AWAKEN_STDIO_CREDENTIALS": str(self.credentials), "PYTHONPATH": str(ROOT)}
        if keyring:
            package = tmp_path / "fake_keyring" / "keyring"
            (package / "backends").mkdir(parents=True)
            (package / "__init__.py").write_text(FAKE_KEYRING)
            (package / "backends" / "__init__.py").write_text("")
            (package / "backends" / "fail.py").write_text("class Keyring:\n    pass\n")
            self.keyring_file = tmp_path / "keyring.json"
            self.env |= {
                "PYTHONPATH": f"{ROOT}{os.pathsep}{package.parent}",
                "FAKE_KEYRING_FILE": str(self.keyring_file),
            }
        else:
            self.env["AWAKEN_STDIO_KEYRING"] = "off"

    def cli(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        env = {**clean_env(), **self.env}
        command = [sys.executable, "-m", "awaken_stdio", *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, env=env, check=False)


def configure(harness: Harness) -> None:
    harness.config = harness.dir / "config.toml"
    harness.config.write_text(
        'default_agent = "coder"\n[models.gpt]\nprovider = "openai"\nmodel = "gpt-4.1"\n'
        f'api_key_env = "{KEY_ENV}"\n[agents.coder]\nmodel = "gpt"\n'
    )


def methods(init: Any) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in init}


async def test_every_initialize_answer_names_an_agent_method_and_terminal_clients_get_the_login(
    harness: Harness,
) -> None:
    harness.configure([{"text": "hi"}])  # a model that needs no key: nothing to authenticate, still a method
    for caps, terminal in (
        (None, False),
        ({"auth": {"terminal": True}}, True),
        ({"_meta": {"terminal-auth": True}}, True),  # what the ACP registry's own check sends
    ):
        async with harness.spawn(caps=caps) as agent:
            answer = agent.wire.incoming()[0]["result"]
            found = methods(answer["authMethods"])
            assert found["configure-model"].get("type", "agent") == "agent"
            if terminal:
                login = found["login"]
                assert (login["type"], login["args"]) == ("terminal", ["login"])
            else:
                assert set(found) == {"configure-model"}
            await agent.conn.authenticate(method_id="configure-model")  # a model is configured: success
            with pytest.raises(RequestError) as raised:
                await agent.conn.authenticate(method_id="nope")
            assert raised.value.code == -32602
            assert await agent.prompt(await agent.new_session(), "hi") == "end_turn"


@pytest.mark.parametrize("keyring", [False, True], ids=["file", "keyring"])
async def test_login_saves_a_key_that_authenticate_and_the_runtime_then_find(
    harness: Harness, tmp_path: Path, keyring: bool
) -> None:
    configure(harness)
    login = Login(tmp_path, keyring=keyring)
    async with harness.spawn(env=login.env, caps={"auth": {"terminal": True}}) as agent:
        with pytest.raises(RequestError) as raised:
            await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[])
        assert raised.value.code == -32000 and "awaken-stdio login" in str(raised.value)
        for method in ("configure-model", "login"):
            with pytest.raises(RequestError) as raised:
                await agent.conn.authenticate(method_id=method)
            assert raised.value.code == -32000 and "awaken-stdio login" in str(raised.value)

        # the editor runs the terminal method: the agent's command with the method's args, the key typed in
        assert harness.config is not None
        done = login.cli("login", "--config", str(harness.config), stdin=f"{KEY}\n")
        assert done.returncode == 0, done.stderr
        assert KEY not in done.stdout + done.stderr and KEY_ENV in done.stdout  # never echoed
        saved = json.loads(login.credentials.read_text())
        if keyring:
            assert saved == {"keys": {KEY_ENV: {"keyring": True}}} and KEY in login.keyring_file.read_text()
            assert "the OS keyring" in done.stdout
        else:
            assert saved == {"keys": {KEY_ENV: {"key": KEY}}}
            assert stat.S_IMODE(login.credentials.stat().st_mode) == 0o600

        await agent.conn.authenticate(method_id="login")
        await agent.new_session()  # a model is configured and its key found: no auth_required
    # the provider reads the key where it reads the variable (a model call here would import the openai SDK on the
    # agent's event loop, which a loaded machine stalls past the run's lease: the read itself is what is tested)
    probe = "import os; from awaken_stdio.providers._common import api_key; "
    probe += f"print(api_key(os.environ, {KEY_ENV!r}, optional=False))"
    env = {**clean_env(), **login.env}
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert found.stdout.strip() == KEY

    done = login.cli("logout")
    assert done.returncode == 0 and KEY_ENV in done.stdout
    assert not login.credentials.exists()
    if keyring:
        assert KEY not in login.keyring_file.read_text()
    assert "nothing to remove" in login.cli("logout").stdout


async def test_login_asks_the_provider_and_acp_login_is_the_same_command(tmp_path: Path) -> None:
    """Without a config file, login asks which provider; the saved key then picks the default model, as the
    variable would. ``awaken-stdio acp login`` (a client appending the method's args) runs the same login."""
    login = Login(tmp_path)
    login.env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")  # no user config file there
    done = login.cli("acp", "login", stdin=f"2\n{KEY}\n")
    assert done.returncode == 0, done.stderr
    assert "Which model provider?" in done.stdout and "OPENAI_API_KEY" in done.stdout and KEY not in done.stdout
    assert json.loads(login.credentials.read_text()) == {"keys": {"OPENAI_API_KEY": {"key": KEY}}}
    probe = "from awaken_stdio.app.config_file import read_config_file; print(read_config_file().data)"
    env = {**clean_env(), **login.env}
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert "'model': 'gpt-4.1', 'api_key_env': 'OPENAI_API_KEY'" in seen.stdout, seen.stdout

    empty = login.cli("login", "--provider", "anthropic", stdin="\n")
    assert empty.returncode == 2 and "no API key was entered" in empty.stderr
    assert json.loads(login.credentials.read_text()) == {"keys": {"OPENAI_API_KEY": {"key": KEY}}}
