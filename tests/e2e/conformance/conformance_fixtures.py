"""The fixture tools the conformance kit's ``tools-call-*`` scenarios call by name, as ``@tool`` functions.

Loaded only by ``make conformance`` (``[tools] modules = ["conformance_fixtures"]``, this directory on ``PYTHONPATH``).
Our tool results are text (plus structured data), so the image, audio, embedded-resource and mixed-content fixtures
cannot be written as tools; those scenarios, and the ones needing logging, sampling or elicitation from inside a
direct tool call, are in the expected-failures baseline.
"""

from __future__ import annotations

from awaken_stdio import tool
from awaken_stdio.contract.tools import ToolCallContext


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
