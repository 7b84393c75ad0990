"""The built-in tools: what the model reads, the data clients render, locations, errors, and the environment seam."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import ToolError
from awaken_stdio.contract.events import AgentEvent, ToolCallStreamDelta
from awaken_stdio.contract.state import Snapshot
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolResult
from awaken_stdio.contract.workspace import DirEntry, OutputCallback, ProcessResult, TerminalCallback, TextWindow
from awaken_stdio.tools.builtin import (
    builtin_tools,
    edit_file,
    find_files,
    list_directory,
    read_file,
    run_command,
    search,
    update_plan,
    write_file,
)
from awaken_stdio.tools.builtin.command import COMMAND_MAX_OUTPUT_CHARS
from awaken_stdio.tools.builtin.files import LIST_MAX_ENTRIES, READ_MAX_CHARS, READ_MAX_LINE_CHARS
from awaken_stdio.tools.builtin.search import FIND_MAX_RESULTS, SEARCH_MAX_LINE_CHARS, SEARCH_MAX_MATCHES
from awaken_stdio.tools.local_fs import LocalFileSystem

pytestmark = pytest.mark.anyio


def make_ctx(tool: Tool, root: Path, **env: Any) -> ToolCallContext:
    return ToolCallContext(
        call_id="c",
        tool_name=tool.name,
        thread_id="t",
        run_id="r",
        agent_id="a",
        snapshot=Snapshot(revision=0),
        env=RunEnvironment(cwd=str(root), **env),
    )


async def call(tool: Tool, root: Path, ctx: ToolCallContext | None = None, **args: Any) -> ToolResult:
    result = await tool.execute(tool.validate_args(args), ctx or make_ctx(tool, root))
    assert isinstance(result, ToolResult) and result.status == "success"
    return result


async def fails(tool: Tool, root: Path, **args: Any) -> ToolError:
    with pytest.raises(ToolError) as info:
        await call(tool, root, **args)
    return info.value


# -- descriptors -----------------------------------------------------------------------------------------------


def test_every_tool_declares_its_kind_and_hints() -> None:
    hints = {t.name: (t.descriptor.kind, t.descriptor.read_only, t.descriptor.destructive) for t in builtin_tools()}
    assert hints == {
        "read_file": ("read", True, False),
        "write_file": ("edit", False, True),
        "edit_file": ("edit", False, False),
        "list_directory": ("read", True, False),
        "find_files": ("search", True, False),
        "search": ("search", True, False),
        "run_command": ("execute", False, True),
        "update_plan": ("think", True, False),
    }
    assert run_command.descriptor.parameters["properties"]["timeout_s"]["maximum"] == 600


# -- confinement through the tools -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (read_file, {"path": "../outside.txt"}),
        (write_file, {"path": "../outside.txt", "content": "x"}),
        (edit_file, {"path": "/etc/hostname", "old_text": "a", "new_text": "b"}),
        (list_directory, {"path": ".."}),
        (find_files, {"pattern": "*", "path": ".."}),
        (search, {"pattern": "x", "path": "/etc"}),
    ],
)
async def test_paths_outside_the_workspace_are_denied(root: Path, tool: Tool, args: dict[str, Any]) -> None:
    (root.parent / "outside.txt").write_text("secret")
    err = await fails(tool, root, **args)
    assert err.kind == "denied" and "outside the workspace" in str(err)
    assert (root.parent / "outside.txt").read_text() == "secret"


async def test_additional_directories_are_reachable(root: Path, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "x.txt").write_text("library\n")
    ctx = make_ctx(read_file, root, roots=(str(tmp_path / "lib"),))
    result = await call(read_file, root, ctx, path=str(tmp_path / "lib" / "x.txt"))
    assert result.message == "library\n"
    assert result.data["path"] == str((tmp_path / "lib" / "x.txt").resolve())  # absolute: outside the root


# -- read_file -------------------------------------------------------------------------------------------------


async def test_read_file_returns_the_text_and_where_it_was(root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    result = await call(read_file, root, path="a.txt")
    assert result.message == "one\ntwo\nthree\n"
    assert result.data == {
        "path": "a.txt", "content": "one\ntwo\nthree\n", "line": 1, "end_line": 3, "total_lines": 3, "next_line": None
    }  # fmt: skip
    assert result.metadata["locations"] == [{"path": str(root / "a.txt"), "line": 1}]


async def test_read_file_window_says_how_to_read_the_rest(root: Path) -> None:
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await call(read_file, root, path="a.txt", line=10, limit=5)
    assert (
        result.message == "line 10\nline 11\nline 12\nline 13\nline 14\n... 86 more lines; call read_file with line=15"
    )
    assert result.data["next_line"] == 15
    assert result.metadata["locations"] == [{"path": str(root / "a.txt"), "line": 10}]
    last = await call(read_file, root, path="a.txt", line=99)
    assert last.message == "line 99\nline 100\n"


async def test_read_file_default_limit_is_2000_lines(root: Path) -> None:
    (root / "big.txt").write_text("x\n" * 2500)
    result = await call(read_file, root, path="big.txt")
    assert result.message.endswith("x\n... 500 more lines; call read_file with line=2001")


async def test_read_file_caps_characters_and_long_lines(root: Path) -> None:
    (root / "wide.txt").write_text("a" * (READ_MAX_LINE_CHARS + 50) + "\nshort")
    result = await call(read_file, root, path="wide.txt")
    assert result.message == "a" * READ_MAX_LINE_CHARS + "... [50 more characters in this line]\nshort"
    per_line = READ_MAX_LINE_CHARS // 2
    (root / "many.txt").write_text(("b" * (per_line - 1) + "\n") * (2 * READ_MAX_CHARS // per_line))
    result = await call(read_file, root, path="many.txt")
    shown = READ_MAX_CHARS // per_line
    assert len(result.message) < READ_MAX_CHARS + 100
    assert result.message.endswith(f"... {shown} more lines; call read_file with line={shown + 1}")


async def test_read_file_errors(root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (root / "a.txt").write_text("one\n")
    assert "binary file" in str(await fails(read_file, root, path="img.png"))
    assert (await fails(read_file, root, path="nope.txt")).kind == "not_found"
    assert "is a directory" in str(await fails(read_file, root, path="."))
    past = await fails(read_file, root, path="a.txt", line=5)
    assert past.kind == "invalid_arguments" and "has 1 line" in str(past)
    assert (await fails(read_file, root, path="a.txt", line=0)).kind == "invalid_arguments"


async def test_read_file_of_an_empty_file(root: Path) -> None:
    (root / "empty").write_text("")
    assert (await call(read_file, root, path="empty")).message == "(empty file)"


# -- write_file and edit_file ----------------------------------------------------------------------------------


async def test_write_file_creates_with_a_diff_from_nothing(root: Path) -> None:
    result = await call(write_file, root, path="new/dir/a.txt", content="hello\nworld\n")
    assert (root / "new" / "dir" / "a.txt").read_text() == "hello\nworld\n"
    assert result.message == "Created new/dir/a.txt (2 lines)"
    assert result.data["created"] is True
    assert result.data["diff"] == {"path": str(root / "new/dir/a.txt"), "old_text": None, "new_text": "hello\nworld\n"}
    assert result.metadata["locations"] == [{"path": str(root / "new/dir/a.txt")}]


async def test_write_file_overwrites_with_a_diff_from_the_old_text(root: Path) -> None:
    (root / "a.txt").write_text("old\n")
    result = await call(write_file, root, path="a.txt", content="new\n")
    assert result.message == "Wrote a.txt (1 line)"
    assert result.data["diff"] == {"path": str(root / "a.txt"), "old_text": "old\n", "new_text": "new\n"}


async def test_edit_file_replaces_once_with_a_diff_and_the_line(root: Path) -> None:
    (root / "a.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = await call(edit_file, root, path="a.py", old_text="return 2", new_text="return 3")
    assert (root / "a.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert result.message == "Edited a.py at line 5"
    assert result.data["diff"] == {
        "path": str(root / "a.py"),
        "old_text": "def f():\n    return 1\n\ndef g():\n    return 2\n",
        "new_text": "def f():\n    return 1\n\ndef g():\n    return 3\n",
    }
    assert result.metadata["locations"] == [{"path": str(root / "a.py"), "line": 5}]


async def test_edit_file_refuses_ambiguous_text_unless_replace_all(root: Path) -> None:
    (root / "a.txt").write_text("x = 1\ny = 2\nx = 1\n")
    err = await fails(edit_file, root, path="a.txt", old_text="x = 1", new_text="x = 0")
    assert "occurs 2 times in a.txt (lines 1, 3)" in str(err) and "replace_all" in str(err)
    assert (root / "a.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    result = await call(edit_file, root, path="a.txt", old_text="x = 1\n", new_text="x = 0\n# zero\n", replace_all=True)
    assert (root / "a.txt").read_text() == "x = 0\n# zero\ny = 2\nx = 0\n# zero\n"
    assert result.message == "Edited a.txt at 2 places"
    assert [loc["line"] for loc in result.metadata["locations"]] == [1, 4]  # lines in the new text


async def test_edit_file_errors(root: Path) -> None:
    (root / "a.txt").write_text("alpha\n")
    not_found = await fails(edit_file, root, path="a.txt", old_text="beta", new_text="gamma")
    assert "old_text was not found in a.txt" in str(not_found)
    assert (await fails(edit_file, root, path="a.txt", old_text="", new_text="x")).kind == "invalid_arguments"
    assert (await fails(edit_file, root, path="a.txt", old_text="alpha", new_text="alpha")).kind == "invalid_arguments"
    assert (await fails(edit_file, root, path="b.txt", old_text="a", new_text="b")).kind == "not_found"


async def test_edit_file_keeps_windows_line_endings(root: Path) -> None:
    (root / "a.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(edit_file, root, path="a.txt", old_text="one\ntwo\n", new_text="1\n2\n")
    assert (root / "a.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# -- list_directory --------------------------------------------------------------------------------------------


async def test_list_directory_lists_directories_first_with_sizes(root: Path) -> None:
    (root / "b.txt").write_text("12345")
    (root / "src").mkdir()
    (root / "a.txt").write_text("")
    (root / "link").symlink_to(root / "src")
    result = await call(list_directory, root)
    assert result.message == "link/ [symlink]\nsrc/\na.txt (0 bytes)\nb.txt (5 bytes)"
    assert result.data["entries"][-1] == {"name": "b.txt", "kind": "file", "size": 5}
    assert result.metadata["locations"] == [{"path": str(root)}]
    (root / "src" / "empty").mkdir()
    assert (await call(list_directory, root, path="src/empty")).message == "(empty directory)"


async def test_list_directory_caps_entries(root: Path) -> None:
    for i in range(LIST_MAX_ENTRIES + 3):
        (root / f"f{i:05}").touch()
    result = await call(list_directory, root)
    assert result.message.endswith("f00999 (0 bytes)\n... 3 more entries; use find_files to narrow them down")
    assert result.data["total"] == LIST_MAX_ENTRIES + 3


# -- find_files and search -------------------------------------------------------------------------------------


@pytest.fixture
def tree(root: Path) -> Path:
    for rel, text in {
        "README.md": "# Project\nTODO: docs\n",
        "src/app.py": "import os\n\ndef main():\n    # TODO: implement\n    pass\n",
        "src/util/helpers.py": "def helper():\n    return 'todo'\n",
        "src/web/index.ts": "// TODO: ts\n",
        "node_modules/dep/index.py": "# TODO: vendored\n",
        ".git/config.py": "# TODO: git\n",
        ".venv/lib.py": "# TODO: venv\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "data.bin").write_bytes(b"\x00TODO: binary\n")
    return root


async def test_find_files_is_sorted_and_skips_dependency_dirs(tree: Path) -> None:
    result = await call(find_files, tree, pattern="*.py")
    assert result.message == "src/app.py\nsrc/util/helpers.py"
    assert result.data == {"files": ["src/app.py", "src/util/helpers.py"], "total": 2}
    assert (await call(find_files, tree, pattern="src/*.{py,ts}")).data["files"] == ["src/app.py"]
    assert (await call(find_files, tree, pattern="**/*.ts", path="src")).data["files"] == ["src/web/index.ts"]
    none = await call(find_files, tree, pattern="*.rs")
    assert none.message == "No files match '*.rs' under ."


async def test_find_files_caps_results(root: Path) -> None:
    for i in range(FIND_MAX_RESULTS + 2):
        (root / f"f{i:04}.txt").touch()
    result = await call(find_files, root, pattern="*.txt")
    assert result.message.endswith("f0499.txt\n... 2 more files; narrow the pattern or the path")
    assert len(result.data["files"]) == FIND_MAX_RESULTS and result.data["total"] == FIND_MAX_RESULTS + 2


@pytest.mark.parametrize("pattern", ["/etc/*", "../*.py", ""])
async def test_find_files_wants_a_relative_pattern(root: Path, pattern: str) -> None:
    assert (await fails(find_files, root, pattern=pattern)).kind == "invalid_arguments"


async def test_search_lists_path_line_text_and_skips_binaries_and_vendored(tree: Path) -> None:
    result = await call(search, tree, pattern="TODO")
    assert (
        result.message
        == "README.md:2: TODO: docs\nsrc/app.py:4:     # TODO: implement\nsrc/web/index.ts:1: // TODO: ts"
    )
    assert result.data["matches"][0] == {"path": "README.md", "line": 2, "text": "TODO: docs"}
    assert result.data["truncated"] is False
    assert result.metadata["locations"][1] == {"path": str(tree / "src" / "app.py"), "line": 4}


async def test_search_narrows_by_path_glob_and_flags(tree: Path) -> None:
    assert (await call(search, tree, pattern="TODO", glob="*.ts")).data["matches"][0]["path"] == "src/web/index.ts"
    assert len((await call(search, tree, pattern="TODO", path="src/app.py")).data["matches"]) == 1
    assert len((await call(search, tree, pattern="(?i)todo", path="src")).data["matches"]) == 3
    none = await call(search, tree, pattern="FIXME", path="src")
    assert none.message == "No matches for 'FIXME' under src"


async def test_search_does_not_follow_symlinks_out(root: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("password\n")
    (root / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (root / "leakdir").symlink_to(tmp_path)
    assert (await call(search, root, pattern="password")).data["matches"] == []


async def test_search_caps_matches_and_long_lines(root: Path) -> None:
    (root / "a.txt").write_text("hit\n" * (SEARCH_MAX_MATCHES + 5))
    (root / "b.txt").write_text("hit" + "x" * SEARCH_MAX_LINE_CHARS + "\n")
    result = await call(search, root, pattern="hit")
    assert result.data["truncated"] is True and len(result.data["matches"]) == SEARCH_MAX_MATCHES
    assert result.message.endswith("... stopped after 200 matches; narrow the pattern, the path or the glob")
    wide = await call(search, root, pattern="hit", path="b.txt")
    assert wide.data["matches"][0]["text"].endswith("x... [3 more characters]")


async def test_search_rejects_a_bad_regex_or_glob(root: Path) -> None:
    err = await fails(search, root, pattern="(unclosed")
    assert err.kind == "invalid_arguments" and "not a valid regular expression" in str(err)
    assert (await fails(search, root, pattern="x", glob="../*")).kind == "invalid_arguments"


# -- run_command -----------------------------------------------------------------------------------------------


def command_ctx(root: Path, events: list[AgentEvent]) -> ToolCallContext:
    async def emit(event: AgentEvent) -> None:
        events.append(event)

    ctx = make_ctx(run_command, root)
    ctx.emit = emit
    return ctx


async def test_run_command_returns_output_and_exit_code_and_streams(root: Path) -> None:
    events: list[AgentEvent] = []
    result = await call(run_command, root, command_ctx(root, events), command="pwd; echo oops >&2; exit 2")
    assert result.message == f"{root}\noops\n(exit code 2)"
    assert result.data == {
        "command": "pwd; echo oops >&2; exit 2",
        "exit_code": 2,
        "signal": None,
        "output": f"{root}\noops\n",
        "truncated": False,
        "terminal_id": None,
    }
    streamed = "".join(e.delta for e in events if isinstance(e, ToolCallStreamDelta))
    assert streamed == f"{root}\noops\n"
    assert (await call(run_command, root, command="true")).message == "(exit code 0)"


async def test_run_command_truncates_output_with_a_note(root: Path) -> None:
    result = await call(run_command, root, command=f"head -c {COMMAND_MAX_OUTPUT_CHARS + 10} /dev/zero | tr '\\0' a")
    assert result.message.startswith("[... 10 earlier characters omitted; redirect the output to a file")
    assert result.data["truncated"] is True


async def test_run_command_timeout_is_an_error_with_the_output(root: Path) -> None:
    # That the process group dies is the runner's part: test_workspace.py proves it.
    err = await fails(run_command, root, command="echo started; sleep 30", timeout_s=0.3)
    assert err.kind == "timeout" and str(err).startswith("Timeout: the command did not finish within 0.3 s")
    assert str(err).endswith("its output:\nstarted\n") and err.data["exit_code"] is None


async def test_run_command_timeout_is_bounded(root: Path) -> None:
    assert (await fails(run_command, root, command="true", timeout_s=601)).kind == "invalid_arguments"


async def test_run_command_stops_when_the_call_is_cancelled(root: Path) -> None:
    ctx = make_ctx(run_command, root)

    async def cancel_once_started(event: AgentEvent) -> None:
        ctx.cancel.cancel()

    ctx.emit = cancel_once_started
    with anyio.fail_after(5), pytest.raises(ToolError) as info:  # far sooner than the sleep
        await run_command.execute({"command": "echo go; sleep 30"}, ctx)
    assert info.value.kind == "cancelled"


class FakeRunner:
    """An ACP-like runner: the client runs the command in a terminal it shows."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        output_limit: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
        on_terminal: TerminalCallback | None = None,
    ) -> ProcessResult:
        self.calls.append({"command": command, "cwd": cwd, "timeout_s": timeout_s, "env": env})
        return ProcessResult(exit_code=0, output="from the editor\n", terminal_id="term-1")


async def test_run_command_uses_the_runner_of_the_environment(root: Path) -> None:
    runner = FakeRunner()
    result = await call(run_command, root, make_ctx(run_command, root, runner=runner), command="make")
    assert runner.calls == [{"command": "make", "cwd": root, "timeout_s": 120, "env": runner.calls[0]["env"]}]
    assert result.message == "from the editor\n(exit code 0)"
    assert result.data["terminal_id"] == "term-1"


# -- the file-system seam --------------------------------------------------------------------------------------


class FakeFileSystem(LocalFileSystem):
    """An editor-backed file system: reads see unsaved buffers, writes go to the editor; the rest is local."""

    def __init__(self, buffers: dict[Path, str]) -> None:
        self.buffers = buffers
        self.writes: list[tuple[Path, str]] = []

    async def read_text(self, path: Path, *, line: int | None = None, limit: int | None = None) -> TextWindow:
        if path not in self.buffers:
            raise ToolError(f"{path} does not exist", "not_found")
        lines = self.buffers[path].splitlines(keepends=True)
        start = (line or 1) - 1
        return TextWindow(text="".join(lines[start : None if limit is None else start + limit]), total_lines=len(lines))

    async def write_text(self, path: Path, content: str) -> None:
        self.writes.append((path, content))
        self.buffers[path] = content

    async def list_directory(self, path: Path) -> list[DirEntry]:
        return [DirEntry(name="only-in-editor.txt", kind="file", size=1)]


async def test_file_tools_use_the_file_system_of_the_environment(root: Path) -> None:
    (root / "a.txt").write_text("on disk\n")
    fs = FakeFileSystem({root / "a.txt": "unsaved buffer\n"})

    def ctx(tool: Tool) -> ToolCallContext:
        return make_ctx(tool, root, fs=fs)

    assert (await call(read_file, root, ctx(read_file), path="a.txt")).message == "unsaved buffer\n"
    edited = await call(edit_file, root, ctx(edit_file), path="a.txt", old_text="unsaved", new_text="saved")
    assert edited.data["diff"]["old_text"] == "unsaved buffer\n"
    created = await call(write_file, root, ctx(write_file), path="b.txt", content="new\n")
    assert created.data["created"] is True
    assert fs.writes == [(root / "a.txt", "saved buffer\n"), (root / "b.txt", "new\n")]
    assert (root / "a.txt").read_text() == "on disk\n" and not (root / "b.txt").exists()
    listed = await call(list_directory, root, ctx(list_directory))
    assert listed.message == "only-in-editor.txt (1 bytes)"


# -- update_plan -----------------------------------------------------------------------------------------------


async def test_update_plan_returns_the_whole_plan(root: Path) -> None:
    entries = [
        {"content": "Read the code", "status": "completed", "priority": "high"},
        {"content": "Fix the bug", "status": "in_progress"},
        {"content": "Run the tests", "status": "pending", "priority": "low"},
    ]
    result = await call(update_plan, root, entries=entries)
    assert result.message == "[x] Read the code\n[>] Fix the bug\n[ ] Run the tests"
    assert result.data == {"entries": [entries[0], {**entries[1], "priority": "medium"}, entries[2]]}
    assert (await call(update_plan, root, entries=[])).message == "(the plan is empty)"


async def test_update_plan_rejects_unknown_statuses(root: Path) -> None:
    err = await fails(update_plan, root, entries=[{"content": "x", "status": "done"}])
    assert err.kind == "invalid_arguments" and re.search(r"entries\[0\]\.status", str(err))
