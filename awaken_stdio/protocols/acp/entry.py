"""``awaken-stdio acp``: the first ``initialize`` is answered before the event loop starts (``initialize.py``, with
the standard library alone), then ``front.py`` serves the rest. Its own module, so that neither of those two imports
the other.
"""

from __future__ import annotations

import argparse

from awaken_stdio.app.startup import Startup
from awaken_stdio.protocols.acp.initialize import initialize
from awaken_stdio.protocols.early import answer_first_request

__all__ = ["serve"]


def serve(args: argparse.Namespace) -> int:
    """The CLI entry: serve until stdin ends or a stop signal; the exit code (``Lifecycle.exit_code``). A config
    that cannot be read or validated, or a bad store URL, raises ``ConfigError`` (the CLI exits 2)."""
    startup = Startup.from_args(args)
    first = answer_first_request("initialize", lambda params: initialize(params, startup.file, validate=False))
    if first is None:
        return 0
    from awaken_stdio.protocols.acp.front import run

    return run(startup, *first)
