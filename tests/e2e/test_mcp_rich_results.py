"""Rich tool results (images, audio, embedded resources, resource links) through ``awaken-stdio mcp``, in both eras:
from a ``@tool`` function, and passed through unchanged from a configured MCP server's tool."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.protocols.mcp.mcp_test_tools import PIXEL
from tests.protocols.mcp.support import connect, make_env

pytestmark = [pytest.mark.anyio]
MODES = ["legacy", "auto"]
KINDS = ["text", "image", "audio", "resource", "resource_link"]


def check_picture(content: list) -> None:
    assert [c.type for c in content] == KINDS
    text, picture, sound, resource, link = content
    assert text.text == "A red pixel."
    assert (base64.b64decode(picture.data), picture.mime_type) == (PIXEL, "image/png")
    assert (base64.b64decode(sound.data), sound.mime_type) == (b"RIFF", "audio/wav")
    assert (str(resource.resource.uri), resource.resource.text) == ("memo://pixel", "red")
    assert (str(link.uri), link.name, link.mime_type) == ("awaken://runs/r1", "run r1", "application/json")


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_returns_content_blocks(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    async with connect(env, mode) as client:
        result = await client.call_tool("picture", {})
    assert result.is_error is False and result.structured_content is None
    check_picture(result.content)


@pytest.mark.parametrize("mode", MODES)
async def test_an_mcp_toolsets_blocks_pass_through(tmp_path: Path, mode: str) -> None:
    (tmp_path / "inner").mkdir()
    inner = make_env(tmp_path / "inner")
    command = inner.command()
    server = f"""
[mcp_servers.inner]
command = {json.dumps(command[0])}
args = {json.dumps(command[1:])}
env = {{ PYTHONPATH = {json.dumps(inner.environ()["PYTHONPATH"])} }}
"""
    env = make_env(tmp_path, extra=server)
    async with connect(env, mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "inner__picture" in names
        result = await client.call_tool("inner__picture", {})
    assert result.is_error is False
    check_picture(result.content)
