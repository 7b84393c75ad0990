"""The ``scripted`` model provider: a deterministic model for tests, demos and users' own CI.

A script is a JSON file (schema: ``schemas/scripted-model.schema.json``) listing the assistant's turns::

    {"turns": [
      {"text": "I'll write it.",
       "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
      {"thinking": "checking", "text": "Done.", "usage": {"input_tokens": 120, "output_tokens": 8}}
    ]}

**Which turn.** The turn played (counted from 0) is the number of non-internal assistant messages already in the
request, so the model keeps no conversation state and a restarted process continues where the thread left off.
Internal assistant messages (compaction summaries, markers) are the runtime's words, not the model's, so they do not
count; interrupted ones do (that turn was played). Past the last turn the call fails with ``invalid_request``, or
plays the last turn again when the script says ``"after_last": "repeat_last"``.

**How a turn streams.** Wait ``delay_ms`` (cancellable); raise the turn's ``error``, if any; then thinking as
ReasoningChunks and text as TextChunks of ``chunk_chars`` characters (default 32, like a real model's deltas; 0 sends
each whole); each tool call as ToolCallChunks (id ``call_<turn>_<i>`` unless given; the arguments' JSON in one piece
unless ``chunk_chars`` is set, to exercise fragment assembly); usage; the stop reason (given, else ``tool_use`` when
the turn calls tools, else ``end_turn``). Usage counts left out are estimated at four characters a token: input from
the request's system prompt and text blocks, output from the turn's text, thinking and arguments.

The script is validated once, at load, and compiled into ready-made chunks (frozen, so calls share them): a call
only counts messages and yields. :class:`FunctionModel` plays turns that a Python function builds from the request,
through the same player (pydantic-ai's ``FunctionModel``).
"""

from __future__ import annotations

import inspect
import json
import sys
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from awaken_stdio.contract.errors import ConfigError, ProviderError
from awaken_stdio.contract.inference import (
    InferenceRequest,
    LlmExecutor,
    ModelCapabilities,
    ReasoningChunk,
    StopChunk,
    StreamChunk,
    TextChunk,
    TokenUsage,
    ToolCallChunk,
    UsageChunk,
)
from awaken_stdio.contract.messages import TextBlock, model_turns
from awaken_stdio.providers.families import SCRIPTED_MEDIA_INPUT

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "FunctionModel",
    "ScriptCapabilities",
    "ScriptError",
    "ScriptFile",
    "ScriptToolCall",
    "ScriptTurn",
    "ScriptUsage",
    "ScriptedModel",
    "TurnFunction",
    "script_json_schema",
]

DEFAULT_CHUNK_CHARS = 32
_INLINE_NAME = "<inline script>"
_DEFAULT_CAPABILITIES = ModelCapabilities()

# -- the file format -------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    # strict: "delay_ms": "100" is a mistake in a script, not something to coerce; extra: typos must fail loudly.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class ScriptToolCall(_Strict):
    """A tool call the turn makes."""

    name: str = Field(min_length=1, description="The tool to call.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The call's arguments.")
    arguments_json: str | None = Field(
        default=None,
        description="Argument text sent verbatim instead of `arguments` (to test malformed or truncated JSON).",
    )
    id: str | None = Field(default=None, min_length=1, description="The call id; default `call_<turn>_<index>`.")

    @model_validator(mode="after")
    def _one_form_of_arguments(self) -> ScriptToolCall:
        if self.arguments_json is not None and "arguments" in self.model_fields_set:
            raise ValueError("give `arguments` or `arguments_json`, not both")
        return self


class ScriptUsage(_Strict):
    """Token counts reported for the turn."""

    input_tokens: int | None = Field(default=None, ge=0, description="Left out: estimated from the request.")
    output_tokens: int | None = Field(default=None, ge=0, description="Left out: estimated from the turn.")
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    thinking_tokens: int = Field(default=0, ge=0)


class ScriptError(_Strict):
    """A provider error the call fails with, after `delay_ms`."""

    kind: Literal["rate_limited", "timeout", "invalid_request", "unauthorized"]
    message: str | None = Field(default=None, description="Default: `scripted <kind> error (turn <n>)`.")
    retry_after_s: float | None = Field(default=None, ge=0, description="Sent with the error (rate limits).")
    times: int | None = Field(
        default=None,
        ge=1,
        description="Fail only the first `times` calls of this turn (per model instance), then stream the turn; "
        "left out: every call fails.",
    )


class ScriptTurn(_Strict):
    """One assistant answer: thinking, text and tool calls, streamed in that order."""

    thinking: str = Field(default="", description="Reasoning, streamed before the text.")
    text: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    usage: ScriptUsage | None = None
    stop_reason: Literal["end_turn", "max_tokens", "refusal"] | None = Field(
        default=None, description="Default: `tool_use` when the turn calls tools, else `end_turn`."
    )
    delay_ms: int = Field(default=0, ge=0, description="Wait before answering (cancellation cuts it short).")
    chunk_chars: int | None = Field(
        default=None,
        ge=0,
        description=f"Characters per streamed chunk (default {DEFAULT_CHUNK_CHARS} for text and thinking, "
        "arguments whole); 0 sends everything whole.",
    )
    error: ScriptError | None = Field(default=None, description="Fail the call with this provider error.")


class ScriptCapabilities(_Strict):
    """What the model reports it accepts."""

    context_window: int = Field(default=_DEFAULT_CAPABILITIES.context_window, ge=1)
    max_output_tokens: int = Field(default=_DEFAULT_CAPABILITIES.max_output_tokens, ge=1)
    image_input: bool = Field(
        default=SCRIPTED_MEDIA_INPUT, description="The scripted model ignores content it cannot use."
    )
    audio_input: bool = SCRIPTED_MEDIA_INPUT


class ScriptFile(_Strict):
    """A scripted model's turns, played in order: turn n answers a conversation holding n assistant messages."""

    model_config = ConfigDict(title="awaken-stdio scripted model")

    schema_: str | None = Field(default=None, alias="$schema", description="For editors; ignored.")
    turns: list[ScriptTurn] = Field(min_length=1)
    after_last: Literal["fail", "repeat_last"] = Field(
        default="fail",
        description="A call past the last turn: `fail` (an invalid_request error) or `repeat_last` (the last turn "
        "again, e.g. a demo's closing words).",
    )
    capabilities: ScriptCapabilities = Field(default_factory=ScriptCapabilities)


def script_json_schema() -> dict[str, Any]:
    """The JSON Schema of a script file (what ``schemas/scripted-model.schema.json`` holds)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **ScriptFile.model_json_schema()}


# -- the player ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Turn:
    """A validated turn compiled for the hot path: everything but the usage estimate is computed once."""

    index: int
    delay_s: float
    error: ScriptError | None
    chunks: tuple[StreamChunk, ...]
    usage_chunk: UsageChunk | None  # set when the script gives both counts
    usage: ScriptUsage | None
    output_estimate: int
    stop: StopChunk


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or len(text) <= size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def _compile(turn: ScriptTurn, index: int) -> _Turn:
    size = DEFAULT_CHUNK_CHARS if turn.chunk_chars is None else turn.chunk_chars
    chunks: list[StreamChunk] = []
    if turn.thinking:
        chunks += [ReasoningChunk(text=p) for p in _pieces(turn.thinking, size)]
    if turn.text:
        chunks += [TextChunk(text=p) for p in _pieces(turn.text, size)]
    out_chars = len(turn.thinking) + len(turn.text)
    for i, call in enumerate(turn.tool_calls):
        args = call.arguments_json
        if args is None:
            args = json.dumps(call.arguments, ensure_ascii=False)
        out_chars += len(args)
        first, *rest = _pieces(args, turn.chunk_chars or 0)
        chunks.append(ToolCallChunk(index=i, id=call.id or f"call_{index}_{i}", name=call.name, args_delta=first))
        chunks += [ToolCallChunk(index=i, args_delta=p) for p in rest]
    usage = turn.usage
    usage_chunk = None
    if usage is not None and usage.input_tokens is not None and usage.output_tokens is not None:
        usage_chunk = UsageChunk(usage=TokenUsage(**usage.model_dump()))
    return _Turn(
        index=index,
        delay_s=turn.delay_ms / 1000,
        error=turn.error,
        chunks=tuple(chunks),
        usage_chunk=usage_chunk,
        usage=usage,
        output_estimate=_tokens(out_chars),
        stop=StopChunk(reason=turn.stop_reason or ("tool_use" if turn.tool_calls else "end_turn")),
    )


def _tokens(chars: int) -> int:
    return (chars + 3) // 4


def _input_estimate(request: InferenceRequest) -> int:
    chars = len(request.system or "")
    for message in request.messages:
        for block in message.content:
            if type(block) is TextBlock:
                chars += len(block.text)
    return _tokens(chars)


def _capabilities(caps: ScriptCapabilities) -> ModelCapabilities:
    return ModelCapabilities(**caps.model_dump())


class _Player(LlmExecutor):
    """Streams compiled turns; subclasses decide which turn answers a request."""

    def __init__(self, capabilities: ModelCapabilities) -> None:
        self._capabilities = capabilities
        self._failures: dict[int, int] = {}  # turn -> calls failed so far, for `error.times`

    @abstractmethod
    async def _turn(self, request: InferenceRequest, index: int) -> _Turn: ...

    def capabilities(self, model: str) -> ModelCapabilities:
        return self._capabilities

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        turn = await self._turn(request, model_turns(request.messages))
        if turn.delay_s:
            await anyio.sleep(turn.delay_s)
        if turn.error is not None and self._fails(turn.index, turn.error):
            error = turn.error
            message = error.message or f"scripted {error.kind} error (turn {turn.index})"
            raise ProviderError(error.kind, message, retry_after_s=error.retry_after_s)
        for chunk in turn.chunks:
            yield chunk
        yield turn.usage_chunk or _usage(turn, request)
        yield turn.stop

    def _fails(self, index: int, error: ScriptError) -> bool:
        if error.times is None:
            return True
        failed = self._failures.get(index, 0)
        if failed >= error.times:
            return False
        self._failures[index] = failed + 1
        return True


def _usage(turn: _Turn, request: InferenceRequest) -> UsageChunk:
    given = turn.usage
    if given is None:
        return UsageChunk(usage=TokenUsage(input_tokens=_input_estimate(request), output_tokens=turn.output_estimate))
    return UsageChunk(
        usage=TokenUsage(
            input_tokens=_input_estimate(request) if given.input_tokens is None else given.input_tokens,
            output_tokens=turn.output_estimate if given.output_tokens is None else given.output_tokens,
            cache_read_tokens=given.cache_read_tokens,
            cache_write_tokens=given.cache_write_tokens,
            thinking_tokens=given.thinking_tokens,
        )
    )


class ScriptedModel(_Player):
    """Plays a script's turns; build it from a dict (or :class:`ScriptFile`) or with :meth:`from_file`.

    ``name`` labels errors (the file's path when loaded from a file)::

        model = ScriptedModel({"turns": [{"text": "Hello!"}]})
    """

    def __init__(self, script: ScriptFile | Mapping[str, Any], *, name: str = _INLINE_NAME) -> None:
        self.name = name
        self.script = script if isinstance(script, ScriptFile) else _validate(ScriptFile, script, name)
        self._turns = tuple(_compile(turn, i) for i, turn in enumerate(self.script.turns))
        super().__init__(_capabilities(self.script.capabilities))

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load and validate a script file; any problem is a one-line :class:`ConfigError` naming the file."""
        name = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"scripted model script {name}: file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"scripted model script {name}: cannot read it: {reason}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"scripted model script {name}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(f"scripted model script {name}: expected a JSON object with `turns`")
        return cls(data, name=name)

    async def _turn(self, request: InferenceRequest, index: int) -> _Turn:
        if index < len(self._turns):
            return self._turns[index]
        if self.script.after_last == "repeat_last":
            return self._turns[-1]
        count = len(self._turns)
        defined = f"{count} turns: 0-{count - 1}" if count > 1 else "1 turn: 0"
        raise ProviderError("invalid_request", f"scripted model {self.name} has no turn {index} (it defines {defined})")


TurnResult = ScriptTurn | Mapping[str, Any]
TurnFunction = Callable[[InferenceRequest, int], TurnResult | Awaitable[TurnResult]]


class FunctionModel(_Player):
    """Plays the turn that ``fn(request, turn)`` returns (sync or async), for tests that must see the request.

    ``turn`` is chosen as for a script (assistant messages so far); ``fn`` may also raise ``ProviderError``::

        def answer(request: InferenceRequest, turn: int) -> dict:
            return {"text": f"turn {turn}: you said {request.messages[-1].text}"}

        model = FunctionModel(answer)
    """

    def __init__(self, fn: TurnFunction, *, capabilities: ModelCapabilities | None = None) -> None:
        self._fn = fn
        super().__init__(capabilities or _capabilities(ScriptCapabilities()))

    async def _turn(self, request: InferenceRequest, index: int) -> _Turn:
        result = self._fn(request, index)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, ScriptTurn):
            result = _validate(ScriptTurn, result, f"function model turn {index}")
        return _compile(result, index)


# -- validation errors as one line -----------------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)
_MAX_REPORTED = 5


def _validate(model: type[_M], data: Any, name: str) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        problems = [_describe(e["loc"], e["type"], e["msg"]) for e in errors[:_MAX_REPORTED]]
        if len(errors) > _MAX_REPORTED:
            problems.append(f"and {len(errors) - _MAX_REPORTED} more")
        raise ConfigError(f"scripted model script {name}: {'; '.join(problems)}") from None


def _describe(loc: tuple[int | str, ...], kind: str, msg: str) -> str:
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    if kind == "extra_forbidden":
        return f"{path}: unknown field"
    if kind == "missing":
        return f"{path}: required field missing"
    msg = msg.removeprefix("Value error, ")
    return f"{path}: {msg}" if path else msg


# -- command line ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``--schema`` prints the script JSON Schema; ``--check FILE...`` validates scripts (exit 2 on a bad one)."""
    import argparse  # only the command line needs it

    parser = argparse.ArgumentParser(prog="python -m awaken_stdio.providers.scripted", description=main.__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--schema", action="store_true", help="print the JSON Schema of script files")
    group.add_argument("--check", nargs="+", metavar="FILE", help="validate script files")
    args = parser.parse_args(argv)
    if args.schema:
        sys.stdout.write(json.dumps(script_json_schema(), indent=2, ensure_ascii=False) + "\n")
        return 0
    status = 0
    for path in args.check:
        try:
            model = ScriptedModel.from_file(path)
        except ConfigError as exc:
            sys.stderr.write(f"{exc}\n")
            status = 2
        else:
            sys.stdout.write(f"{path}: ok, {len(model.script.turns)} turns\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
