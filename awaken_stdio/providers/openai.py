"""The ``openai`` provider: OpenAI and every OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter).

Chat Completions by default; ``api = "responses"`` selects the Responses API. Thinking from earlier turns is not sent
back (neither API takes it as input); ``reasoning_content``/``reasoning`` deltas from compatible servers and
Responses reasoning summaries stream as :class:`ReasoningChunk`. Usage: ``input_tokens`` counts the whole prompt,
cached tokens included (``cache_read_tokens`` is that part), so budgets mean the same as with Anthropic.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import anyio

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
from awaken_stdio.contract.messages import ImageBlock, Message, TextBlock, text_of
from awaken_stdio.providers._common import (
    SdkExecutor,
    close_stream,
    content_parts,
    install_hint,
    stream_error,
)

try:
    import httpx2
    import openai
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise install_hint("openai", exc) from exc

__all__ = ["OpenAIModel", "chat_messages", "create_executor", "responses_input"]

_FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def create_executor(spec: ModelSpec, base_dir: Path) -> OpenAIModel:
    executor = OpenAIModel.from_options(spec.model, spec.options)
    executor.discover = not spec.model and executor.base_url is not None  # the server's only model
    return executor


class OpenAIModel(SdkExecutor):
    """A model served over the OpenAI API (``api``: ``chat`` or ``responses``)."""

    provider = "openai"
    default_key_env = "OPENAI_API_KEY"
    sdk = openai
    client_class = openai.AsyncOpenAI
    transport_error = httpx2.TransportError

    def __init__(self, model: str = "", *, api: Literal["chat", "responses"] = "chat", **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.api = api
        self.discover = False  # no model configured for a base_url: ask the server's /models on first use

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        if self.discover:
            await self._discover()
        async for chunk in super().stream(request):
            yield chunk

    async def check(self, timeout_s: float = 5.0) -> str:
        if self.discover:
            try:
                with anyio.fail_after(timeout_s):
                    await self._discover()
            except TimeoutError:
                raise ProviderError("timeout", f"openai at {self.base_url} did not answer in {timeout_s:g} s") from None
        return await super().check(timeout_s)

    async def _discover(self) -> None:
        """Use the server's only model (Ollama with one model pulled, a vLLM or llama.cpp server), else say which
        models it serves and where to name one: guessing a name it does not serve only fails later, less clearly."""
        client, errors = self._connect()
        try:
            served = sorted([model.id async for model in client.models.list()])
        except Exception as exc:
            mapped = errors(exc, False)
            if mapped is None:
                raise
            raise mapped from exc
        url = str(client.base_url).rstrip("/")
        if len(served) != 1:
            listed = f"{len(served)} models ({', '.join(served)})" if served else "no model"
            raise ProviderError(
                "model_not_found",
                f"no model is set and {url} serves {listed}: name one as `model` beside "
                f'base_url = "{url}" in a [models.<id>] table of the config file (awaken-stdio doctor shows where)',
            )
        self.model, self.discover = served[0], False
        self._errors = replace(errors, model=self.model)

    @classmethod
    def from_options(cls, model: str, options: Mapping[str, Any]) -> OpenAIModel:
        executor = super().from_options(model, options)
        executor.api = options.get("api", "chat")
        return executor

    def _attempt(
        self, client: openai.AsyncOpenAI, model: str, request: InferenceRequest, caps: ModelCapabilities
    ) -> AsyncGenerator[StreamChunk]:
        if self.api == "responses":
            return _responses(client, model, request, caps)
        return _chat(client, model, request, caps, official=self.base_url is None)


# -- Chat Completions ------------------------------------------------------------------------------------------


async def _chat(
    client: openai.AsyncOpenAI,
    model: str,
    request: InferenceRequest,
    caps: ModelCapabilities,
    *,
    official: bool,
) -> AsyncGenerator[StreamChunk]:
    params: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(request, images=caps.image_input),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [{"type": "function", "function": _function(t)} for t in request.tools]
    if request.max_output_tokens:
        # OpenAI itself wants the newer name (its reasoning models refuse max_tokens); compatible servers the older.
        params["max_completion_tokens" if official else "max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.reasoning_effort:
        params["reasoning_effort"] = request.reasoning_effort

    stream = await client.chat.completions.create(**params)
    finish: str | None = None
    calls = _CallIndex()
    try:
        async for chunk in stream:
            if chunk.usage is not None:
                yield UsageChunk(usage=_chat_usage(chunk.usage))
            for choice in chunk.choices[:1]:
                delta = choice.delta
                # Compatible servers' reasoning field: vLLM/DeepSeek `reasoning_content`, Ollama/OpenRouter `reasoning`.
                if extra := delta.model_extra:  # fields beyond OpenAI's own, without a failed lookup per chunk
                    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                    if isinstance(reasoning, str) and reasoning:
                        yield ReasoningChunk(text=reasoning)
                if delta.content:
                    yield TextChunk(text=delta.content)
                if delta.refusal:
                    yield TextChunk(text=delta.refusal)
                for position, call in enumerate(delta.tool_calls or ()):
                    fn = call.function
                    index = calls.index(position if call.index is None else call.index, call.id)
                    yield ToolCallChunk(
                        index=index,
                        id=call.id,
                        name=fn.name if fn else None,
                        args_delta=(fn.arguments or "") if fn else "",
                    )
                finish = choice.finish_reason or finish
    finally:
        await close_stream(stream)
    if finish is None:
        raise ProviderError("stream_interrupted", "the openai stream ended without a finish_reason")
    reason = _FINISH.get(finish, "end_turn")
    yield StopChunk(reason="tool_use" if reason == "end_turn" and calls.count else reason)


class _CallIndex:
    """Tool-call indexes as the contract wants them: one per call, even from servers that reuse index 0."""

    __slots__ = ("_ids", "count")

    def __init__(self) -> None:
        self.count = 0
        self._ids: dict[int, tuple[int, str | None]] = {}

    def index(self, wire: int, call_id: str | None) -> int:
        slot = self._ids.get(wire)
        if slot is None or (call_id and slot[1] and call_id != slot[1]):
            slot = self._ids[wire] = (self.count, call_id)
            self.count += 1
        return slot[0]


def _chat_usage(usage: Any) -> TokenUsage:
    prompt = getattr(usage, "prompt_tokens_details", None)
    completion = getattr(usage, "completion_tokens_details", None)
    return TokenUsage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=(prompt and prompt.cached_tokens) or 0,
        thinking_tokens=(completion and completion.reasoning_tokens) or 0,
    )


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return {"name": tool["name"], "description": tool.get("description", ""), "parameters": tool["input_schema"]}


def _data_url(image: ImageBlock) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def chat_messages(request: InferenceRequest, *, images: bool) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages (thinking is not sent back: the API takes none)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for m in request.messages:
        if m.role == "system":
            out.append({"role": "system", "content": m.text})
        elif m.role == "user":
            out.append({"role": "user", "content": _chat_content(m, images)})
        elif m.role == "tool":
            # Tool results take text only in Chat Completions.
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": _text(m)})
        elif m.text or m.tool_calls:
            message: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
                    }
                    for c in m.tool_calls
                ]
            out.append(message)
    return out


def _chat_content(m: Message, images: bool) -> str | list[dict[str, Any]]:
    parts = content_parts(m.content, images=images)
    if all(type(p) is TextBlock for p in parts):
        return text_of(parts)
    return [
        {"type": "text", "text": p.text}
        if isinstance(p, TextBlock)
        else {"type": "image_url", "image_url": {"url": _data_url(p)}}
        for p in parts
    ]


def _text(m: Message) -> str:
    return "\n".join(p.text for p in content_parts(m.content, images=False) if isinstance(p, TextBlock))


# -- Responses -------------------------------------------------------------------------------------------------


async def _responses(
    client: openai.AsyncOpenAI, model: str, request: InferenceRequest, caps: ModelCapabilities
) -> AsyncGenerator[StreamChunk]:
    items = responses_input(request, images=caps.image_input)
    params: dict[str, Any] = {"model": model, "input": items, "stream": True}
    if request.system:
        params["instructions"] = request.system
    if request.tools:
        params["tools"] = [{"type": "function", **_function(t), "strict": False} for t in request.tools]
    if request.max_output_tokens:
        params["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.reasoning_effort:
        params["reasoning"] = {"effort": request.reasoning_effort, "summary": "auto"}

    stream = await client.responses.create(**params)
    calls: dict[str, int] = {}  # output item id -> tool-call index
    stop: StopReason | None = None
    try:
        async for event in stream:
            kind = event.type
            if kind == "response.output_text.delta" or kind == "response.refusal.delta":
                yield TextChunk(text=event.delta)
            elif kind == "response.reasoning_summary_text.delta" or kind == "response.reasoning_text.delta":
                yield ReasoningChunk(text=event.delta)
            elif kind == "response.output_item.added" and event.item.type == "function_call":
                item = event.item
                calls[item.id or item.call_id] = index = len(calls)
                yield ToolCallChunk(index=index, id=item.call_id, name=item.name, args_delta=item.arguments or "")
            elif kind == "response.function_call_arguments.delta":
                yield ToolCallChunk(index=calls[event.item_id], args_delta=event.delta)
            elif kind == "response.completed" or kind == "response.incomplete":
                response = event.response
                if response.usage is not None:
                    yield UsageChunk(usage=_responses_usage(response.usage))
                reason = response.incomplete_details.reason if response.incomplete_details else None
                if reason == "max_output_tokens":
                    stop = "max_tokens"
                elif reason == "content_filter":
                    stop = "refusal"
                else:
                    stop = "tool_use" if calls else "end_turn"
            elif kind == "response.failed":
                error = event.response.error
                raise stream_error("openai", error and error.code, error and error.message)
            elif kind == "error":
                raise stream_error("openai", event.code, event.message)
    finally:
        await close_stream(stream)
    if stop is None:
        raise ProviderError("stream_interrupted", "the openai response stream ended before response.completed")
    yield StopChunk(reason=stop)


def _responses_usage(usage: Any) -> TokenUsage:
    cached = getattr(usage.input_tokens_details, "cached_tokens", 0) if usage.input_tokens_details else 0
    reasoning = getattr(usage.output_tokens_details, "reasoning_tokens", 0) if usage.output_tokens_details else 0
    return TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=cached or 0,
        cache_write_tokens=0,
        thinking_tokens=reasoning or 0,
    )


def responses_input(request: InferenceRequest, *, images: bool) -> list[dict[str, Any]]:
    """The conversation as Responses input items: messages, ``function_call`` and ``function_call_output``."""
    items: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "system":
            items.append({"role": "system", "content": m.text})
        elif m.role == "user":
            content = [
                {"type": "input_text", "text": p.text}
                if isinstance(p, TextBlock)
                else {"type": "input_image", "image_url": _data_url(p)}
                for p in content_parts(m.content, images=images)
            ]
            items.append({"role": "user", "content": content})
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": _text(m)})
        else:
            if m.text:
                items.append({"role": "assistant", "content": m.text})
            items += [
                {
                    "type": "function_call",
                    "call_id": c.id,
                    "name": c.name,
                    "arguments": json.dumps(c.arguments, ensure_ascii=False),
                }
                for c in m.tool_calls
            ]
    return items
