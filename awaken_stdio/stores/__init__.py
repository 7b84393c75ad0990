"""Persistence backends behind one :class:`~awaken_stdio.contract.stores.Store` contract, chosen by URL.

``memory://`` (this process only), ``file:///abs/dir`` (JSON files), ``sqlite:///abs/path.db`` (the default; the
SQLAlchemy spelling ``sqlite:////abs/path.db`` names the same file) and ``postgresql://user:pw@host:port/db``
(``postgres://`` too). Each backend module is imported only when its URL is opened: asyncpg never loads for SQLite,
sqlite3 never for memory.

``open_store(url)`` is both awaitable and an async context manager::

    async with open_store(url) as store:        # closed on exit
        ...
    store = await open_store(url)               # the caller closes it
    try: ...
    finally: await store.aclose()

Errors at open: a URL that cannot be parsed or names an unknown scheme raises ``ConfigError``; a directory that
cannot be created or written, a file that is not an awaken-stdio database, an unreachable server raise
``StoreUnavailable``; a database written by a newer awaken-stdio raises ``SchemaTooNew``. Each message is one line
naming the problem (passwords redacted). Listing methods take opaque cursors; a cursor that was not returned by the
same listing raises ``ValueError``.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlsplit

from awaken_stdio.contract.errors import ConfigError

if TYPE_CHECKING:  # parse_store_url runs before a protocol server's first answer: keep this module light
    from awaken_stdio.contract.stores import Store

__all__ = ["StoreURL", "default_store_url", "open_store", "parse_store_url"]

Backend = Literal["memory", "file", "sqlite", "postgresql"]
_EXAMPLES = "memory://, file:///abs/dir, sqlite:///abs/path.db or postgresql://user:pw@host:port/db"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreURL:
    """A parsed store URL: the backend, its normalised URL, and the absolute path for ``file``/``sqlite``."""

    backend: Backend
    url: str
    path: str = ""


def default_store_url() -> str:
    """``sqlite:///<user data dir>/awaken.db`` (platformdirs; e.g. ``~/.local/share/awaken-stdio`` on Linux)."""
    from platformdirs import user_data_dir

    return "sqlite:///" + os.path.join(user_data_dir("awaken-stdio", appauthor=False), "awaken.db").lstrip("/")


def _absolute_path(url: str, rest: str, what: str) -> str:
    """``rest`` is what follows ``scheme://``: an absolute path, so it must start with ``/``."""
    if not rest.startswith("/"):
        raise ConfigError(f"store URL {url!r} needs an absolute {what} path after the scheme, e.g. {_EXAMPLES}")
    path = unquote(rest.split("?", 1)[0].split("#", 1)[0])
    path = "/" + path.lstrip("/")  # sqlite:////abs == sqlite:///abs
    if path == "/" or "\x00" in path:
        raise ConfigError(f"store URL {url!r} has no usable {what} path")
    return os.path.normpath(path)


def parse_store_url(url: str) -> StoreURL:
    """Validate a store URL without touching the disk or network. Raises ``ConfigError`` naming the problem."""
    text = url.strip()
    if not text:
        raise ConfigError(f"the store URL is empty; use {_EXAMPLES}")
    scheme, sep, rest = text.partition(":")
    scheme = scheme.lower()
    if not sep:
        raise ConfigError(f"store URL {url!r} has no scheme; use {_EXAMPLES}")
    if scheme == "memory":
        if rest not in ("", "//"):
            raise ConfigError(f"store URL {url!r}: memory:// takes nothing after the scheme")
        return StoreURL(backend="memory", url="memory://")
    if scheme in ("file", "sqlite"):
        if not rest.startswith("//"):
            raise ConfigError(f"store URL {url!r} must start with {scheme}:///, followed by an absolute path")
        after = rest[2:]
        host, slash, _ = after.partition("/")
        if host not in ("", "localhost"):
            raise ConfigError(f"store URL {url!r} names a host ({host!r}); {scheme} URLs take a local absolute path")
        path = _absolute_path(url, after[len(host) :] if slash else after, "directory" if scheme == "file" else "file")
        return StoreURL(backend=scheme, url=f"{scheme}://{path}", path=path)
    if scheme in ("postgresql", "postgres"):
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018  (validates the port)
        except ValueError as exc:
            raise ConfigError(f"store URL for PostgreSQL cannot be parsed: {exc}") from exc
        if not parts.netloc and not parts.query:
            raise ConfigError("store URL for PostgreSQL names no server, e.g. postgresql://user:pw@host:5432/db")
        return StoreURL(backend="postgresql", url=text)
    raise ConfigError(f"unknown store URL scheme {scheme!r}; use {_EXAMPLES}")


async def _open(url: str) -> Store:
    parsed = parse_store_url(url)
    if parsed.backend == "memory":
        from awaken_stdio.stores.memory import MemoryStore

        return MemoryStore()
    if parsed.backend == "file":
        from awaken_stdio.stores.file import FileStore

        return await FileStore.open(parsed.url, parsed.path)
    if parsed.backend == "sqlite":
        from awaken_stdio.stores.sqlite import SqliteStore

        return await SqliteStore.open(parsed.url, parsed.path)
    try:
        from awaken_stdio.stores.postgres import PostgresStore
    except ImportError as exc:
        raise ConfigError("the PostgreSQL store needs asyncpg: pip install 'awaken-stdio[postgres]'") from exc
    return await PostgresStore.open(parsed.url)


class _Opening:
    """What ``open_store`` returns: await it for a store, or ``async with`` it to have the store closed on exit."""

    __slots__ = ("_store", "_url")

    def __init__(self, url: str) -> None:
        self._url = url
        self._store: Store | None = None

    def __await__(self) -> Generator[Any, None, Store]:
        return _open(self._url).__await__()

    async def __aenter__(self) -> Store:
        self._store = await _open(self._url)
        return self._store

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._store is not None:
            await self._store.aclose()


def open_store(url: str) -> _Opening:
    """Open the store ``url`` names (see the module docstring for the URLs, the two ways to use it, the errors)."""
    return _Opening(url)
