"""Profile / shared state: ProfileAccess over the in-memory ProfileStore, and StateScope strings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from awaken_stdio.contract.errors import KeyAlreadyRegistered, NotFound, StoreError
from awaken_stdio.contract.profile import ProfileAccess, ProfileKey, ProfileStore, StateScope
from awaken_stdio.runtime.plugins import Plugin, PluginRegistrar
from awaken_stdio.stores.memory import MemoryStore


class Preferences(BaseModel):
    theme: str = "light"
    font_size: int = 12


LOCALE: ProfileKey[str] = ProfileKey("locale", default="en")
PREFS: ProfileKey[Preferences] = ProfileKey("prefs", default=Preferences, value_type=Preferences)
UNREGISTERED: ProfileKey[int] = ProfileKey("unregistered", default=0)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()  # nothing to open or release


@pytest.fixture
def profile(store: MemoryStore) -> ProfileAccess:
    return ProfileAccess(store, [LOCALE, PREFS])


def test_memory_store_implements_the_profile_store_protocol(store: MemoryStore) -> None:
    assert isinstance(store, ProfileStore)


@pytest.mark.anyio
async def test_read_of_a_missing_entry_is_the_default(profile: ProfileAccess) -> None:
    assert await profile.read(LOCALE, "alice") == "en"
    assert await profile.read(PREFS, "alice") == Preferences()


@pytest.mark.anyio
async def test_write_read_round_trip(profile: ProfileAccess, store: MemoryStore) -> None:
    await profile.write(PREFS, "alice", Preferences(theme="dark", font_size=14))
    assert await profile.read(PREFS, "alice") == Preferences(theme="dark", font_size=14)
    entry = await store.get_profile("agent:alice", "prefs")
    assert entry is not None
    assert (entry.key, entry.value) == ("prefs", {"theme": "dark", "font_size": 14})
    assert entry.updated_at > 1_600_000_000_000  # the store stamps milliseconds


@pytest.mark.anyio
async def test_delete_then_read_gives_the_default_and_delete_is_idempotent(profile: ProfileAccess) -> None:
    await profile.write(LOCALE, "alice", "fr")
    await profile.delete(LOCALE, "alice")
    assert await profile.read(LOCALE, "alice") == "en"
    await profile.delete(LOCALE, "alice")
    await profile.delete(LOCALE, "never-written")


@pytest.mark.anyio
async def test_write_overwrites_last_write_wins(profile: ProfileAccess) -> None:
    await profile.write(LOCALE, "alice", "fr")
    await profile.write(LOCALE, "alice", "de")
    assert await profile.read(LOCALE, "alice") == "de"
    assert len(await profile.list("alice")) == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    "operation",
    [
        pytest.param(lambda p: p.read(UNREGISTERED, "alice"), id="read"),
        pytest.param(lambda p: p.write(UNREGISTERED, "alice", 1), id="write"),
        pytest.param(lambda p: p.delete(UNREGISTERED, "alice"), id="delete"),
    ],
)
async def test_unregistered_namespace_is_not_found(
    profile: ProfileAccess, store: MemoryStore, operation: Callable[[ProfileAccess], Awaitable[Any]]
) -> None:
    with pytest.raises(NotFound) as err:
        await operation(profile)
    assert str(err.value) == "not found: profile key not registered: unregistered"
    assert await store.list_profile("agent:alice") == []


@pytest.mark.anyio
async def test_list_and_clear_are_not_checked_against_registration(profile: ProfileAccess, store: MemoryStore) -> None:
    await store.set_profile("agent:alice", "unregistered", 5)
    assert [e.key for e in await profile.list("alice")] == ["unregistered"]
    await profile.clear("alice")
    assert await profile.list("alice") == []


@pytest.mark.anyio
async def test_an_undecodable_entry_is_a_store_error(profile: ProfileAccess, store: MemoryStore) -> None:
    await store.set_profile("agent:alice", "prefs", {"font_size": "huge"})
    with pytest.raises(StoreError, match="alice/prefs"):
        await profile.read(PREFS, "alice")


@pytest.mark.anyio
async def test_entries_are_isolated_per_key_and_namespace(profile: ProfileAccess) -> None:
    await profile.write(LOCALE, "alice", "fr")
    await profile.write(LOCALE, "bob", "de")
    await profile.write(PREFS, "alice", Preferences(theme="dark"))
    assert await profile.read(LOCALE, "alice") == "fr"
    assert await profile.read(LOCALE, "bob") == "de"
    assert await profile.read(PREFS, "bob") == Preferences()
    assert await profile.read(LOCALE, StateScope.new("alice_scope")) == "en"


@pytest.mark.anyio
async def test_namespaces_under_one_key_list_sorted_and_clear_removes_them_all(profile: ProfileAccess) -> None:
    await profile.write(PREFS, "alice", Preferences())
    await profile.write(LOCALE, "alice", "fr")
    await profile.write(LOCALE, "bob", "de")
    assert [(e.key, e.value) for e in await profile.list("alice")] == [
        ("locale", "fr"),
        ("prefs", {"theme": "light", "font_size": 12}),
    ]
    await profile.clear("alice")
    assert await profile.list("alice") == []
    assert await profile.read(LOCALE, "alice") == "en"
    assert await profile.read(LOCALE, "bob") == "de"
    await profile.clear("alice")  # idempotent


@pytest.mark.anyio
async def test_the_system_key_is_an_agent_owner(profile: ProfileAccess, store: MemoryStore) -> None:
    await profile.write(LOCALE, "system", "fr")
    assert await store.get_profile("system", "locale") is None
    entry = await store.get_profile("agent:system", "locale")
    assert entry is not None and entry.value == "fr"


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (StateScope.global_(), "global"),
        (StateScope.parent_thread("t-1"), "parent_thread::t-1"),
        (StateScope.agent_type("coder"), "agent_type::coder"),
        (StateScope.thread("t-2"), "thread::t-2"),
        (StateScope.new("my scope"), "my scope"),
    ],
)
def test_state_scope_strings(scope: str, expected: str) -> None:
    assert scope == expected


@pytest.mark.anyio
async def test_scopes_are_separate_entries(profile: ProfileAccess) -> None:
    await profile.write(LOCALE, StateScope.global_(), "global")
    await profile.write(LOCALE, StateScope.parent_thread("p1"), "parent-1")
    await profile.write(LOCALE, StateScope.agent_type("coder"), "coder")
    await profile.write(LOCALE, StateScope.thread("p1"), "thread-p1")
    assert await profile.read(LOCALE, StateScope.parent_thread("p1")) == "parent-1"
    assert await profile.read(LOCALE, StateScope.parent_thread("p2")) == "en"
    assert await profile.read(LOCALE, StateScope.thread("p1")) == "thread-p1"
    assert await profile.read(LOCALE, StateScope.agent_type("coder")) == "coder"
    assert await profile.read(LOCALE, "global") == "global"


@pytest.mark.anyio
async def test_plugin_registered_key_is_usable(store: MemoryStore) -> None:
    class LocalePlugin(Plugin):
        name = "locale"

        def register(self, registrar: PluginRegistrar) -> None:
            registrar.register_profile_key(LOCALE)

    registrar = PluginRegistrar()
    registrar.install(LocalePlugin())
    profile = ProfileAccess(store, registrar.profile_keys)
    assert profile.namespaces == frozenset({"locale"})
    await profile.write(LOCALE, "alice", "fr")
    assert await profile.read(LOCALE, "alice") == "fr"


@pytest.mark.parametrize("register_twice", ["registrar", "access"])
def test_duplicate_profile_key_registration_fails(store: MemoryStore, register_twice: str) -> None:
    same_name: ProfileKey[str] = ProfileKey("locale")
    with pytest.raises(KeyAlreadyRegistered, match=r"^key already registered: locale$"):
        if register_twice == "registrar":
            registrar = PluginRegistrar()
            registrar.register_profile_key(LOCALE)
            registrar.register_profile_key(same_name)
        else:
            ProfileAccess(store, [LOCALE, same_name])
