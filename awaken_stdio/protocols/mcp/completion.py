"""``completion/complete``: values for prompt arguments and resource-template variables, by prefix.

Prompt arguments complete from the values ``[mcp.prompts]`` declares for them (an agent's ``message`` is free text:
nothing). Template variables complete from what exists: ``awaken://sessions/{id}`` from the store's sessions,
``awaken://runs/{id}`` from its runs (newest first), the file template's ``path`` from the entries of the directory
the value names so far under ``--cwd`` (directories end in ``/``, so a client can go on completing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from awaken_stdio.app.tooling import LocalFileSystem
from awaken_stdio.contract.errors import ToolFailure

if TYPE_CHECKING:
    from awaken_stdio.protocols.mcp.prompts import Prompts
    from awaken_stdio.protocols.mcp.resources import Resources

__all__ = ["MAX_VALUES", "complete"]

MAX_VALUES = 100  # the spec's cap per response
_SCAN = 500  # ids read from the store per completion


async def complete(
    prompts: Prompts, resources: Resources, ref: dict[str, Any], name: str, value: str
) -> dict[str, Any]:
    """The ``completion`` object for argument ``name`` (typed so far: ``value``) of ``ref``."""
    if ref.get("type") == "ref/prompt":
        candidates = prompts.argument_values(str(ref.get("name", "")), name)
    elif ref.get("type") == "ref/resource":
        candidates = await _template_values(resources, str(ref.get("uri", "")), name, value)
    else:
        candidates = []
    matches = [c for c in candidates if c.startswith(value)]
    out: dict[str, Any] = {"values": matches[:MAX_VALUES], "total": len(matches)}
    out["hasMore"] = len(matches) > MAX_VALUES
    return out


async def _template_values(resources: Resources, uri_template: str, name: str, value: str) -> list[str]:
    store = resources.store
    if uri_template == resources.sessions.uri_template and name == "id":
        return [s.session_id for s in (await store.list_sessions(limit=_SCAN)).items]
    if uri_template == resources.runs.uri_template and name == "id":
        return [r.run_id for r in (await store.list_runs(limit=_SCAN)).items]
    if uri_template == resources.files.uri_template and name == "path":
        return await _paths(resources, value)
    return []


async def _paths(resources: Resources, value: str) -> list[str]:
    directory = value.rsplit("/", 1)[0] + "/" if "/" in value else ""
    try:
        path = await resources.workspace.resolve(directory or ".")
        entries = await LocalFileSystem().list_directory(path)
    except (ToolFailure, OSError):
        return []
    return sorted(f"{directory}{e.name}{'/' if e.kind == 'directory' else ''}" for e in entries)
