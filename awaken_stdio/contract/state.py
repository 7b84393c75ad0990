"""Typed state: keys with scopes and merge rules, immutable snapshots, mutation batches and commands.

A :class:`StateKey` is declared once (usually at module level by a plugin) and names one slot of run or thread
state. Values are treated as immutable: ``apply`` returns a new value, so a :class:`Snapshot` can share its values
with later snapshots and never changes after it is taken. The engine that commits batches lives in
``runtime/state_store.py``; everything here is pure data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from awaken_stdio.contract._typed import TypedValue
from awaken_stdio.contract.errors import (
    KeyDecodeError,
    KeyEncodeError,
    MutationBaseRevisionMismatch,
    ParallelMergeConflict,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "Effect",
    "KeyScope",
    "MergeStrategy",
    "MutationBatch",
    "PersistedState",
    "ScheduledAction",
    "Snapshot",
    "StateCommand",
    "StateKey",
    "StateMap",
    "UnknownKeyPolicy",
]

V = TypeVar("V")
U = TypeVar("U")

MergeStrategy = Literal["exclusive", "commutative"]
KeyScope = Literal["run", "thread"]
UnknownKeyPolicy = Literal["error", "skip"]

_MISSING: Any = object()


def _replace(_old: Any, new: Any) -> Any:
    return new


class StateKey(TypedValue[V], Generic[V, U]):
    """One named, typed slot of state.

    ``apply(value, update) -> new value`` must not mutate ``value`` (snapshots share it). Without ``apply`` an
    update replaces the value. ``merge`` decides what two parallel writers mean: ``exclusive`` keys conflict,
    ``commutative`` keys concatenate their updates (which must then be order-independent). ``scope`` ``thread``
    keys persist across runs of a thread; ``run`` keys start from the default every run. With ``value_type`` the
    value is validated and encoded through pydantic when persisted; without it the value must be JSON-ready.
    """

    __slots__ = ("apply", "decode_json", "encode_json", "key", "merge", "persistent", "retain_on_uninstall", "scope")

    def __init__(
        self,
        key: str,
        *,
        default: V | Callable[[], V] | None = None,
        apply: Callable[[V, U], V] | None = None,
        merge: MergeStrategy = "exclusive",
        scope: KeyScope = "run",
        persistent: bool = True,
        retain_on_uninstall: bool = False,
        value_type: Any = None,
        encode: Callable[[V], Any] | None = None,
        decode: Callable[[Any], V] | None = None,
    ) -> None:
        if not key:
            raise ValueError("a state key needs a non-empty name")
        super().__init__(default, value_type)
        self.key = key
        self.apply: Callable[[V, U], V] = apply or _replace
        self.merge: MergeStrategy = merge
        self.scope: KeyScope = scope
        self.persistent = persistent
        self.retain_on_uninstall = retain_on_uninstall
        self.encode_json = encode
        self.decode_json = decode

    def encode(self, value: V) -> Any:
        try:
            if self.encode_json is not None:
                return self.encode_json(value)
            return self.dump_json(value)
        except Exception as exc:
            raise KeyEncodeError(self.key, str(exc)) from exc

    def decode(self, data: Any) -> V:
        try:
            if self.decode_json is not None:
                return self.decode_json(data)
            return self.load_json(data)
        except Exception as exc:
            raise KeyDecodeError(self.key, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc

    def __repr__(self) -> str:
        return f"StateKey({self.key!r}, scope={self.scope}, merge={self.merge})"


class StateMap:
    """Key name -> value. Absent keys read as the key's default."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = values if values is not None else {}

    def contains(self, key: StateKey[Any, Any] | str) -> bool:
        return (key if isinstance(key, str) else key.key) in self._values

    def get(self, key: StateKey[V, Any]) -> V | None:
        return self._values.get(key.key)

    def value(self, key: StateKey[V, Any]) -> V:
        v = self._values.get(key.key, _MISSING)
        return key.default() if v is _MISSING else v

    def insert(self, key: StateKey[V, Any], value: V) -> None:
        self._values[key.key] = value

    def remove(self, key: StateKey[Any, Any] | str) -> Any:
        return self._values.pop(key if isinstance(key, str) else key.key, None)

    def get_or_insert_default(self, key: StateKey[V, Any]) -> V:
        if key.key not in self._values:
            self._values[key.key] = key.default()
        return self._values[key.key]

    def names(self) -> Iterator[str]:
        return iter(self._values)

    def raw(self) -> dict[str, Any]:
        return self._values

    def copy(self) -> StateMap:
        return StateMap(dict(self._values))

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """The state at one revision. Never changes; later commits make new snapshots."""

    revision: int
    ext: StateMap = field(default_factory=StateMap)

    def get(self, key: StateKey[V, Any]) -> V:
        """The key's value, or its default when the key has none."""
        return self.ext.value(key)

    def has(self, key: StateKey[Any, Any]) -> bool:
        return self.ext.contains(key)


@dataclass(slots=True, kw_only=True)
class PersistedState:
    """State in its JSON form: what run records, thread state rows and ``state_snapshot`` events carry."""

    revision: int = 0
    extensions: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.revision, "extensions": self.extensions}

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> PersistedState:
        if not d:
            return PersistedState()
        return PersistedState(revision=int(d.get("revision", 0)), extensions=dict(d.get("extensions") or {}))


_UPDATE, _CLEAR = 0, 1


@dataclass(slots=True, kw_only=True)
class MutationBatch:
    """An ordered list of updates to apply in one commit.

    ``base_revision`` (optional) makes the commit conditional: it fails if the store has moved on.
    """

    base_revision: int | None = None
    ops: list[tuple[int, StateKey[Any, Any], Any]] = field(default_factory=list)

    def update(self, key: StateKey[Any, U], update: U) -> MutationBatch:
        self.ops.append((_UPDATE, key, update))
        return self

    def clear(self, key: StateKey[Any, Any]) -> MutationBatch:
        """Remove the key's value (it reads as its default again)."""
        self.ops.append((_CLEAR, key, None))
        return self

    @property
    def touched_keys(self) -> list[str]:
        return [k.key for _, k, _ in self.ops]

    def is_empty(self) -> bool:
        return not self.ops

    def __len__(self) -> int:
        return len(self.ops)

    def _merged_base(self, other: MutationBatch) -> int | None:
        """The base revision of the combination: both must agree if both are set, a one-sided one is adopted."""
        if self.base_revision is None:
            return other.base_revision
        if other.base_revision is not None and self.base_revision != other.base_revision:
            raise MutationBaseRevisionMismatch(self.base_revision, other.base_revision)
        return self.base_revision

    def extend(self, other: MutationBatch) -> MutationBatch:
        """Append ``other``'s ops after ours (sequential composition)."""
        self.base_revision = self._merged_base(other)
        self.ops.extend(other.ops)
        return self

    def merge_parallel(
        self, other: MutationBatch, strategy: Callable[[str], MergeStrategy] | None = None
    ) -> MutationBatch:
        """Combine two batches computed from the same snapshot: a key both touch must be commutative.

        ``strategy`` maps a key name to its registered merge strategy (unregistered keys: exclusive); without it
        the key objects' own ``merge`` decides.
        """
        base = self._merged_base(other)
        mine = {k.key for _, k, _ in self.ops}
        for _, k, _ in other.ops:
            if k.key in mine:
                merge = strategy(k.key) if strategy is not None else k.merge
                if merge != "commutative":
                    raise ParallelMergeConflict(k.key)
        self.base_revision = base
        self.ops.extend(other.ops)
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledAction:
    """Work a hook asks to run in a later phase (``name`` picks the registered handler)."""

    name: str
    payload: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """A side effect dispatched after the commit that carried it, with the post-commit snapshot."""

    name: str
    payload: Any = None


@dataclass(slots=True, kw_only=True)
class StateCommand:
    """What hooks and tools return: a state patch plus scheduled actions and effects."""

    patch: MutationBatch = field(default_factory=MutationBatch)
    scheduled_actions: list[ScheduledAction] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)

    def update(self, key: StateKey[Any, U], update: U) -> StateCommand:
        self.patch.update(key, update)
        return self

    def clear(self, key: StateKey[Any, Any]) -> StateCommand:
        self.patch.clear(key)
        return self

    def schedule(self, name: str, payload: Any = None) -> StateCommand:
        self.scheduled_actions.append(ScheduledAction(name=name, payload=payload))
        return self

    def effect(self, name: str, payload: Any = None) -> StateCommand:
        self.effects.append(Effect(name=name, payload=payload))
        return self

    def is_empty(self) -> bool:
        return not self.patch.ops and not self.scheduled_actions and not self.effects

    def extend(self, other: StateCommand) -> StateCommand:
        self.patch.extend(other.patch)
        self.scheduled_actions.extend(other.scheduled_actions)
        self.effects.extend(other.effects)
        return self

    def merge_parallel(
        self, other: StateCommand, strategy: Callable[[str], MergeStrategy] | None = None
    ) -> StateCommand:
        self.patch.merge_parallel(other.patch, strategy)
        self.scheduled_actions.extend(other.scheduled_actions)
        self.effects.extend(other.effects)
        return self
