"""W3C trace context from a client into the run's span and out again (``TraceContext`` in a run's environment): the
``invoke_agent`` span is a child of the client's span, in its trace, with its baggage; what goes out on the run's
requests is the run span's context. Without OpenTelemetry the received fields pass through unchanged."""

from __future__ import annotations

import pytest

from awaken_stdio.contract import tracing
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.tracing import TraceContext
from awaken_stdio.runtime import otel
from awaken_stdio.runtime.observability import ObservabilityPlugin
from tests.runtime.helpers import make_runtime, turn

try:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError:
    HAVE_OTEL = False
else:
    HAVE_OTEL = True

pytestmark = pytest.mark.anyio

TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
META = {"traceparent": f"00-{TRACE}-{SPAN}-01", "tracestate": "vendor=1", "baggage": "user=ada", "other": "x"}


def test_only_a_request_with_a_traceparent_has_a_trace_context() -> None:
    assert TraceContext.of(None) is None and TraceContext.of({}) is None and TraceContext.of({"baggage": "a=1"}) is None
    trace = TraceContext.of(META)
    assert trace is not None and trace.carrier == {k: META[k] for k in ("traceparent", "tracestate", "baggage")}


async def test_without_opentelemetry_the_fields_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel, "trace_api", lambda: None)
    monkeypatch.setattr(tracing, "propagation", lambda: None)
    trace = TraceContext.of(META)
    assert trace is not None and trace.parent() is None
    runtime = make_runtime([turn("done")], plugins=[ObservabilityPlugin()])
    await runtime.run(RunActivation(messages=[Message.user("go")], env=RunEnvironment(trace=trace)))
    assert trace.span is None and trace.outgoing() == trace.carrier


@pytest.mark.skipif(not HAVE_OTEL, reason="needs the otel extra")
async def test_the_run_span_is_a_child_of_the_clients_and_goes_out_on_its_requests() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace = TraceContext.of(META)
    assert trace is not None
    runtime = make_runtime([turn("done")], plugins=[ObservabilityPlugin(tracer_provider=provider)])
    await runtime.run(RunActivation(messages=[Message.user("go")], env=RunEnvironment(trace=trace)))
    [run] = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert f"{run.context.trace_id:032x}" == TRACE
    assert run.parent is not None and f"{run.parent.span_id:016x}" == SPAN
    out = trace.outgoing()
    assert out["traceparent"] == f"00-{TRACE}-{run.context.span_id:016x}-01"
    assert out["baggage"] == "user=ada"
    provider.shutdown()
