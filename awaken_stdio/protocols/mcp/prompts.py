"""``prompts/list`` and ``prompts/get``: each published agent as a prompt, and the prompts of ``[mcp.prompts]``.

An agent's prompt (``agent_<id>``, argument ``message``) is its system prompt followed by the message, as one user
message: the host's own model then works as that agent would. A config prompt is a list of messages whose text,
image, audio or embedded resource is declared in the config; ``{argument}`` in a text or a resource URI is replaced
by the argument's value. Images and audio are files relative to the config's directory; an embedded resource is read
from this server's resources unless the config gives its text.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.protocols.mcp.catalog import decode_cursor, encode_cursor
from awaken_stdio.protocols.mcp.resources import ResourceNotFound, Resources, fill

if TYPE_CHECKING:
    from awaken_stdio.app.config import McpPromptConfig, McpPromptMessageConfig
    from awaken_stdio.contract.agent import AgentSpec

__all__ = ["PromptError", "Prompts"]


class PromptError(ValueError):
    """An unknown prompt or a missing argument (-32602, naming it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Agent:
    spec: AgentSpec


class Prompts:
    def __init__(
        self,
        agents: Mapping[str, AgentSpec],
        declared: Mapping[str, McpPromptConfig],
        base_dir: Path,
        resources: Resources,
    ) -> None:
        self._by_name: dict[str, McpPromptConfig | _Agent] = dict(declared)
        for agent_id in sorted(agents):
            spec = agents[agent_id]
            if spec.expose_mcp and f"agent_{agent_id}" not in self._by_name:
                self._by_name[f"agent_{agent_id}"] = _Agent(spec=spec)
        self._base_dir = base_dir
        self._resources = resources

    def page(self, cursor: str | None, size: int) -> tuple[list[dict[str, Any]], str | None]:
        after = decode_cursor(cursor) if cursor else ""
        names = [n for n in sorted(self._by_name) if n > after]
        chunk = names[:size]
        more = len(names) > size
        return [self._listing(n) for n in chunk], (encode_cursor(chunk[-1]) if more and chunk else None)

    def argument_values(self, name: str, argument: str) -> list[str]:
        """The declared values of one argument of a config prompt (completion); [] for anything else."""
        prompt = self._by_name.get(name)
        if prompt is None or isinstance(prompt, _Agent):
            return []
        return next((list(a.values) for a in prompt.arguments if a.name == argument), [])

    def _listing(self, name: str) -> dict[str, Any]:
        prompt = self._by_name[name]
        if isinstance(prompt, _Agent):
            spec = prompt.spec
            return {
                "name": name,
                "title": f"Agent {spec.id}",
                "description": spec.description.strip() or f"Work as the {spec.id} agent on a task.",
                "arguments": [{"name": "message", "description": "The task or question.", "required": True}],
            }
        out: dict[str, Any] = {"name": name, "description": prompt.description or name}
        if prompt.title:
            out["title"] = prompt.title
        if prompt.arguments:
            out["arguments"] = [
                {"name": a.name, "description": a.description, "required": a.required} for a in prompt.arguments
            ]
        return out

    async def get(self, name: str, arguments: Mapping[str, str]) -> dict[str, Any]:
        prompt = self._by_name.get(name)
        if prompt is None:
            raise PromptError(f"Unknown prompt: {name}")
        listing = self._listing(name)
        missing = [a["name"] for a in listing.get("arguments", []) if a["required"] and a["name"] not in arguments]
        if missing:
            raise PromptError(f"Prompt {name} needs the argument(s): {', '.join(missing)}")
        if isinstance(prompt, _Agent):
            instructions = prompt.spec.system_prompt.strip()
            text = f"{instructions}\n\n{arguments['message']}" if instructions else arguments["message"]
            messages = [{"role": "user", "content": {"type": "text", "text": text}}]
        else:
            values = {a.name: arguments.get(a.name, "") for a in prompt.arguments}
            messages = [{"role": m.role, "content": await self._content(m, values)} for m in prompt.messages]
        return {"description": listing["description"], "messages": messages}

    async def _content(self, m: McpPromptMessageConfig, values: dict[str, str]) -> dict[str, Any]:
        if m.resource is not None:
            uri = fill(m.resource, values)
            if m.text is not None:
                resource = {"uri": uri, "mimeType": m.mime_type or "text/plain", "text": fill(m.text, values)}
            else:
                try:
                    resource = (await self._resources.read(uri))[0]
                except ResourceNotFound as exc:
                    raise PromptError(str(exc)) from None
            return {"type": "resource", "resource": resource}
        media = m.image or m.audio
        if media is not None:
            path = self._base_dir / media
            data = base64.b64encode(await anyio.Path(path).read_bytes()).decode("ascii")
            mime = m.mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            return {"type": "image" if m.image else "audio", "data": data, "mimeType": mime}
        return {"type": "text", "text": fill(m.text or "", values)}
