"""PhaseEngine: hook convergence, strict gathering, scheduled actions and effects; PluginRegistrar duplicates."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.errors import (
    EffectHandlerAlreadyRegistered,
    HandlerAlreadyRegistered,
    KeyAlreadyRegistered,
    ParallelMergeConflict,
    PhaseRunLoopExceeded,
    ToolAlreadyRegistered,
    UnknownEffectHandler,
    UnknownKey,
    UnknownScheduledActionHandler,
)
from awaken_stdio.contract.profile import ProfileKey
from awaken_stdio.contract.state import MutationBatch, Snapshot, StateCommand, StateKey
from awaken_stdio.runtime.phases import MAX_ACTION_ROUNDS, PhaseEngine, index_hooks
from awaken_stdio.runtime.plugins import Phase, PhaseContext, PhaseHook, Plugin, PluginRegistrar
from awaken_stdio.runtime.state_store import StateStore
from awaken_stdio.tools.function import tool

MODE: StateKey[str, str] = StateKey("phase.mode", default="")
OTHER: StateKey[str, str] = StateKey("phase.other", default="")
TALLY: StateKey[int, int] = StateKey("phase.tally", default=0, apply=operator.add, merge="commutative")
BEFORE = Phase.BEFORE_INFERENCE


def make_engine(registrar: PluginRegistrar | None = None) -> PhaseEngine:
    registrar = registrar or PluginRegistrar()
    store = StateStore()
    store.install_plugin("phase-test", [MODE, OTHER, TALLY])
    return PhaseEngine(
        store=store,
        hooks=index_hooks(registrar.hooks),
        actions=dict(registrar.actions),
        effects=dict(registrar.effects),
    )


def ctx_factory(
    engine: PhaseEngine, phase: Phase = BEFORE, snapshot: Snapshot | None = None
) -> Callable[[], PhaseContext]:
    """A context factory; with ``snapshot`` it always hands out that (stale) snapshot."""
    return lambda: PhaseContext(
        phase=phase,
        snapshot=snapshot or engine.store.snapshot(),
        thread_id="thread",
        run_id="run",
        agent=AgentSpec(id="agent"),
        messages=[],
    )


def hooked(*hooks: tuple[str, PhaseHook], phase: Phase = BEFORE) -> PhaseEngine:
    registrar = PluginRegistrar()
    for plugin_id, hook in hooks:
        registrar.plugin_id = plugin_id
        registrar.phase_hook(phase, hook)
    return make_engine(registrar)


def writer(
    key: StateKey[Any, Any], update: Any, seen: list[Any] | None = None, reads: StateKey[Any, Any] | None = None
) -> PhaseHook:
    """A hook that records what ``reads`` (default: ``key``) held in its snapshot, yields, then writes ``update``."""

    async def hook(ctx: PhaseContext) -> StateCommand:
        if seen is not None:
            seen.append(ctx.state(reads or key))
        await anyio.sleep(0)
        return StateCommand().update(key, update)

    return hook


def appender(seen: list[str]) -> PhaseHook:
    """Writes MODE = (what it read) + "B": meaningful only on current state."""

    async def hook(ctx: PhaseContext) -> StateCommand:
        seen.append(ctx.state(MODE))
        return StateCommand().update(MODE, ctx.state(MODE) + "B")

    return hook


# -- hook convergence --------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sibling_hooks_read_the_same_current_snapshot() -> None:
    seen: list[str] = []
    engine = hooked(
        ("a", writer(MODE, "from-a")),
        ("b", writer(OTHER, "from-b", seen, reads=MODE)),
        ("c", writer(TALLY, 1, seen, reads=OTHER)),
    )
    stale = ctx_factory(engine, snapshot=engine.store.snapshot())
    engine.store.commit(MutationBatch().update(OTHER, "initial"))
    await engine.run_phase(BEFORE, stale)
    assert seen == ["", "initial"]  # neither a sibling's write nor the factory's stale snapshot
    snapshot = engine.store.snapshot()
    assert (snapshot.get(MODE), snapshot.get(OTHER), snapshot.get(TALLY)) == ("from-a", "from-b", 1)


@pytest.mark.anyio
async def test_non_conflicting_hooks_commit_once() -> None:
    engine = hooked(("a", writer(MODE, "x")), ("b", writer(OTHER, "y")))
    commits: list[int] = []
    engine.store.add_commit_hook(lambda e: commits.append(e.op_count))
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert commits == [2]


@pytest.mark.anyio
async def test_commutative_overlap_does_not_trigger_the_fallback() -> None:
    calls: list[int] = []
    engine = hooked(("a", writer(TALLY, 3, calls)), ("b", writer(TALLY, 4, calls)))
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert calls == [0, 0]  # each hook ran once
    assert (engine.store.revision, engine.store.snapshot().get(TALLY)) == (1, 7)


@pytest.mark.anyio
async def test_exclusive_conflict_reruns_the_later_hook_on_a_fresh_snapshot() -> None:
    seen: list[str] = []
    engine = hooked(("a", writer(MODE, "A")), ("b", appender(seen)), ("c", writer(OTHER, "C")))
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert seen == ["", "A"]  # first on the shared snapshot, then again after "a" committed
    assert engine.store.snapshot().get(MODE) == "AB"
    assert engine.store.snapshot().get(OTHER) == "C"  # non-conflicting "c" joined the first commit
    assert engine.store.revision == 2


@pytest.mark.anyio
async def test_deferred_hook_sees_the_store_even_when_the_factory_is_stale() -> None:
    seen: list[str] = []
    engine = hooked(("a", writer(MODE, "A")), ("b", appender(seen)))
    await engine.run_phase(BEFORE, ctx_factory(engine, snapshot=engine.store.snapshot()))
    assert seen == ["", "A"]
    assert engine.store.snapshot().get(MODE) == "AB"


@pytest.mark.anyio
async def test_collect_commands_gathers_on_one_snapshot_without_committing() -> None:
    seen: list[int] = []
    engine = hooked(("a", writer(TALLY, 1, seen)), ("b", writer(TALLY, 2, seen)), ("c", writer(MODE, "m")))
    merged = await engine.collect_commands(BEFORE, ctx_factory(engine))
    assert seen == [0, 0]
    assert merged.patch.touched_keys == ["phase.tally", "phase.tally", "phase.mode"]
    assert engine.store.revision == 0


@pytest.mark.anyio
async def test_collect_commands_fails_on_exclusive_conflict() -> None:
    engine = hooked(("a", writer(MODE, "A")), ("b", writer(MODE, "B")))
    with pytest.raises(ParallelMergeConflict, match=r'"phase\.mode"'):
        await engine.collect_commands(BEFORE, ctx_factory(engine))
    assert engine.store.revision == 0


@pytest.mark.anyio
async def test_hooks_of_other_phases_do_not_run() -> None:
    engine = hooked(("a", writer(MODE, "A")), phase=Phase.AFTER_INFERENCE)
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert engine.store.revision == 0


@pytest.mark.anyio
@pytest.mark.parametrize("siblings", [0, 1], ids=["alone", "with-a-sibling"])
async def test_a_failing_hook_raises_its_own_error(siblings: int) -> None:
    async def broken(_ctx: PhaseContext) -> StateCommand:
        return StateCommand().update(StateKey("phase.unregistered"), 1)

    engine = hooked(*[("ok", writer(OTHER, "x"))] * siblings, ("broken", broken))
    with pytest.raises(UnknownKey, match=r"phase\.unregistered"):
        await engine.run_phase(BEFORE, ctx_factory(engine))

    async def raising(_ctx: PhaseContext) -> StateCommand:
        raise RuntimeError("hook failed")

    engine = hooked(*[("ok", writer(OTHER, "x"))] * siblings, ("raising", raising))
    for run in (engine.run_phase, engine.collect_commands):
        with pytest.raises(RuntimeError, match="hook failed"):
            await run(BEFORE, ctx_factory(engine))


# -- scheduled actions -------------------------------------------------------------------------------------------


def with_actions(**handlers: tuple[Phase, Any]) -> PhaseEngine:
    registrar = PluginRegistrar()
    for name, (phase, handler) in handlers.items():
        registrar.scheduled_action(name, phase, handler)
    return make_engine(registrar)


def counting(calls: list[Any], then: Callable[[Any], StateCommand | None] = lambda _p: None) -> Any:
    async def handler(_ctx: PhaseContext, payload: Any) -> StateCommand | None:
        calls.append(payload)
        return then(payload)

    return handler


@pytest.mark.anyio
async def test_scheduled_action_without_handler_is_rejected_at_submit() -> None:
    engine = make_engine()
    with pytest.raises(UnknownScheduledActionHandler, match=r"^no handler registered for scheduled action: nope$"):
        await engine.submit(StateCommand().update(MODE, "x").schedule("nope"))
    assert (engine.store.revision, engine.pending) == (0, [])


@pytest.mark.anyio
async def test_actions_run_in_their_phase_in_submission_order() -> None:
    calls: list[Any] = []
    engine = with_actions(later=(Phase.AFTER_INFERENCE, counting(calls)), now=(BEFORE, counting(calls)))
    await engine.submit(StateCommand().schedule("now", 1).schedule("later", 2).schedule("now", 3))
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert calls == [1, 3]
    assert [q.action.name for q in engine.pending] == ["later"]  # skipped, still queued
    await engine.run_phase(Phase.AFTER_INFERENCE, ctx_factory(engine, Phase.AFTER_INFERENCE))
    assert (calls, engine.pending) == ([1, 3, 2], [])


@pytest.mark.anyio
async def test_action_ids_increase_monotonically() -> None:
    engine = with_actions(now=(BEFORE, counting([])))
    await engine.submit(StateCommand().schedule("now").schedule("now"))
    await engine.submit(StateCommand().schedule("now"))
    assert [q.id for q in engine.pending] == [1, 2, 3]


@pytest.mark.anyio
async def test_action_handler_sees_the_hooks_commit() -> None:
    seen: list[str] = []

    async def reader(ctx: PhaseContext, _payload: Any) -> None:
        seen.append(ctx.state(MODE))

    registrar = PluginRegistrar()
    registrar.phase_hook(BEFORE, writer(MODE, "written"))
    registrar.scheduled_action("read", BEFORE, reader)
    engine = make_engine(registrar)
    await engine.submit(StateCommand().schedule("read"))
    await engine.run_phase(BEFORE, ctx_factory(engine, snapshot=engine.store.snapshot()))
    assert seen == ["written"]


@pytest.mark.anyio
async def test_cascade_of_exactly_max_rounds_converges() -> None:
    calls: list[Any] = []
    engine = with_actions(
        step=(
            BEFORE,
            counting(calls, lambda n: StateCommand().schedule("step", n + 1) if n < MAX_ACTION_ROUNDS else None),
        )
    )
    await engine.submit(StateCommand().schedule("step", 1))
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert calls == list(range(1, MAX_ACTION_ROUNDS + 1))
    assert engine.pending == []


@pytest.mark.anyio
async def test_endless_cascade_stops_with_phase_run_loop_exceeded() -> None:
    calls: list[Any] = []
    engine = with_actions(again=(BEFORE, counting(calls, lambda _p: StateCommand().schedule("again"))))
    await engine.submit(StateCommand().schedule("again"))
    with pytest.raises(PhaseRunLoopExceeded) as err:
        await engine.run_phase(BEFORE, ctx_factory(engine))
    assert (err.value.phase, err.value.rounds) == ("before_inference", 16)
    assert str(err.value) == "phase before_inference exceeded 16 scheduled-action rounds"
    assert len(calls) == MAX_ACTION_ROUNDS == 16


@pytest.mark.anyio
async def test_failing_actions_are_dead_lettered_and_the_round_goes_on() -> None:
    calls: list[Any] = []

    async def boom(_ctx: PhaseContext, _payload: Any) -> None:
        raise RuntimeError("boom")

    engine = with_actions(
        boom=(BEFORE, boom),
        bad_command=(BEFORE, counting([], lambda _p: StateCommand().update(StateKey("phase.unregistered"), 1))),
        ok=(BEFORE, counting(calls, lambda _p: StateCommand().update(TALLY, 1))),
    )
    await engine.submit(StateCommand().schedule("boom", "p").schedule("bad_command").schedule("ok", "after"))
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert calls == ["after"]
    assert engine.store.snapshot().get(TALLY) == 1
    assert [(a.name, a.payload, error) for a, error in engine.failed_actions] == [
        ("boom", "p", "boom"),
        ("bad_command", None, "failed to submit action command: unknown state key: phase.unregistered"),
    ]
    assert engine.pending == []


@pytest.mark.anyio
async def test_drop_pending_forgets_queued_actions() -> None:
    calls: list[Any] = []
    engine = with_actions(now=(BEFORE, counting(calls)))
    await engine.submit(StateCommand().schedule("now"))
    engine.drop_pending()
    await engine.run_phase(BEFORE, ctx_factory(engine))
    assert calls == []


# -- effects -----------------------------------------------------------------------------------------------------


def with_effects(**handlers: Any) -> PhaseEngine:
    registrar = PluginRegistrar()
    for name, handler in handlers.items():
        registrar.effect(name, handler)
    return make_engine(registrar)


@pytest.mark.anyio
async def test_effects_run_in_order_after_the_commit_and_failures_are_isolated() -> None:
    seen: list[tuple[Any, str, int]] = []

    async def record(payload: Any, snapshot: Snapshot) -> None:
        seen.append((payload, snapshot.get(MODE), snapshot.revision))

    async def fail(_payload: Any, _snapshot: Snapshot) -> None:
        raise RuntimeError("effect failed")

    engine = with_effects(record=record, fail=fail)
    cmd = StateCommand().update(MODE, "committed").effect("record", 1).effect("fail").effect("record", 2)
    assert await engine.submit(cmd) == 1
    assert seen == [(1, "committed", 1), (2, "committed", 1)]
    assert engine.effect_failures == 1


@pytest.mark.anyio
async def test_unknown_effect_is_rejected_at_submit() -> None:
    engine = make_engine()
    with pytest.raises(UnknownEffectHandler, match=r"^no handler registered for effect: nope$"):
        await engine.submit(StateCommand().update(MODE, "x").effect("nope"))
    assert engine.store.revision == 0


# -- registrar ---------------------------------------------------------------------------------------------------


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


async def noop_action(_ctx: PhaseContext, _payload: Any) -> None:
    return None


async def noop_effect(_payload: Any, _snapshot: Snapshot) -> None:
    return None


@pytest.mark.parametrize(
    ("register", "error", "message"),
    [
        (
            lambda r: r.register_key(StateKey("dup")),
            KeyAlreadyRegistered,
            "key already registered: dup (plugins 'first' and 'second' both register it)",
        ),
        (
            lambda r: r.register_profile_key(ProfileKey("locale")),
            KeyAlreadyRegistered,
            "key already registered: locale (plugins 'first' and 'second' both register it)",
        ),
        (lambda r: r.register_tool(echo), ToolAlreadyRegistered, "tool already registered: echo"),
        (
            lambda r: r.scheduled_action("act", BEFORE, noop_action),
            HandlerAlreadyRegistered,
            "scheduled action handler already registered: act",
        ),
        (
            lambda r: r.effect("eff", noop_effect),
            EffectHandlerAlreadyRegistered,
            "effect handler already registered: eff",
        ),
    ],
    ids=["state-key", "profile-key", "tool", "scheduled-action", "effect"],
)
def test_registrar_rejects_duplicates_across_plugins(
    register: Callable[[PluginRegistrar], None], error: type[Exception], message: str
) -> None:
    class Registers(Plugin):
        def register(self, registrar: PluginRegistrar) -> None:
            register(registrar)

    first, second = Registers(), Registers()
    first.name, second.name = "first", "second"
    registrar = PluginRegistrar()
    registrar.install(first)
    with pytest.raises(error) as err:
        registrar.install(second)
    assert str(err.value) == message
    assert registrar.plugin_id == ""


def test_registrar_records_which_plugin_owns_what() -> None:
    class Owner(Plugin):
        name = "owner"

        def register(self, registrar: PluginRegistrar) -> None:
            registrar.register_key(MODE)
            registrar.phase_hook(BEFORE, writer(MODE, "x"))

    registrar = PluginRegistrar()
    registrar.install(Owner())
    assert registrar.key_owner == {"phase.mode": "owner"}
    assert [(plugin_id, phase) for plugin_id, phase, _ in registrar.hooks] == [("owner", BEFORE)]
