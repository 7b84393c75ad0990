"""JSON-RPC on the wire: frames (one JSON object per line, no NaN or Infinity either way), request ids, the error
codes, the exception a handler raises to answer with one, and the single place where any other exception becomes a
wire error (``error_to_wire``). Standard library only: it is on the way to the first answer, beside
``protocols/jsonrpc.py``, which re-exports its public names."""

from __future__ import annotations

import json
import logging
from typing import Any, NoReturn, TypeAlias, TypeGuard

__all__ = [
    "CONNECTION_CLOSED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_TIMEOUT",
    "ConnectionClosedError",
    "JsonRpcError",
    "RequestId",
    "RequestTimeoutError",
    "decode_line",
    "encode_frame",
    "envelope_problem",
    "error_to_wire",
    "one_line",
    "valid_id",
]

logger = logging.getLogger("awaken_stdio.protocols.jsonrpc")  # the peer's log, where these failures belong

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Local conditions, never written by this peer (the MCP SDK uses the same two numbers).
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


_MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    CONNECTION_CLOSED: "Connection closed",
    REQUEST_TIMEOUT: "Request timed out",
}
RequestId: TypeAlias = int | str

_MESSAGE_LIMIT = 300  # characters of an exception text kept in a single-line error message


class JsonRpcError(Exception):
    """A JSON-RPC error: raised by handlers to answer with it, and by ``request()`` when the other side answers so.

    The message is collapsed to one non-empty line (clients show it as is; ACP-ERROR-001); details go in ``data``.
    """

    def __init__(self, code: int, message: str = "", data: Any = None) -> None:
        self.code = code
        self.message = " ".join(str(message).split()) or _MESSAGES.get(code, "Error")
        self.data = data
        super().__init__(self.message)

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConnectionClosedError(JsonRpcError):
    """The connection closed: an outbound request will never be answered, or nothing more can be sent."""

    def __init__(self, message: str = "connection closed") -> None:
        super().__init__(CONNECTION_CLOSED, message)


class RequestTimeoutError(JsonRpcError):
    """The other side did not answer an outbound request in time."""

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(REQUEST_TIMEOUT, f"no answer to {method} within {timeout:g} s")


def error_to_wire(exc: BaseException) -> dict[str, Any]:
    """The single exception-to-wire boundary: the JSON-RPC ``error`` object for what a handler raised.

    ``JsonRpcError`` keeps its code; a pydantic ``ValidationError`` (recognised by name, so pydantic is never
    imported here) becomes -32602 with field locations and messages but no pydantic URLs or input echo; anything
    else is -32603 with a one-line message, ``data {type, message}``, and its traceback in the log.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]  # a task group inside a handler wraps a single failure
    if isinstance(exc, JsonRpcError):
        return exc.to_wire()
    if _is_validation_error(exc):
        return _invalid_params(exc)
    logger.error("request handler failed", exc_info=exc)
    text = str(exc)
    first = one_line(text.strip().splitlines()[0] if text.strip() else type(exc).__name__)
    return {
        "code": INTERNAL_ERROR,
        "message": f"Internal error: {first}",
        "data": {"type": type(exc).__name__, "message": text},
    }


def _is_validation_error(exc: BaseException) -> bool:
    cls = type(exc)
    return (
        cls.__name__ == "ValidationError"
        and cls.__module__.startswith("pydantic")
        and callable(getattr(exc, "errors", None))
    )


def _invalid_params(exc: Any) -> dict[str, Any]:
    errors = [
        {"loc": list(err.get("loc", ())), "msg": str(err.get("msg", ""))}
        for err in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
    message = "Invalid params"
    if errors:
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        message += f": {where + ': ' if where else ''}{first['msg']}"
        if len(errors) > 1:
            message += f" (+{len(errors) - 1} more)"
    return {"code": INVALID_PARAMS, "message": one_line(message), "data": {"errors": errors}}


def one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ascii_encoder = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def encode_frame(frame: dict[str, Any]) -> bytes:
    """One wire line. ``json`` escapes newlines inside strings, so a frame is always exactly one line."""
    try:
        return (_encoder.encode(frame) + "\n").encode()
    except UnicodeEncodeError:  # a lone surrogate: the ASCII form escapes it and stays valid JSON
        return (_ascii_encoder.encode(frame) + "\n").encode()


def envelope_problem(message: dict[str, Any]) -> str | None:
    """What makes a request or notification (not a response) invalid, if anything."""
    method, params = message.get("method"), message.get("params")
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if method is None:
        return "no method, result or error"
    if type(method) is not str or not method:
        return "method must be a non-empty string"
    if params is not None and type(params) is not dict and type(params) is not list:
        return "params must be an object or an array"
    return None


def valid_id(value: object) -> TypeGuard[RequestId]:
    return type(value) is int or type(value) is str  # not bool, float or null


def decode_line(line: str) -> Any:
    """A frame's JSON value; ``NaN``/``Infinity`` are refused (not JSON), as ``ValueError``."""
    return _decoder.decode(line)
