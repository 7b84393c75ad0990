"""A tool module for the ACP tests: ``explode`` raises a fatal ``ToolError`` (the run must end, failed)."""

from awaken_stdio import ToolError, tool


@tool
def explode() -> str:
    """Fail for good."""
    raise ToolError("the disk is on fire")
