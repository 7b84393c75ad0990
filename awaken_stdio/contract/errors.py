"""The one exception tree of awaken-stdio, split by audience.

::

    AwakenError
    ├── UsageError                  the person or program configuring us made a mistake (CLI exit 2)
    │   └── ConfigError             a config file, store URL or agent definition is wrong
    ├── StateError                  the state engine refused an operation (a programming error in a plugin)
    │   ├── KeyAlreadyRegistered, UnknownKey, KeyDecodeError, KeyEncodeError
    │   ├── RevisionConflict, MutationBaseRevisionMismatch, ParallelMergeConflict
    │   ├── PluginAlreadyInstalled, PluginNotInstalled, ToolAlreadyRegistered
    │   ├── HandlerAlreadyRegistered, EffectHandlerAlreadyRegistered
    │   ├── UnknownScheduledActionHandler, UnknownEffectHandler
    │   └── PhaseRunLoopExceeded
    ├── RunError                    a run could not be started, resumed or controlled
    │   ├── ThreadAlreadyRunning, AgentNotFound, InvalidResume, DecisionTargetNotFound
    │   └── OutcomeUnknown          a decision would run a call whose earlier attempt may have had its effect
    ├── StoreError                  persistence failed; wraps driver errors ``from exc``
    │   ├── NotFound, AlreadyExists, VersionConflict, SchemaTooNew, StoreUnavailable
    │   └── Fenced                  this holder's claim moved on: it may no longer write or act
    ├── ProviderError               a model call failed; ``kind`` says whether a retry can help
    ├── ModelAnswerPending          the model's answer comes from outside the process: the run waits for it
    └── ToolError                   raised from a tool: fatal, the run ends ``failed`` with the tool's name and message
        └── ToolFailure             raised from a tool: a failed call the model sees; the run goes on

Only ``protocols/`` turns these into wire errors, and only ``cli.py`` turns them into exit codes.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "AgentNotFound",
    "AlreadyExists",
    "AwakenError",
    "ConfigError",
    "DecisionTargetNotFound",
    "EffectHandlerAlreadyRegistered",
    "Fenced",
    "HandlerAlreadyRegistered",
    "InvalidResume",
    "KeyAlreadyRegistered",
    "KeyDecodeError",
    "KeyEncodeError",
    "ModelAnswerPending",
    "MutationBaseRevisionMismatch",
    "NotFound",
    "OutcomeUnknown",
    "ParallelMergeConflict",
    "PhaseRunLoopExceeded",
    "PluginAlreadyInstalled",
    "PluginNotInstalled",
    "ProviderError",
    "ProviderErrorKind",
    "RevisionConflict",
    "RunError",
    "SchemaTooNew",
    "StateError",
    "StoreError",
    "StoreUnavailable",
    "ThreadAlreadyRunning",
    "ToolAlreadyRegistered",
    "ToolError",
    "ToolErrorKind",
    "ToolFailure",
    "UnknownEffectHandler",
    "UnknownKey",
    "UnknownScheduledActionHandler",
    "UsageError",
    "VersionConflict",
]


class AwakenError(Exception):
    """awaken-stdio failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message if message is not None else (type(self).__doc__ or type(self).__name__).strip())

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


# -- usage -----------------------------------------------------------------------------------------------------


class UsageError(AwakenError):
    """The command line or the embedding program used awaken-stdio wrongly."""


class ConfigError(UsageError):
    """The configuration is not valid."""


# -- state -----------------------------------------------------------------------------------------------------


class StateError(AwakenError):
    """The state engine refused the operation."""


class KeyAlreadyRegistered(StateError):
    """``detail`` names who registered it twice (the plugins and the agent), when that is known."""

    def __init__(self, key: str, detail: str = "") -> None:
        self.key = key
        super().__init__(f"key already registered: {key}" + (f" ({detail})" if detail else ""))


class UnknownKey(StateError):
    """``detail`` says which plugin registers the key and which agent does not use it, when that is known."""

    def __init__(self, key: str, detail: str = "") -> None:
        self.key = key
        super().__init__(f"unknown state key: {key}" + (f" ({detail})" if detail else ""))


class KeyDecodeError(StateError):
    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"failed to decode state key {key}: {message}")


class KeyEncodeError(StateError):
    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"failed to encode state key {key}: {message}")


class RevisionConflict(StateError):
    def __init__(self, expected: int, actual: int) -> None:
        self.expected, self.actual = expected, actual
        super().__init__(f"revision conflict: expected {expected}, actual {actual}")


class MutationBaseRevisionMismatch(StateError):
    def __init__(self, left: int, right: int) -> None:
        self.left, self.right = left, right
        super().__init__(f"mutation batches have different base revisions: {left} and {right}")


class ParallelMergeConflict(StateError):
    def __init__(self, key: str, owners: tuple[str, str] | None = None) -> None:
        self.key, self.owners = key, owners
        if owners:
            msg = (
                f'conflicting parallel state modification on exclusive key "{key}" '
                f"by tool calls [{owners[0]}] and [{owners[1]}]"
            )
        else:
            msg = f'conflicting parallel state modification on exclusive key "{key}"'
        super().__init__(msg)


class PluginAlreadyInstalled(StateError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"plugin already installed: {name}")


class PluginNotInstalled(StateError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"plugin not installed: {name}")


class ToolAlreadyRegistered(StateError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"tool already registered: {name}")


class HandlerAlreadyRegistered(StateError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"scheduled action handler already registered: {name}")


class EffectHandlerAlreadyRegistered(StateError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"effect handler already registered: {name}")


class UnknownScheduledActionHandler(StateError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no handler registered for scheduled action: {name}")


class UnknownEffectHandler(StateError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no handler registered for effect: {name}")


class PhaseRunLoopExceeded(StateError):
    def __init__(self, phase: str, rounds: int) -> None:
        self.phase, self.rounds = phase, rounds
        super().__init__(f"phase {phase} exceeded {rounds} scheduled-action rounds")


# -- runs ------------------------------------------------------------------------------------------------------


class RunError(AwakenError):
    """The run could not be started, resumed or controlled."""


class ThreadAlreadyRunning(RunError):
    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread already has an active run: {thread_id}")


class AgentNotFound(RunError):
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f"agent not found: {agent_id}")


class InvalidResume(RunError):
    """The run to continue does not exist or belongs to another thread."""


class OutcomeUnknown(InvalidResume):
    """Approving would run calls whose earlier attempt started and whose end was never recorded: the effect may
    have happened. The person must choose (run again, or record as done); ``calls`` names them."""

    def __init__(self, run_id: str, calls: list[str], how: str | None = None) -> None:
        self.run_id, self.calls = run_id, calls
        names = ", ".join(calls)
        super().__init__(
            f"run {run_id}: the outcome of {names} is unknown (an earlier attempt started and its end was never "
            f"recorded, so it may have had its effect); {how or 'choose to run it again or to record it as done'}"
        )


class DecisionTargetNotFound(RunError):
    def __init__(self, target: str) -> None:
        self.target = target
        super().__init__(f"tool call or suspension {target} not found")


# -- stores ----------------------------------------------------------------------------------------------------


class StoreError(AwakenError):
    """The store failed."""


class NotFound(StoreError):
    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"not found: {what}")


class AlreadyExists(StoreError):
    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"already exists: {what}")


class VersionConflict(StoreError):
    def __init__(self, what: str, expected: int | str | None, actual: int | str | None) -> None:
        self.what, self.expected, self.actual = what, expected, actual
        super().__init__(f"version conflict on {what}: expected {expected}, actual {actual}")


class Fenced(StoreError):
    """A holder's write was refused because its claim on the thread is no longer current (it was paused or cut
    off past its lease, and another process took the run over): it must not act, write, or report the run."""

    def __init__(self, dispatch_id: str, token: str, now_held_by: str | None) -> None:
        self.dispatch_id, self.token, self.now_held_by = dispatch_id, token, now_held_by
        elsewhere = f" (now held by {now_held_by})" if now_held_by else ""
        super().__init__(
            f"this process lost its claim on the run (dispatch {dispatch_id}) while it was paused or cut off past "
            f"its lease; the run continued elsewhere{elsewhere} and nothing more is done here"
        )


class SchemaTooNew(StoreError):
    def __init__(self, location: str, found: int, supported: int) -> None:
        self.location, self.found, self.supported = location, found, supported
        super().__init__(
            f"{location} was written by a newer awaken-stdio (schema version {found}, this one knows up to "
            f"{supported}); upgrade awaken-stdio, it will not downgrade the database"
        )


class StoreUnavailable(StoreError):
    """The store cannot be reached or opened."""


# -- providers -------------------------------------------------------------------------------------------------

ProviderErrorKind = Literal[
    "provider",
    "rate_limited",
    "overloaded",
    "timeout",
    "stream_interrupted",
    "context_overflow",
    "invalid_request",
    "unauthorized",
    "model_not_found",
    "content_filtered",
    "cancelled",
]
_RETRYABLE: frozenset[str] = frozenset({"provider", "rate_limited", "overloaded", "timeout", "stream_interrupted"})


class ProviderError(AwakenError):
    """The model provider failed."""

    def __init__(self, kind: ProviderErrorKind, message: str, *, retry_after_s: float | None = None) -> None:
        self.kind = kind
        self.retry_after_s = retry_after_s
        super().__init__(message)

    @property
    def retryable(self) -> bool:
        return self.kind in _RETRYABLE


class ModelAnswerPending(AwakenError):
    """Raised by a model whose answer comes from outside the process (an MCP client's model, asked in 2026-07-28
    rounds that end the client's call): the run stops where it is, waiting durably, and a later resume of it
    without decisions asks the model again, which then has the answer."""


# -- tools -----------------------------------------------------------------------------------------------------

ToolErrorKind = Literal[
    "invalid_arguments", "execution_failed", "timeout", "cancelled", "denied", "not_found", "internal"
]
_TOOL_ERROR_PREFIX: dict[str, str] = {
    "invalid_arguments": "Invalid arguments",
    "execution_failed": "Execution failed",
    "timeout": "Timeout",
    "cancelled": "Cancelled",
    "denied": "Denied",
    "not_found": "Not found",
    "internal": "Internal error",
}


class ToolError(AwakenError):
    """A tool failed beyond repair. Raised from a tool's ``execute``, it ends the run ``failed`` with the tool's name
    and this message as its reason, after the calls already under way are recorded (the model is not called again).

    For a failure the model should hear about and may work around (a missing file, a refused path, a timeout),
    raise :class:`ToolFailure` or return ``ToolResult.error(...)``; any other exception counts as such a failure too.
    """

    def __init__(self, message: str, kind: ToolErrorKind = "execution_failed", *, data: Any = None) -> None:
        self.kind = kind
        self.detail = message
        self.data = data
        super().__init__(f"{_TOOL_ERROR_PREFIX[kind]}: {message}")


class ToolFailure(ToolError):
    """A tool call failed and the model should know: raised from a tool, it becomes a failed result whose text the
    model sees, and the run goes on. ``kind`` prefixes the text (``Not found: ...``); ``timeout`` also marks the
    result ``timed_out``."""
