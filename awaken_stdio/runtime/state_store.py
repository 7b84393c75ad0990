"""The state engine: one mutable pointer to an immutable snapshot, advanced only by commits.

A commit applies a :class:`MutationBatch` to a copy of the current values and publishes a new snapshot whose
revision is one higher (an empty batch changes nothing). Keys must be registered first, by plugins through the
registrar or by the runtime itself, so a typo in a key name is an error rather than silent state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from awaken_stdio.contract.errors import (
    KeyAlreadyRegistered,
    ParallelMergeConflict,
    PluginAlreadyInstalled,
    PluginNotInstalled,
    RevisionConflict,
    UnknownKey,
)
from awaken_stdio.contract.state import (
    MergeStrategy,
    MutationBatch,
    PersistedState,
    Snapshot,
    StateCommand,
    StateKey,
    StateMap,
    UnknownKeyPolicy,
)

__all__ = [
    "CommitEvent",
    "CommitHook",
    "StateStore",
    "collect_all_touched_keys",
    "validate_parallel_state_batches",
]

log = logging.getLogger(__name__)
_MISSING: Any = object()
_CLEAR = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitEvent:
    previous_revision: int
    new_revision: int
    op_count: int
    snapshot: Snapshot


CommitHook = Callable[[CommitEvent], None]


class StateStore:
    """Registered keys plus the current snapshot. Not thread-safe: one run owns one store."""

    __slots__ = ("_hooks", "_keys", "_plugins", "_snapshot")

    def __init__(self) -> None:
        self._snapshot = Snapshot(revision=0, ext=StateMap())
        self._keys: dict[str, StateKey[Any, Any]] = {}
        self._plugins: dict[str, list[str]] = {}
        self._hooks: list[CommitHook] = []

    # -- reading ------------------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def revision(self) -> int:
        return self._snapshot.revision

    def key(self, name: str) -> StateKey[Any, Any] | None:
        return self._keys.get(name)

    def strategy(self, name: str) -> MergeStrategy:
        """The registered merge strategy; an unregistered key is exclusive."""
        key = self._keys.get(name)
        return key.merge if key is not None else "exclusive"

    # -- registration -------------------------------------------------------------------------------------------

    def register_key(self, key: StateKey[Any, Any], *, skip_if_present: bool = False) -> None:
        existing = self._keys.get(key.key)
        if existing is not None:
            if skip_if_present and existing is key:
                return
            raise KeyAlreadyRegistered(key.key)
        self._keys[key.key] = key

    def install_plugin(self, name: str, keys: Iterable[StateKey[Any, Any]]) -> None:
        """Register a plugin's keys, all or none."""
        if name in self._plugins:
            raise PluginAlreadyInstalled(name)
        keys = list(keys)
        seen: set[str] = set()
        for k in keys:
            if k.key in self._keys or k.key in seen:
                raise KeyAlreadyRegistered(k.key)
            seen.add(k.key)
        for k in keys:
            self._keys[k.key] = k
        self._plugins[name] = [k.key for k in keys]

    def uninstall_plugin(self, name: str) -> None:
        """Clear the plugin's keys (except ``retain_on_uninstall`` ones) in one commit, then unregister them all.

        A retained value stays in the state, unregistered, until the plugin is installed again.
        """
        owned = self._plugins.pop(name, None)
        if owned is None:
            raise PluginNotInstalled(name)
        batch = MutationBatch()
        for key_name in owned:
            key = self._keys[key_name]
            if not key.retain_on_uninstall and self._snapshot.ext.contains(key_name):
                batch.clear(key)
        self.commit(batch)
        for key_name in owned:
            del self._keys[key_name]

    def add_commit_hook(self, hook: CommitHook) -> None:
        self._hooks.append(hook)

    # -- committing ---------------------------------------------------------------------------------------------

    def commit(self, batch: MutationBatch) -> int:
        """Apply ``batch`` atomically; returns the new revision (unchanged for an empty batch)."""
        ops = batch.ops
        current = self._snapshot
        if not ops:
            return current.revision
        if batch.base_revision is not None and batch.base_revision != current.revision:
            raise RevisionConflict(batch.base_revision, current.revision)
        keys = self._keys
        for _, key, _ in ops:
            if key.key not in keys:
                raise UnknownKey(key.key)
        values = dict(current.ext.raw())
        for op, key, update in ops:
            name = key.key
            if op == _CLEAR:
                values.pop(name, None)
                continue
            old = values.get(name, _MISSING)
            values[name] = key.apply(key.default() if old is _MISSING else old, update)
        snapshot = Snapshot(revision=current.revision + 1, ext=StateMap(values))
        self._snapshot = snapshot
        if self._hooks:
            event = CommitEvent(
                previous_revision=current.revision, new_revision=snapshot.revision, op_count=len(ops), snapshot=snapshot
            )
            for hook in self._hooks:
                hook(event)
        return snapshot.revision

    def merge_parallel(self, left: MutationBatch, right: MutationBatch) -> MutationBatch:
        return left.merge_parallel(right, self.strategy)

    def merge_all_commands(self, commands: Iterable[StateCommand]) -> StateCommand:
        merged = StateCommand()
        for cmd in commands:
            merged.merge_parallel(cmd, self.strategy)
        return merged

    # -- persistence --------------------------------------------------------------------------------------------

    def _export(self, scope: str | None, snapshot: Snapshot | None) -> PersistedState:
        snapshot = snapshot or self._snapshot
        out: dict[str, Any] = {}
        for name, value in snapshot.ext.raw().items():
            key = self._keys.get(name)
            if key is None or not key.persistent or (scope is not None and key.scope != scope):
                continue
            out[name] = key.encode(value)
        return PersistedState(revision=snapshot.revision, extensions=out)

    def export_persisted(self) -> PersistedState:
        """Every persistent key that has a value (non-persistent keys never leave the process)."""
        return self._export(None, None)

    def export_thread_scoped(self, snapshot: Snapshot | None = None) -> PersistedState:
        """The thread-scoped keys of the current state, or of an earlier ``snapshot`` of it (snapshots are
        immutable: a checkpoint captures one in O(1) and exports it only when it is written)."""
        return self._export("thread", snapshot)

    def export_run_scoped(self, snapshot: Snapshot | None = None) -> PersistedState:
        return self._export("run", snapshot)

    def _decode(self, persisted: PersistedState, policy: UnknownKeyPolicy, scope: str | None) -> dict[str, Any]:
        decoded: dict[str, Any] = {}
        for name, data in persisted.extensions.items():
            key = self._keys.get(name)
            if key is None:
                if policy == "error":
                    raise UnknownKey(name)
                continue
            if scope is not None and key.scope != scope:
                continue
            decoded[name] = key.decode(data)
        return decoded

    def restore_persisted(self, persisted: PersistedState, policy: UnknownKeyPolicy = "error") -> None:
        """Replace the whole state with ``persisted``, taking its revision."""
        decoded = self._decode(persisted, policy, None)
        self._snapshot = Snapshot(revision=persisted.revision, ext=StateMap(decoded))

    def restore_thread_scoped(self, persisted: PersistedState, policy: UnknownKeyPolicy = "skip") -> None:
        """Merge the thread-scoped keys of ``persisted`` into the current state (revision unchanged)."""
        self._merge_values(self._decode(persisted, policy, "thread"))

    def apply_seed(self, persisted: PersistedState, policy: UnknownKeyPolicy = "error") -> None:
        """Merge the listed keys (atomic: nothing is applied if one fails); revision unchanged, no hooks."""
        self._merge_values(self._decode(persisted, policy, None))

    def clear_run_scoped(self) -> None:
        values = {n: v for n, v in self._snapshot.ext.raw().items() if (k := self._keys.get(n)) and k.scope != "run"}
        self._snapshot = Snapshot(revision=self._snapshot.revision, ext=StateMap(values))

    def _merge_values(self, decoded: dict[str, Any]) -> None:
        if decoded:
            values = dict(self._snapshot.ext.raw())
            values.update(decoded)
            self._snapshot = Snapshot(revision=self._snapshot.revision, ext=StateMap(values))


# -- parallel tool batches ------------------------------------------------------------------------------------------


def collect_all_touched_keys(batches: Iterable[tuple[str, Iterable[str]]]) -> list[str]:
    """Every key the ``(call_id, touched keys)`` batches touch, once each, in first-seen order."""
    return list(dict.fromkeys(key for _, keys in batches for key in keys))


def validate_parallel_state_batches(
    batches: Iterable[tuple[str, Iterable[str]]], strategy: Callable[[str], MergeStrategy]
) -> None:
    """Check that tool calls run in parallel did not write the same exclusive key.

    ``batches`` are ``(call_id, touched keys)`` pairs (``MutationBatch.touched_keys``), ``strategy`` usually
    ``StateStore.strategy``. The first key (in first-seen order) written by two calls is reported with its first two
    writers. A call touching a key several times is one writer.
    """
    owners: dict[str, list[str]] = {}
    for call_id, keys in batches:
        for key in dict.fromkeys(keys):
            owners.setdefault(key, []).append(call_id)
    for key, calls in owners.items():
        if len(calls) > 1 and strategy(key) == "exclusive":
            raise ParallelMergeConflict(key, (calls[0], calls[1]))
