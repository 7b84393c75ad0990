"""The phase engine: runs a phase's hooks on one snapshot and commits what they return.

Hooks of one phase run concurrently and never see each other's writes. When two hooks write the same exclusive
key, the later hook (registration order) is deferred and re-run alone on the snapshot that includes the earlier
hook's commit, so its decision is made on current state rather than silently overwritten. Scheduled actions run in
the phase they belong to, round after round, until none remain (at most 16 rounds).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio

from awaken_stdio.contract.errors import PhaseRunLoopExceeded, UnknownEffectHandler, UnknownScheduledActionHandler
from awaken_stdio.contract.state import ScheduledAction, StateCommand
from awaken_stdio.runtime.plugins import EffectHandler, Phase, PhaseContext, PhaseHook, ScheduledActionHandler
from awaken_stdio.runtime.state_store import StateStore

__all__ = ["MAX_ACTION_ROUNDS", "PhaseEngine"]

log = logging.getLogger(__name__)
MAX_ACTION_ROUNDS = 16


@dataclass(slots=True, kw_only=True)
class _QueuedAction:
    id: int
    action: ScheduledAction


@dataclass(slots=True, kw_only=True)
class PhaseEngine:
    store: StateStore
    hooks: dict[Phase, list[tuple[str, PhaseHook]]] = field(default_factory=dict)
    actions: dict[str, tuple[Phase, ScheduledActionHandler]] = field(default_factory=dict)
    effects: dict[str, EffectHandler] = field(default_factory=dict)
    pending: list[_QueuedAction] = field(default_factory=list)
    failed_actions: list[tuple[ScheduledAction, str]] = field(default_factory=list)
    effect_failures: int = 0
    _next_action_id: int = 0

    def hooks_for(self, phase: Phase) -> Sequence[tuple[str, PhaseHook]]:
        """The phase's hooks, not copied (a phase runs about six times a step): an agent's hook lists never change,
        a handoff replaces the whole table."""
        return self.hooks.get(phase, ())

    def idle(self, phase: Phase) -> bool:
        """Whether running ``phase`` would do nothing (no hook of it, no action queued): the caller then builds no
        context for it either. Most phases of most agents have no hook, and a step runs about six."""
        return not self.pending and not self.hooks.get(phase)

    def hooked(self, phase: Phase) -> bool:
        """Whether ``collect_commands(phase)`` would run a hook, i.e. return anything but an empty command."""
        return bool(self.hooks.get(phase))

    # -- submitting commands ------------------------------------------------------------------------------------

    def validate(self, cmd: StateCommand) -> None:
        """Reject actions and effects nobody handles before anything is committed."""
        for action in cmd.scheduled_actions:
            if action.name not in self.actions:
                raise UnknownScheduledActionHandler(action.name)
        for effect in cmd.effects:
            if effect.name not in self.effects:
                raise UnknownEffectHandler(effect.name)

    async def submit(self, cmd: StateCommand) -> int:
        """Commit the patch, queue its actions, then dispatch its effects with the post-commit snapshot."""
        if cmd.scheduled_actions or cmd.effects:  # most commands have neither: nothing to check
            self.validate(cmd)
        revision = self.store.commit(cmd.patch)
        for action in cmd.scheduled_actions:
            self._next_action_id += 1
            self.pending.append(_QueuedAction(id=self._next_action_id, action=action))
        if cmd.effects:
            snapshot = self.store.snapshot()
            for effect in cmd.effects:
                try:
                    await self.effects[effect.name](effect.payload, snapshot)
                except Exception:
                    self.effect_failures += 1
                    log.exception("effect handler %s failed", effect.name)
        return revision

    def drop_pending(self) -> None:
        """The run reached a terminal state: queued actions will never run."""
        self.pending.clear()

    # -- running phases -----------------------------------------------------------------------------------------

    def _fresh_ctx(self, make_ctx: Callable[[], PhaseContext]) -> PhaseContext:
        """A context on the store's current snapshot, whatever snapshot the factory would hand out."""
        ctx = make_ctx()
        ctx.snapshot = self.store.snapshot()
        return ctx

    async def _gather(
        self, hooks: Sequence[tuple[str, PhaseHook]], make_ctx: Callable[[], PhaseContext]
    ) -> list[tuple[int, StateCommand]]:
        """Run the hooks concurrently on one snapshot: ``(registration index, command)`` for each that returned one.

        A failing hook's own exception is raised (the first in registration order), not an exception group.
        """
        snapshot = self.store.snapshot()
        if len(hooks) == 1:  # the common case: no task group (it costs more than most hooks)
            ctx = make_ctx()
            ctx.snapshot = snapshot
            cmd = await hooks[0][1](ctx)
            return [(0, cmd)] if isinstance(cmd, StateCommand) else []
        results: list[StateCommand | Exception | None] = [None] * len(hooks)

        async def one(i: int, hook: PhaseHook) -> None:
            ctx = make_ctx()
            ctx.snapshot = snapshot
            try:
                results[i] = await hook(ctx)
            except Exception as exc:
                results[i] = exc

        async with anyio.create_task_group() as tg:
            for i, (_, hook) in enumerate(hooks):
                tg.start_soon(one, i, hook)
        for result in results:
            if isinstance(result, Exception):
                raise result
        return [(i, r) for i, r in enumerate(results) if isinstance(r, StateCommand)]

    async def collect_commands(self, phase: Phase, make_ctx: Callable[[], PhaseContext]) -> StateCommand:
        """Gather the hooks' commands merged strictly: an exclusive overlap is an error here."""
        hooks = self.hooks_for(phase)
        if not hooks:
            return StateCommand()
        return self.store.merge_all_commands(cmd for _, cmd in await self._gather(hooks, make_ctx))

    async def run_phase(self, phase: Phase, make_ctx: Callable[[], PhaseContext]) -> None:
        """Run the phase's hooks (with the exclusive-conflict fallback), then its scheduled actions."""
        hooks = self.hooks_for(phase)
        if hooks:
            await self._run_hooks(hooks, make_ctx)
        if self.pending:
            await self.run_actions(phase, make_ctx)

    async def _run_hooks(self, hooks: Sequence[tuple[str, PhaseHook]], make_ctx: Callable[[], PhaseContext]) -> None:
        batch = StateCommand()
        claimed: set[str] = set()
        deferred: list[int] = []
        for i, cmd in await self._gather(hooks, make_ctx):
            exclusive = {k.key for _, k, _ in cmd.patch.ops if self.store.strategy(k.key) == "exclusive"}
            if exclusive & claimed:
                deferred.append(i)
                continue
            claimed |= exclusive
            batch.extend(cmd)  # commutative overlaps simply concatenate
        await self.submit(batch)
        for i in deferred:  # re-run on the state that includes the earlier writers' commit
            cmd = await hooks[i][1](self._fresh_ctx(make_ctx))
            if cmd is not None:
                await self.submit(cmd)

    async def run_actions(self, phase: Phase, make_ctx: Callable[[], PhaseContext]) -> None:
        """Run the phase's due scheduled actions, round after round (phases whose hooks are gathered separately)."""
        rounds = 0
        while True:
            due = [q for q in self.pending if self.actions[q.action.name][0] == phase]
            if not due:
                return
            rounds += 1
            if rounds > MAX_ACTION_ROUNDS:
                raise PhaseRunLoopExceeded(phase.value, MAX_ACTION_ROUNDS)
            due_ids = {q.id for q in due}
            self.pending = [q for q in self.pending if q.id not in due_ids]
            for q in sorted(due, key=lambda q: q.id):
                await self._run_action(q.action, make_ctx)

    async def _run_action(self, action: ScheduledAction, make_ctx: Callable[[], PhaseContext]) -> None:
        """Run one action and submit its command; any failure dead-letters the action instead of ending the phase."""
        try:
            cmd = await self.actions[action.name][1](self._fresh_ctx(make_ctx), action.payload)
        except Exception as exc:
            log.exception("scheduled action %s failed", action.name)
            self.failed_actions.append((action, str(exc)))
            return
        if cmd is None:
            return
        try:
            await self.submit(cmd)
        except Exception as exc:
            log.warning("scheduled action %s returned a command that cannot be submitted: %s", action.name, exc)
            self.failed_actions.append((action, f"failed to submit action command: {exc}"))


def index_hooks(hooks: list[tuple[str, Phase, PhaseHook]]) -> dict[Phase, list[tuple[str, PhaseHook]]]:
    out: dict[Phase, list[tuple[str, PhaseHook]]] = {}
    for plugin_id, phase, hook in hooks:
        out.setdefault(phase, []).append((plugin_id, hook))
    return out


__all__ += ["index_hooks"]
