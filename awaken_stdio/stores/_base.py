"""The lifecycle every backend shares (an async context manager with ``aclose()`` that refuses use after close),
and ``drive``, which runs the shared async store logic synchronously where it cannot suspend."""

from __future__ import annotations

from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from awaken_stdio.contract.errors import StoreUnavailable

__all__ = ["BaseStore", "drive"]

T = TypeVar("T")


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run to completion, synchronously, a coroutine that never suspends: the shared async logic over a table or
    transaction whose calls return at once (SQLite on its connection thread, the file mailbox's dicts)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a store operation that must run synchronously tried to suspend")


class BaseStore:
    """``async with store:`` closes it on exit; any call after ``aclose()`` raises ``StoreUnavailable``."""

    url: str
    schema_version: int | None = None  # the database's schema version (SQL backends), for ``doctor``
    _closed: bool = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._close()

    async def _close(self) -> None:
        """Release the backend's resources (called once)."""

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable(f"store {self.url} is closed")
