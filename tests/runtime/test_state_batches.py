"""MutationBatch / StateCommand composition, parallel merges and the parallel tool-batch validator."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest

from awaken_stdio.contract.errors import MutationBaseRevisionMismatch, ParallelMergeConflict
from awaken_stdio.contract.state import Effect, MergeStrategy, MutationBatch, ScheduledAction, StateCommand, StateKey
from awaken_stdio.runtime.state_store import StateStore, collect_all_touched_keys, validate_parallel_state_batches

EXCLUSIVE: StateKey[str, str] = StateKey("batch.exclusive")
OTHER: StateKey[str, str] = StateKey("batch.other")
COMMUTATIVE: StateKey[int, int] = StateKey("batch.commutative", default=0, apply=operator.add, merge="commutative")
UNREGISTERED_COMM: StateKey[int, int] = StateKey("batch.unregistered", merge="commutative")


def batch(*updates: tuple[StateKey[Any, Any], Any], base: int | None = None) -> MutationBatch:
    out = MutationBatch(base_revision=base)
    for key, update in updates:
        out.update(key, update)
    return out


def ops(b: MutationBatch) -> list[tuple[str, Any]]:
    return [(key.key, update) for _, key, update in b.ops]


@pytest.fixture
def store() -> StateStore:
    store = StateStore()
    store.install_plugin("batches", [EXCLUSIVE, OTHER, COMMUTATIVE])
    return store


# -- extend ------------------------------------------------------------------------------------------------------


def test_extend_with_matching_base_revisions() -> None:
    merged = batch((EXCLUSIVE, "a"), base=1).extend(batch((OTHER, "b"), base=1))
    assert (len(merged), merged.base_revision) == (2, 1)


def test_extend_with_mismatched_base_revisions_fails_and_changes_nothing() -> None:
    left = batch((EXCLUSIVE, "a"), base=1)
    with pytest.raises(MutationBaseRevisionMismatch) as err:
        left.extend(batch((OTHER, "b"), base=2))
    assert (err.value.left, err.value.right) == (1, 2)
    assert str(err.value) == "mutation batches have different base revisions: 1 and 2"
    assert ops(left) == [("batch.exclusive", "a")]


@pytest.mark.parametrize(("left", "right"), [(None, 4), (4, None)])
def test_extend_adopts_a_one_sided_base_revision(left: int | None, right: int | None) -> None:
    assert batch(base=left).extend(batch(base=right)).base_revision == 4


def test_extend_preserves_op_order_and_duplicate_touched_keys() -> None:
    merged = batch((EXCLUSIVE, "1"), (OTHER, "2")).extend(batch((EXCLUSIVE, "3")))
    assert ops(merged) == [("batch.exclusive", "1"), ("batch.other", "2"), ("batch.exclusive", "3")]
    assert merged.touched_keys == ["batch.exclusive", "batch.other", "batch.exclusive"]


# -- merge_parallel ----------------------------------------------------------------------------------------------


def test_merge_parallel_of_disjoint_keys(store: StateStore) -> None:
    merged = store.merge_parallel(batch((EXCLUSIVE, "a")), batch((OTHER, "b")))
    assert ops(merged) == [("batch.exclusive", "a"), ("batch.other", "b")]


def test_merge_parallel_concatenates_commutative_overlap(store: StateStore) -> None:
    merged = store.merge_parallel(batch((COMMUTATIVE, 3)), batch((COMMUTATIVE, 3)))
    assert ops(merged) == [("batch.commutative", 3), ("batch.commutative", 3)]
    store.commit(merged)
    assert store.snapshot().get(COMMUTATIVE) == 6


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param(batch((EXCLUSIVE, "a")), batch((EXCLUSIVE, "b")), id="exclusive-overlap"),
        pytest.param(
            batch((COMMUTATIVE, 1), (EXCLUSIVE, "a")),
            batch((COMMUTATIVE, 2), (EXCLUSIVE, "b")),
            id="one-exclusive-overlap-blocks-the-merge",
        ),
    ],
)
def test_merge_parallel_rejects_exclusive_overlap_and_changes_nothing(
    store: StateStore, left: MutationBatch, right: MutationBatch
) -> None:
    before = ops(left)
    with pytest.raises(ParallelMergeConflict) as err:
        store.merge_parallel(left, right)
    assert err.value.key == "batch.exclusive"
    assert str(err.value) == 'conflicting parallel state modification on exclusive key "batch.exclusive"'
    assert ops(left) == before


def test_merge_parallel_treats_an_unregistered_key_as_exclusive(store: StateStore) -> None:
    with pytest.raises(ParallelMergeConflict, match=r"batch\.unregistered"):
        store.merge_parallel(batch((UNREGISTERED_COMM, 1)), batch((UNREGISTERED_COMM, 2)))


def test_merge_parallel_without_a_store_uses_the_keys_own_strategy() -> None:
    assert len(batch((UNREGISTERED_COMM, 1)).merge_parallel(batch((UNREGISTERED_COMM, 2)))) == 2
    with pytest.raises(ParallelMergeConflict):
        batch((EXCLUSIVE, "a")).merge_parallel(batch((EXCLUSIVE, "b")))


def test_merge_parallel_rejects_mismatched_base_revisions(store: StateStore) -> None:
    with pytest.raises(MutationBaseRevisionMismatch) as err:
        store.merge_parallel(batch((EXCLUSIVE, "a"), base=1), batch((OTHER, "b"), base=2))
    assert (err.value.left, err.value.right) == (1, 2)


def test_failed_merge_does_not_adopt_the_other_base_revision(store: StateStore) -> None:
    left = batch((EXCLUSIVE, "a"))
    with pytest.raises(ParallelMergeConflict):
        store.merge_parallel(left, batch((EXCLUSIVE, "b"), base=3))
    assert left.base_revision is None


# -- StateCommand ------------------------------------------------------------------------------------------------


def command(tag: str, key: StateKey[Any, Any], update: Any) -> StateCommand:
    return StateCommand().update(key, update).schedule(f"act.{tag}", tag).effect(f"eff.{tag}", tag)


@pytest.mark.parametrize("combine", ["extend", "merge_parallel"])
def test_state_command_combination_carries_actions_and_effects(combine: str) -> None:
    merged: StateCommand = getattr(command("a", EXCLUSIVE, "x"), combine)(command("b", OTHER, "y"))
    assert ops(merged.patch) == [("batch.exclusive", "x"), ("batch.other", "y")]
    assert merged.scheduled_actions == [
        ScheduledAction(name="act.a", payload="a"),
        ScheduledAction(name="act.b", payload="b"),
    ]
    assert merged.effects == [Effect(name="eff.a", payload="a"), Effect(name="eff.b", payload="b")]


def test_merge_all_commands_uses_registered_strategies(store: StateStore) -> None:
    merged = store.merge_all_commands([command("a", COMMUTATIVE, 1), command("b", COMMUTATIVE, 2)])
    assert len(merged.patch) == 2
    assert [a.name for a in merged.scheduled_actions] == ["act.a", "act.b"]
    with pytest.raises(ParallelMergeConflict):
        store.merge_all_commands([command("a", EXCLUSIVE, "x"), command("b", EXCLUSIVE, "y")])


def test_state_command_emptiness() -> None:
    assert StateCommand().is_empty()
    assert not StateCommand().schedule("x").is_empty()
    assert not StateCommand().effect("x").is_empty()
    assert not StateCommand().update(EXCLUSIVE, "x").is_empty()


# -- the parallel tool-batch validator ---------------------------------------------------------------------------


def by_name(commutative: set[str]) -> Callable[[str], MergeStrategy]:
    return lambda key: "commutative" if key in commutative else "exclusive"


ALL_EXCLUSIVE = by_name(set())


@pytest.mark.parametrize(
    ("batches", "commutative"),
    [
        pytest.param([], set(), id="empty"),
        pytest.param([("call_1", ["any", "keys"])], set(), id="single-batch"),
        pytest.param([("call_1", ["alpha"]), ("call_2", ["beta"])], set(), id="disjoint"),
        pytest.param([(f"call_{i}", ["shared"]) for i in range(3)], {"shared"}, id="commutative-any-writers"),
        pytest.param([("call_1", ["counter", "config"]), ("call_2", ["counter"])], {"counter"}, id="mixed-strategies"),
        pytest.param([("call_1", ["x", "x"])], set(), id="one-call-twice-is-one-writer"),
    ],
)
def test_parallel_batches_without_exclusive_overlap_are_valid(
    batches: list[tuple[str, list[str]]], commutative: set[str]
) -> None:
    validate_parallel_state_batches(batches, by_name(commutative))


def test_overlapping_exclusive_key_names_the_key_and_both_calls() -> None:
    with pytest.raises(ParallelMergeConflict) as err:
        validate_parallel_state_batches([("call_1", ["shared"]), ("call_2", ["shared"])], ALL_EXCLUSIVE)
    assert (err.value.key, err.value.owners) == ("shared", ("call_1", "call_2"))
    assert str(err.value) == (
        'conflicting parallel state modification on exclusive key "shared" by tool calls [call_1] and [call_2]'
    )


def test_first_conflicting_pair_is_reported() -> None:
    with pytest.raises(ParallelMergeConflict) as err:
        validate_parallel_state_batches([(c, ["shared"]) for c in ("c1", "c2", "c3")], ALL_EXCLUSIVE)
    assert err.value.owners == ("c1", "c2")


def test_the_exclusive_key_among_shared_ones_is_reported() -> None:
    batches = [("call_1", ["a", "commutative", "b"]), ("call_2", ["d", "commutative", "b"])]
    with pytest.raises(ParallelMergeConflict) as err:
        validate_parallel_state_batches(batches, by_name({"commutative"}))
    assert err.value.key == "b"


def test_validator_works_with_the_store_strategy_and_real_batches(store: StateStore) -> None:
    calls = [("a", batch((COMMUTATIVE, 1), (EXCLUSIVE, "x"))), ("b", batch((COMMUTATIVE, 2), (EXCLUSIVE, "y")))]
    with pytest.raises(ParallelMergeConflict, match=r"\[a\] and \[b\]"):
        validate_parallel_state_batches([(c, b.touched_keys) for c, b in calls], store.strategy)


@pytest.mark.parametrize(
    ("batches", "expected"),
    [
        pytest.param([], [], id="empty"),
        pytest.param([("c1", ["a", "b"])], ["a", "b"], id="single"),
        pytest.param([("c1", ["z", "a"]), ("c2", ["m", "a"])], ["z", "a", "m"], id="dedup-first-seen-order"),
    ],
)
def test_collect_all_touched_keys(batches: list[tuple[str, list[str]]], expected: list[str]) -> None:
    assert collect_all_touched_keys(batches) == expected
