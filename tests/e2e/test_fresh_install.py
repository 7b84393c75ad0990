"""A plain install reaches a model: ``pip install <checkout>`` (no extras) into a fresh venv, then an ACP prompt
through the ``openai`` provider against a local OpenAI-compatible server. What pipx and ``uv tool install`` do too.

The checkout's package files are copied first, so the build (which writes ``build/`` and ``*.egg-info`` beside the
sources) leaves the working tree alone. pip reuses its cache: about 10 s when it is warm.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_openai_provider_e2e import KEY, KEY_ENV, model_toml
from tests.protocols.acp.conftest import ROOT, Harness
from tests.providers.fake_servers import FakeServer, Reply, chat_text

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

NO_CHECKOUT = {"PYTHONPATH": ""}  # the child must import the installed copy, not this checkout


@pytest.fixture(scope="module")
def fresh_install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new venv with the package installed the way a user installs it; yields its ``bin`` directory."""
    base = tmp_path_factory.mktemp("fresh")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "awaken_stdio", source / "awaken_stdio", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=120)
    bin_dir = base / "venv" / "bin"
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=280)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    yield bin_dir


def test_the_installed_package_is_the_one_that_runs(fresh_install: Path) -> None:
    code = "import awaken_stdio, importlib.metadata as m; print(awaken_stdio.__file__, m.version('openai'))"
    run = [str(fresh_install / "python"), "-c", code]  # from elsewhere: `-c` puts the cwd first on sys.path
    out = subprocess.run(run, capture_output=True, text=True, check=True, env=NO_CHECKOUT, cwd=fresh_install)
    assert str(fresh_install.parent) in out.stdout and str(ROOT / "awaken_stdio") not in out.stdout


async def test_a_plain_install_answers_an_acp_prompt_through_openai(tmp_path: Path, fresh_install: Path) -> None:
    with FakeServer(Reply(events=chat_text("Hello from ", "a plain install."))) as server:

        class Installed(Harness):
            def command(self) -> list[str]:
                return [str(fresh_install / "awaken-stdio"), *super().command()[3:]]  # not `python -m` from here

        harness = Installed(tmp_path)
        harness.config = harness.dir / "config.toml"
        harness.config.write_text(f'default_agent = "coder"\n{model_toml(server)}\n[agents.coder]\nmodel = "gpt"\n')
        async with harness.spawn(env={KEY_ENV: KEY, **NO_CHECKOUT}) as agent:
            sid = await agent.new_session()
            assert await agent.prompt(sid, "hello") == "end_turn"
            chunks = [u for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
            assert "".join(c["content"]["text"] for c in chunks) == "Hello from a plain install."
        [request] = server.requests
        assert (request.path, request.headers["authorization"]) == ("/v1/chat/completions", f"Bearer {KEY}")
