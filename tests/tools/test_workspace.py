"""The workspace seam: confinement, globs, the local file system and process runner, and the environment's."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import anyio
import pytest

from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import ToolError
from awaken_stdio.contract.state import Snapshot
from awaken_stdio.contract.tools import ToolCallContext
from awaken_stdio.tools import local_fs
from awaken_stdio.tools.local_fs import LocalFileSystem, compile_glob
from awaken_stdio.tools.runner import LocalProcessRunner
from awaken_stdio.tools.workspace import (
    Workspace,
    get_file_system,
    get_process_runner,
    get_workspace,
)

pytestmark = pytest.mark.anyio


# -- confinement -----------------------------------------------------------------------------------------------


async def test_relative_paths_resolve_against_the_root(root: Path) -> None:
    ws = await Workspace.create(root)
    assert await ws.resolve("a/b.txt") == root / "a" / "b.txt"
    assert await ws.resolve("a/../c.txt") == root / "c.txt"
    assert await ws.resolve(".") == root
    assert await ws.resolve(str(root / "x")) == root / "x"


@pytest.mark.parametrize("path", ["..", "../x.txt", "a/../../x.txt", "/etc/passwd"])
async def test_paths_outside_are_denied_naming_the_path_and_the_roots(root: Path, path: str) -> None:
    ws = await Workspace.create(root)
    with pytest.raises(ToolError) as info:
        await ws.resolve(path)
    assert info.value.kind == "denied"
    assert repr(path) in str(info.value)
    assert f"allowed: {root}" in str(info.value)


async def test_a_symlink_leading_out_is_denied(root: Path, tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("k")
    (root / "link").symlink_to(tmp_path / "secret")
    (root / "file_link").symlink_to(tmp_path / "secret" / "key")
    ws = await Workspace.create(root)
    for path in ("link/key", "file_link", "link/new.txt"):
        with pytest.raises(ToolError, match="outside the workspace") as info:
            await ws.resolve(path)
        assert info.value.kind == "denied"


async def test_a_symlink_staying_inside_is_allowed(root: Path) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real")
    ws = await Workspace.create(root)
    assert await ws.resolve("alias/f") == root / "real" / "f"


async def test_additional_directories_are_allowed(root: Path, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    ws = await Workspace.create(root, [tmp_path / "lib", "../other"])
    assert ws.roots == (root, (tmp_path / "lib").resolve(), (tmp_path / "other").resolve())
    assert await ws.resolve(str(tmp_path / "lib" / "x")) == (tmp_path / "lib" / "x").resolve()
    assert await ws.resolve("../lib/x") == (tmp_path / "lib" / "x").resolve()  # via the root, into another root
    with pytest.raises(ToolError, match=re.escape(f"allowed: {root}, {(tmp_path / 'lib').resolve()}")):
        await ws.resolve("../elsewhere")


async def test_a_symlinked_root_is_resolved(tmp_path: Path, root: Path) -> None:
    (tmp_path / "alias").symlink_to(root)
    ws = await Workspace.create(tmp_path / "alias")
    assert ws.root == root
    assert await ws.resolve(str(tmp_path / "alias" / "f")) == root / "f"


def test_roots_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="absolute"):
        Workspace(Path("relative"))


async def test_display_is_relative_inside_the_root_else_absolute(root: Path, tmp_path: Path) -> None:
    ws = await Workspace.create(root, [tmp_path])
    assert ws.display(root / "a" / "b.txt") == "a/b.txt"
    assert ws.display(root) == "."
    assert ws.display(tmp_path / "x") == str(tmp_path / "x")


# -- globs -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", "src/deep/b.py", ".hidden.py"], ["a.pyc", "py"]),
        ("src/*.py", ["src/a.py"], ["src/deep/b.py", "a.py"]),
        ("src/**/*.py", ["src/a.py", "src/deep/b.py"], ["lib/a.py"]),
        ("**/test_?.py", ["test_a.py", "x/test_b.py"], ["test_ab.py"]),
        ("*.{ts,tsx}", ["a.ts", "b/c.tsx"], ["a.js"]),
        ("[!a]*.txt", ["b.txt"], ["a.txt"]),
        ("./docs/*.md", ["docs/x.md"], ["x.md"]),
        ("a+b(1).txt", ["a+b(1).txt"], ["aab1.txt"]),
    ],
)
def test_globs(pattern: str, matches: list[str], misses: list[str]) -> None:
    regex = compile_glob(pattern)
    assert [m for m in matches if not regex.fullmatch(m)] == []
    assert [m for m in misses if regex.fullmatch(m)] == []


# -- the local file system -------------------------------------------------------------------------------------


async def test_read_text_windows_lines_and_counts_them_all(root: Path) -> None:
    (root / "f.txt").write_bytes(b"one\r\ntwo\nthree\nfour")
    fs = LocalFileSystem()
    whole = await fs.read_text(root / "f.txt")
    assert (whole.text, whole.total_lines) == ("one\r\ntwo\nthree\nfour", 4)
    window = await fs.read_text(root / "f.txt", line=2, limit=2)
    assert (window.text, window.total_lines) == ("two\nthree\n", 4)


@pytest.mark.parametrize("content", [b"PNG\x00\x01\x02", b"caf\xe9 latin-1", b"x\n" * 5000 + b"\xff"])
async def test_binary_files_are_refused(root: Path, content: bytes) -> None:
    (root / "f.bin").write_bytes(content)
    with pytest.raises(ToolError, match="binary file"):
        await LocalFileSystem().read_text(root / "f.bin")


async def test_missing_files_and_directories_are_clear_errors(root: Path) -> None:
    fs = LocalFileSystem()
    with pytest.raises(ToolError, match="does not exist") as info:
        await fs.read_text(root / "nope")
    assert info.value.kind == "not_found"
    with pytest.raises(ToolError, match="is a directory"):
        await fs.read_text(root)
    with pytest.raises(ToolError, match="is a file"):
        (root / "f").write_text("")
        await fs.list_directory(root / "f")


async def test_write_text_creates_parents_and_keeps_line_endings(root: Path) -> None:
    await LocalFileSystem().write_text(root / "a" / "b" / "c.txt", "x\r\ny\n")
    assert (root / "a" / "b" / "c.txt").read_bytes() == b"x\r\ny\n"


# -- the local process runner ----------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie nobody reaped (PID 1 in a container may not) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def _wait_gone(pid: int) -> None:
    with anyio.fail_after(5):
        while _alive(pid):
            await anyio.sleep(0.02)


async def test_run_returns_exit_code_and_interleaved_output(root: Path) -> None:
    result = await LocalProcessRunner().run(
        "echo out; echo err >&2; pwd; echo $GREETING; exit 3",
        cwd=root,
        timeout_s=10,
        output_limit=1000,
        env={"GREETING": "hi"},
    )
    assert result.exit_code == 3
    assert result.output == f"out\nerr\n{root}\nhi\n"
    assert (result.signal, result.timed_out, result.omitted_chars) == (None, False, 0)


async def test_run_streams_chunks_as_they_come(root: Path) -> None:
    chunks: list[tuple[float, str]] = []

    async def on_output(text: str) -> None:
        chunks.append((anyio.current_time(), text))

    await LocalProcessRunner().run(
        "echo first; sleep 0.3; echo second", cwd=root, timeout_s=10, output_limit=1000, on_output=on_output
    )
    assert [text for _, text in chunks] == ["first\n", "second\n"]
    assert chunks[1][0] - chunks[0][0] > 0.2  # the first arrived while the command was still running


async def test_run_keeps_the_end_of_long_output(root: Path) -> None:
    result = await LocalProcessRunner().run("seq 1 20000", cwd=root, timeout_s=10, output_limit=100)
    assert result.output.endswith("19999\n20000\n") and len(result.output) == 100
    assert result.omitted_chars == len("".join(f"{i}\n" for i in range(1, 20001))) - 100


async def test_a_timeout_kills_the_whole_process_group(root: Path) -> None:
    seen: list[str] = []

    async def on_output(text: str) -> None:
        seen.append(text)

    start = anyio.current_time()
    result = await LocalProcessRunner().run(
        "sleep 30 & echo $!; wait", cwd=root, timeout_s=0.5, output_limit=1000, on_output=on_output
    )
    assert anyio.current_time() - start < 5
    assert result.timed_out and result.exit_code is None and result.signal == "SIGTERM"
    await _wait_gone(int(result.output.strip()))


async def test_a_process_ignoring_sigterm_is_killed(root: Path) -> None:
    result = await LocalProcessRunner(kill_grace_s=0.2).run(
        "trap '' TERM; sleep 30", cwd=root, timeout_s=0.3, output_limit=1000
    )
    assert result.timed_out and result.signal == "SIGKILL"


async def test_cancellation_kills_the_whole_process_group(root: Path) -> None:
    pids: list[int] = []

    async def on_output(text: str) -> None:
        pids.append(int(text.strip()))
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: LocalProcessRunner().run(
                "sleep 30 & echo $!; wait", cwd=root, timeout_s=30, output_limit=1000, on_output=on_output
            )
        )
    await _wait_gone(pids[0])


async def test_background_jobs_do_not_hold_the_call(root: Path, tmp_path: Path) -> None:
    start = anyio.current_time()
    result = await LocalProcessRunner().run("sleep 3 & echo started", cwd=root, timeout_s=10, output_limit=100)
    assert result.output == "started\n" and result.exit_code == 0
    assert anyio.current_time() - start < 2


async def test_a_signal_death_is_reported(root: Path) -> None:
    result = await LocalProcessRunner().run("kill -KILL $$", cwd=root, timeout_s=10, output_limit=100)
    assert (result.exit_code, result.signal, result.timed_out) == (None, signal.Signals.SIGKILL.name, False)


# -- the run's environment -------------------------------------------------------------------------------------


def make_ctx(env: RunEnvironment) -> ToolCallContext:
    return ToolCallContext(
        call_id="c", tool_name="t", thread_id="t", run_id="r", agent_id="a", snapshot=Snapshot(revision=0), env=env
    )


async def test_the_environment_defaults_to_local_implementations_on_its_cwd(root: Path, tmp_path: Path) -> None:
    ctx = make_ctx(RunEnvironment(cwd=str(root), roots=(str(tmp_path),)))
    ws = await get_workspace(ctx)
    assert ws.roots == (root, tmp_path.resolve())
    assert isinstance(get_file_system(ctx), LocalFileSystem)
    assert isinstance(get_process_runner(ctx), LocalProcessRunner)


async def test_the_file_system_and_runner_of_the_environment_are_used(root: Path) -> None:
    fs, runner = LocalFileSystem(), LocalProcessRunner()
    ctx = make_ctx(RunEnvironment(cwd=str(root), fs=fs, runner=runner))
    assert get_file_system(ctx) is fs
    assert get_process_runner(ctx) is runner


async def test_no_cwd_means_the_process_directory() -> None:
    ctx = ToolCallContext(
        call_id="c", tool_name="t", thread_id="t", run_id="r", agent_id="a", snapshot=Snapshot(revision=0)
    )
    assert (await get_workspace(ctx)).root == Path(os.getcwd()).resolve()


# -- opening without following links, hard links, .gitignore ----------------------------------------------------


async def test_a_symlink_in_a_checked_path_is_refused_not_followed(root: Path, tmp_path: Path) -> None:
    """What a directory swapped for a link after ``Workspace.resolve`` looks like to the file system."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f.txt").write_text("secret\n")
    (root / "d").symlink_to(tmp_path / "outside")
    (root / "f.txt").symlink_to(tmp_path / "outside" / "f.txt")
    fs = LocalFileSystem()
    attempts = [
        fs.read_text(root / "d" / "f.txt"),
        fs.read_text(root / "f.txt"),
        fs.write_text(root / "d" / "new.txt", "x"),
        fs.write_text(root / "f.txt", "x"),
        fs.list_directory(root / "d"),
        fs.search(root / "d", re.compile("secret"), glob=None, limit=10),
    ]
    for attempt in attempts:
        with pytest.raises(ToolError, match="symbolic link") as info:
            await attempt
        assert info.value.kind == "denied"
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["f.txt"]
    assert (tmp_path / "outside" / "f.txt").read_text() == "secret\n"


async def test_a_hard_linked_file_is_neither_read_nor_written(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "passwords.txt"
    outside.write_text("secret\n")
    os.link(outside, root / "notes.txt")
    fs = LocalFileSystem()
    for attempt in (fs.read_text(root / "notes.txt"), fs.write_text(root / "notes.txt", "overwritten\n")):
        with pytest.raises(ToolError, match=rf"{re.escape(str(root / 'notes.txt'))} has 2 hard links") as info:
            await attempt
        assert info.value.kind == "denied"
    assert outside.read_text() == "secret\n"
    assert await fs.search(root, re.compile("secret"), glob=None, limit=10) == []


async def test_a_fifo_is_refused_at_once(root: Path) -> None:
    os.mkfifo(root / "pipe")
    fs = LocalFileSystem()
    with anyio.fail_after(4):  # opened blocking, a FIFO without a writer would hang the call for ever
        for attempt in (fs.read_text(root / "pipe"), fs.write_text(root / "pipe", "x")):
            with pytest.raises(ToolError, match="not a regular file"):
                await attempt


async def test_without_dir_fd_the_checks_are_made_by_name(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback of platforms without ``dir_fd`` (Windows): same results, links still refused."""
    monkeypatch.setattr(local_fs, "_AT", False)
    fs = LocalFileSystem()
    await fs.write_text(root / "a" / "b.txt", "x\ny\n")
    assert (await fs.read_text(root / "a" / "b.txt", line=2)).text == "y\n"
    assert [e.name for e in await fs.list_directory(root / "a")] == ["b.txt"]
    assert await fs.find(root, "*.txt") == [root / "a" / "b.txt"]
    (root / "out").symlink_to(tmp_path)
    with pytest.raises(ToolError, match="symbolic link"):
        await fs.write_text(root / "out" / "c.txt", "x")
    with pytest.raises(ToolError, match="does not exist"):
        await fs.read_text(root / "a" / "b.txt" / "c")


@pytest.fixture
def ignoring(root: Path) -> Path:
    files = {
        ".gitignore": "build/\n*.log\n!keep.log\n",
        "build/out.py": "x = 'hit'\n",
        "a.log": "hit\n",
        "keep.log": "hit\n",
        "src/app.py": "hit\n",
        "src/.gitignore": "generated.py\n!/sub/kept.log\n",
        "src/generated.py": "hit\n",
        "src/sub/generated.py": "hit\n",
        "src/sub/kept.log": "hit\n",
        "src/sub/other.log": "hit\n",
        "docs/build.txt": "hit\n",
        ".git/HEAD": "hit\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


async def test_find_and_search_honour_nested_gitignore_files(ignoring: Path) -> None:
    fs = LocalFileSystem()
    expected = [".gitignore", "docs/build.txt", "keep.log", "src/.gitignore", "src/app.py", "src/sub/kept.log"]
    found = await fs.find(ignoring, "*", gitignore_from=ignoring)
    assert sorted(p.relative_to(ignoring).as_posix() for p in found) == expected
    hits = await fs.search(ignoring, re.compile("hit"), glob=None, limit=100, gitignore_from=ignoring)
    assert sorted(h.path.relative_to(ignoring).as_posix() for h in hits) == [e for e in expected if "git" not in e]


async def test_the_gitignore_files_above_a_searched_directory_apply(ignoring: Path) -> None:
    fs = LocalFileSystem()
    found = await fs.find(ignoring / "src", "*.log", gitignore_from=ignoring)
    assert found == [ignoring / "src" / "sub" / "kept.log"]  # *.log from the root, re-included below
    assert await fs.find(ignoring / "src", "*.log") == [
        ignoring / "src" / "sub" / "kept.log",
        ignoring / "src" / "sub" / "other.log",
    ]


async def test_an_ignored_directory_named_as_the_path_is_searched(ignoring: Path) -> None:
    fs = LocalFileSystem()
    assert await fs.find(ignoring / "build", "*.py", gitignore_from=ignoring) == [ignoring / "build" / "out.py"]


async def test_the_search_tools_pass_the_workspace_root_for_gitignore(ignoring: Path) -> None:
    from awaken_stdio.tools.builtin import find_files, search

    ctx = make_ctx(RunEnvironment(cwd=str(ignoring)))
    found = await find_files.execute(find_files.validate_args({"pattern": "*.log", "path": "src"}), ctx)
    assert found.data["files"] == ["src/sub/kept.log"]
    hits = await search.execute(search.validate_args({"pattern": "hit", "path": "src"}), ctx)
    assert [m["path"] for m in hits.data["matches"]] == ["src/app.py", "src/sub/kept.log"]


async def test_a_glob_expanding_to_too_many_alternatives_is_refused(root: Path) -> None:
    from awaken_stdio.tools.builtin import search

    with pytest.raises(ToolError, match="is not valid") as info:
        await search.execute(
            search.validate_args({"pattern": "x", "glob": "{a,b}" * 12}), make_ctx(RunEnvironment(cwd=str(root)))
        )
    assert info.value.kind == "invalid_arguments"
