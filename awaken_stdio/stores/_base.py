"""The lifecycle every backend shares: an async context manager with ``aclose()`` that refuses use after close."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from awaken_stdio.contract.errors import StoreUnavailable

__all__ = ["BaseStore"]


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
