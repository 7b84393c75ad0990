"""StateStore: revisions, commits, hooks, plugin install/uninstall and persistence."""

from __future__ import annotations

import operator
from typing import Any

import pytest

from awaken_stdio.contract.errors import (
    KeyAlreadyRegistered,
    KeyDecodeError,
    KeyEncodeError,
    PluginAlreadyInstalled,
    PluginNotInstalled,
    RevisionConflict,
    UnknownKey,
)
from awaken_stdio.contract.state import MutationBatch, PersistedState, StateKey
from awaken_stdio.runtime.state_store import CommitEvent, StateStore

COUNTER: StateKey[int, int] = StateKey("test.counter", default=0, apply=operator.add, value_type=int)
LABEL: StateKey[str, str] = StateKey("test.label", default="", value_type=str)
SESSION: StateKey[int, int] = StateKey("test.session", default=0, apply=operator.add, scope="thread", value_type=int)
EPHEMERAL: StateKey[int, int] = StateKey("test.ephemeral", default=0, apply=operator.add, persistent=False)
RETAINED: StateKey[str, str] = StateKey("test.retained", default="", retain_on_uninstall=True)


def store_with(*keys: StateKey[Any, Any], plugin: str = "test") -> StateStore:
    store = StateStore()
    store.install_plugin(plugin, keys)
    return store


def commit(store: StateStore, *updates: tuple[StateKey[Any, Any], Any], base: int | None = None) -> int:
    batch = MutationBatch(base_revision=base)
    for key, update in updates:
        batch.update(key, update)
    return store.commit(batch)


def record_commits(store: StateStore) -> list[CommitEvent]:
    events: list[CommitEvent] = []
    store.add_commit_hook(events.append)
    return events


# -- commits and revisions ---------------------------------------------------------------------------------------


def test_store_starts_at_revision_zero_and_each_commit_bumps_by_one() -> None:
    store = store_with(COUNTER)
    assert store.revision == 0
    assert store.snapshot().revision == 0
    assert commit(store, (COUNTER, 1)) == 1
    assert commit(store, (COUNTER, 2)) == 2
    assert store.revision == 2


def test_empty_commit_returns_current_revision_without_bump_or_hooks() -> None:
    store = store_with(COUNTER)
    commit(store, (COUNTER, 1))
    events = record_commits(store)
    assert store.commit(MutationBatch()) == 1
    assert store.commit(MutationBatch(base_revision=0)) == 1  # empty: not even the base revision is checked
    assert store.revision == 1
    assert events == []


def test_read_before_write_is_none_and_falls_back_to_default() -> None:
    snapshot = store_with(COUNTER).snapshot()
    assert not snapshot.has(COUNTER)
    assert snapshot.ext.get(COUNTER) is None
    assert snapshot.get(COUNTER) == 0


def test_updates_accumulate_across_commits_and_within_one_batch() -> None:
    store = store_with(COUNTER)
    commit(store, (COUNTER, 10))
    commit(store, (COUNTER, 20))
    assert store.snapshot().get(COUNTER) == 30
    assert commit(store, (COUNTER, 1), (COUNTER, 2), (COUNTER, 3)) == 3  # one batch, one revision
    assert store.snapshot().get(COUNTER) == 36


def test_snapshot_is_unaffected_by_later_commits() -> None:
    store = store_with(COUNTER, LABEL)
    commit(store, (COUNTER, 10))
    before = store.snapshot()
    commit(store, (COUNTER, 20), (LABEL, "new"))
    assert (before.revision, before.get(COUNTER), before.has(LABEL)) == (1, 10, False)
    assert (store.snapshot().revision, store.snapshot().get(COUNTER)) == (2, 30)


def test_stale_base_revision_is_a_revision_conflict_and_changes_nothing() -> None:
    store = store_with(COUNTER)
    commit(store, (COUNTER, 1), base=0)
    events = record_commits(store)
    with pytest.raises(RevisionConflict) as err:
        commit(store, (COUNTER, 5), base=0)
    assert (err.value.expected, err.value.actual) == (0, 1)
    assert str(err.value) == "revision conflict: expected 0, actual 1"
    assert (store.revision, store.snapshot().get(COUNTER)) == (1, 1)
    assert events == []


def test_matching_base_revision_commits() -> None:
    store = store_with(COUNTER)
    assert commit(store, (COUNTER, 1), base=0) == 1
    assert commit(store, (COUNTER, 1), base=1) == 2


def test_commit_hooks_see_metadata_in_registration_order() -> None:
    store = store_with(COUNTER)
    seen: list[tuple[str, int, int, int, int]] = []
    for name in ("first", "second"):
        store.add_commit_hook(
            lambda e, name=name: seen.append(
                (name, e.previous_revision, e.new_revision, e.op_count, e.snapshot.get(COUNTER))
            )
        )
    commit(store, (COUNTER, 1), (COUNTER, 2), (COUNTER, 3))
    assert seen == [("first", 0, 1, 3, 6), ("second", 0, 1, 3, 6)]


def test_commit_to_unregistered_key_fails_and_applies_nothing() -> None:
    store = store_with(COUNTER)
    events = record_commits(store)
    with pytest.raises(UnknownKey) as err:
        commit(store, (COUNTER, 1), (LABEL, "x"))
    assert err.value.key == "test.label"
    assert str(err.value) == "unknown state key: test.label"
    assert (store.revision, store.snapshot().has(COUNTER)) == (0, False)
    assert events == []


def test_a_failing_apply_leaves_the_state_untouched() -> None:
    def explode(_value: int, _update: int) -> int:
        raise ValueError("bad update")

    fragile: StateKey[int, int] = StateKey("test.fragile", default=0, apply=explode)
    store = store_with(COUNTER, fragile)
    with pytest.raises(ValueError, match="bad update"):
        commit(store, (COUNTER, 1), (fragile, 1))
    assert (store.revision, store.snapshot().has(COUNTER)) == (0, False)


def test_clear_removes_a_value_so_it_reads_as_default() -> None:
    store = store_with(COUNTER)
    commit(store, (COUNTER, 5))
    assert store.commit(MutationBatch().clear(COUNTER)) == 2
    assert not store.snapshot().has(COUNTER)
    assert store.snapshot().get(COUNTER) == 0


# -- registration and plugins ------------------------------------------------------------------------------------


def test_duplicate_plugin_install_is_rejected() -> None:
    store = store_with(COUNTER, plugin="counter")
    with pytest.raises(PluginAlreadyInstalled, match=r"^plugin already installed: counter$"):
        store.install_plugin("counter", [LABEL])
    assert store.key("test.label") is None


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(("other", [LABEL, StateKey("test.counter")]), id="across-plugins"),
        pytest.param(("same", [StateKey("test.label2"), LABEL, StateKey("test.label2")]), id="within-one-plugin"),
    ],
)
def test_a_key_name_registered_twice_is_rejected_and_nothing_is_installed(
    second: tuple[str, list[StateKey[Any, Any]]],
) -> None:
    store = StateStore()
    store.install_plugin("counter", [COUNTER])
    name, keys = second
    with pytest.raises(KeyAlreadyRegistered, match=r"^key already registered: test\.(counter|label2)$"):
        store.install_plugin(name, keys)
    assert store.key("test.label") is None
    store.install_plugin(name, [LABEL])  # the failed install left no trace


def test_register_key_rejects_a_second_key_with_the_same_name() -> None:
    store = StateStore()
    store.register_key(COUNTER)
    store.register_key(COUNTER, skip_if_present=True)  # the very same key: skipped
    with pytest.raises(KeyAlreadyRegistered, match=r"^key already registered: test\.counter$"):
        store.register_key(StateKey("test.counter"), skip_if_present=True)
    with pytest.raises(KeyAlreadyRegistered):
        store.register_key(COUNTER)


def test_unregistered_keys_merge_as_exclusive() -> None:
    store = store_with(StateKey("test.comm", merge="commutative"))
    assert store.strategy("test.comm") == "commutative"
    assert store.strategy("test.nobody") == "exclusive"


def test_uninstall_clears_owned_keys_in_one_commit() -> None:
    store = store_with(COUNTER, LABEL)
    commit(store, (COUNTER, 5))
    events = record_commits(store)
    store.uninstall_plugin("test")
    assert store.revision == 2
    assert [(e.previous_revision, e.new_revision) for e in events] == [(1, 2)]
    assert not store.snapshot().has(COUNTER)
    assert store.key("test.counter") is None
    with pytest.raises(UnknownKey):
        commit(store, (COUNTER, 1))


def test_uninstall_twice_fails() -> None:
    store = store_with(COUNTER)
    store.uninstall_plugin("test")
    with pytest.raises(PluginNotInstalled, match=r"^plugin not installed: test$"):
        store.uninstall_plugin("test")


def test_uninstall_leaves_other_plugins_alone() -> None:
    store = StateStore()
    store.install_plugin("counter", [COUNTER])
    store.install_plugin("label", [LABEL])
    commit(store, (COUNTER, 5), (LABEL, "kept"))
    store.uninstall_plugin("counter")
    assert store.snapshot().get(LABEL) == "kept"
    commit(store, (LABEL, "still here"))
    assert store.snapshot().get(LABEL) == "still here"


def test_retained_key_survives_uninstall_and_reinstall() -> None:
    store = store_with(COUNTER, RETAINED)
    commit(store, (COUNTER, 5), (RETAINED, "seed"))
    store.uninstall_plugin("test")
    assert store.snapshot().get(RETAINED) == "seed"
    assert not store.snapshot().has(COUNTER)
    store.install_plugin("test", [COUNTER, RETAINED])
    assert store.snapshot().get(RETAINED) == "seed"
    commit(store, (RETAINED, "updated"))
    assert store.snapshot().get(RETAINED) == "updated"


def test_reinstall_after_uninstall_starts_clean() -> None:
    store = store_with(COUNTER)
    commit(store, (COUNTER, 5))
    store.uninstall_plugin("test")
    store.install_plugin("test", [COUNTER])
    assert not store.snapshot().has(COUNTER)
    commit(store, (COUNTER, 2))
    assert store.snapshot().get(COUNTER) == 2


# -- persistence -------------------------------------------------------------------------------------------------


def persisted(revision: int = 0, **extensions: Any) -> PersistedState:
    return PersistedState(revision=revision, extensions={k.replace("_", "."): v for k, v in extensions.items()})


def test_export_restore_round_trip() -> None:
    store = store_with(COUNTER, LABEL, SESSION)
    commit(store, (COUNTER, 42), (LABEL, "hello"), (SESSION, 7))
    exported = store.export_persisted()
    assert exported.revision == 1
    assert exported.extensions == {"test.counter": 42, "test.label": "hello", "test.session": 7}
    assert PersistedState.from_json(exported.to_json()) == exported

    restored = store_with(COUNTER, LABEL, SESSION)
    restored.restore_persisted(PersistedState.from_json(exported.to_json()))
    assert restored.revision == 1
    snapshot = restored.snapshot()
    assert (snapshot.get(COUNTER), snapshot.get(LABEL), snapshot.get(SESSION)) == (42, "hello", 7)


def test_export_splits_thread_and_run_scoped_keys() -> None:
    store = store_with(COUNTER, SESSION)
    commit(store, (COUNTER, 1), (SESSION, 2))
    assert store.export_thread_scoped().extensions == {"test.session": 2}
    assert store.export_run_scoped().extensions == {"test.counter": 1}
    assert store.export_thread_scoped().revision == store.export_run_scoped().revision == 1


def test_non_persistent_keys_are_never_exported() -> None:
    store = store_with(COUNTER, EPHEMERAL)
    commit(store, (COUNTER, 5), (EPHEMERAL, 7))
    assert store.export_persisted().extensions == {"test.counter": 5}
    assert store.export_run_scoped().extensions == {"test.counter": 5}


def test_empty_state_exports_empty_extensions() -> None:
    assert store_with(COUNTER).export_persisted() == PersistedState(revision=0, extensions={})


def test_export_reports_encode_errors_with_the_key() -> None:
    def refuse(_value: int) -> Any:
        raise TypeError("not JSON")

    picky: StateKey[int, int] = StateKey("test.picky", default=0, encode=refuse)
    store = store_with(picky)
    commit(store, (picky, 1))
    with pytest.raises(KeyEncodeError, match=r"^failed to encode state key test\.picky: not JSON$"):
        store.export_persisted()


def test_restore_replaces_the_whole_state_and_takes_the_revision() -> None:
    store = store_with(COUNTER, LABEL)
    commit(store, (COUNTER, 1), (LABEL, "old"))
    commit(store, (COUNTER, 1))
    store.restore_persisted(persisted(7, test_counter=99))
    assert store.revision == 7
    assert store.snapshot().get(COUNTER) == 99
    assert not store.snapshot().has(LABEL)
    assert commit(store, (COUNTER, 1)) == 8


def test_restore_skip_policy_ignores_unknown_keys() -> None:
    store = store_with(COUNTER)
    store.restore_persisted(persisted(5, test_counter=10, unknown_key="ignored"), "skip")
    assert (store.revision, store.snapshot().get(COUNTER)) == (5, 10)
    assert not store.snapshot().ext.contains("unknown.key")


def test_restore_error_policy_rejects_unknown_keys_and_changes_nothing() -> None:
    store = store_with(COUNTER)
    commit(store, (COUNTER, 3))
    with pytest.raises(UnknownKey, match=r"^unknown state key: unknown\.key$"):
        store.restore_persisted(persisted(5, test_counter=10, unknown_key="boom"), "error")
    assert (store.revision, store.snapshot().get(COUNTER)) == (1, 3)


def test_restore_of_a_wrong_type_is_a_decode_error() -> None:
    store = store_with(COUNTER)
    with pytest.raises(KeyDecodeError) as err:
        store.restore_persisted(persisted(1, test_counter="not a number"))
    assert err.value.key == "test.counter"
    assert str(err.value).startswith("failed to decode state key test.counter: ")
    assert store.revision == 0


def test_new_run_starts_with_run_keys_default_and_thread_keys_restored() -> None:
    first_run = store_with(COUNTER, SESSION, EPHEMERAL)
    commit(first_run, (COUNTER, 5), (SESSION, 42), (EPHEMERAL, 1))
    checkpoint = first_run.export_persisted()  # a checkpoint may carry both scopes

    second_run = store_with(COUNTER, SESSION, EPHEMERAL)
    second_run.restore_thread_scoped(checkpoint)
    snapshot = second_run.snapshot()
    assert snapshot.get(SESSION) == 42
    assert not snapshot.has(COUNTER)
    assert not snapshot.has(EPHEMERAL)
    assert second_run.revision == 0
    commit(second_run, (SESSION, 1))
    assert second_run.snapshot().get(SESSION) == 43


def test_restore_thread_scoped_skips_unknown_keys_by_default_and_can_reject_them() -> None:
    store = store_with(SESSION)
    store.restore_thread_scoped(persisted(3, test_session=1, gone_key=2))
    assert store.snapshot().get(SESSION) == 1
    with pytest.raises(UnknownKey):
        store.restore_thread_scoped(persisted(3, gone_key=2), "error")


def test_clear_run_scoped_keeps_thread_keys() -> None:
    store = store_with(COUNTER, SESSION)
    commit(store, (COUNTER, 1), (SESSION, 2))
    store.clear_run_scoped()
    assert not store.snapshot().has(COUNTER)
    assert store.snapshot().get(SESSION) == 2
    assert store.revision == 1


def test_apply_seed_merges_listed_keys_without_revision_or_hooks() -> None:
    store = store_with(COUNTER, LABEL)
    commit(store, (COUNTER, 1), (LABEL, "kept"))
    events = record_commits(store)
    store.apply_seed(persisted(99, test_counter=10))
    assert (store.snapshot().get(COUNTER), store.snapshot().get(LABEL)) == (10, "kept")
    assert store.revision == 1
    assert events == []


@pytest.mark.parametrize(
    ("seed", "error"),
    [
        pytest.param(persisted(0, test_counter=10, unknown_key=1), UnknownKey, id="unknown-key"),
        pytest.param(persisted(0, test_label="new", test_counter="NaN"), KeyDecodeError, id="decode-failure"),
    ],
)
def test_apply_seed_is_atomic_on_failure(seed: PersistedState, error: type[Exception]) -> None:
    store = store_with(COUNTER, LABEL)
    commit(store, (COUNTER, 1), (LABEL, "old"))
    with pytest.raises(error):
        store.apply_seed(seed)
    assert (store.snapshot().get(COUNTER), store.snapshot().get(LABEL)) == (1, "old")


def test_apply_seed_skip_policy_merges_known_keys() -> None:
    store = store_with(COUNTER)
    store.apply_seed(persisted(0, test_counter=4, unknown_key=1), "skip")
    assert store.snapshot().get(COUNTER) == 4
    assert not store.snapshot().ext.contains("unknown.key")
