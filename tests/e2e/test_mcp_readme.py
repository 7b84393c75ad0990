"""The README's MCP client example runs as printed against a real ``awaken-stdio mcp`` (no config file, no API key:
its agent thinks with the example's sampling callback), and its tool example compiles."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"


def mcp_blocks() -> list[str]:
    section = README.read_text(encoding="utf-8").split("## Use it from an MCP client", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```py\n(.*?)```", section, re.S)


def test_the_tool_example_compiles() -> None:
    blocks = mcp_blocks()
    assert len(blocks) == 2
    for block in blocks:
        compile(block, "README.md", "exec")
    assert "ctx.elicit" in blocks[1] and "ctx.sample" in blocks[1] and "image(" in blocks[1]


def test_the_client_example_runs(tmp_path: Path) -> None:
    [client] = [b for b in mcp_blocks() if "StdioServerParameters" in b]
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("Remember the tests.\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("AWAKEN_STDIO")}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "AWAKEN_STDIO_STORE": f"sqlite:///{tmp_path / 'store.db'}",
    }
    out = subprocess.run(
        [sys.executable, "-c", client], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stdout.splitlines()
    assert first == "['notes.txt'] Remember the tests. Say hello"
    assert second == "Hello from the host's model. application/json"
