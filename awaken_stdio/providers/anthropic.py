"""The ``anthropic`` provider: the Messages API, streamed.

Thinking blocks travel back with their signatures (the API rejects a tool-use turn whose thinking was altered or
dropped), redacted thinking as its opaque ``data``. With ``enable_prompt_cache`` the system prompt, the last tool and
the newest user turn carry ``cache_control`` breakpoints, so each turn of an agent loop reads the previous one's
prefix from the cache. Usage: ``input_tokens`` counts the whole prompt (the API's uncached input plus cache reads and
writes), so budgets and compaction see the real context size; ``cache_read_tokens``/``cache_write_tokens`` are parts.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from awaken_stdio.contract.agent import ModelSpec
from awaken_stdio.contract.errors import ProviderError
from awaken_stdio.contract.inference import (
    InferenceRequest,
    ModelCapabilities,
    ReasoningChunk,
    StopChunk,
    StopReason,
    StreamChunk,
    TextChunk,
    TokenUsage,
    ToolCallChunk,
    UsageChunk,
)
from awaken_stdio.contract.messages import Message, TextBlock
from awaken_stdio.providers._common import SdkExecutor, close_stream, content_parts, install_hint

try:
    import anthropic
    import httpx2
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise install_hint("anthropic", exc) from exc

__all__ = ["AnthropicModel", "create_executor", "messages_params"]

_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "tool_use": "tool_use",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "end_turn",
    "model_context_window_exceeded": "max_tokens",
}
# reasoning_effort -> thinking budget (tokens; the API's minimum is 1024) for models with manual extended thinking.
_THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
# Models that decide how much to think themselves: they take an effort level, and warn on a budget.
_ADAPTIVE = (
    "claude-opus-4-6",
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-sonnet-4-6",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-haiku-5",
    "claude-mythos",
    "claude-fable",
)
_EFFORT = {"minimal": "low"}
_CACHE = {"type": "ephemeral"}


def create_executor(spec: ModelSpec, base_dir: Path) -> AnthropicModel:
    return AnthropicModel.from_options(spec.model, spec.options)


class AnthropicModel(SdkExecutor):
    """A Claude model served over the Anthropic Messages API."""

    provider = "anthropic"
    default_key_env = "ANTHROPIC_API_KEY"
    sdk = anthropic
    client_class = anthropic.AsyncAnthropic
    transport_error = httpx2.TransportError

    async def _attempt(
        self, client: anthropic.AsyncAnthropic, model: str, request: InferenceRequest, caps: ModelCapabilities
    ) -> AsyncGenerator[StreamChunk]:
        stream = await client.messages.create(**messages_params(model, request, caps), stream=True)
        usage: Any = None
        output_tokens = 0
        stop: StopReason | None = None
        stopped = False
        tools: dict[int, int] = {}  # content block index -> tool-call index
        try:
            async for event in stream:
                if event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        yield TextChunk(text=delta.text)
                    elif delta.type == "input_json_delta":
                        yield ToolCallChunk(index=tools[event.index], args_delta=delta.partial_json)
                    elif delta.type == "thinking_delta":
                        yield ReasoningChunk(text=delta.thinking)
                    elif delta.type == "signature_delta":
                        yield ReasoningChunk(signature=delta.signature)
                elif event.type == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        tools[event.index] = index = len(tools)
                        yield ToolCallChunk(index=index, id=block.id, name=block.name)
                    elif block.type == "text" and block.text:
                        yield TextChunk(text=block.text)
                    elif block.type == "thinking" and (block.thinking or block.signature):
                        yield ReasoningChunk(text=block.thinking, signature=block.signature or None)
                    elif block.type == "redacted_thinking":
                        yield ReasoningChunk(signature=block.data, redacted=True)
                elif event.type == "message_start":
                    usage = event.message.usage
                    output_tokens = usage.output_tokens or 0
                elif event.type == "message_delta":
                    stop = _STOP.get(event.delta.stop_reason or "end_turn", "end_turn")
                    output_tokens = event.usage.output_tokens or output_tokens  # cumulative
                elif event.type == "message_stop":
                    # Read on to the end of the body rather than return: a response closed early cannot hand
                    # its connection back to the pool, and the next turn would pay for a new one.
                    stopped = True
        finally:
            await close_stream(stream)
        if not stopped:
            raise ProviderError("stream_interrupted", "the anthropic stream ended before message_stop")
        if usage is not None:
            yield UsageChunk(usage=_usage(usage, output_tokens))
        yield StopChunk(reason=stop or "end_turn")


def _usage(start: Any, output_tokens: int) -> TokenUsage:
    read = start.cache_read_input_tokens or 0
    write = start.cache_creation_input_tokens or 0
    return TokenUsage(
        input_tokens=(start.input_tokens or 0) + read + write,
        output_tokens=output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


# -- the request -----------------------------------------------------------------------------------------------


def messages_params(model: str, request: InferenceRequest, caps: ModelCapabilities) -> dict[str, Any]:
    """The Messages API request body (without ``stream``)."""
    system, messages = _conversation(request, images=caps.image_input)
    max_tokens = request.max_output_tokens or caps.max_output_tokens
    params: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    tools = [
        {"name": t["name"], "description": t.get("description", ""), "input_schema": t["input_schema"]}
        for t in request.tools
    ]
    if request.enable_prompt_cache:
        for blocks in (system, tools, messages[-1]["content"] if messages and messages[-1]["role"] == "user" else []):
            if blocks:
                blocks[-1] = {**blocks[-1], "cache_control": _CACHE}
    if system:
        params["system"] = system
    if tools:
        params["tools"] = tools
    effort = request.reasoning_effort
    if effort and model.startswith(_ADAPTIVE):
        params["thinking"] = {"type": "adaptive"}
        params["output_config"] = {"effort": _EFFORT.get(effort, effort)}
        return params
    # The budget counts against max_tokens and must leave room for the answer.
    budget = min(_THINKING_BUDGET.get(effort or "", 0), max_tokens * 3 // 4)
    if budget >= 1024:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif request.temperature is not None:  # the API refuses a temperature together with thinking
        params["temperature"] = request.temperature
    return params


def _conversation(request: InferenceRequest, *, images: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """System blocks and alternating messages: tool results become user ``tool_result`` blocks, and consecutive
    messages of one role merge (the API wants the results of one assistant turn in the one user turn after it)."""
    system = [{"type": "text", "text": request.system}] if request.system else []
    messages: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "system":
            if m.text:
                system.append({"type": "text", "text": m.text})
            continue
        if m.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(m)
        elif m.role == "tool":
            role = "user"
            blocks = [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": _blocks(m, images)}]
        else:
            role, blocks = "user", _blocks(m, images)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    return system, messages


def _blocks(m: Message, images: bool) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": p.text}
        if isinstance(p, TextBlock)
        else {"type": "image", "source": {"type": "base64", "media_type": p.mime_type, "data": p.data}}
        for p in content_parts(m.content, images=images)
        if not isinstance(p, TextBlock) or p.text  # the API rejects empty text blocks
    ]


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    """Signed thinking first (unsigned thinking, e.g. from another provider, cannot be sent), then text and calls."""
    blocks: list[dict[str, Any]] = []
    for t in m.thinking:
        if t.redacted and t.signature:
            blocks.append({"type": "redacted_thinking", "data": t.signature})
        elif t.signature:
            blocks.append({"type": "thinking", "thinking": t.text, "signature": t.signature})
    if m.text:
        blocks.append({"type": "text", "text": m.text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
    return blocks
