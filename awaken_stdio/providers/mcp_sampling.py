"""The ``mcp_sampling`` provider: model turns through ``sampling/createMessage`` on the MCP client's own model.

An MCP host with a model (VS Code, fast-agent, Claude Code...) can then run awaken-stdio's agents with no API key:
the request carries the client's model of the run's environment (``RunEnvironment.sampling``, which
``awaken-stdio mcp`` gives the runs it serves); a run without one, or whose client did not declare ``sampling``,
fails its turn with ``ProviderError(invalid_request)`` saying so. How the client answers (a request in the middle of
the call, or in the 2026-07-28 era one round of the call per turn, ``ModelAnswerPending`` until the retry brings the
answer) is the MCP server's business (``protocols/mcp/channel.py``).

A request becomes sampling params: system messages join ``systemPrompt``; user text, images and audio stay blocks;
assistant tool calls become ``tool_use`` blocks and tool results ``tool_result`` blocks of a user message (the
2025-11-25 sampling-with-tools form), with the agent's tools as ``tools``. Tools need the client's
``sampling.tools`` capability: a turn that needs them from a client without it fails saying so. The configured
``model`` (optional) goes as a model-preference hint; the client picks the model. The answer comes back whole (no
streaming in sampling), as text, tool calls and the stop reason.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from awaken_stdio.contract.content import to_wire
from awaken_stdio.contract.errors import ProviderError
from awaken_stdio.contract.inference import (
    InferenceRequest,
    ModelCapabilities,
    StopChunk,
    StopReason,
    StreamChunk,
    TextChunk,
    ToolCallChunk,
)
from awaken_stdio.contract.messages import Message, TextBlock

__all__ = ["DEFAULT_MAX_TOKENS", "McpSamplingModel"]

DEFAULT_MAX_TOKENS = 4096
_STOP: dict[str, StopReason] = {
    "endTurn": "end_turn",
    "maxTokens": "max_tokens",
    "toolUse": "tool_use",
    "stopSequence": "stop_sequence",
}


class McpSamplingModel:
    """An ``LlmExecutor`` asking the client's model of the run's environment (``InferenceRequest.sampling``)."""

    def __init__(self, model: str = "", *, max_output_tokens: int | None = None, context_window: int | None = None):
        self.model = model
        self._capabilities = ModelCapabilities(
            context_window=context_window or 200_000,
            max_output_tokens=max_output_tokens or DEFAULT_MAX_TOKENS,
            image_input=True,
            audio_input=True,
        )

    def capabilities(self, model: str) -> ModelCapabilities:
        return self._capabilities

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        client = request.sampling
        if client is None or not client.can_sample():
            raise ProviderError(
                "invalid_request",
                "mcp_sampling: no MCP client's model to ask. This provider works in `awaken-stdio mcp` when the "
                "client declares the sampling capability; configure a model with an API key "
                "otherwise.",
            )
        params = self.params(request, tools=client.can_use_tools())
        result = await client.create_message(params)
        for chunk in _chunks(result):
            yield chunk

    def params(self, request: InferenceRequest, *, tools: bool) -> dict[str, Any]:
        """The ``sampling/createMessage`` params of ``request``; ``tools``: whether the client takes tools."""
        needs_tools = bool(request.tools) or any(m.tool_calls or m.role == "tool" for m in request.messages)
        if needs_tools and not tools:
            raise ProviderError(
                "invalid_request",
                "mcp_sampling: this agent uses tools, but the MCP client's sampling does not (it did not declare "
                "sampling.tools); give the agent no tools, or use a client that supports sampling with tools.",
            )
        system = [request.system] if request.system else []
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            if m.role == "system":
                system.append(m.text)
            else:
                _append(messages, m)
        params: dict[str, Any] = {
            "messages": messages,
            "maxTokens": request.max_output_tokens or self._capabilities.max_output_tokens,
        }
        if system:
            params["systemPrompt"] = "\n\n".join(system)
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if self.model:
            params["modelPreferences"] = {"hints": [{"name": self.model}]}
        if request.tools:
            params["tools"] = [
                {"name": t["name"], "description": t.get("description", ""), "inputSchema": t["input_schema"]}
                for t in request.tools
            ]
            params["toolChoice"] = {"mode": "auto"}
        return params


def _append(messages: list[dict[str, Any]], m: Message) -> None:
    """``m`` as sampling content; consecutive tool results share one user message, as the form requires."""
    if m.role == "tool":
        block = {"type": "tool_result", "toolUseId": m.tool_call_id or "", "content": [to_wire(b) for b in m.content]}
        last = messages[-1] if messages else None
        if last and last["role"] == "user" and all(b["type"] == "tool_result" for b in last["content"]):
            last["content"].append(block)
        else:
            messages.append({"role": "user", "content": [block]})
        return
    content = [to_wire(b) for b in m.content if not (isinstance(b, TextBlock) and not b.text)]
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
    if content:
        messages.append({"role": "assistant" if m.role == "assistant" else "user", "content": content})


def _chunks(result: dict[str, Any]) -> list[StreamChunk]:
    content = result.get("content")
    blocks = content if isinstance(content, list) else [content]
    chunks: list[StreamChunk] = []
    calls = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and block.get("text"):
            chunks.append(TextChunk(text=str(block["text"])))
        elif block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input") or {})
            chunks.append(
                ToolCallChunk(
                    index=calls, id=str(block.get("id", f"call_{calls}")), name=str(block["name"]), args_delta=arguments
                )
            )
            calls += 1
    reason = _STOP.get(str(result.get("stopReason")), "tool_use" if calls else "end_turn")
    chunks.append(StopChunk(reason=reason))
    return chunks
