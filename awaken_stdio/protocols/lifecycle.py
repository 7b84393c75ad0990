"""How ``awaken-stdio acp`` and ``awaken-stdio mcp`` stop, and the exit code that says why.

Input EOF, the parent's death and a broken stdout end the JSON-RPC peer (``jsonrpc.py``). SIGTERM and SIGINT end
it the same way, as systemd expects of a service: reading stops (no new work is accepted), requests in flight are
cancelled at once (their turns and tool calls with them: a running command's process group is stopped, and what it
left in its session ends with the process guard, ``tools/_processes.py``), the app closes (the store is flushed and
closed), and the process exits 0 for SIGTERM (a requested stop that went as asked) or 130 for SIGINT (the shell's
convention for an interrupted program). A second signal is not handled: SIGTERM's default action or Python's
``KeyboardInterrupt`` ends the process at once, and the guard still ends its children.

A config that fails validation, found after the first answer (``app/startup.py``), stops the peer too, once the requests
waiting for the app have their -32603 answer; the process then exits 2 with one stderr line naming the problem
(``Lifecycle.exit_code`` raises the ``ConfigError`` for the CLI to report).
"""

from __future__ import annotations

import logging
import signal

import anyio
import anyio.abc

from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.protocols.jsonrpc import JsonRpcPeer

__all__ = ["Lifecycle"]

log = logging.getLogger(__name__)

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Lifecycle:
    """Why a stdio server's peer stopped: a signal, a config problem, or neither (its input ended)."""

    def __init__(self, peer: JsonRpcPeer) -> None:
        self.peer = peer
        self.signal: int | None = None
        self.problem: ConfigError | None = None

    def fail(self, problem: ConfigError) -> None:
        """The config failed validation: stop reading, answer what waits, exit 2 (``exit_code``)."""
        self.problem = problem
        self.peer.close()

    async def watch_signals(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Until the first SIGTERM or SIGINT, then stop the peer with what is in flight cancelled at once.

        Outside the main thread, or where the event loop cannot take signals, this only reports itself started.
        """
        started = False
        try:
            with anyio.open_signal_receiver(*_STOP_SIGNALS) as signals:  # leaving it restores the default actions
                task_status.started()
                started = True
                async for signum in signals:
                    self.signal = signum
                    log.info("%s received: stopping", signal.Signals(signum).name)
                    self.peer.close(grace_s=0)
                    return
        except (ValueError, RuntimeError, NotImplementedError):
            if started:
                raise
            task_status.started()

    def exit_code(self) -> int:
        """0 after input EOF or SIGTERM, 130 after SIGINT; raises the config problem (the CLI exits 2)."""
        if self.problem is not None:
            raise self.problem
        return 130 if self.signal == signal.SIGINT else 0
