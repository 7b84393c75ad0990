"""The built-in tools: files, search, commands and the plan, confined to the run's workspace.

They reach the disk and processes only through the seam in ``awaken_stdio.tools.workspace`` (``ctx.env``),
so hosts can route them elsewhere (an ACP client's ``fs/*`` and ``terminal/*``). Every result has the model's
text in ``message``, structured data in ``data`` and ``metadata["locations"]`` (``[{path, line?}]``, absolute).
"""

from __future__ import annotations

from awaken_stdio.contract.tools import Tool
from awaken_stdio.tools.builtin.command import run_command
from awaken_stdio.tools.builtin.files import edit_file, list_directory, read_file, write_file
from awaken_stdio.tools.builtin.plan import update_plan
from awaken_stdio.tools.builtin.search import find_files, search

__all__ = [
    "builtin_tools",
    "edit_file",
    "find_files",
    "list_directory",
    "read_file",
    "run_command",
    "search",
    "update_plan",
    "write_file",
]


def builtin_tools() -> list[Tool]:
    """Every built-in tool, in the order they are listed to the model."""
    return [read_file, write_file, edit_file, list_directory, find_files, search, run_command, update_plan]
