"""W3C trace context over ACP: read from the ``_meta`` of a client's ``session/prompt`` into the session (its runs'
``RunEnvironment.trace``, where the runtime's ``ObservabilityPlugin`` parents the run's span on it), and put back
on the requests made on the run's behalf (``session/request_permission``, ``fs/*``, ``terminal/*``) as ``_meta``.
A request without a ``traceparent`` costs one dictionary lookup; without OpenTelemetry the fields received are
passed on unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from awaken_stdio.contract.tracing import TraceContext

__all__ = ["adopt_trace", "trace_meta", "with_meta"]


def adopt_trace(params: Any) -> TraceContext | None:
    """The trace context of a request (its ``_meta``): the one of the session's next run; ``None`` clears it."""
    return TraceContext.of(params.get("_meta")) if isinstance(params, dict) else None


def trace_meta(trace: TraceContext | None) -> dict[str, str] | None:
    """The ``_meta`` fields for a request made on behalf of the session's run; ``None`` without a trace context."""
    return trace.outgoing() if trace is not None else None


def with_meta(params: dict[str, Any], meta: Callable[[], dict[str, str] | None] | None) -> dict[str, Any]:
    """``params`` with the trace fields of ``meta()`` as its ``_meta``, when there are any."""
    fields = meta() if meta is not None else None
    return {**params, "_meta": fields} if fields else params
