"""How a stdio server opens the app after its first answer (:class:`DeferredApp`), once, for every request that needs
it; the first answer itself is given from ``startup.py``'s raw config. Written once for ``acp`` and ``mcp``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import anyio.lowlevel

from awaken_stdio.contract.errors import ConfigError

if TYPE_CHECKING:
    from awaken_stdio.app.app import App, Settings

__all__ = ["DeferredApp"]

log = logging.getLogger(__name__)


class DeferredApp:
    """The app a stdio server opens after its first answer, once, for every request that needs it.

    It is ``wanted()`` once the server's first answer is given (ACP: ``initialize``; MCP: any, the writer
    ``announcing`` it) or as soon as a request needs it (``ready()``). ``run`` then validates the settings (pydantic
    loads only now), opens the app, enters the server's own ``serving`` around it (what the server builds before
    any request sees the app, and keeps while the app is open) and holds it until ``close()`` or cancellation. A
    config the validation rejects goes to ``on_config_error`` (the server then exits 2); it, or an app that cannot
    open, becomes the error of every request that waits (``failure``, given the reason; ``None`` once the app has
    closed).
    """

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        failure: Callable[[str | None], Exception],
        on_config_error: Callable[[ConfigError], None],
        serving: Callable[[App, Settings], AbstractAsyncContextManager[None]],
        timeout_s: float | None = None,
        lent: App | None = None,
    ) -> None:
        self._settings = settings
        self._lent = lent  # an app already open (``serve``: one app under many connections), used, never closed
        self._failure = failure
        self._on_config_error = on_config_error
        self._serving = serving
        self._timeout_s = timeout_s  # how long a request waits for the app to open
        self._wanted = anyio.Event()
        self._settled = anyio.Event()  # open, or failed for good
        self._closing = anyio.Event()
        self._problem: str | None = None
        self._app: App | None = None

    @property
    def app(self) -> App | None:
        """The app, once open and served (``None`` before, after, or when it could not open)."""
        return self._app

    @property
    def is_wanted(self) -> bool:
        return self._wanted.is_set()

    def wanted(self) -> None:
        """Open the app now (``run`` waits for this)."""
        self._wanted.set()

    def announcing(self, writer: anyio.abc.ByteSendStream) -> anyio.abc.ByteSendStream:
        """``writer``, whose first write (the first answer, on the wire) makes the app wanted."""
        return _Announcing(writer, self._wanted)

    async def ready(self) -> App:
        """The open app, waited for (and wanted); ``failure``'s error when it could not open or has closed."""
        self.wanted()
        with anyio.fail_after(self._timeout_s):
            await self._settled.wait()
        if self._app is None:
            raise self._failure(self._problem)
        return self._app

    def close(self) -> None:
        """Close the app, leaving ``run``; if it was never opened, ``run`` only validates the settings (a config
        the validation rejects still goes to ``on_config_error``, even when no request came)."""
        self._closing.set()
        self._wanted.set()

    async def run(self) -> None:
        """Open the app once wanted and keep it open until ``close()`` (or cancellation)."""
        await self._wanted.wait()
        # The answer that made it wanted may be queued but not written yet: yield so the writer puts it on the wire
        # before the imports below hold the event loop.
        for _ in range(2):
            await anyio.lowlevel.checkpoint()
        try:
            settings = self._settings()
        except ConfigError as exc:
            self._problem = str(exc)
            self._settled.set()
            self._on_config_error(exc)
            return
        if self._closing.is_set():
            return
        try:
            async with self._open(settings) as app, self._serving(app, settings):
                self._app = app
                self._settled.set()
                await self._closing.wait()
        except Exception as exc:
            log.exception("could not open the app")
            self._problem = str(exc)
        finally:
            self._app = None
            self._settled.set()

    def _open(self, settings: Settings) -> AbstractAsyncContextManager[App]:
        if self._lent is not None:
            return nullcontext(self._lent)
        from awaken_stdio.app.app import open_app

        return open_app(settings)


class _Announcing(anyio.abc.ByteSendStream):
    """The wire writer; the first write sets ``event``: the first answer is out, the app may load now."""

    def __init__(self, inner: anyio.abc.ByteSendStream, event: anyio.Event) -> None:
        self._inner = inner
        self._event = event

    async def send(self, item: bytes) -> None:
        await self._inner.send(item)
        self._event.set()

    async def aclose(self) -> None:
        await self._inner.aclose()
