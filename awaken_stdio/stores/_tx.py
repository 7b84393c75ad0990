"""The SQL backends' transaction (:class:`Tx`) and what the mailbox needs of its store (:class:`Transactions`): their
own module, so that the store (``_sql.py``) and its mailbox (``mailbox_sql.py``) need not import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["Transactions", "Tx"]

T = TypeVar("T")


class Tx(Protocol):
    """One open transaction (or, for single-statement reads, one connection)."""

    async def fetchone(self, sql: str, *args: Any) -> Sequence[Any] | None: ...

    async def fetchall(self, sql: str, *args: Any) -> list[Sequence[Any]]: ...

    async def execute(self, sql: str, *args: Any) -> int:
        """Run a statement; the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None: ...


class Transactions(Protocol):
    """A SQL store as its mailbox uses it (``SqlStore``): one transaction to read or write in, an urgent write ahead
    of the queued ones (lease renewals), and the statement that tells the other processes on the database, inside
    a write's transaction, that it made work their pollers act on (``None``: nobody to tell, SQLite)."""

    notify: str | None

    async def _write(self, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T: ...

    async def _write_urgent(self, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T: ...

    async def _read(self, fn: Callable[[Tx], Coroutine[Any, Any, T]], *, snapshot: bool = False) -> T: ...
