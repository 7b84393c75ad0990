"""The permission plugin: which tool calls run, which wait for a person, which are refused.

**Rules** come from the agent's ``permission`` section (``{"default": "allow"|"ask"|"deny", "rules": [{"tool":
pattern, "behavior": ...}]}``; patterns in :mod:`awaken_stdio.runtime.tool_pattern`). Among the rules matching a
call, Deny > Allow > Ask, then the most specific pattern. With no matching rule the agent's ``default`` applies;
with no ``default``, tools that declare themselves read-only are allowed and everything else (edits, commands, tools
of MCP servers, whose read-only hint is only the server's claim) asks. A shell command is judged segment by segment
(``git status && rm -rf x`` is two commands): any denied segment denies the call, any asking one asks.

**Remembered answers.** ``allow_always`` / ``reject_always`` are stored in the :class:`PermissionStore` as grants
scoped to a workspace (the run's normalised absolute ``cwd``; runs without one share :data:`GLOBAL_WORKSPACE`):
for the tool as a whole, except ``run_command``, whose programs are remembered (``git push origin main`` ->
``run_command(git *)``). A grant acts as a rule placed after the configured ones, so the order is: configured deny >
remembered deny > configured or remembered allow > configured ask > default. Expired grants are ignored.

**Modes** (``ctx.env.mode``, the session's, read at each call; default ``default``): ``default`` applies the above;
``accept_edits`` turns Ask into Allow for edit-kind tools (commands still ask); ``plan`` offers the model only tools
declaring themselves read-only (which are then judged as usual), and a call to any other fails with an error result
the model reads (the run goes on); ``bypass`` turns every Ask into Allow. Deny rules and remembered denies deny in
every mode: bypass means "do not ask me", not "ignore what I forbade".

The gate answers Deny with ``Block`` (the run ends ``blocked``) and Ask with a ``perm_<call id>`` suspension that is
replayed through the gate once a person approves. Tools a configured rule denies whatever their arguments are taken
out of the tool list the model sees; remembered denies are not (they need a store read, and the request transform
is synchronous), the gate refuses their calls.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.stores import PermissionBehavior, PermissionGrant, PermissionStore
from awaken_stdio.contract.suspension import PERMISSION_ACTION, PendingToolCall, SuspendTicket, Suspension
from awaken_stdio.contract.tools import ToolDescriptor, ToolResult
from awaken_stdio.runtime.plugins import Block, GateDecision, PhaseContext, Plugin, PluginRegistrar, SetResult, Suspend
from awaken_stdio.runtime.tool_pattern import COMMAND_ARGUMENT, ToolPattern, argument_values, command_segments

if TYPE_CHECKING:
    from awaken_stdio.contract.agent import AgentSpec
    from awaken_stdio.contract.inference import InferenceRequest
    from awaken_stdio.contract.suspension import ToolCallResume

__all__ = [
    "GLOBAL_WORKSPACE",
    "Behavior",
    "PermissionDecision",
    "PermissionMode",
    "PermissionPlugin",
    "PermissionPolicy",
    "PermissionRule",
    "permission_mode",
    "remembered_scopes",
    "workspace_key",
]

log = logging.getLogger(__name__)

GLOBAL_WORKSPACE = "global"  # not an absolute path, so it never collides with a real workspace

Behavior = Literal["allow", "ask", "deny"]
PermissionMode = Literal["default", "accept_edits", "plan", "bypass"]
_MODES: tuple[str, ...] = get_args(PermissionMode)
_BEHAVIORS: tuple[str, ...] = get_args(Behavior)
_PRECEDENCE: dict[str, int] = {"deny": 2, "allow": 1, "ask": 0}  # which matching rule decides
_RESTRICTIVENESS: dict[str, int] = {"deny": 2, "ask": 1, "allow": 0}  # how command segments combine
_ALWAYS: dict[str, PermissionBehavior] = {"allow_always": "allow", "reject_always": "deny"}


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRule:
    """A configured rule, or a remembered answer turned into one."""

    pattern: ToolPattern
    behavior: Behavior
    remembered: bool = False  # a stored "always" answer rather than configuration


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionDecision:
    """The outcome for one call and the rule that decided it (``None``: the default or the mode)."""

    behavior: Behavior
    rule: PermissionRule | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionPolicy:
    """An agent's rules (plus remembered grants) and default, ready to judge calls."""

    rules: tuple[PermissionRule, ...] = ()
    default: Behavior | None = None

    @staticmethod
    def from_agent(agent: AgentSpec) -> PermissionPolicy:
        """Parse ``agent.sections["permission"]``; a bad pattern or behaviour raises :class:`ConfigError`."""
        section = agent.sections.get("permission") or {}
        default = section.get("default")
        if default is not None and default not in _BEHAVIORS:
            raise ConfigError(f"agent {agent.id!r}: permission default {default!r} is not allow, ask or deny")
        rules = []
        for rule in section.get("rules") or ():
            behavior = rule.get("behavior")
            if behavior not in _BEHAVIORS:
                raise ConfigError(f"agent {agent.id!r}: permission behavior {behavior!r} is not allow, ask or deny")
            rules.append(PermissionRule(pattern=ToolPattern.parse(str(rule.get("tool", ""))), behavior=behavior))
        return PermissionPolicy(rules=tuple(rules), default=default)

    def with_grants(self, grants: Iterable[PermissionGrant]) -> PermissionPolicy:
        remembered = (
            PermissionRule(pattern=ToolPattern.parse(g.tool, g.pattern), behavior=g.behavior, remembered=True)
            for g in grants
        )
        return replace(self, rules=(*self.rules, *remembered))

    def always_denies(self, tool: str) -> bool:
        """Whether a rule denies ``tool`` whatever its arguments (such tools are not offered to the model)."""
        return any(
            r.behavior == "deny" and r.pattern.argument is None and r.pattern.matches_tool(tool) for r in self.rules
        )

    def decide(
        self, tool: str, args: Any, descriptor: ToolDescriptor | None, mode: PermissionMode = "default"
    ) -> PermissionDecision:
        """Judge one call (see the module docstring); ``plan`` mode's refusal of writing tools is the gate's."""
        read_only = descriptor is not None and descriptor.read_only and "mcp_server" not in descriptor.metadata
        fallback: Behavior = self.default or ("allow" if read_only else "ask")
        schema = descriptor.parameters if descriptor is not None else None
        decision = max(
            (self._decide_one(tool, value, fallback) for value in argument_values(tool, args, schema)),
            key=lambda d: _RESTRICTIVENESS[d.behavior],
        )
        lifted = mode == "bypass" or (mode == "accept_edits" and descriptor is not None and descriptor.kind == "edit")
        if decision.behavior == "ask" and lifted:
            return PermissionDecision(behavior="allow")
        return decision

    def _decide_one(self, tool: str, value: str | None, fallback: Behavior) -> PermissionDecision:
        matching = [r for r in self.rules if r.pattern.matches(tool, value)]
        if not matching:
            return PermissionDecision(behavior=fallback)
        best = max(matching, key=lambda r: (_PRECEDENCE[r.behavior], not r.remembered, r.pattern.specificity))
        return PermissionDecision(behavior=best.behavior, rule=best)


def permission_mode(ctx: PhaseContext) -> PermissionMode:
    mode = ctx.env.mode.value or "default"
    if mode not in _MODES:
        raise ConfigError(f"unknown permission mode {mode!r}; expected one of {', '.join(_MODES)}")
    return cast(PermissionMode, mode)


def workspace_key(cwd: str | None) -> str:
    """The workspace grants are remembered for: the normalised absolute ``cwd``, or :data:`GLOBAL_WORKSPACE`."""
    return os.path.normpath(os.path.abspath(cwd)) if cwd else GLOBAL_WORKSPACE


def remembered_scopes(tool: str, args: Any) -> list[tuple[str, str | None]]:
    """What an "always" answer to a call remembers, as ``(tool, argument pattern)`` pairs.

    The whole tool, except ``run_command``: each program of the command line (``git *``, matching ``git`` and
    ``git <anything>``). A segment starting with a variable assignment is remembered verbatim, never as
    ``FOO=1 *``. A ``run_command`` call without a command remembers nothing.
    """
    if tool != "run_command":
        return [(tool, None)]
    command = args.get(COMMAND_ARGUMENT) if isinstance(args, Mapping) else None
    if not isinstance(command, str) or not command.strip():
        return []
    patterns = []
    for segment in command_segments(command):
        program = segment.split(maxsplit=1)[0]
        patterns.append(glob.escape(segment) if "=" in program else f"{glob.escape(program)} *")
    return [(tool, p) for p in dict.fromkeys(patterns)]


def _grant_id(workspace: str, tool: str, pattern: str | None, behavior: str) -> str:
    """Derived from the grant's scope, so a repeated or re-delivered answer replaces its grant instead of adding one."""
    digest = hashlib.sha256(json.dumps([workspace, tool, pattern, behavior]).encode()).hexdigest()
    return f"grant_{digest[:32]}"


def _ticket(call_id: str, tool: str, args: Any) -> SuspendTicket:
    return SuspendTicket(
        suspension=Suspension(
            id=f"perm_{call_id}",
            action=PERMISSION_ACTION,
            message=f"Permission required for tool '{tool}'",
            parameters=args,
        ),
        pending=PendingToolCall(id=f"perm_{call_id}", name="permission_confirm", arguments=args),
        resume_mode="replay_tool_call",
    )


class PermissionPlugin(Plugin):
    """Rules, modes and remembered answers for every tool call (see the module docstring).

    ``remember_for_s`` bounds how long an "always" answer lasts (``None``: until deleted).
    """

    name = "permission"
    always_active = True  # the runtime's own: every agent, listed or not

    def __init__(self, store: PermissionStore, *, remember_for_s: float | None = None) -> None:
        self.store = store
        self.remember_for_s = remember_for_s

    def register(self, registrar: PluginRegistrar) -> None:
        registrar.tool_gate(self.gate)
        registrar.request_transform(self.offer)

    async def gate(self, ctx: PhaseContext) -> GateDecision | None:
        name = ctx.tool_name or ""
        if ctx.resume_input is not None:
            return None  # replayed after a person approved it (the loop replays only "resume" decisions)
        descriptor: ToolDescriptor | None = ctx.tool_descriptor
        mode = permission_mode(ctx)
        if mode == "plan" and not (descriptor is not None and descriptor.read_only):
            message = f"Tool '{name}' is not available in plan mode: only read-only tools run until plan mode ends."
            return SetResult(result=ToolResult.error(name, message))
        decision = await self.decide(
            name, ctx.tool_args, descriptor=descriptor, cwd=ctx.env.cwd, agent=ctx.agent, mode=mode
        )
        if decision.behavior == "deny":
            return Block(reason=f"Tool '{name}' denied by permission rules")
        if decision.behavior == "ask":
            return Suspend(ticket=_ticket(ctx.tool_call_id or "", name, ctx.tool_args))
        return None

    async def decide(
        self,
        name: str,
        args: Any,
        descriptor: ToolDescriptor | None,
        cwd: str | None,
        agent: AgentSpec | None = None,
        mode: PermissionMode = "default",
    ) -> PermissionDecision:
        """Judge one call by ``agent``'s rules (none: the default, read-only tools run and everything else asks)
        and the answers remembered for the workspace ``cwd``: the gate's judgement, also for calls made outside
        any run (an MCP client's direct call)."""
        grants = await self.store.list_grants(workspace_key(cwd))
        policy = PermissionPolicy.from_agent(agent) if agent is not None else PermissionPolicy()
        decision = policy.with_grants(grants).decide(name, args, descriptor, mode)
        log.debug("permission for %s: %s (%s)", name, decision.behavior, decision.rule)
        return decision

    def offer(self, request: InferenceRequest, ctx: PhaseContext) -> InferenceRequest:
        """The request without the tools the model may not call: always-denied ones, and in plan mode writers."""
        policy = PermissionPolicy.from_agent(ctx.agent)
        plan = permission_mode(ctx) == "plan"

        def offered(name: str) -> bool:
            if policy.always_denies(name):
                return False
            descriptor = ctx.offered_tools.get(name)
            return not plan or (descriptor is not None and descriptor.read_only)

        tools = [t for t in request.tools if offered(t["name"])]
        return request if len(tools) == len(request.tools) else replace(request, tools=tools)

    async def on_decision(self, ctx: PhaseContext, decision: ToolCallResume) -> None:
        if ctx.tool_name is not None:
            await self.remember(ctx.tool_name, ctx.tool_args, ctx.env.cwd, decision)

    async def remember(self, name: str, args: Any, cwd: str | None, decision: ToolCallResume) -> None:
        """Remember an ``allow_always`` / ``reject_always`` answer to a call of ``name`` for the workspace ``cwd``;
        ``*_once`` answers are not remembered."""
        policy = decision.result.get("policy") if isinstance(decision.result, dict) else None
        behavior = _ALWAYS.get(policy) if isinstance(policy, str) else None
        if behavior is None:
            return
        workspace = workspace_key(cwd)
        expires_at = None if self.remember_for_s is None else now_ms() + int(self.remember_for_s * 1000)
        for tool, pattern in remembered_scopes(name, args):
            grant_id = _grant_id(workspace, tool, pattern, behavior)
            await self.store.add_grant(
                PermissionGrant(
                    grant_id=grant_id,
                    workspace=workspace,
                    tool=tool,
                    behavior=behavior,
                    pattern=pattern,
                    expires_at=expires_at,
                )
            )
