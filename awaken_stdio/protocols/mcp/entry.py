"""``awaken-stdio mcp``: a plain first ``initialize`` is answered before the event loop starts (``initialize.py``,
with the standard library alone), then ``server.py`` serves the rest. Its own module, so that neither of those two
imports the other.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from awaken_stdio.app.startup import Startup, loaded_heavy_modules
from awaken_stdio.protocols.early import answer_first_request
from awaken_stdio.protocols.mcp.initialize import Initialized, initialize

__all__ = ["serve"]

log = logging.getLogger(__name__)


def serve(args: argparse.Namespace) -> int:
    """The ``awaken-stdio mcp`` command: serve stdin/stdout until EOF or a stop signal; the exit code.

    An unreadable config file, bad TOML or a bad store URL exits 2 before any output; a config that fails
    validation exits 2 after the first answer (``ConfigError`` raised for the CLI).
    """
    startup = Startup.from_args(args)
    first = answer_first_request("initialize", _early)
    if first is None:
        return 0
    from awaken_stdio.protocols.mcp.server import run

    return run(startup, *first)


def _early(params: dict[str, Any] | None) -> Initialized | None:
    answered = initialize(params or {}, validate=False)
    if answered is not None:
        log.info("serving the handshake protocol era")
        log.debug("answering initialize; heavy modules loaded: %s", loaded_heavy_modules())
    return answered
