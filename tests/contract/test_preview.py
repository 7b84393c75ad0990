"""A tool call's preview as plain text (MCP elicitation messages, ``runs show``): shortened, paths relative."""

from __future__ import annotations

from pathlib import Path

from awaken_stdio.contract.preview import FileChange, ToolPreview


def test_the_preview_of_a_long_change_is_shortened_for_plain_text(tmp_path: Path) -> None:
    old = "".join(f"line {n}\n" for n in range(100))
    preview = ToolPreview(
        changes=(FileChange(path=str(tmp_path / "f.txt"), old_text=old, new_text=old.replace("line", "LINE")),),
        cwd=str(tmp_path),
    )
    lines = preview.summary(max_lines=10).splitlines()
    assert len(lines) == 10 and lines[0] == "--- a/f.txt" and lines[-1].startswith("… ")
    command = ToolPreview(command="make test", cwd="/w").summary()
    assert command == "$ make test\n(in /w)"


def test_a_file_outside_cwd_keeps_its_path_and_a_new_file_comes_from_nothing(tmp_path: Path) -> None:
    lines = FileChange(path="/etc/x.conf", old_text=None, new_text="a\n").unified(str(tmp_path))
    assert lines[:2] == ["--- /dev/null", "+++ b/etc/x.conf"]
