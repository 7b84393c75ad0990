"""The fixture tools the conformance kit's ``tools-call-*`` scenarios call by name, as ``@tool`` functions.

Loaded only by ``make conformance`` (``[tools] modules = ["conformance_fixtures"]``, this directory on ``PYTHONPATH``).
"""

from __future__ import annotations

import base64

from awaken_stdio import tool
from awaken_stdio.contract.content import audio, embedded, image
from awaken_stdio.contract.messages import AudioBlock, ContentBlock, ImageBlock, ResourceBlock, TextBlock
from awaken_stdio.contract.tools import ToolCallContext

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
# A 44-byte WAV header with no samples: the smallest valid audio/wav.
SILENCE = (
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00"
    b"\x02\x00\x10\x00data\x00\x00\x00\x00"
)


@tool(read_only=True)
def test_simple_text() -> str:
    """Returns simple text content for conformance testing."""
    return "This is a simple text response for testing."


@tool(read_only=True)
def test_error_handling() -> str:
    """Always fails, for conformance testing of isError results."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool(read_only=True)
async def test_tool_with_progress(ctx: ToolCallContext) -> str:
    """Reports progress three times, then answers."""
    for step in (0, 50, 100):
        await ctx.report_progress("running", f"{step}%", progress=step, total=100)
    return "Progress test completed"


@tool(read_only=True)
def test_image_content() -> ImageBlock:
    """Returns an image (a 1x1 red PNG)."""
    return image(PIXEL, "image/png")


@tool(read_only=True)
def test_audio_content() -> AudioBlock:
    """Returns audio (an empty WAV)."""
    return audio(SILENCE, "audio/wav")


@tool(read_only=True)
def test_embedded_resource() -> ResourceBlock:
    """Returns an embedded text resource."""
    return embedded("test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain")


@tool(read_only=True)
def test_multiple_content_types() -> list[ContentBlock]:
    """Returns text, an image and an embedded resource."""
    return [
        TextBlock("Multiple content types test:"),
        image(PIXEL, "image/png"),
        embedded("test://mixed-content-resource", text='{"test": "data", "value": 123}', mime_type="application/json"),
    ]
