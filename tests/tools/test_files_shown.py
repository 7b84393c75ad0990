"""The built-in writes keep to the diff they were approved on: a file changed after the runtime's last check (between
it and the write) is refused, not written over; an unchanged one is written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.state import Snapshot
from awaken_stdio.contract.suspension import ToolCallResume, bind
from awaken_stdio.contract.tools import Tool, ToolCallContext
from awaken_stdio.tools.builtin import edit_file, write_file

pytestmark = pytest.mark.anyio
BEFORE = "one\ntwo\n"
CALLS = [
    (write_file, {"path": "a.txt", "content": "new\n"}, "new\n"),
    (edit_file, {"path": "a.txt", "old_text": "two", "new_text": "2"}, "one\n2\n"),
]


async def approved(tool: Tool, args: dict[str, Any], root: Path) -> ToolCallContext:
    """The context of ``tool``'s call resumed by an approval of its preview on the file as it is now."""
    ctx = ToolCallContext(
        call_id="c",
        tool_name=tool.name,
        thread_id="t",
        run_id="r",
        agent_id="a",
        snapshot=Snapshot(revision=0),
        env=RunEnvironment(cwd=str(root)),
    )
    preview = await tool.preview(tool.validate_args(args), ctx)
    return replace(ctx, resume_input=bind(ToolCallResume.approve(), preview))


@pytest.mark.parametrize(("tool", "args", "after"), CALLS, ids=["write", "edit"])
async def test_a_file_changed_since_its_approved_diff_is_not_written(
    tmp_path: Path, tool: Tool, args: dict[str, Any], after: str
) -> None:
    target = tmp_path / "a.txt"
    target.write_text(BEFORE)
    ctx = await approved(tool, args, tmp_path)
    target.write_text(BEFORE + "three\n")
    with pytest.raises(ToolFailure, match=r"a\.txt changed since the diff was approved, so nothing was written"):
        await tool.execute(tool.validate_args(args), ctx)
    assert target.read_text() == BEFORE + "three\n"

    target.write_text(BEFORE)  # as shown again: the approval holds
    await tool.execute(tool.validate_args(args), ctx)
    assert target.read_text() == after
