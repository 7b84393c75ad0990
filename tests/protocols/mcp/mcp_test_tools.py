"""``@tool`` functions the MCP tests publish (``[tools] modules = ["mcp_test_tools"]``, on ``PYTHONPATH``)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from pydantic import BaseModel

from awaken_stdio import tool
from awaken_stdio.contract.content import audio, embedded, image, resource_link
from awaken_stdio.contract.messages import ContentBlock, TextBlock
from awaken_stdio.contract.tools import ToolCallContext

PIXEL = bytes.fromhex(  # a 1x1 red PNG
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63fccfc0f01f0005050200"
    "5fc8f1d20000000049454e44ae426082"
)


class Sum(BaseModel):
    sum: int


@tool(read_only=True)
def add(a: int, b: int) -> Sum:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return Sum(sum=a + b)


@tool(read_only=True)
def echo(text: str) -> str:
    """Say it back."""
    return text


@tool(read_only=True)
def explode(message: str) -> str:
    """Always fails."""
    raise RuntimeError(message)


@tool(read_only=True)
def big(size: int) -> str:
    """Return ``size`` characters."""
    return "x" * size


@tool(read_only=True)
async def nap(seconds: float, ctx: ToolCallContext) -> str:
    """Sleep (cancellable), reporting progress first."""
    await ctx.report_progress("running", "napping")
    await anyio.sleep(seconds)
    return "rested"


@tool(kind="edit")
def mark(label: str, ctx: ToolCallContext) -> str:
    """A side effect: append ``label`` to marks.txt in the working directory."""
    with open(Path(ctx.env.cwd or os.getcwd()) / "marks.txt", "a", encoding="utf-8") as f:
        f.write(label + "\n")
    return f"marked {label}"


@tool(read_only=True)
def picture() -> list[ContentBlock]:
    """A rich result: text, an image, audio, an embedded resource and a resource link."""
    return [
        TextBlock(text="A red pixel."),
        image(PIXEL, "image/png"),
        audio(b"RIFF", "audio/wav"),
        embedded("memo://pixel", text="red", mime_type="text/plain"),
        resource_link("awaken://runs/r1", "run r1", mime_type="application/json"),
    ]


@tool(read_only=True)
async def interview(topic: str, ctx: ToolCallContext) -> str:
    """Talks back to the client: logs, reports progress, asks the user, then asks the client's model.

    Args:
        topic: what to ask about
    """
    await ctx.log("info", f"interviewing about {topic}")
    await ctx.log("debug", "a detail")
    await ctx.progress(1, 3, "asking the user")
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = await ctx.elicit(f"Who knows about {topic}?", schema)
    if answer.action != "accept" or answer.content is None:
        return f"no answer ({answer.action})"
    await ctx.progress(2, 3, "asking the model")
    summary = await ctx.sample(f"Summarise {topic} for {answer.content['name']}", system_prompt="Be brief.")
    await ctx.progress(3, 3)
    return f"{answer.content['name']}: {summary.text} ({summary.model})"
