"""``awaken-stdio chat``: a terminal client of the real ``awaken-stdio acp`` agent process.

``client`` launches the agent and speaks ACP to it, ``view`` draws the updates (``rich``), ``keyboard`` reads the
person's messages and answers (``prompt_toolkit`` on a terminal), ``commands`` sorts slash commands into the chat's
own and the agent's. ``--demo`` runs the bundled scripted agent (``data/demo-config.toml``, ``data/demo-script.json``)
in a temporary copy of ``data/demo-workspace``: no API key, nothing touched outside that directory.

Nothing imports this package but the ``chat`` command, so ``rich`` and ``prompt_toolkit`` never load in the servers.
"""

from awaken_stdio.chat.client import main

__all__ = ["main"]
