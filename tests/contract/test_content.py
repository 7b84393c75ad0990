"""Content blocks of rich tool results: the wire form both protocols share, what the model reads, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_stdio.contract.content import (
    audio,
    embedded,
    from_file,
    from_wire,
    image,
    is_content,
    resource_link,
    to_wire,
)
from awaken_stdio.contract.messages import AudioBlock, ImageBlock, ResourceBlock, TextBlock
from awaken_stdio.contract.tools import ToolResult

BLOCKS = [
    TextBlock(text="look:"),
    image(b"\x89PNG", "image/png"),
    audio(b"RIFF", "audio/wav"),
    embedded("memo://a", text="alpha", mime_type="text/plain"),
    embedded("memo://b", data=b"\x00\x01"),
    resource_link("awaken://runs/r1", "run r1", title="Run r1"),
]


def test_wire_round_trip() -> None:
    assert [from_wire(to_wire(b)) for b in BLOCKS] == BLOCKS
    assert to_wire(BLOCKS[1]) == {"type": "image", "data": "iVBORw==", "mimeType": "image/png"}
    assert from_wire({"type": "hologram"}) is None


def test_the_model_reads_text_and_stand_ins() -> None:
    result = ToolResult.rich("picture", BLOCKS)
    assert result.text_for_model().splitlines() == [
        "look:",
        "[image image/png, 6 bytes]",
        "[audio audio/wav, 6 bytes]",
        "alpha",
        "[resource memo://b, binary]",
        "[resource link awaken://runs/r1: Run r1]",
    ]
    assert ToolResult.from_json(result.to_json()) == result


def test_is_content() -> None:
    assert is_content(BLOCKS[1]) and is_content(BLOCKS) and is_content(tuple(BLOCKS))
    assert not is_content([]) and not is_content([*BLOCKS, "text"]) and not is_content({"type": "text"})


def test_from_file(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"\x89PNG")
    (tmp_path / "b.wav").write_bytes(b"RIFF")
    (tmp_path / "c.txt").write_text("hi")
    (tmp_path / "d.bin").write_bytes(b"\xff\xfe\x00")
    assert isinstance(from_file(tmp_path / "a.png"), ImageBlock)
    assert isinstance(from_file(tmp_path / "b.wav"), AudioBlock)
    text, binary = from_file(tmp_path / "c.txt"), from_file(tmp_path / "d.bin")
    assert isinstance(text, ResourceBlock) and (text.text, text.mime_type) == ("hi", "text/plain")
    assert isinstance(binary, ResourceBlock) and binary.text is None and binary.blob == "//4A"
    with pytest.raises(ValueError, match="either text or data"):
        embedded("memo://x")
