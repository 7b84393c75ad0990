"""W3C trace context carried across a protocol boundary: what a client sent with the request that started a run.

A run whose environment holds one (``RunEnvironment.trace``) gets its ``invoke_agent`` span under that parent, and
the context records the span, so the requests made on the run's behalf (ACP permission, file and terminal requests)
carry it on. Without OpenTelemetry (the ``otel`` extra) the received fields are passed on unchanged, and a request
without them costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

__all__ = ["TraceContext", "propagation"]

_W3C_FIELDS = ("traceparent", "tracestate", "baggage")


@cache
def propagation() -> ModuleType | None:
    """``opentelemetry.propagate`` (the globally configured propagators, W3C trace context and baggage by default),
    or ``None`` without the ``otel`` extra (tests replace this to simulate that)."""
    try:
        from opentelemetry import propagate
    except ImportError:
        return None
    return propagate


@dataclass(slots=True, kw_only=True)
class TraceContext:
    """The W3C trace context a client sent with a request (the root keys ``traceparent``, ``tracestate`` and
    ``baggage`` of its ``_meta``), and the OpenTelemetry context of the run span made under it (``span``, set by
    the runtime's ``ObservabilityPlugin`` when it traces)."""

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
        propagate = propagation()
        return propagate.extract(self.carrier) if propagate is not None else None

    def outgoing(self) -> dict[str, str]:
        """The fields for a request made on the run's behalf: its span's context when it is traced, else the ones
        received, passed on as they came."""
        if self.span is not None:
            propagate = propagation()
            if propagate is not None:
                carrier: dict[str, str] = {}
                propagate.inject(carrier, context=self.span)
                if carrier.get("traceparent"):
                    return carrier
        return dict(self.carrier)
