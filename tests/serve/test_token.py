"""The token ``serve`` makes on its first start: kept 0600, used again by the next start, shown by ``doctor``, and
refused when others may read it; ``--no-token`` only on loopback."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.protocols.mcp.support import make_env
from tests.serve.support import INITIALIZE, JSON_HEADERS, serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def run(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "awaken_stdio", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


async def test_made_on_first_start_then_kept(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    xdg = {"XDG_DATA_HOME": str(tmp_path / "data")}
    path = tmp_path / "data" / "awaken-stdio" / "serve-token"
    async with serve(env, token=None, environ=xdg) as served:
        token = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) >= 32
        assert any(str(path) in line for line in served.stderr) and not any(token in line for line in served.stderr)
        async with served.client(token=token) as http:
            assert (await http.post(served.mcp, json=INITIALIZE, headers=JSON_HEADERS)).status_code == 200
    async with serve(env, token=None, environ=xdg) as again, again.client(token=token) as http:
        assert (await http.post(again.mcp, json=INITIALIZE, headers=JSON_HEADERS)).status_code == 200
    doctor = run(tmp_path, "doctor", "--config", str(env.config), "--store", env.store, env={**env.environ(), **xdg})
    assert f"ok    serve token: {path} (mode 600)" in doctor.stdout and token not in doctor.stdout
    path.chmod(0o644)
    refused = run(tmp_path, "serve", "--config", str(env.config), "--listen", "127.0.0.1:0",
                  env={**env.environ(), **xdg})  # fmt: skip
    assert refused.returncode == 2 and "chmod 600" in refused.stderr.splitlines()[-1]
    doctor = run(tmp_path, "doctor", "--config", str(env.config), "--store", env.store, env={**env.environ(), **xdg})
    assert "FAIL  serve token:" in doctor.stdout


def test_no_token_is_for_loopback_only(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    out = run(tmp_path, "serve", "--config", str(env.config), "--listen", "0.0.0.0:0", "--no-token", env=env.environ())
    assert out.returncode == 2 and "loopback" in out.stderr.splitlines()[-1]
    bad = run(tmp_path, "serve", "--config", str(env.config), "--listen", "nowhere", env=env.environ())
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr.splitlines()[-1]
