"""The fixture tools the conformance kit's ``tools-call-*`` scenarios call by name, as ``@tool`` functions.

Loaded only by ``make conformance`` (``[tools] modules = ["conformance_fixtures"]``, this directory on ``PYTHONPATH``).
"""

from __future__ import annotations

import base64
import json

import anyio

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
        TextBlock(text="Multiple content types test:"),
        image(PIXEL, "image/png"),
        embedded("test://mixed-content-resource", text='{"test": "data", "value": 123}', mime_type="application/json"),
    ]


@tool(read_only=True)
async def test_tool_with_logging(ctx: ToolCallContext) -> str:
    """Logs three info messages 50 ms apart."""
    await ctx.log("info", "Tool execution started")
    await anyio.sleep(0.05)
    await ctx.log("info", "Tool processing data")
    await anyio.sleep(0.05)
    await ctx.log("info", "Tool execution completed")
    return "Logging test completed"


@tool(read_only=True)
async def test_sampling(prompt: str, ctx: ToolCallContext) -> str:
    """Asks the client's model.

    Args:
        prompt: the prompt to send to the LLM
    """
    answer = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {answer.text}"


@tool(read_only=True)
async def test_elicitation(message: str, ctx: ToolCallContext) -> str:
    """Asks the user for a username and an email.

    Args:
        message: the message to show the user
    """
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await ctx.elicit(message, schema)
    return f"User response: action={answer.action}, content={json.dumps(answer.content)}"


@tool(read_only=True)
async def test_elicitation_sep1034_defaults(ctx: ToolCallContext) -> str:
    """Asks with a default for each primitive type (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    answer = await ctx.elicit("Please review the defaults", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@tool(read_only=True)
async def test_elicitation_sep1330_enums(ctx: ToolCallContext) -> str:
    """Asks with each enum form (SEP-1330)."""
    titled = [{"const": f"value{i}", "title": t} for i, t in enumerate(("First Option", "Second Option"), 1)]
    choices = [{"const": f"value{i}", "title": t} for i, t in enumerate(("First Choice", "Second Choice"), 1)]
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {"type": "array", "items": {"anyOf": choices}},
        },
    }
    answer = await ctx.elicit("Please choose", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"
