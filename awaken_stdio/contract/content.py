"""Rich tool results: images, audio, embedded resources and resource links beside the text a model reads.

A ``@tool`` function returns one block or a list of them (``TextBlock``, ``ImageBlock``, ``AudioBlock``,
``ResourceBlock``, ``ResourceLinkBlock`` from ``contract/messages.py``, or built here from bytes and files); the
result keeps them in ``ToolResult.content``, and its text for the model is the text blocks with a one-line stand-in
for each other block (``[image image/png, 68 bytes]``), since models read tool results as text. The protocols show
the blocks themselves: MCP ``tools/call`` content, ACP tool-call content. MCP and ACP spell a block the same way on
the wire (``to_wire``/``from_wire``); a block an MCP server sends comes through its toolset unchanged.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from awaken_stdio.contract.messages import (
    AudioBlock,
    ContentBlock,
    ImageBlock,
    ResourceBlock,
    ResourceLinkBlock,
    TextBlock,
)

__all__ = [
    "CONTENT_TYPES",
    "audio",
    "embedded",
    "from_file",
    "from_wire",
    "image",
    "is_content",
    "model_text",
    "resource_link",
    "to_wire",
]

CONTENT_TYPES = (TextBlock, ImageBlock, AudioBlock, ResourceBlock, ResourceLinkBlock)


def image(data: bytes, mime_type: str) -> ImageBlock:
    return ImageBlock(data=base64.b64encode(data).decode("ascii"), mime_type=mime_type)


def audio(data: bytes, mime_type: str) -> AudioBlock:
    return AudioBlock(data=base64.b64encode(data).decode("ascii"), mime_type=mime_type)


def embedded(
    uri: str, *, text: str | None = None, data: bytes | None = None, mime_type: str | None = None
) -> ResourceBlock:
    """A resource sent with its contents: ``text``, or ``data`` (sent base64)."""
    if (text is None) == (data is None):
        raise ValueError("an embedded resource has either text or data")
    blob = base64.b64encode(data).decode("ascii") if data is not None else None
    return ResourceBlock(uri=uri, text=text, blob=blob, mime_type=mime_type)


def resource_link(
    uri: str, name: str, *, mime_type: str | None = None, title: str | None = None, description: str | None = None
) -> ResourceLinkBlock:
    """A pointer the client may read later (``resources/read``): for results too big to send."""
    return ResourceLinkBlock(uri=uri, name=name, mime_type=mime_type, title=title, description=description)


def from_file(path: str | Path, mime_type: str | None = None) -> ImageBlock | AudioBlock | ResourceBlock:
    """A file as the block its type calls for: an image, audio, else an embedded resource (text when UTF-8)."""
    path = Path(path)
    data = path.read_bytes()
    mime = mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if mime.startswith("image/"):
        return image(data, mime)
    if mime.startswith("audio/"):
        return audio(data, mime)
    uri = path.resolve().as_uri()
    try:
        return embedded(uri, text=data.decode("utf-8"), mime_type=mime)
    except UnicodeDecodeError:
        return embedded(uri, data=data, mime_type=mime)


def is_content(value: Any) -> bool:
    """Whether a tool returned content blocks: one, or a non-empty list or tuple of nothing else."""
    if isinstance(value, CONTENT_TYPES):
        return True
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(b, CONTENT_TYPES) for b in value)


def model_text(blocks: Sequence[ContentBlock]) -> str:
    """What a model reads of ``blocks``: their text, and a stand-in line for each other block."""
    return "\n".join(_stand_in(b) for b in blocks)


def _stand_in(block: ContentBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ImageBlock | AudioBlock):
        return f"[{block.type} {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, ResourceBlock):
        return block.text if block.text is not None else f"[resource {block.uri}, {block.mime_type or 'binary'}]"
    return f"[resource link {block.uri}: {block.title or block.name}]"


def to_wire(block: ContentBlock) -> dict[str, Any]:
    """The MCP (and ACP) content block."""
    if type(block) is TextBlock:
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        out = {"type": "image", "data": block.data, "mimeType": block.mime_type}
        return out | ({"uri": block.uri} if block.uri else {})
    if isinstance(block, AudioBlock):
        return {"type": "audio", "data": block.data, "mimeType": block.mime_type}
    if isinstance(block, ResourceBlock):
        resource: dict[str, Any] = {"uri": block.uri}
        if block.text is not None:
            resource["text"] = block.text
        else:
            resource["blob"] = block.blob or ""
        if block.mime_type:
            resource["mimeType"] = block.mime_type
        return {"type": "resource", "resource": resource}
    assert isinstance(block, ResourceLinkBlock)
    optional = {"mimeType": block.mime_type, "title": block.title, "description": block.description, "size": block.size}
    return {"type": "resource_link", "uri": block.uri, "name": block.name} | {
        k: v for k, v in optional.items() if v is not None
    }


def from_wire(data: dict[str, Any]) -> ContentBlock | None:
    """A content block from MCP (or ACP); None for a type this runtime does not know (left out, not guessed)."""
    kind = data.get("type")
    if kind == "text":
        return TextBlock(text=str(data.get("text", "")))
    if kind in ("image", "audio"):
        data_b64, mime = str(data.get("data", "")), str(data.get("mimeType", "application/octet-stream"))
        return (
            ImageBlock(data=data_b64, mime_type=mime, uri=data.get("uri"))
            if kind == "image"
            else AudioBlock(data=data_b64, mime_type=mime)
        )
    if kind == "resource" and isinstance(data.get("resource"), dict):
        r = data["resource"]
        return ResourceBlock(
            uri=str(r.get("uri", "")), text=r.get("text"), blob=r.get("blob"), mime_type=r.get("mimeType")
        )
    if kind == "resource_link":
        size = data.get("size")
        return ResourceLinkBlock(
            uri=str(data.get("uri", "")),
            name=str(data.get("name", "")),
            mime_type=data.get("mimeType"),
            title=data.get("title"),
            description=data.get("description"),
            size=size if isinstance(size, int) else None,
        )
    return None
