"""The runtime-owned keys: run lifecycle and tool-call states, with their status machines."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from awaken_stdio.contract.lifecycle import run_transition_allowed, tool_call_transition_allowed
from awaken_stdio.contract.state import MutationBatch, StateKey
from awaken_stdio.runtime.runtime_keys import (
    RUN_LIFECYCLE,
    TOOL_CALL_STATES,
    LifecycleUpdate,
    RunLifecycle,
    ToolCallState,
    ToolCallStatesUpdate,
)
from awaken_stdio.runtime.state_store import StateStore

RUN_STATUSES = ["created", "running", "waiting", "done"]
TOOL_STATUSES = ["new", "running", "suspended", "resuming", "succeeded", "failed", "cancelled"]
LEGAL_RUN = {
    ("created", "running"),
    ("created", "done"),
    ("running", "waiting"),
    ("running", "done"),
    ("waiting", "running"),
    ("waiting", "done"),
}
LEGAL_TOOL = (
    {("new", t) for t in TOOL_STATUSES}
    | {("running", t) for t in ("suspended", "succeeded", "failed", "cancelled")}
    | {("suspended", t) for t in ("resuming", "cancelled")}
    | {("resuming", t) for t in ("running", "suspended", "succeeded", "failed", "cancelled")}
)


@pytest.fixture
def store() -> StateStore:
    store = StateStore()
    store.install_plugin("__runtime", [RUN_LIFECYCLE, TOOL_CALL_STATES])
    return store


def apply(store: StateStore, key: StateKey[Any, Any], *updates: Any) -> Any:
    batch = MutationBatch()
    for update in updates:
        batch.update(key, update)
    store.commit(batch)
    return store.snapshot().get(key)


def call(status: str, call_id: str = "c1", **fields: Any) -> ToolCallState:
    return ToolCallState(call_id=call_id, tool_name="search", arguments={"q": "x"}, status=status, **fields)  # type: ignore[arg-type]


# -- status machines ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("current", RUN_STATUSES)
@pytest.mark.parametrize("target", RUN_STATUSES)
def test_run_status_machine(current: str, target: str) -> None:
    assert run_transition_allowed(current, target) == (current == target or (current, target) in LEGAL_RUN)


@pytest.mark.parametrize("current", TOOL_STATUSES)
@pytest.mark.parametrize("target", TOOL_STATUSES)
def test_tool_call_status_machine(current: str, target: str) -> None:
    expected = current == target or (current, target) in LEGAL_TOOL
    assert tool_call_transition_allowed(current, target) == expected


# -- __runtime.run_lifecycle -------------------------------------------------------------------------------------


def test_run_lifecycle_key_options() -> None:
    assert (RUN_LIFECYCLE.key, RUN_LIFECYCLE.scope, RUN_LIFECYCLE.merge) == (
        "__runtime.run_lifecycle",
        "run",
        "exclusive",
    )
    assert RUN_LIFECYCLE.persistent


def test_start_counts_steps_and_finishes(store: StateStore) -> None:
    value = apply(store, RUN_LIFECYCLE, LifecycleUpdate.start("run-1"))
    assert (value.run_id, value.status, value.step_count) == ("run-1", "running", 0)
    assert value.updated_at > 1_600_000_000_000  # milliseconds
    value = apply(store, RUN_LIFECYCLE, LifecycleUpdate.step_completed(), LifecycleUpdate.step_completed())
    assert value.step_count == 2
    value = apply(store, RUN_LIFECYCLE, LifecycleUpdate.done("natural"))
    assert (value.status, value.status_reason, value.step_count) == ("done", "natural", 2)


def test_waiting_then_running_again(store: StateStore) -> None:
    apply(store, RUN_LIFECYCLE, LifecycleUpdate.start("run-1"))
    value = apply(store, RUN_LIFECYCLE, LifecycleUpdate.set_waiting("suspended"))
    assert (value.status, value.status_reason) == ("waiting", "suspended")
    value = apply(store, RUN_LIFECYCLE, LifecycleUpdate.set_running())
    assert (value.status, value.status_reason) == ("running", None)


@pytest.mark.parametrize(
    "illegal",
    [
        pytest.param(LifecycleUpdate.set_running(), id="done-to-running"),
        pytest.param(LifecycleUpdate.set_waiting("suspended"), id="done-to-waiting"),
    ],
)
def test_illegal_lifecycle_transition_is_logged_and_ignored(
    store: StateStore, illegal: LifecycleUpdate, caplog: pytest.LogCaptureFixture
) -> None:
    apply(store, RUN_LIFECYCLE, LifecycleUpdate.start("run-1"), LifecycleUpdate.done("cancelled"))
    before = store.snapshot().get(RUN_LIFECYCLE)
    with caplog.at_level(logging.WARNING, logger="awaken_stdio.runtime.runtime_keys"):
        assert apply(store, RUN_LIFECYCLE, illegal) == before
    assert "illegal run lifecycle transition done ->" in caplog.text


def test_created_run_cannot_wait(store: StateStore) -> None:
    assert apply(store, RUN_LIFECYCLE, LifecycleUpdate.set_waiting("x")).status == "created"


def test_lifecycle_round_trips_through_persistence(store: StateStore) -> None:
    apply(store, RUN_LIFECYCLE, LifecycleUpdate.start("run-1"), LifecycleUpdate.set_waiting("suspended"))
    exported = store.export_run_scoped()
    assert exported.extensions["__runtime.run_lifecycle"]["status"] == "waiting"
    restored = StateStore()
    restored.register_key(RUN_LIFECYCLE)
    restored.restore_persisted(exported)
    assert restored.snapshot().get(RUN_LIFECYCLE) == store.snapshot().get(RUN_LIFECYCLE)


def test_lifecycle_default_is_created() -> None:
    assert RUN_LIFECYCLE.default() == RunLifecycle()
    assert RunLifecycle().status == "created"


# -- __runtime.tool_call_states ----------------------------------------------------------------------------------


def test_tool_call_states_key_options() -> None:
    assert (TOOL_CALL_STATES.scope, TOOL_CALL_STATES.merge) == ("thread", "commutative")
    assert TOOL_CALL_STATES.persistent


def test_put_tracks_each_call(store: StateStore) -> None:
    states = apply(
        store,
        TOOL_CALL_STATES,
        ToolCallStatesUpdate.put(call("running", "c1")),
        ToolCallStatesUpdate.put(call("running", "c2")),
        ToolCallStatesUpdate.put(call("succeeded", "c1")),
    )
    assert {k: s.status for k, s in states.items()} == {"c1": "succeeded", "c2": "running"}


@pytest.mark.parametrize(
    ("path", "rejected"),
    [
        pytest.param(["running", "suspended"], "running", id="suspended-to-running"),
        pytest.param(["running", "suspended"], "succeeded", id="suspended-to-succeeded"),
        pytest.param(["running", "succeeded"], "running", id="succeeded-to-running"),
        pytest.param(["running", "failed"], "succeeded", id="failed-to-succeeded"),
        pytest.param(["running", "suspended", "cancelled"], "resuming", id="cancelled-to-resuming"),
    ],
)
def test_put_ignores_illegal_transitions(store: StateStore, path: list[str], rejected: str) -> None:
    apply(store, TOOL_CALL_STATES, *(ToolCallStatesUpdate.put(call(s)) for s in path))
    assert apply(store, TOOL_CALL_STATES, ToolCallStatesUpdate.put(call(rejected)))["c1"].status == path[-1]


def test_suspended_call_can_resume(store: StateStore) -> None:
    states = apply(
        store,
        TOOL_CALL_STATES,
        *(ToolCallStatesUpdate.put(call(s)) for s in ("running", "suspended", "resuming", "running", "succeeded")),
    )
    assert states["c1"].status == "succeeded"


def test_clear_empties_the_map(store: StateStore) -> None:
    apply(store, TOOL_CALL_STATES, ToolCallStatesUpdate.put(call("running")))
    assert apply(store, TOOL_CALL_STATES, ToolCallStatesUpdate.clear()) == {}
    assert apply(store, TOOL_CALL_STATES, ToolCallStatesUpdate.put(call("running", "c9"))).keys() == {"c9"}


def test_parallel_puts_merge_commutatively(store: StateStore) -> None:
    left = MutationBatch().update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(call("succeeded", "c1")))
    right = MutationBatch().update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(call("failed", "c2")))
    store.commit(store.merge_parallel(left, right))
    assert {k: s.status for k, s in store.snapshot().get(TOOL_CALL_STATES).items()} == {
        "c1": "succeeded",
        "c2": "failed",
    }


def test_tool_call_states_round_trip_through_thread_persistence(store: StateStore) -> None:
    suspended = call("suspended", suspension_id="perm_c1", suspension_reason="ask", updated_at=5)
    apply(store, TOOL_CALL_STATES, ToolCallStatesUpdate.put(suspended))
    exported = store.export_thread_scoped()
    assert exported.extensions["__runtime.tool_call_states"]["c1"]["suspension_id"] == "perm_c1"
    next_run = StateStore()
    next_run.register_key(TOOL_CALL_STATES)
    next_run.restore_thread_scoped(exported)
    assert next_run.snapshot().get(TOOL_CALL_STATES) == {"c1": suspended}
