"""One inference: the request built from the conversation (offered tools, transforms), the model's stream turned
into events as it comes, and compaction first when the conversation nears the model's context window.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from awaken_stdio.contract.events import (
    InferenceComplete,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStart,
)
from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.inference import (
    InferenceRequest,
    ReasoningChunk,
    StreamAccumulator,
    StreamResult,
    TextChunk,
    ToolCallChunk,
)
from awaken_stdio.contract.messages import Message, ToolCall, valid_text, valid_value
from awaken_stdio.runtime.compaction import CompactionReport, model_view
from awaken_stdio.runtime.executors import INTERRUPTED
from awaken_stdio.runtime.plugins import Phase
from awaken_stdio.runtime.run.state import RunState

__all__ = ["build_request", "compact_if_needed", "infer"]

log = logging.getLogger(__name__)


async def compact_if_needed(run: RunState) -> list[Message] | None:
    """Summarise the older turns first when the request nears the model's context window.

    Tried once a run: its kept suffix is the whole latest user turn, so a second plan could not cut later. A
    failed summary is logged and the inference goes ahead with the whole conversation. Returns the conversation's
    model view when it worked it out and no summary changed it since, for the request to reuse (``infer``).
    """
    if run.deps.compactor_for is None or run.compaction_tried:
        return None
    compactor = run.cache.compactors.get(run.deps.agent.id)  # one per agent for the run: it caches estimates
    if compactor is None:
        compactor = run.cache.compactors[run.deps.agent.id] = run.deps.compactor_for(run.deps.agent)
    view = model_view(run.messages)
    if not compactor.needed(view, system_prompt(run), run.deps.agent.tool_json):
        return view
    run.compaction_tried = True
    try:
        report = CompactionReport(run.emit) if run.deps.sink is not None else None
        result = await compactor.compact(view, report, sampling=run.deps.activation.env.sampling)
    except Exception:
        log.warning("compaction of thread %s failed; continuing uncompacted", run.thread_id, exc_info=True)
        return None
    if result.usage is not None:
        run.usage = run.usage + result.usage
    if result.summary is not None:
        run.messages.append(replace(result.summary, run_id=run.run_id))  # durable at the step's checkpoint
    log.info("thread %s: %s", run.thread_id, result.describe())
    return None


def _offered_tools(run: RunState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The tool JSON sent to the model and the descriptors offered, by name; built once per agent, not per step."""
    agent = run.deps.agent
    if run.cache.tools_for is None or run.cache.tools_for[0] is not agent:
        extra = run.cache.extra_descriptors
        tool_json = agent.tool_json
        if extra:
            tool_json = tool_json + [
                {"name": d.name, "description": d.description, "input_schema": d.parameters} for d in extra
            ]
        offered = {n: t.descriptor for n, t in agent.tools.items()}
        offered.update((d.name, d) for d in extra)
        run.cache.tools_for = (agent, tool_json, offered)
    return run.cache.tools_for[1], run.cache.tools_for[2]


def system_prompt(run: RunState) -> str:
    """The agent's system prompt, composed with the client's instructions of the run's session, if any."""
    own = run.deps.agent.spec.system_prompt
    client = run.deps.activation.system_prompt
    return own if client is None else client.apply(own)


def build_request(run: RunState, view: list[Message] | None = None) -> InferenceRequest:
    """The request for the conversation's model ``view`` (worked out here when not given)."""
    agent = run.deps.agent
    tools, offered = _offered_tools(run)
    messages = _paired(model_view(run.messages) if view is None else view)
    if messages is run.messages:  # the request's own list: a transform or model may edit it in place
        messages = list(messages)
    request = InferenceRequest(
        model=agent.model_name,
        messages=messages,
        tools=[dict(t) for t in tools],  # the cached descriptors' JSON stays the agent's
        system=system_prompt(run) or None,
        overrides=dict(run.deps.activation.overrides),
        sampling=run.deps.activation.env.sampling,
    )
    if agent.registrar.transforms:
        ctx = run.ctx(Phase.BEFORE_INFERENCE, offered_tools=dict(offered))()
        for _, transform in agent.registrar.transforms:
            request = transform(request, ctx)
    return request


async def infer(run: RunState, message_id: str, view: list[Message] | None = None) -> StreamResult:
    request = build_request(run, view)
    acc = StreamAccumulator()
    ids: dict[int, str] = {}
    started = time.monotonic()
    run.partial_text = []
    run.partial_id = message_id
    emit = run.deps.sink is not None
    async for chunk in run.deps.agent.executor.stream(request):
        if type(chunk) is TextChunk:
            if (text := valid_text(chunk.text)) is not chunk.text:
                chunk = TextChunk(text=text)
            acc.add(chunk)
            run.partial_text.append(chunk.text)
            if emit:
                await run.emit(TextDelta(delta=chunk.text, message_id=message_id))
        elif type(chunk) is ToolCallChunk:
            if (delta := valid_text(chunk.args_delta)) is not chunk.args_delta:
                chunk = replace(chunk, args_delta=delta)
            call_id = ids.get(chunk.index)
            if call_id is None:
                call_id = ids[chunk.index] = chunk.id or new_id("call_")
                chunk = ToolCallChunk(index=chunk.index, id=call_id, name=chunk.name, args_delta=chunk.args_delta)
                if emit:
                    await run.emit(ToolCallStart(id=call_id, name=chunk.name or ""))
            acc.add(chunk)
            if emit and chunk.args_delta:
                await run.emit(ToolCallDelta(id=call_id, args_delta=chunk.args_delta))
        elif type(chunk) is ReasoningChunk:
            if (text := valid_text(chunk.text)) is not chunk.text:
                chunk = replace(chunk, text=text)
            acc.add(chunk)
            if emit and chunk.text:
                await run.emit(ReasoningDelta(delta=chunk.text, message_id=message_id))
        else:
            acc.add(chunk)
    run.partial_text = []
    result = acc.result()
    result.tool_calls = [_valid_call(c) for c in result.tool_calls]  # names and "\\ud800" escapes in arguments
    run.inferences += 1
    if result.usage is not None:
        run.usage = run.usage + result.usage
    if emit:
        for call in result.tool_calls:
            await run.emit(ToolCallReady(id=call.id, name=call.name, arguments=call.arguments))
        duration = int((time.monotonic() - started) * 1000)
        await run.emit(
            InferenceComplete(
                model=run.deps.agent.model_name,
                usage=result.usage,
                duration_ms=duration,
                stop_reason=result.stop_reason,
            )
        )
    return result


def _valid_call(call: ToolCall) -> ToolCall:
    name, arguments = valid_text(call.name), valid_value(call.arguments)
    return (
        call
        if name is call.name and arguments is call.arguments
        else ToolCall(id=call.id, name=name, arguments=arguments)
    )


def _paired(messages: list[Message]) -> list[Message]:
    """The history as the model may see it: every tool call answered, nothing dangling.

    A call left without a result (the process died mid-step, a stop policy ended the run before its tools ran)
    gets a synthetic "interrupted" result right after its assistant message, so providers accept the history.
    """
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    if answered.issuperset([c.id for m in messages for c in m.tool_calls]):  # once a step: no generator
        return messages
    out: list[Message] = []
    for m in messages:
        out.append(m)
        out.extend(Message.tool(c.id, INTERRUPTED, internal=True) for c in m.tool_calls if c.id not in answered)
    return out
