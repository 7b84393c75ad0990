"""Profile (shared) state: JSON entries addressed by (scope key, namespace), outside runs and revisions.

A plugin registers a :class:`ProfileKey` (a namespace with a value type); hooks and tools then read and write
entries under any scope string that :class:`StateScope` builds (``global``, ``thread::<id>``...). Last write wins;
profile entries take no part in snapshots or merges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from awaken_stdio.contract._typed import TypedValue
from awaken_stdio.contract.errors import KeyAlreadyRegistered, NotFound, StoreError

if TYPE_CHECKING:
    pass

__all__ = ["ProfileAccess", "ProfileEntry", "ProfileKey", "ProfileStore", "StateScope"]

V = TypeVar("V")


class ProfileKey(TypedValue[V]):
    """A profile namespace with a value type; a missing entry reads as ``default``."""

    __slots__ = ("namespace",)

    def __init__(self, namespace: str, *, default: V | Callable[[], V] | None = None, value_type: Any = None) -> None:
        if not namespace:
            raise ValueError("a profile key needs a non-empty namespace")
        super().__init__(default, value_type)
        self.namespace = namespace

    def encode(self, value: V) -> Any:
        return self.dump_json(value)

    def decode(self, data: Any) -> V:
        return self.load_json(data)

    def __repr__(self) -> str:
        return f"ProfileKey({self.namespace!r})"


class StateScope:
    """Builds the scope strings profile entries are filed under."""

    @staticmethod
    def global_() -> str:
        return "global"

    @staticmethod
    def parent_thread(thread_id: str) -> str:
        return f"parent_thread::{thread_id}"

    @staticmethod
    def agent_type(name: str) -> str:
        return f"agent_type::{name}"

    @staticmethod
    def thread(thread_id: str) -> str:
        return f"thread::{thread_id}"

    @staticmethod
    def new(scope: str) -> str:
        return scope


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileEntry:
    key: str
    value: Any
    updated_at: int


@runtime_checkable
class ProfileStore(Protocol):
    """Raw JSON profile entries per owner (``agent:<scope>`` or ``system``)."""

    async def get_profile(self, owner: str, key: str) -> ProfileEntry | None: ...

    async def set_profile(self, owner: str, key: str, value: Any) -> None: ...

    async def delete_profile(self, owner: str, key: str) -> None: ...

    async def list_profile(self, owner: str) -> list[ProfileEntry]: ...

    async def clear_profile_owner(self, owner: str) -> None: ...


def _owner(scope: str) -> str:
    return f"agent:{scope}"


class ProfileAccess:
    """Typed profile access for hooks and tools. Only registered namespaces can be read or written."""

    __slots__ = ("_keys", "_store")

    def __init__(self, store: ProfileStore, keys: Iterable[ProfileKey[Any]] = ()) -> None:
        self._store = store
        self._keys: dict[str, ProfileKey[Any]] = {}
        for k in keys:
            self.register(k)

    def register(self, key: ProfileKey[Any]) -> None:
        if key.namespace in self._keys:
            raise KeyAlreadyRegistered(key.namespace)
        self._keys[key.namespace] = key

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset(self._keys)

    def _check(self, key: ProfileKey[Any]) -> None:
        if key.namespace not in self._keys:
            raise NotFound(f"profile key not registered: {key.namespace}")

    async def read(self, key: ProfileKey[V], scope: str) -> V:
        self._check(key)
        entry = await self._store.get_profile(_owner(scope), key.namespace)
        if entry is None:
            return key.default()
        try:
            return key.decode(entry.value)
        except Exception as exc:
            raise StoreError(f"profile entry {scope}/{key.namespace} cannot be decoded: {exc}") from exc

    async def write(self, key: ProfileKey[V], scope: str, value: V) -> None:
        self._check(key)
        await self._store.set_profile(_owner(scope), key.namespace, key.encode(value))

    async def delete(self, key: ProfileKey[Any], scope: str) -> None:
        self._check(key)
        await self._store.delete_profile(_owner(scope), key.namespace)

    async def list(self, scope: str) -> list[ProfileEntry]:
        """Every entry under ``scope``, sorted by namespace (registered or not)."""
        return await self._store.list_profile(_owner(scope))

    async def clear(self, scope: str) -> None:
        await self._store.clear_profile_owner(_owner(scope))
