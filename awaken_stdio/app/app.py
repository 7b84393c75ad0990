"""The application both protocol servers (and the CLI) run: config, store, runtime, tools, plugins, mailbox.

Two stages, because start-up speed matters: :func:`load_settings` is cheap (TOML + pydantic; the protocol servers
answer their first request from the TOML alone, ``app/startup.py``, and build these settings after it);
:func:`open_app` opens the store (database drivers), has ``assemble.py`` build the runtime with the built-in tools,
the ``@tool`` modules and the permission plugin, starts the mailbox service (``app/dispatch.py``) in a task group it
owns, and is entered only after that first answer is on the wire.

Every surface delivers approvals through :meth:`App.decide`, and should start runs with :meth:`App.run`: both go
through the mailbox, which is what makes a decision resume a run exactly once across processes sharing the store.

The ``@tool`` modules and the configured MCP servers load in the background (``loading.py``): the app is open, and
every protocol request answered, while they import and connect; runs wait for them, bounded.

Wherever a run resumes, it runs in one context (:meth:`App.run_context`): the live session's, when a protocol server
of this process has the run's session open (an editor's file system, terminal, roots and MCP tools); else the one
rebuilt from the store (the session's working directory, additional directories, mode and MCP servers started from
their recorded specs). So an approved call behaves as it would have, had a rule allowed it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.app.config import LoadedConfig, validate_config
from awaken_stdio.app.config_file import read_config_file, store_url
from awaken_stdio.app.loading import ToolLoading
from awaken_stdio.app.sessions import Sessions
from awaken_stdio.app.verdicts import unknown_calls
from awaken_stdio.contract.environment import ModeRef, RunEnvironment
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.tools import CancelToken, Tool, ToolCallContext, ToolDescriptor, ToolResult, preview_call

if TYPE_CHECKING:  # the rest loads in open_app, after the first answer
    from anyio.abc import TaskGroup

    from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
    from awaken_stdio.contract.activation import AgentRunResult, EventSink, RunActivation
    from awaken_stdio.contract.channel import ClientChannel, SamplingHost
    from awaken_stdio.contract.preview import ToolPreview
    from awaken_stdio.contract.stores import RunRecord, SessionRecord, Store, WaitingTicket
    from awaken_stdio.contract.suspension import Decisions, ToolCallResume
    from awaken_stdio.runtime.agent_runtime import AgentRuntime
    from awaken_stdio.runtime.permission import Behavior
    from awaken_stdio.tools.mcp import McpServerStatus, McpToolsets

__all__ = ["App", "Settings", "load_settings", "open_app"]

log = logging.getLogger(__name__)

_DIRECT = "mcp-direct"  # thread, run and agent id of tool calls made outside any agent run


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What a process was started with, resolved: the config, the store URL, the working directory."""

    loaded: LoadedConfig
    store_url: str
    cwd: str


def load_settings(config: str | None = None, store: str | None = None, cwd: str | None = None) -> Settings:
    """The config file (``--config``/env/default), then ``--store`` > env > config > the default SQLite file."""
    file = read_config_file(config)
    loaded = validate_config(file)
    return Settings(loaded=loaded, store_url=store_url(store, file), cwd=os.path.abspath(cwd or os.getcwd()))


@dataclass(slots=True, kw_only=True)
class App:
    settings: Settings
    store: Store
    runtime: AgentRuntime
    mailbox: MailboxService
    toolsets: McpToolsets | None = None  # the configured [mcp_servers], their tools kept in runtime.tools
    tool_listeners: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # sessions open in this process: session id -> what its runs get there (``env``, ``tools``, ``system_prompt``)
    session_hosts: dict[str, Callable[[], RunActivation]] = field(default_factory=dict)
    loading: ToolLoading = field(default_factory=ToolLoading)  # the tool modules and MCP servers still loading
    # the model of the MCP client this app serves (``awaken-stdio mcp``), in every environment a run gets from it
    sampling: SamplingHost | None = None

    @property
    def sessions(self) -> Sessions:
        """The sessions of this app's store: records with their threads (``sessions.py``)."""
        return Sessions(store=self.store)

    def reload(self, settings: Settings) -> None:
        """Adopt a re-read config (ACP ``authenticate``, after a key or a config file was set since start-up): its
        models and agents, when this app started without any."""
        if not self.runtime.agents:
            from awaken_stdio.app.assemble import add_agents

            add_agents(self.runtime, settings.loaded)

    def agent_for(self, record: SessionRecord) -> str:
        """The agent a session's runs use: its configured agent, or a copy of it on the session's chosen model."""
        runtime = self.runtime
        agent_id = record.agent_id if record.agent_id in runtime.agents else runtime.default_agent_id()
        spec = runtime.agents[agent_id]
        if not record.model or record.model == spec.model or record.model not in runtime.models:
            return agent_id
        derived = f"{agent_id}@{record.model}"
        if derived not in runtime.agents:
            runtime.add_agent(replace(spec, id=derived, model=record.model))
        return derived

    async def tools_changed(self) -> None:
        """Called when a configured MCP server's tools change: tell every listener (the MCP server's list_changed)."""
        for listener in list(self.tool_listeners):
            await listener()

    async def decide(
        self,
        run_id: str,
        decisions: Decisions,
        sink: EventSink | None = None,
        context: RunActivation | None = None,
        origin: str = "internal",
        on_waiting: Callable[[], Awaitable[None]] | None = None,
        *,
        follow: bool = False,
    ) -> AgentRunResult | None:
        """Deliver decisions for a waiting run, from any surface (``origin``: acp, mcp, cli), exactly once.

        The decisions are recorded in the mailbox first. When no live process holds the run's thread (or its holder
        died), the run is resumed here and its result returned (events to ``sink``); when one does, that process
        continues it and this returns ``None`` once it has taken the decision (with ``follow``, when that process is
        this one, the run's result once it waits again or ends). Unknown runs raise
        ``InvalidResume``; runs another decision moved on first raise ``DecisionSuperseded`` naming it; a target
        that is not one of the run's pending calls raises ``DecisionTargetNotFound``.
        """
        await self.loading.settle()
        return await self.mailbox.decide(
            run_id, decisions, sink=sink, context=context, origin=origin, on_waiting=on_waiting, follow=follow
        )

    async def waiting_run(self, run_id: str) -> RunRecord:
        """The run, waiting for decisions (its pending calls in ``waiting``); else ``InvalidResume``: unknown, or
        ``DecisionSuperseded`` naming the surface and process that decided or cancelled it first."""
        return await self.mailbox.waiting(run_id)

    async def unknown_calls(self, run: RunRecord) -> list[str]:
        """The run's pending calls whose earlier attempt's outcome is unknown: a surface asks about them with the
        choices (run again, record as done, skip), as ``decide`` refuses a plain approval of them."""
        return await unknown_calls(self.store.mailbox, run, now_ms())

    async def holder(self, thread_id: str) -> str | None:
        """The process (``host:pid:instance``) holding the thread's claim, which continues its run; ``None``."""
        claimed = await self.store.mailbox.list_dispatches(thread_id, ["claimed"])
        return claimed[0].claimed_by if claimed else None

    async def run(
        self,
        activation: RunActivation,
        sink: EventSink | None = None,
        give_up: Callable[[], bool] | None = None,
        on_waiting: Callable[[], Awaitable[None]] | None = None,
    ) -> AgentRunResult:
        """Run through the mailbox, holding the thread's claim: with ``wait_for_decisions`` a run that suspends
        keeps it and continues live when a decision arrives from any surface of any process (``on_waiting`` is
        awaited each time it starts waiting: the moment to ask a person). With ``give_up``, a thread busy with
        another run is waited for until ``give_up()``."""
        await self.loading.settle()
        return await self.mailbox.submit(activation, sink, give_up, on_waiting)

    async def cancel(self, run_id: str) -> bool:
        """Cancel a run: running or waiting here, waiting in another process, or waiting in the store."""
        return await self.mailbox.cancel(run_id)

    async def dismiss(self, run_id: str) -> bool:
        """The person dismissed a run's question: cancel it, unless a decision recorded elsewhere got there first
        (then the run goes on with that decision and this returns False)."""
        return await self.mailbox.dismiss(run_id)

    async def release(self, run_id: str) -> bool:
        """A run waiting here whose question could not be put to anyone (the editor has no dialog): stop holding it,
        so it stays waiting, decidable from any surface. False when a decision took it over first."""
        return await self.mailbox.release(run_id)

    # -- calls outside any agent run (an MCP client's direct ``tools/call``) ----------------------------------------

    def direct_context(
        self,
        tool: Tool,
        *,
        cancel: CancelToken | None = None,
        channel: ClientChannel | None = None,
        emit: EventSink | None = None,
    ) -> ToolCallContext:
        """What a call made outside any agent run sees (for its preview and its run alike): this process's working
        directory, the ``channel`` of the client calling, no thread, run, agent or state (ids ``mcp-direct``)."""
        from awaken_stdio.contract.state import Snapshot

        return ToolCallContext(
            call_id=new_id(),
            tool_name=tool.name,
            thread_id=_DIRECT,
            run_id=_DIRECT,
            agent_id=_DIRECT,
            snapshot=Snapshot(revision=0),
            env=RunEnvironment(cwd=self.settings.cwd, channel=channel),
            cancel=cancel or CancelToken(),
            emit=emit,
        )

    async def call_tool(
        self, tool: Tool, args: dict[str, Any], ctx: ToolCallContext, *, passing: tuple[type[Exception], ...] = ()
    ) -> ToolResult:
        """Run ``tool`` outside any agent run, the way a run's call runs (``runtime.run.tools.execute_tool``): its
        arguments checked, what it raises a failed result. ``passing``: the caller's own signals, raised on."""
        from awaken_stdio.runtime.run.tools import execute_tool

        try:
            return (await execute_tool(tool, args, ctx, passing=passing)).result
        except anyio.get_cancelled_exc_class():
            ctx.cancel.cancel()  # a tool running in a worker thread watches the token
            raise

    async def check_direct_call(self, descriptor: ToolDescriptor, args: dict[str, Any]) -> Behavior:
        """How the permission rules judge a call made outside any agent run: as for an agent without rules
        (read-only tools run, everything else asks), with the answers remembered for this workspace."""
        from awaken_stdio.runtime.permission import PermissionPlugin

        decision = await PermissionPlugin(self.store).decide(descriptor.name, args, descriptor, self.settings.cwd)
        return decision.behavior

    async def remember(self, descriptor: ToolDescriptor, args: dict[str, Any], decision: ToolCallResume) -> None:
        """Keep an ``always`` answer to a call made outside any run for this workspace, as a run's answer is kept."""
        from awaken_stdio.runtime.permission import PermissionPlugin

        await PermissionPlugin(self.store).remember(descriptor.name, args, self.settings.cwd, decision)

    async def preview(self, run: RunRecord, ticket: WaitingTicket, context: RunActivation) -> ToolPreview | None:
        """What approving ``ticket`` would do now, worked out where the run would resume (``context``'s ``env`` and
        ``tools``, as :meth:`run_context` gives them): a question asked again later (after a restart, a
        ``session/load``) shows the file as it is then, not as it was when first asked. None when the tool is not
        here or cannot tell."""
        from awaken_stdio.contract.state import Snapshot

        session_tools = {t.name: t for t in context.tools}
        tool = session_tools.get(ticket.tool_name) or self.runtime.tools.get(ticket.tool_name)
        if tool is None or ticket.resume_mode != "replay_tool_call":
            return None
        ctx = ToolCallContext(
            call_id=ticket.tool_call_id,
            tool_name=tool.name,
            thread_id=run.thread_id,
            run_id=run.run_id,
            agent_id=run.agent_id,
            snapshot=Snapshot(revision=0),
            env=context.env,
        )
        return await preview_call(tool, ticket.arguments, ctx)

    @asynccontextmanager
    async def run_context(
        self, session_id: str | None, cwd: str | None, wanted: tuple[str, ...] = ()
    ) -> AsyncGenerator[RunActivation]:
        """Where a run of ``session_id`` resumes (an activation's ``env``, ``tools`` and ``system_prompt``), for its
        duration.

        The live session's when one is open in this process; else rebuilt from the session record: its roots, its
        mode, its client's system prompt and its MCP servers started from their recorded specs (closed again
        afterwards). A server that cannot start is named in the failed result of each ``wanted`` call (the pending
        tool names) that would have used it.
        """
        from awaken_stdio.contract.activation import RunActivation, SystemPrompt

        await self.loading.settle()
        host = self.session_hosts.get(session_id) if session_id else None
        if host is not None:
            yield host()
            return
        session = await self.store.load_session(session_id) if session_id else None
        if session is None:
            yield RunActivation(env=RunEnvironment(cwd=cwd or None, sampling=self.sampling))
            return
        env = RunEnvironment(
            cwd=cwd or session.cwd,
            roots=tuple(session.additional_directories),
            mode=ModeRef(session.mode or "default"),
            sampling=self.sampling,
        )
        extras = RunActivation(env=env, system_prompt=SystemPrompt.of(session.system_prompt))
        if not session.mcp_servers:
            yield extras
            return
        from awaken_stdio.tools.mcp import McpServerSpec, RestartPolicy, open_mcp_toolsets

        specs = [McpServerSpec.from_acp(e, cwd=session.cwd, timeout_s=_MCP_START_S) for e in session.mcp_servers]
        async with open_mcp_toolsets(specs, restart=RestartPolicy(max_failures=0)) as toolsets:
            tools = toolsets.tools()
            failed = [s for s in toolsets.statuses() if s.state != "ready"]
            if failed:
                tools += _unavailable(failed, wanted, {t.name for t in tools}, session.session_id)
            yield replace(extras, tools=tools)


_MCP_START_S = 30.0  # each session MCP server started for a resume away from its editor


class _Unavailable(Tool):
    """A session MCP tool whose server could not start away from its editor: its call fails saying why, rather than
    "tool not found"."""

    def __init__(self, name: str, why: str) -> None:
        self.descriptor = ToolDescriptor(name=name, description=why)
        self.why = why

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        return ToolResult.error(self.name, f"Tool {self.name!r} is not available: {self.why}")


def _unavailable(failed: list[McpServerStatus], wanted: tuple[str, ...], have: set[str], session: str) -> list[Tool]:
    """Stand-ins for the wanted tools the session's servers did not bring, naming the servers and their errors."""
    servers = "; ".join(f"{s.name!r}: {s.error or s.state}" for s in failed)
    why = f"MCP servers of session {session} could not start away from its editor ({servers})"
    return [_Unavailable(name, why) for name in wanted if name not in have]


@asynccontextmanager
async def open_app(
    settings: Settings, *, serve: bool = True, mailbox: MailboxConfig | None = None
) -> AsyncGenerator[App]:
    """Open the store, build the runtime with every configured tool and plugin, and run the mailbox service until
    exit (then the store closes). ``serve=False`` (the CLI) handles only this process's own dispatches and never
    picks up other processes' queued work."""
    from awaken_stdio.app.assemble import assemble_runtime
    from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
    from awaken_stdio.runtime.otel import otel_from_env
    from awaken_stdio.stores import open_store

    config = settings.loaded.config
    tracer_provider = otel_from_env()
    async with AsyncExitStack() as stack:
        if tracer_provider is not None:
            stack.callback(tracer_provider.shutdown)  # flushes the spans
        store = await stack.enter_async_context(open_store(settings.store_url))
        runtime = assemble_runtime(settings.loaded, store, tracer_provider)
        service = MailboxService(runtime=runtime, config=replace(mailbox or MailboxConfig(), dispatch_queued=serve))
        app = App(settings=settings, store=store, runtime=runtime, mailbox=service)
        service.context = app.run_context
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            tg.start_soon(app.loading.watch)
            load_tool_modules(app, tg)
            try:
                async with AsyncExitStack() as servers:  # closed inside the task group: cancel scopes nest
                    if config.mcp_servers:
                        app.toolsets = await servers.enter_async_context(_configured_servers(app))
                    yield app
            except Exception as exc:  # raised after the group: callers see it, not an ExceptionGroup around it
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure


def load_tool_modules(app: App, tasks: TaskGroup) -> None:
    """Import each ``[tools] modules`` entry in ``tasks``, off the event loop, each loading (``app.loading``) from
    now until its tools join the runtime or it fails (a problem naming it)."""
    for module in app.settings.loaded.config.tools.modules:
        name = f"tool module {module!r}"
        app.loading.start(name)
        tasks.start_soon(_add_tool_module, app, module, name)


async def _add_tool_module(app: App, module: str, name: str) -> None:
    from awaken_stdio.tools.discovery import import_tools

    try:
        tools = await import_tools(module, app.settings.loaded.base_dir)
    except ConfigError as exc:
        app.loading.done(name, str(exc))
        return
    runtime = app.runtime
    taken = sorted(t.name for t in tools if t.name in runtime.tools)
    for tool in tools:
        if tool.name not in taken:
            runtime.add_tool(tool)
    await app.tools_changed()
    app.loading.done(name, f"{name} defines tools already registered: {', '.join(taken)}" if taken else None)


@asynccontextmanager
async def _configured_servers(app: App) -> AsyncGenerator[McpToolsets]:
    """Connect ``[mcp_servers]`` in the background (each under its own timeout) and keep their tools in
    ``app.runtime.tools`` as they arrive; each is loading (``app.loading``) until it is first ready or failed."""
    from awaken_stdio.app.assemble import configured_specs
    from awaken_stdio.tools.mcp import open_mcp_toolsets

    published: set[str] = set()
    specs = configured_specs(app.settings.loaded.config.mcp_servers)
    loading = {spec.name: f"MCP server {spec.name!r}" for spec in specs}
    for name in loading.values():
        app.loading.start(name)

    def sync() -> None:
        names = {t.name for t in toolsets.tools()}
        for gone in published - names:
            app.runtime.remove_tool(gone)
        for tool in toolsets.tools():
            app.runtime.add_tool(tool, replace=True)
        published.clear()
        published.update(names)

    async def on_change(status: McpServerStatus) -> None:
        log.info("MCP server %s: %s%s", status.name, status.state, f" ({status.error})" if status.error else "")
        sync()
        await app.tools_changed()
        name = loading.pop(status.name, None) if status.state in ("ready", "failed") else None
        if name is not None:  # after the clients were told: one that waited for it lists it
            app.loading.done(name, f"{name} is not available: {status.error}" if status.state == "failed" else None)

    async with open_mcp_toolsets(specs, on_change=on_change, wait=False) as toolsets:
        yield toolsets
