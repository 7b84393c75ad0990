"""Observability: OpenTelemetry GenAI spans and run metrics from the loop's phases.

:class:`ObservabilityPlugin` turns each run into an ``invoke_agent {agent}`` span with a ``chat {model}`` span per
inference and an ``execute_tool {tool}`` span per executed tool as its children, named and attributed after the
OpenTelemetry GenAI semantic conventions (``gen_ai.provider.name`` and the other attributes of semconv 1.37+, not the
older ``gen_ai.system``). The same observations reach a :class:`MetricsSink` as plain records plus one
:class:`AgentMetrics` aggregate per run, so metrics work without OpenTelemetry.

OpenTelemetry is optional (the ``otel`` extra) and imported only when a plugin is built: without it, or with
``OTEL_SDK_DISABLED=true``, no span is made, and a plugin with no sink either registers no hook at all.

Spans are parented through explicit contexts kept per run id, never through the ``contextvars`` current span: the
loop runs hooks in tasks of their own, where an attached context would leak or vanish. A run whose inference fails
ends without ``run_end`` today; its open spans end (as errors) through :meth:`ObservabilityPlugin.on_run_failed`
when the loop calls it, else when the next run on the same thread starts.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from awaken_stdio.contract.errors import ProviderError
from awaken_stdio.contract.inference import InferenceRequest, TokenUsage
from awaken_stdio.contract.tools import ToolResult
from awaken_stdio.runtime import otel
from awaken_stdio.runtime.plugins import Phase, PhaseContext, Plugin, PluginRegistrar
from awaken_stdio.runtime.runtime_keys import RUN_LIFECYCLE

if TYPE_CHECKING:
    pass

__all__ = [
    "AgentMetrics",
    "InMemorySink",
    "InferenceEvent",
    "LogSink",
    "MetricsEvent",
    "MetricsSink",
    "ObservabilityPlugin",
    "ToolEvent",
]

log = logging.getLogger(__name__)

_SCOPE = "awaken_stdio"
_OTHER = "_OTHER"  # the semconv's error.type / provider fallback
ToolStatus = Literal["success", "error", "pending", "cancelled"]


# -- what a sink receives ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceEvent:
    """One inference (a ``chat`` span): what was asked of which model and what it cost."""

    run_id: str
    thread_id: str
    agent_id: str
    step: int
    model: str
    provider: str
    usage: TokenUsage | None
    finish_reasons: tuple[str, ...]
    duration_ms: float
    error_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEvent:
    """One executed tool call (an ``execute_tool`` span)."""

    run_id: str
    thread_id: str
    agent_id: str
    call_id: str
    tool_name: str
    status: ToolStatus
    duration_ms: float
    error_type: str | None = None


MetricsEvent = InferenceEvent | ToolEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentMetrics:
    """A run's aggregate, delivered once it ends (or stops to wait for a person: ``status == "waiting"``).

    ``status`` is the run-lifecycle reason (``natural``, ``cancelled``, ``blocked:<r>``, ``stopped:<code>``),
    ``waiting`` or ``error``; ``errors`` counts failed inferences and failed tool calls.
    """

    run_id: str
    thread_id: str
    agent_id: str
    status: str
    inferences: int
    tool_calls: int
    usage: TokenUsage
    duration_ms: float
    errors: int
    error_type: str | None = None


class MetricsSink(Protocol):
    """Where observations go. Called on the event loop: keep both methods quick and non-blocking."""

    def record(self, event: MetricsEvent) -> None: ...

    def on_run_end(self, metrics: AgentMetrics) -> None: ...


@dataclass(slots=True, kw_only=True)
class InMemorySink:
    """Keeps everything (tests, ``doctor``, an embedding program that reports at the end)."""

    events: list[MetricsEvent] = field(default_factory=list)
    runs: list[AgentMetrics] = field(default_factory=list)

    def record(self, event: MetricsEvent) -> None:
        self.events.append(event)

    def on_run_end(self, metrics: AgentMetrics) -> None:
        self.runs.append(metrics)


class LogSink:
    """One log line per run end (INFO) and per inference or tool call (DEBUG), for the CLI's log."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.log = logger or logging.getLogger("awaken_stdio.metrics")

    def record(self, event: MetricsEvent) -> None:
        if not self.log.isEnabledFor(logging.DEBUG):
            return
        error = f" error={event.error_type}" if event.error_type else ""
        if isinstance(event, InferenceEvent):
            u = event.usage or TokenUsage()
            self.log.debug(
                "inference run=%s model=%s in=%d out=%d finish=%s %.0fms%s",
                event.run_id,
                event.model,
                u.input_tokens,
                u.output_tokens,
                ",".join(event.finish_reasons) or "-",
                event.duration_ms,
                error,
            )
        else:
            self.log.debug(
                "tool run=%s %s id=%s %s %.0fms%s",
                event.run_id,
                event.tool_name,
                event.call_id,
                event.status,
                event.duration_ms,
                error,
            )

    def on_run_end(self, metrics: AgentMetrics) -> None:
        m, u = metrics, metrics.usage
        self.log.info(
            "run %s agent=%s thread=%s status=%s inferences=%d tools=%d tokens_in=%d tokens_out=%d cache_read=%d "
            "cache_write=%d errors=%d %.0fms",
            m.run_id,
            m.agent_id,
            m.thread_id,
            m.status,
            m.inferences,
            m.tool_calls,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            m.errors,
            m.duration_ms,
        )


# -- the plugin ---------------------------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Open:
    """An operation in flight: its span (``None`` without tracing) and when it started."""

    span: Any
    started: float
    name: str
    provider: str = ""
    step: int = 0


@dataclass(slots=True, kw_only=True)
class _Run:
    thread_id: str
    agent_id: str
    started: float
    span: Any = None
    context: Any = None  # the run span's context: the explicit parent of its chat and tool spans
    chat: _Open | None = None
    tools: dict[str, _Open] = field(default_factory=dict)
    inferences: int = 0
    tool_calls: int = 0
    errors: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)


class ObservabilityPlugin(Plugin):
    """GenAI spans and run metrics.

    ``tracer_provider`` defaults to OpenTelemetry's global one (so an embedding program's own set-up is used);
    ``providers`` maps a model id (``AgentSpec.model``) to its ``gen_ai.provider.name`` (``openai``,
    ``anthropic``...; others report ``_OTHER``).
    """

    name = "observability"
    always_active = True  # the runtime's own: every agent, listed or not

    def __init__(
        self,
        sink: MetricsSink | None = None,
        tracer_provider: Any = None,
        *,
        providers: Mapping[str, str] | None = None,
    ) -> None:
        self.sink = sink
        self.providers = dict(providers or {})
        self._api: Any = otel.trace_api()  # opentelemetry.trace, or None (then no tracer and no span is ever made)
        self._tracer: Any = None
        if self._api is not None and (tracer_provider is not None or not otel.sdk_disabled(os.environ)):
            provider = tracer_provider or self._api.get_tracer_provider()
            self._tracer = provider.get_tracer(_SCOPE)
        self._runs: dict[str, _Run] = {}
        self._threads: dict[str, str] = {}  # thread id -> its run in flight, to close runs that vanished

    @property
    def tracing(self) -> bool:
        return self._tracer is not None

    def register(self, registrar: PluginRegistrar) -> None:
        if self._tracer is None and self.sink is None:
            return  # inert: not one hook in the loop
        registrar.request_transform(self._start_inference)
        registrar.phase_hook(Phase.AFTER_INFERENCE, self._end_inference)
        registrar.phase_hook(Phase.BEFORE_TOOL_EXECUTE, self._start_tool)
        registrar.phase_hook(Phase.AFTER_TOOL_EXECUTE, self._end_tool)
        registrar.phase_hook(Phase.STEP_END, self._step_end)
        registrar.phase_hook(Phase.RUN_END, self._run_end)

    async def on_run_failed(self, ctx: PhaseContext, error: BaseException) -> None:
        """The run failed (an inference or storage error): end its open spans as errors and report it."""
        self._end_run(ctx, "error", _error_type(error), str(error) or type(error).__name__)

    # -- runs -----------------------------------------------------------------------------------------------------

    def _run(self, ctx: PhaseContext) -> _Run:
        """The run's state, made at its first observation (the loop offers no hook before a resumed run's tools)."""
        run = self._runs.get(ctx.run_id)
        if run is not None:
            return run
        stale = self._threads.get(ctx.thread_id)
        if stale is not None and stale in self._runs:
            self._close(stale, "error", _OTHER, "the run ended without run_end")
        run = self._runs[ctx.run_id] = _Run(thread_id=ctx.thread_id, agent_id=ctx.agent.id, started=time.perf_counter())
        self._threads[ctx.thread_id] = ctx.run_id
        if self._tracer is not None:
            attributes = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": self._provider(ctx.agent.model),
                "gen_ai.agent.name": ctx.agent.id,
                "gen_ai.agent.id": ctx.agent.id,
                "gen_ai.conversation.id": ctx.thread_id,
                "awaken.run.id": ctx.run_id,
            }
            if ctx.agent.description:
                attributes["gen_ai.agent.description"] = ctx.agent.description
            trace = ctx.env.trace
            parent = trace.parent() if trace is not None else None  # the client's span, if it sent one
            run.span = self._tracer.start_span(
                f"invoke_agent {ctx.agent.id}", context=parent, kind=self._api.SpanKind.INTERNAL, attributes=attributes
            )
            run.context = self._api.set_span_in_context(run.span, parent)
            if trace is not None:
                trace.span = run.context  # the requests made on the run's behalf carry it on
        return run

    def _end_run(self, ctx: PhaseContext, status: str, error_type: str | None = None, message: str = "") -> None:
        self._run(ctx)  # a run first seen at its end still gets its span and metrics
        self._close(ctx.run_id, status, error_type, message)

    def _close(self, run_id: str, status: str, error_type: str | None, message: str) -> None:
        run = self._runs.pop(run_id)
        if self._threads.get(run.thread_id) == run_id:
            del self._threads[run.thread_id]
        cut = error_type or ("cancelled" if status == "cancelled" else _OTHER)
        if run.chat is not None:
            self._finish_inference(run_id, run, open_=run.chat, usage=None, reasons=(), error_type=cut, message=message)
        for call_id, open_ in list(run.tools.items()):
            tool_status: ToolStatus = "cancelled" if status == "cancelled" else "error"
            self._finish_tool(
                run_id, run, call_id=call_id, open_=open_, status=tool_status, error_type=cut, message=message
            )
        if run.span is not None:
            span = run.span
            span.set_attribute("awaken.run.status", status)
            _set_usage(span, run.usage)
            self._end_span(span, error_type, message)
        if self.sink is not None:
            duration = _elapsed_ms(run.started)
            self.sink.on_run_end(
                AgentMetrics(
                    run_id=run_id,
                    thread_id=run.thread_id,
                    agent_id=run.agent_id,
                    status=status,
                    inferences=run.inferences,
                    tool_calls=run.tool_calls,
                    usage=run.usage,
                    duration_ms=duration,
                    errors=run.errors,
                    error_type=error_type,
                )
            )

    async def _step_end(self, ctx: PhaseContext) -> None:
        # A run stopping to wait for a person gets no run_end; the wait can last hours, or outlive the process.
        if ctx.state(RUN_LIFECYCLE).status == "waiting" and ctx.run_id in self._runs:
            self._close(ctx.run_id, "waiting", None, "")

    async def _run_end(self, ctx: PhaseContext) -> None:
        lifecycle = ctx.state(RUN_LIFECYCLE)
        self._end_run(ctx, lifecycle.status_reason or lifecycle.status)

    # -- inference ------------------------------------------------------------------------------------------------

    def _start_inference(self, request: InferenceRequest, ctx: PhaseContext) -> InferenceRequest:
        """A request transform only in name: it starts the ``chat`` span just before the model is called."""
        run = self._run(ctx)
        provider = self._provider(ctx.agent.model)
        span = None
        if self._tracer is not None:
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": request.model,
                "gen_ai.request.stream": True,
                "gen_ai.conversation.id": ctx.thread_id,
                "awaken.step": ctx.step + 1,
            }
            if request.max_output_tokens is not None:
                attributes["gen_ai.request.max_tokens"] = request.max_output_tokens
            if request.temperature is not None:
                attributes["gen_ai.request.temperature"] = request.temperature
            span = self._tracer.start_span(
                f"chat {request.model}", context=run.context, kind=self._api.SpanKind.CLIENT, attributes=attributes
            )
            if run.span is not None and run.inferences == 0:
                run.span.set_attribute("gen_ai.request.model", request.model)
        run.chat = _Open(
            span=span, started=time.perf_counter(), name=request.model, provider=provider, step=ctx.step + 1
        )
        return request

    async def _end_inference(self, ctx: PhaseContext) -> None:
        run = self._runs.get(ctx.run_id)
        if run is None or run.chat is None or ctx.response is None:
            return
        response = ctx.response
        reasons = (response.stop_reason,) if response.stop_reason else ()
        self._finish_inference(
            ctx.run_id, run, open_=run.chat, usage=response.usage, reasons=reasons, error_type=None, message=""
        )

    def _finish_inference(
        self,
        run_id: str,
        run: _Run,
        open_: _Open,
        usage: TokenUsage | None,
        reasons: tuple[str, ...],
        error_type: str | None,
        message: str,
    ) -> None:
        run.chat = None
        run.inferences += 1
        if usage is not None:
            run.usage = run.usage + usage
        if error_type is not None:
            run.errors += 1
        span = open_.span
        if span is not None:
            if usage is not None:
                _set_usage(span, usage)
            if reasons:
                span.set_attribute("gen_ai.response.finish_reasons", reasons)
            self._end_span(span, error_type, message)
        if self.sink is not None:
            duration = _elapsed_ms(open_.started)
            self.sink.record(
                InferenceEvent(
                    run_id=run_id,
                    thread_id=run.thread_id,
                    agent_id=run.agent_id,
                    step=open_.step,
                    model=open_.name,
                    provider=open_.provider,
                    usage=usage,
                    finish_reasons=reasons,
                    duration_ms=duration,
                    error_type=error_type,
                )
            )

    # -- tools ----------------------------------------------------------------------------------------------------

    async def _start_tool(self, ctx: PhaseContext) -> None:
        if ctx.tool_call_id is None or ctx.tool_name is None:
            return
        run = self._run(ctx)
        span = None
        if self._tracer is not None:
            span = self._tracer.start_span(
                f"execute_tool {ctx.tool_name}",
                context=run.context,
                kind=self._api.SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": ctx.tool_name,
                    "gen_ai.tool.call.id": ctx.tool_call_id,
                    "gen_ai.tool.type": "function",
                    "gen_ai.conversation.id": ctx.thread_id,
                },
            )
        run.tools[ctx.tool_call_id] = _Open(span=span, started=time.perf_counter(), name=ctx.tool_name)

    async def _end_tool(self, ctx: PhaseContext) -> None:
        run = self._runs.get(ctx.run_id)
        open_ = run.tools.get(ctx.tool_call_id or "") if run is not None else None
        if run is None or open_ is None or ctx.tool_call_id is None:
            return  # answered by a gate without running: not an executed tool
        result = ctx.tool_result
        if result is not None and result.is_error:
            message = (result.message or "")[:200]
            self._finish_tool(
                ctx.run_id,
                run,
                call_id=ctx.tool_call_id,
                open_=open_,
                status="error",
                error_type=_tool_error_type(result),
                message=message,
            )
        else:
            status: ToolStatus = "pending" if result is not None and result.is_pending else "success"
            self._finish_tool(
                ctx.run_id, run, call_id=ctx.tool_call_id, open_=open_, status=status, error_type=None, message=""
            )

    def _finish_tool(
        self,
        run_id: str,
        run: _Run,
        call_id: str,
        open_: _Open,
        status: ToolStatus,
        error_type: str | None,
        message: str,
    ) -> None:
        del run.tools[call_id]
        run.tool_calls += 1
        if error_type is not None:
            run.errors += 1
        span = open_.span
        if span is not None:
            if status == "pending":
                span.set_attribute("awaken.tool.status", status)
            self._end_span(span, error_type, message)
        if self.sink is not None:
            duration = _elapsed_ms(open_.started)
            self.sink.record(
                ToolEvent(
                    run_id=run_id,
                    thread_id=run.thread_id,
                    agent_id=run.agent_id,
                    call_id=call_id,
                    tool_name=open_.name,
                    status=status,
                    duration_ms=duration,
                    error_type=error_type,
                )
            )

    def _provider(self, model_id: str) -> str:
        return self.providers.get(model_id, _OTHER)

    def _end_span(self, span: Any, error_type: str | None, message: str) -> None:
        """End ``span``, marked failed (``error.type`` and an error status) when ``error_type`` is set."""
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            span.set_status(self._api.Status(self._api.StatusCode.ERROR, message or None))
        span.end()


def _elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _set_usage(span: Any, usage: TokenUsage) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.cache_read_tokens:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    if usage.cache_write_tokens:
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)
    if usage.thinking_tokens:
        span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.thinking_tokens)


def _error_type(error: BaseException) -> str:
    """Low-cardinality: a provider error's kind (``rate_limited``, ``timeout``...), else the exception's class."""
    if isinstance(error, ProviderError):
        return error.kind
    return type(error).__qualname__


def _tool_error_type(result: ToolResult) -> str:
    data = result.data
    if isinstance(data, dict) and isinstance(data.get("error"), dict) and data["error"].get("code"):
        return str(data["error"]["code"])
    if result.metadata.get("timed_out"):
        return "timeout"
    return _OTHER
