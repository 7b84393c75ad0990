"""Observability: GenAI spans through the OpenTelemetry in-memory exporter, sink records and run-end metrics."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.errors import ProviderError, ToolError
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.tools import ToolCallContext, ToolResult
from awaken_stdio.runtime import otel
from awaken_stdio.runtime.observability import (
    InferenceEvent,
    InMemorySink,
    LogSink,
    ObservabilityPlugin,
    ToolEvent,
)
from awaken_stdio.runtime.otel import otel_from_env
from awaken_stdio.runtime.plugins import PluginRegistrar
from tests.runtime.helpers import AskPermission, FnTool, call, make_runtime, turn

try:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError:  # without the otel extra the span tests skip; the sink and inert ones still run
    HAVE_OTEL = False
else:
    HAVE_OTEL = True

pytestmark = pytest.mark.anyio
needs_otel = pytest.mark.skipif(not HAVE_OTEL, reason="needs the otel extra: pip install -e '.[otel]'")

USAGE = {"input_tokens": 100, "output_tokens": 10, "cache_read_tokens": 60, "cache_write_tokens": 5}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def plugin(tracer_provider: TracerProvider, sink: InMemorySink | None = None) -> ObservabilityPlugin:
    return ObservabilityPlugin(sink, tracer_provider, providers={"default": "anthropic"})


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _activation(thread_id: str) -> RunActivation:
    return RunActivation(messages=[Message.user("go")], thread_id=thread_id)


def failing(exc: BaseException) -> FnTool:
    async def fail(args: dict[str, Any], ctx: ToolCallContext) -> Any:
        raise exc

    return FnTool("broken", fail)


@needs_otel
async def test_run_chat_and_tool_spans_follow_the_genai_conventions(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    runtime = make_runtime(
        [turn("looking", call("lookup", {"q": "x"}, id="c1"), usage=USAGE), turn("done", usage=USAGE)],
        tools=[FnTool("lookup")],
        plugins=[plugin(tracer_provider)],
        description="Finds things",
    )
    result = await runtime.run("hi")

    spans = exporter.get_finished_spans()
    [run] = by_name(spans, "invoke_agent")
    chats = by_name(spans, "chat")
    [tool] = by_name(spans, "execute_tool")
    assert len(spans) == 4 and len(chats) == 2
    assert run.name == "invoke_agent default" and run.kind == SpanKind.INTERNAL
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.name": "default",
        "gen_ai.agent.id": "default",
        "gen_ai.agent.description": "Finds things",
        "gen_ai.conversation.id": result.thread_id,
        "gen_ai.request.model": "default",
        "gen_ai.usage.input_tokens": 200,
        "gen_ai.usage.output_tokens": 20,
        "awaken.run.id": result.run_id,
        "awaken.run.status": "natural",
    }.items() <= attrs(run).items()
    assert run.status.status_code == StatusCode.UNSET

    first = chats[0]
    assert first.name == "chat default" and first.kind == SpanKind.CLIENT
    assert {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "default",
        "gen_ai.conversation.id": result.thread_id,
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 60,
        "gen_ai.usage.cache_creation.input_tokens": 5,
        "awaken.step": 1,
    }.items() <= attrs(first).items()
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert attrs(chats[1])["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attrs(chats[1])["awaken.step"] == 2

    assert tool.name == "execute_tool lookup" and tool.kind == SpanKind.INTERNAL
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
    }.items() <= attrs(tool).items()
    assert tool.status.status_code == StatusCode.UNSET

    # chat and tool spans are children of the run span, in one trace, and inside its time
    assert run.parent is None and run.context is not None
    for child in [*chats, tool]:
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context is not None and child.context.trace_id == run.context.trace_id
        assert run.start_time is not None and child.start_time is not None and run.end_time is not None
        assert run.start_time <= child.start_time and child.end_time is not None and child.end_time <= run.end_time
    assert chats[0].end_time is not None and tool.start_time is not None and chats[0].end_time <= tool.start_time


@needs_otel
async def test_parallel_tools_each_get_a_span_under_the_run(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def slow(args: dict[str, Any], ctx: ToolCallContext) -> str:
        await anyio.sleep(0.01)
        return "ok"

    runtime = make_runtime(
        [turn("", call("slow", id="a"), call("slow", id="b")), turn("done")],
        tools=[FnTool("slow", slow)],
        plugins=[plugin(tracer_provider)],
        tool_executor="parallel",
    )
    await runtime.run_to_completion("go")
    spans = exporter.get_finished_spans()
    [run] = by_name(spans, "invoke_agent")
    tools = by_name(spans, "execute_tool")
    assert sorted(attrs(s)["gen_ai.tool.call.id"] for s in tools) == ["a", "b"]
    assert run.context is not None
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in tools)


@needs_otel
async def test_a_failing_tool_is_an_error_span_and_the_run_goes_on(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = InMemorySink()
    runtime = make_runtime(
        [turn("", call("broken", id="c1")), turn("sorry")],
        tools=[failing(ToolError("no such file", "not_found"))],
        plugins=[plugin(tracer_provider, sink)],
    )
    await runtime.run_to_completion("go")
    spans = exporter.get_finished_spans()
    [tool] = by_name(spans, "execute_tool")
    [run] = by_name(spans, "invoke_agent")
    assert tool.status.status_code == StatusCode.ERROR
    assert "error.type" in attrs(tool)
    assert run.status.status_code == StatusCode.UNSET
    [event] = [e for e in sink.events if isinstance(e, ToolEvent)]
    assert event.status == "error" and event.error_type == attrs(tool)["error.type"]
    assert sink.runs[0].errors == 1 and sink.runs[0].tool_calls == 1


@needs_otel
async def test_a_tool_error_code_is_the_error_type(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def fail(args: dict[str, Any], ctx: ToolCallContext) -> Any:
        return ToolResult.error("coded", "denied", code="permission_denied")

    runtime = make_runtime(
        [turn("", call("coded")), turn("ok")], tools=[FnTool("coded", fail)], plugins=[plugin(tracer_provider)]
    )
    await runtime.run_to_completion("go")
    [tool] = by_name(exporter.get_finished_spans(), "execute_tool")
    assert attrs(tool)["error.type"] == "permission_denied"
    assert tool.status.status_code == StatusCode.ERROR


@needs_otel
async def test_a_provider_error_ends_the_open_spans_as_errors(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The loop calls ``on_run_failed`` when a run fails without reaching ``run_end``."""
    sink = InMemorySink()
    obs = plugin(tracer_provider, sink)
    runtime = make_runtime([turn("hi", error={"kind": "rate_limited", "message": "slow down"})], plugins=[obs])
    with pytest.raises(ProviderError):
        await runtime.run_to_completion("go")

    spans = exporter.get_finished_spans()
    [chat] = by_name(spans, "chat")
    [run] = by_name(spans, "invoke_agent")
    for span in (chat, run):
        assert span.status.status_code == StatusCode.ERROR
        assert attrs(span)["error.type"] == "rate_limited"
    assert run.status.description == "slow down"
    [event] = sink.events
    assert isinstance(event, InferenceEvent) and event.error_type == "rate_limited" and event.usage is None
    [metrics] = sink.runs
    assert (metrics.status, metrics.errors, metrics.inferences, metrics.error_type) == ("error", 1, 1, "rate_limited")


@needs_otel
async def test_a_run_that_vanished_is_closed_when_the_thread_runs_again(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = InMemorySink()
    turns = [turn("hi", error={"kind": "timeout", "times": 1})]
    runtime = make_runtime(turns, plugins=[plugin(tracer_provider, sink)])
    with pytest.raises(ProviderError):
        await runtime.run(_activation("t1"))
    await runtime.run(_activation("t1"))
    runs = by_name(exporter.get_finished_spans(), "invoke_agent")
    assert [r.status.status_code for r in runs] == [StatusCode.ERROR, StatusCode.UNSET]
    assert [m.status for m in sink.runs] == ["error", "natural"]
    assert runs[0].context is not None and runs[1].context is not None
    assert runs[0].context.trace_id != runs[1].context.trace_id


@needs_otel
async def test_a_cancelled_run_ends_the_tool_span_as_cancelled(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    started = anyio.Event()

    async def hang(args: dict[str, Any], ctx: ToolCallContext) -> Any:
        started.set()
        await anyio.sleep_forever()

    sink = InMemorySink()
    runtime = make_runtime(
        [turn("", call("hang", id="h1")), turn("never")],
        tools=[FnTool("hang", hang)],
        plugins=[plugin(tracer_provider, sink)],
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(runtime.run, _activation("t1"))
        with anyio.fail_after(5):
            await started.wait()
        await runtime.cancel("t1")
    spans = exporter.get_finished_spans()
    [tool] = by_name(spans, "execute_tool")
    [run] = by_name(spans, "invoke_agent")
    assert attrs(tool)["error.type"] == "cancelled" and tool.status.status_code == StatusCode.ERROR
    assert attrs(run)["awaken.run.status"] == "cancelled"
    assert [m.status for m in sink.runs] == ["cancelled"]
    assert [e.status for e in sink.events if isinstance(e, ToolEvent)] == ["cancelled"]


@needs_otel
async def test_a_run_waiting_for_a_person_ends_its_span(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = InMemorySink()
    runtime = make_runtime(
        [turn("", call("lookup", id="c1")), turn("done")],
        tools=[FnTool("lookup")],
        plugins=[AskPermission(), plugin(tracer_provider, sink)],
    )
    result = await runtime.run_to_completion("go")
    assert result.status == "waiting"
    [run] = by_name(exporter.get_finished_spans(), "invoke_agent")
    assert attrs(run)["awaken.run.status"] == "waiting"
    assert by_name(exporter.get_finished_spans(), "execute_tool") == []  # suspended by the gate: never executed
    assert [(m.status, m.tool_calls) for m in sink.runs] == [("waiting", 0)]


# -- the sink and run-end metrics ----------------------------------------------------------------------------------


async def test_the_sink_gets_one_record_per_inference_and_tool_and_the_run_aggregate() -> None:
    sink = InMemorySink()
    runtime = make_runtime(
        [
            turn("", call("lookup", id="a"), call("lookup", id="b"), usage=USAGE),
            turn("", call("lookup", id="c"), usage=USAGE),
            turn("done", usage={"input_tokens": 7, "output_tokens": 3, "thinking_tokens": 2}),
        ],
        tools=[FnTool("lookup")],
        plugins=[ObservabilityPlugin(sink, providers={"default": "openai"})],
    )
    result = await runtime.run_to_completion("go")

    inferences = [e for e in sink.events if isinstance(e, InferenceEvent)]
    tools = [e for e in sink.events if isinstance(e, ToolEvent)]
    assert [e.step for e in inferences] == [1, 2, 3]
    assert [e.finish_reasons for e in inferences] == [("tool_use",), ("tool_use",), ("end_turn",)]
    assert {(e.model, e.provider, e.run_id) for e in inferences} == {("default", "openai", result.run_id)}
    assert [(e.call_id, e.status) for e in tools] == [("a", "success"), ("b", "success"), ("c", "success")]
    assert all(e.duration_ms >= 0 for e in sink.events)

    [m] = sink.runs
    assert (m.run_id, m.thread_id, m.agent_id, m.status) == (result.run_id, result.thread_id, "default", "natural")
    assert (m.inferences, m.tool_calls, m.errors, m.error_type) == (3, 3, 0, None)
    assert (m.usage.input_tokens, m.usage.output_tokens) == (207, 23)
    assert (m.usage.cache_read_tokens, m.usage.cache_write_tokens, m.usage.thinking_tokens) == (120, 10, 2)
    assert m.usage == result.usage
    assert m.duration_ms > 0


async def test_log_sink_writes_one_line_per_run(caplog: pytest.LogCaptureFixture) -> None:
    runtime = make_runtime(
        [turn("", call("lookup")), turn("done", usage=USAGE)],
        tools=[FnTool("lookup")],
        plugins=[ObservabilityPlugin(LogSink())],
    )
    with caplog.at_level("DEBUG", logger="awaken_stdio.metrics"):
        result = await runtime.run_to_completion("go")
    lines = [r.getMessage() for r in caplog.records if r.name == "awaken_stdio.metrics"]
    assert len(lines) == 4  # two inferences, one tool, the run
    assert all("\n" not in line for line in lines)
    assert lines[-1].startswith(f"run {result.run_id} agent=default")
    assert "status=natural inferences=2 tools=1" in lines[-1]


# -- inert without OpenTelemetry -----------------------------------------------------------------------------------


def test_without_opentelemetry_and_without_a_sink_no_hook_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel, "trace_api", lambda: None)
    obs = ObservabilityPlugin()
    registrar = PluginRegistrar()
    registrar.install(obs)
    assert not obs.tracing
    assert registrar.hooks == [] and registrar.transforms == []


async def test_without_opentelemetry_the_sink_still_gets_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel, "trace_api", lambda: None)
    sink = InMemorySink()
    obs = ObservabilityPlugin(sink)
    runtime = make_runtime([turn("", call("lookup")), turn("done")], tools=[FnTool("lookup")], plugins=[obs])
    await runtime.run_to_completion("go")
    assert not obs.tracing
    assert [type(e).__name__ for e in sink.events] == ["InferenceEvent", "ToolEvent", "InferenceEvent"]
    assert [m.status for m in sink.runs] == ["natural"]


@needs_otel
def test_otel_sdk_disabled_turns_the_global_tracer_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not ObservabilityPlugin().tracing
    monkeypatch.setenv("OTEL_SDK_DISABLED", "false")
    assert ObservabilityPlugin().tracing  # the global (proxy) tracer: an embedding program's set-up is used


# -- otel_from_env -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"},
    ],
)
def test_otel_from_env_is_off_unless_asked(env: dict[str, str]) -> None:
    assert otel_from_env(env) is None


@needs_otel
def test_otel_from_env_console_exports_to_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    err, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider = otel_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert provider is not None
    provider.get_tracer("t").start_span("hello").end()
    provider.shutdown()
    assert '"name": "hello"' in err.getvalue() and '"service.name": "awaken-stdio"' in err.getvalue()
    assert out.getvalue() == ""


@needs_otel
def test_otel_from_env_otlp_without_the_exporter_package_warns(caplog: pytest.LogCaptureFixture) -> None:
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401

        pytest.skip("the OTLP exporter is installed")
    except ImportError:
        pass
    with caplog.at_level("WARNING"):
        assert otel_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) is None
    assert "opentelemetry-exporter-otlp" in caplog.text
