"""OpenTelemetry when it is installed (the ``otel`` extra): the tracer provider the standard ``OTEL_*`` variables ask
for, and W3C trace context carried across a protocol boundary.

A run whose services hold a client's W3C trace context (:data:`TRACE_CONTEXT`, a :class:`TraceContext` made from
the ``_meta`` of the request that started it: ``traceparent``, ``tracestate``, ``baggage``) gets its
``invoke_agent`` span under that parent, and the context records the span, so the requests made on the run's
behalf (ACP permission, file and terminal requests) carry it on. Without OpenTelemetry the received fields are
passed on unchanged, and a request without them costs nothing.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["TRACE_CONTEXT", "TraceContext", "otel_from_env", "sdk_disabled", "trace_api"]

log = logging.getLogger(__name__)


# -- OpenTelemetry, when installed --------------------------------------------------------------------------------


def sdk_disabled(env: Mapping[str, str]) -> bool:
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


@cache
def trace_api() -> ModuleType | None:
    """``opentelemetry.trace``, or ``None`` without the ``otel`` extra (tests replace this to simulate that)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


def _propagate() -> ModuleType | None:
    """``opentelemetry.propagate`` (the globally configured propagators, W3C trace context and baggage by default),
    or ``None`` without the ``otel`` extra."""
    return _propagate_module() if trace_api() is not None else None


@cache
def _propagate_module() -> ModuleType | None:
    try:
        from opentelemetry import propagate
    except ImportError:
        return None
    return propagate


# -- W3C trace context across a protocol boundary -----------------------------------------------------------------

TRACE_CONTEXT = "trace_context"  # the run service holding a client's trace context (a TraceContext)
_W3C_FIELDS = ("traceparent", "tracestate", "baggage")


@dataclass(slots=True, kw_only=True)
class TraceContext:
    """The W3C trace context a client sent with a request (the root keys ``traceparent``, ``tracestate`` and
    ``baggage`` of its ``_meta``), and the OpenTelemetry context of the run span made under it (``span``, set by
    :class:`observability.ObservabilityPlugin` when it traces)."""

    carrier: dict[str, str]
    span: Any = None

    @staticmethod
    def of(meta: Any) -> TraceContext | None:
        """The trace context in a request's ``_meta``; ``None`` without a ``traceparent`` (nothing to carry)."""
        if not isinstance(meta, dict) or not isinstance(meta.get("traceparent"), str):
            return None
        return TraceContext(carrier={k: v for k in _W3C_FIELDS if isinstance(v := meta.get(k), str)})

    def parent(self) -> Any:
        """The OpenTelemetry context to start the run's span in (``None`` without OpenTelemetry)."""
        propagate = _propagate()
        return propagate.extract(self.carrier) if propagate is not None else None

    def outgoing(self) -> dict[str, str]:
        """The fields for a request made on the run's behalf: its span's context when it is traced, else the ones
        received, passed on as they came."""
        if self.span is not None:
            propagate = _propagate()
            if propagate is not None:
                carrier: dict[str, str] = {}
                propagate.inject(carrier, context=self.span)
                if carrier.get("traceparent"):
                    return carrier
        return dict(self.carrier)


def otel_from_env(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A ``TracerProvider`` exporting as the standard ``OTEL_*`` variables ask, or ``None`` when they ask nothing.

    Tracing is on only when ``OTEL_TRACES_EXPORTER`` names exporters (``otlp``, ``console``; ``none`` = off) or,
    without it, an ``OTEL_EXPORTER_OTLP_ENDPOINT``/``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; never under
    ``OTEL_SDK_DISABLED=true`` or without the SDK. ``otlp`` needs ``opentelemetry-exporter-otlp`` (its protocol from
    ``OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL``, default ``http/protobuf``; the exporter reads endpoint, headers and
    timeout itself). ``console`` writes to stderr: stdout carries the protocol. The sampler, batch and resource
    variables are the SDK's own. Call ``shutdown()`` on the result at exit to flush.
    """
    env = os.environ if environ is None else environ
    if sdk_disabled(env):
        return None
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names and (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        names = ["otlp"]
    if not names or names == ["none"]:
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.warning("OTEL_* asks for traces but the OpenTelemetry SDK is missing: pip install 'awaken-stdio[otel]'")
        return None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "awaken-stdio"}))
    provider = TracerProvider(resource=resource)
    exporters: list[Any] = []
    for name in names:
        if name == "console":
            exporters.append(ConsoleSpanExporter(out=sys.stderr))
        elif name == "otlp":
            protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            exporter = _otlp_exporter((protocol or "http/protobuf").strip().lower())
            if exporter is not None:
                exporters.append(exporter)
        elif name != "none":
            log.warning("OTEL_TRACES_EXPORTER: unsupported exporter %r (use otlp or console)", name)
    if not exporters:
        return None
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _otlp_exporter(protocol: str) -> Any:
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # pyright: ignore[reportMissingImports]
                OTLPSpanExporter,  # not in the otel extra: the user installs it to export
            )
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
    except ImportError:
        log.warning("OTLP traces need the exporter: pip install opentelemetry-exporter-otlp")
        return None
    return OTLPSpanExporter()
