"""Work that may never return, kept off the event loop: ``off_loop(fn)`` runs ``fn()`` in a daemon thread of its own.

For imports above all (a user's ``@tool`` module, the MCP SDK): an import cannot be interrupted, so a caller that is
cancelled leaves the thread behind, and being a daemon it does not hold the process at exit, as a worker thread of
the event loop's pool would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["off_loop"]

T = TypeVar("T")


async def off_loop(fn: Callable[[], T], name: str) -> T:
    """``fn()`` in a daemon thread named ``name``, awaited; what it raises is raised here (``SystemExit`` and the
    like as a ``RuntimeError``: a module's ``sys.exit()`` must not end the server)."""
    token = anyio.lowlevel.current_token()
    finished = anyio.Event()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:
            failure.append(exc)
        except BaseException as exc:  # a module may raise anything, SystemExit included
            failure.append(RuntimeError(f"{type(exc).__name__}: {exc}"))
        try:
            anyio.from_thread.run_sync(finished.set, token=token)
        except RuntimeError:
            pass  # the event loop is gone: nobody waits any more

    threading.Thread(target=work, name=name, daemon=True).start()
    await finished.wait()
    if failure:
        raise failure[0]
    return outcome[0]
