"""Shared builders for the runtime tests: runtimes on scripted models, recording sinks, small tools and plugins."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio

from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.events import AgentEvent, RunFinish, StepEnd, StepStart, ToolCallDone
from awaken_stdio.contract.inference import InferenceRequest, ModelCapabilities, StreamChunk, TextChunk
from awaken_stdio.contract.state import StateCommand, StateKey
from awaken_stdio.contract.stores import Store
from awaken_stdio.contract.suspension import PendingToolCall, SuspendTicket, Suspension
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor, ToolOutput, ToolResult
from awaken_stdio.providers.scripted import FunctionModel, ScriptedModel, TurnFunction
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.plugins import GateDecision, PhaseContext, Plugin, PluginRegistrar, Suspend

E = TypeVar("E", bound=AgentEvent)
Turns = list[dict[str, Any]] | TurnFunction
ToolFn = Callable[[dict[str, Any], ToolCallContext], Awaitable[Any]]


# -- models and runtimes ---------------------------------------------------------------------------------------


def call(name: str, args: dict[str, Any] | None = None, id: str | None = None) -> dict[str, Any]:
    """A scripted tool call."""
    out: dict[str, Any] = {"name": name, "arguments": args or {}}
    if id is not None:
        out["id"] = id
    return out


def turn(text: str = "", *calls: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A scripted turn: text, tool calls and any other turn field (``delay_ms``, ``error``, ``chunk_chars``)."""
    return {"text": text, "tool_calls": list(calls), **extra}


def model(turns: Turns) -> ScriptedModel | FunctionModel:
    return FunctionModel(turns) if callable(turns) else ScriptedModel({"turns": turns})


def make_runtime(
    turns: Turns,
    *,
    tools: Iterable[Tool] = (),
    plugins: Iterable[Plugin] = (),
    store: Store | None = None,
    agents: Iterable[tuple[AgentSpec, Turns]] = (),
    **spec: Any,
) -> AgentRuntime:
    """A runtime whose agent ``default`` plays ``turns`` and uses ``plugins``; ``agents`` adds more agents, each with
    its own model."""
    plugins = list(plugins)
    spec.setdefault("plugins", [p.name for p in plugins if not p.always_active])
    runtime = AgentRuntime(tools=tools, plugins=plugins, store=store)
    runtime.add_agent(AgentSpec(id="default", model="default", **spec)).add_model("default", model(turns))
    for agent, agent_turns in agents:
        runtime.add_agent(agent).add_model(agent.model, model(agent_turns))
    return runtime


def tool_messages(request: InferenceRequest) -> dict[str, str]:
    """Call id -> tool result text, as the model sees them."""
    return {m.tool_call_id: m.text for m in request.messages if m.role == "tool" and m.tool_call_id}


class RequestLog:
    """A turn function wrapper that keeps every request the model received."""

    def __init__(self, turns: list[dict[str, Any]]) -> None:
        self.turns = turns
        self.requests: list[InferenceRequest] = []

    def __call__(self, request: InferenceRequest, index: int) -> dict[str, Any]:
        self.requests.append(request)
        return self.turns[index]


class StallingModel:
    """Streams ``chunks`` of text, then hangs until cancelled (a model that stalls mid-answer)."""

    def __init__(self, *chunks: str) -> None:
        self.chunks = chunks
        self.cancelled = False

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        for chunk in self.chunks:
            yield TextChunk(text=chunk)
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise

    def capabilities(self, model: str) -> ModelCapabilities:
        return ModelCapabilities()


# -- events ----------------------------------------------------------------------------------------------------


class Recorder:
    """An event sink that keeps every event and lets a test await one; ``on_event`` runs inside the loop."""

    def __init__(self, on_event: Callable[[AgentEvent], Awaitable[None]] | None = None) -> None:
        self.events: list[AgentEvent] = []
        self.on_event = on_event
        self._changed = anyio.Event()

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()
        if self.on_event is not None:
            await self.on_event(event)

    def types(self) -> list[str]:
        return [e.event_type for e in self.events]

    def of(self, cls: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, cls)]

    async def wait_for(self, cls: type[E], count: int = 1, where: Callable[[E], bool] = lambda e: True) -> E:
        """The ``count``-th event of type ``cls`` matching ``where``, once it has been emitted (at most 5 s)."""
        with anyio.fail_after(5):
            while True:
                matches = [e for e in self.of(cls) if where(e)]
                if len(matches) >= count:
                    return matches[count - 1]
                await self._changed.wait()


def assert_well_formed(events: list[AgentEvent]) -> None:
    """First ``run_start``, last ``run_finish``, step_start/step_end strictly paired and never nested."""
    assert events[0].event_type == "run_start"
    assert events[-1].event_type == "run_finish"
    open_step = False
    for e in events:
        if isinstance(e, StepStart):
            assert not open_step, "nested step_start"
            open_step = True
        elif isinstance(e, StepEnd):
            assert open_step, "step_end without step_start"
            open_step = False
        elif isinstance(e, RunFinish):
            assert not open_step, "run_finish inside a step"
    assert not open_step


def done_by_id(recorder: Recorder) -> dict[str, ToolCallDone]:
    return {e.id: e for e in recorder.of(ToolCallDone)}


# -- tools -----------------------------------------------------------------------------------------------------


class FnTool(Tool):
    """A tool backed by an async function ``fn(args, ctx)``; ``calls`` keeps the arguments of every execution."""

    def __init__(self, name: str, fn: ToolFn | None = None) -> None:
        self.descriptor = ToolDescriptor(name=name, description=f"The {name} tool.")
        self.fn = fn
        self.calls: list[dict[str, Any]] = []
        self.contexts: list[ToolCallContext] = []

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> Any:
        self.calls.append(args)
        self.contexts.append(ctx)
        if self.fn is None:
            return {"ok": True, "args": args}
        return await self.fn(args, ctx)


COUNTER: StateKey[int, int] = StateKey("test.counter", default=0, apply=lambda v, u: v + u, merge="commutative")
THREAD_COUNTER: StateKey[int, int] = StateKey(
    "test.thread_counter", default=0, apply=lambda v, u: v + u, merge="commutative", scope="thread"
)


class CounterPlugin(Plugin):
    """Registers the run-scoped ``COUNTER`` and the thread-scoped ``THREAD_COUNTER``."""

    name = "test_counter"

    def register(self, registrar: PluginRegistrar) -> None:
        registrar.register_key(COUNTER)
        registrar.register_key(THREAD_COUNTER)


def adder(name: str = "add") -> FnTool:
    """``add {n}``: returns the counters it saw, then adds ``n`` to both."""

    async def add(args: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        seen = {"run": ctx.state(COUNTER), "thread": ctx.state(THREAD_COUNTER)}
        n = args.get("n", 1)
        return ToolOutput(
            result=ToolResult.success(name, seen), command=StateCommand().update(COUNTER, n).update(THREAD_COUNTER, n)
        )

    return FnTool(name, add)


# -- suspension ------------------------------------------------------------------------------------------------


def permission_ticket(call_id: str, tool: str, args: Any) -> SuspendTicket:
    return SuspendTicket(
        suspension=Suspension(
            id=f"perm_{call_id}",
            action="tool:PermissionConfirm",
            message=f"Permission required for tool '{tool}'",
            parameters=args,
        ),
        pending=PendingToolCall(id=f"perm_{call_id}", name="permission_confirm", arguments=args),
        resume_mode="replay_tool_call",
    )


class AskPermission(Plugin):
    """A permission-style gate: suspends calls of ``tools`` (all when empty) until a decision replays them.

    Active for every agent, as the real permission plugin is."""

    name = "test_permission"
    always_active = True

    def __init__(self, *tools: str) -> None:
        self.tools = set(tools)
        self.seen: list[PhaseContext] = []

    def register(self, registrar: PluginRegistrar) -> None:
        registrar.tool_gate(self.gate)

    async def gate(self, ctx: PhaseContext) -> GateDecision | None:
        self.seen.append(ctx)
        if ctx.resume_input is not None or (self.tools and ctx.tool_name not in self.tools):
            return None
        assert ctx.tool_call_id is not None and ctx.tool_name is not None
        return Suspend(ticket=permission_ticket(ctx.tool_call_id, ctx.tool_name, ctx.tool_args))


class FixedGate(Plugin):
    """A gate that answers every call of ``tool`` with ``decision``."""

    def __init__(self, name: str, tool: str, decision: GateDecision) -> None:
        self.name = name
        self.tool = tool
        self.decision = decision

    def register(self, registrar: PluginRegistrar) -> None:
        registrar.tool_gate(self.gate)

    async def gate(self, ctx: PhaseContext) -> GateDecision | None:
        return self.decision if ctx.tool_name == self.tool else None
