"""``resources/*``: the files of ``--cwd``, each session's transcript and each run's record, and config resources.

- Files: ``file://`` URIs of the regular files under ``--cwd`` (``.gitignore`` and the usual build directories left
  out, as ``find_files`` does), read-only and confined exactly as the file tools are: the path is resolved and
  checked against the workspace, then opened a component at a time without following a link
  (``tools/local_fs.py``). UTF-8 contents come back as ``text``, anything else as a base64 ``blob``; the mime type
  is guessed from the name. Listed, and a template (``file://<cwd>/{+path}``) whose ``path`` completes.
- ``awaken://sessions/{id}``: a session's transcript (an ACP session id, or the ``thread_id`` an MCP agent result
  names), and ``awaken://runs/{id}``: a run's record (status, pending approvals, response), both JSON. Templates
  only: there are too many to list, and their ids complete.
- ``[mcp.resources]`` of the config: fixed text or a file, and templates whose ``{variables}`` are substituted.

A subscription (``resources/subscribe``, or a 2026-era ``subscriptions/listen`` with ``resourceSubscriptions``) is
served by polling the resource's version (a run's status and update time, a file's size and mtime) every
``poll_s``: the store may be changed by another process (a run resumed from the CLI), so the store is the truth.
"""

from __future__ import annotations

import base64
import json
import logging
import mimetypes
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import anyio
import anyio.to_thread

from awaken_stdio.app.tooling import LocalFileSystem, Workspace, open_file
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.messages import message_to_json
from awaken_stdio.protocols.mcp.catalog import decode_cursor, encode_cursor

if TYPE_CHECKING:
    from awaken_stdio.app.config import McpResourceConfig
    from awaken_stdio.contract.stores import Store

__all__ = ["MAX_READ_BYTES", "ResourceNotFound", "Resources", "Template", "Watch", "fill"]

log = logging.getLogger(__name__)

MAX_READ_BYTES = 8 * 1024 * 1024  # a bigger file is refused: hosts put resources into the model's context
SESSIONS = "awaken://sessions/"
RUNS = "awaken://runs/"
_VARIABLE = re.compile(r"\{\+?([A-Za-z0-9_]+)\}")
JSON = "application/json"


class ResourceNotFound(LookupError):
    """No resource has this URI (-32002 in the handshake era, -32602 in the 2026 one), or it cannot be read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Template:
    """A URI template (RFC 6570 level 1, plus ``{+var}`` for paths) and what matches it."""

    uri_template: str
    name: str
    description: str
    mime_type: str | None
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, uri_template: str, name: str, description: str, mime_type: str | None = None) -> Template:
        regex, last = "", 0
        for m in _VARIABLE.finditer(uri_template):
            regex += re.escape(uri_template[last : m.start()])
            regex += f"(?P<{m.group(1)}>{'.+' if m.group(0).startswith('{+') else '[^/]+'})"
            last = m.end()
        pattern = re.compile(regex + re.escape(uri_template[last:]))
        return cls(uri_template=uri_template, name=name, description=description, mime_type=mime_type, pattern=pattern)

    @property
    def variables(self) -> list[str]:
        return list(self.pattern.groupindex)

    def match(self, uri: str) -> dict[str, str] | None:
        m = self.pattern.fullmatch(uri)
        return {k: unquote(v) for k, v in m.groupdict().items()} if m else None

    def listing(self) -> dict[str, Any]:
        out = {"uriTemplate": self.uri_template, "name": self.name, "description": self.description}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        return out


class Resources:
    """What ``resources/list``, ``resources/templates/list`` and ``resources/read`` serve, for one open app."""

    def __init__(self, store: Store, cwd: str, declared: Mapping[str, McpResourceConfig], base_dir: Path) -> None:
        self.store = store
        self.root = Path(cwd).resolve()
        self.declared = {uri: r for uri, r in declared.items() if not _VARIABLE.search(uri)}
        self.sessions = Template.of(
            SESSIONS + "{id}", "session", "A session's transcript: its messages, newest last (JSON).", JSON
        )
        self.runs = Template.of(
            RUNS + "{id}", "run", "An agent run's record: status, pending approvals, response (JSON).", JSON
        )
        self.files = Template.of(self.root.as_uri() + "/{+path}", "file", f"A file under {self.root} (read-only).")
        declared_templates = [
            Template.of(uri, r.name or uri, r.description or "", r.mime_type)
            for uri, r in declared.items()
            if _VARIABLE.search(uri)
        ]
        self.templates = [self.sessions, self.runs, self.files, *declared_templates]
        self._template_text = {uri: r for uri, r in declared.items() if _VARIABLE.search(uri)}
        self._base_dir = base_dir
        self.workspace = Workspace(self.root)

    # -- listing ----------------------------------------------------------------------------------------------

    async def page(self, cursor: str | None, size: int) -> tuple[list[dict[str, Any]], str | None]:
        """The declared resources, then the files under ``--cwd``, in URI order; ``InvalidCursor`` for a bad one."""
        after = decode_cursor(cursor) if cursor else ""
        files = await LocalFileSystem().find(self.root, "**", gitignore_from=self.root)
        listed = [self._declared_listing(uri) for uri in self.declared] + [self._file_listing(p) for p in files]
        listed.sort(key=lambda r: r["uri"])
        start = next((i for i, r in enumerate(listed) if r["uri"] > after), len(listed))
        chunk = listed[start : start + size]
        more = start + size < len(listed)
        return chunk, (encode_cursor(chunk[-1]["uri"]) if more and chunk else None)

    def _declared_listing(self, uri: str) -> dict[str, Any]:
        r = self.declared[uri]
        out: dict[str, Any] = {"uri": uri, "name": r.name or uri, "description": r.description or uri}
        mime = r.mime_type or _guess(r.file or uri)
        if mime:
            out["mimeType"] = mime
        return out

    def _file_listing(self, path: Path) -> dict[str, Any]:
        rel = path.relative_to(self.root).as_posix()
        out: dict[str, Any] = {"uri": path.as_uri(), "name": rel, "description": f"{rel} in the working directory"}
        mime = _guess(path.name)
        if mime:
            out["mimeType"] = mime
        return out

    # -- reading ----------------------------------------------------------------------------------------------

    async def read(self, uri: str) -> list[dict[str, Any]]:
        """The ``contents`` of ``uri``; ``ResourceNotFound`` saying why when there is nothing to read."""
        if uri in self.declared:
            return [await self._read_declared(uri, self.declared[uri], {})]
        if uri.startswith("file:"):
            return [await self._read_file(uri)]
        if (found := self.sessions.match(uri)) is not None:
            return [_json_contents(uri, await self._session(found["id"]))]
        if (found := self.runs.match(uri)) is not None:
            record = await self.store.load_run(found["id"])
            if record is None:
                raise ResourceNotFound(f"No run {found['id']!r} (awaken-stdio runs list shows the runs)")
            return [_json_contents(uri, record.to_json())]
        for template_uri, declared in self._template_text.items():
            values = Template.of(template_uri, "", "").match(uri)
            if values is not None:
                return [await self._read_declared(uri, declared, values)]
        raise ResourceNotFound(f"Resource not found: {uri}")

    async def version(self, uri: str) -> Any:
        """What changes when the resource does (polled for subscriptions); None when it cannot be read."""
        if (found := self.runs.match(uri)) is not None:
            run = await self.store.load_run(found["id"])
            return None if run is None else (run.status, run.updated_at, run.steps)
        if (found := self.sessions.match(uri)) is not None:
            session = await self.store.load_session(found["id"])
            thread_id = session.thread_id if session is not None else found["id"]
            run = await self.store.latest_run(thread_id)
            return None if run is None else (run.run_id, run.status, run.updated_at)
        if uri.startswith("file:"):
            try:
                info = await anyio.Path(await self._confined(uri)).stat()
            except (OSError, ResourceNotFound):
                return None
            return (info.st_size, info.st_mtime_ns)
        declared = uri in self.declared or any(Template.of(t, "", "").match(uri) for t in self._template_text)
        return True if declared else None

    async def exists(self, uri: str) -> bool:
        return await self.version(uri) is not None

    async def _read_declared(self, uri: str, r: McpResourceConfig, values: dict[str, str]) -> dict[str, Any]:
        if r.file is not None:
            path = self._base_dir / r.file
            data = await anyio.Path(path).read_bytes()
            return _contents(uri, data, r.mime_type or _guess(path.name))
        text = fill(r.text or "", values)
        return {"uri": uri, "mimeType": r.mime_type or "text/plain", "text": text}

    async def _confined(self, uri: str) -> Path:
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise ResourceNotFound(f"Resource not found: {uri} (only local file:// URIs)")
        try:
            return await self.workspace.resolve(unquote(parts.path))
        except ToolFailure as exc:
            raise ResourceNotFound(f"Resource not found: {exc}") from None

    async def _read_file(self, uri: str) -> dict[str, Any]:
        path = await self._confined(uri)

        def read() -> bytes:
            fd = open_file(path, os.O_RDONLY)
            with os.fdopen(fd, "rb") as f:
                data = f.read(MAX_READ_BYTES + 1)
            if len(data) > MAX_READ_BYTES:
                raise ToolFailure(f"{path} is larger than {MAX_READ_BYTES} bytes; read a part with read_file")
            return data

        try:
            data = await anyio.to_thread.run_sync(read)
        except ToolFailure as exc:
            raise ResourceNotFound(f"Cannot read {uri}: {exc}") from None
        return _contents(path.as_uri(), data, _guess(path.name))

    async def _session(self, session_id: str) -> dict[str, Any]:
        session = await self.store.load_session(session_id)
        if session is not None:
            head: dict[str, Any] = {
                "session_id": session.session_id,
                "thread_id": session.thread_id,
                "agent_id": session.agent_id,
                "title": session.title,
                "cwd": session.cwd,
            }
            thread_id = session.thread_id
        else:
            thread = await self.store.load_thread(session_id)
            if thread is None:
                raise ResourceNotFound(f"No session or thread {session_id!r}")
            head = {"thread_id": session_id, "agent_id": thread.thread.agent_id, "title": thread.thread.title}
            thread_id = session_id
        messages = await self.store.load_messages(thread_id)
        head["messages"] = [message_to_json(m) for m in messages if not m.internal]
        return head


class Watch:
    """Subscriptions: each watched URI's version polled every ``poll_s``; a change calls its listeners."""

    def __init__(self, version: Callable[[str], Awaitable[Any]], poll_s: float = 1.0) -> None:
        self._version = version
        self.poll_s = poll_s
        self._listeners: dict[str, dict[object, Callable[[str], Awaitable[None]]]] = {}
        self._seen: dict[str, Any] = {}

    async def add(self, uri: str, key: object, send: Callable[[str], Awaitable[None]]) -> None:
        if uri not in self._listeners:
            self._seen[uri] = await self._version(uri)
        self._listeners.setdefault(uri, {})[key] = send

    def remove(self, uri: str, key: object) -> None:
        listeners = self._listeners.get(uri, {})
        listeners.pop(key, None)
        if not listeners:
            self._listeners.pop(uri, None)
            self._seen.pop(uri, None)

    async def run(self) -> None:
        while True:
            await anyio.sleep(self.poll_s)
            for uri in list(self._listeners):
                try:
                    version = await self._version(uri)
                except Exception:  # a store hiccup: try again next round
                    log.warning("could not check %s for its subscribers", uri, exc_info=True)
                    continue
                if uri not in self._listeners or version == self._seen.get(uri):
                    continue
                self._seen[uri] = version
                for send in list(self._listeners.get(uri, {}).values()):
                    try:
                        await send(uri)
                    except Exception:  # a closed connection or stream: its own request ends it
                        log.debug("could not tell a subscriber that %s changed", uri, exc_info=True)


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` of ``values`` replaced; other braces stay as they are."""
    return _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def _guess(name: str) -> str | None:
    return mimetypes.guess_type(name, strict=False)[0]


def _contents(uri: str, data: bytes, mime: str | None) -> dict[str, Any]:
    try:
        return {"uri": uri, "mimeType": mime or "text/plain", "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        blob = base64.b64encode(data).decode("ascii")
        return {"uri": uri, "mimeType": mime or "application/octet-stream", "blob": blob}


def _json_contents(uri: str, value: Any) -> dict[str, Any]:
    return {"uri": uri, "mimeType": JSON, "text": json.dumps(value, ensure_ascii=False, default=str)}
