"""What the stdio servers know before their first answer: the config as read, the store URL, the working directory.

``awaken-stdio acp`` and ``awaken-stdio mcp`` answer their first request from a :class:`Startup` (TOML read by
``config_file.py``, nothing validated by pydantic) and only then build the full :class:`~awaken_stdio.app.app.Settings`
(``Startup.settings``). So a file that is not TOML, or a malformed store URL, still exits 2 before serving, while a
config that fails validation is found after the first answer: each server answers the requests waiting for it with
-32603 and its text, then exits 2 with one stderr line (``lifecycle.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from awaken_stdio._version import __version__
from awaken_stdio.app.config_file import ConfigFile, read_config_file, store_url

if TYPE_CHECKING:
    from awaken_stdio.app.app import Settings

__all__ = ["HEAVY_MODULES", "Startup", "loaded_heavy_modules", "server_info"]

# None of these may be loaded when a first answer is given (a test checks the servers' debug log line).
HEAVY_MODULES = ("pydantic", "awaken_stdio.app.config", "aiosqlite", "asyncpg", "mcp", "openai", "anthropic")


@dataclass(frozen=True, slots=True)
class Startup:
    """The command line resolved without validating the config: enough for a server's first answer."""

    file: ConfigFile
    store_url: str
    cwd: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Startup:
        """``--config`` read (``ConfigError`` for a missing file or bad TOML), ``--store`` checked, ``--cwd``."""
        file = read_config_file(args.config)
        return cls(file, store_url(args.store, file), os.path.abspath(getattr(args, "cwd", None) or os.getcwd()))

    def settings(self) -> Settings:
        """The full settings: the config validated (pydantic); a wrong field raises ``ConfigError``."""
        from awaken_stdio.app.app import Settings
        from awaken_stdio.app.config import validate_config

        return Settings(validate_config(self.file), self.store_url, self.cwd)


def loaded_heavy_modules() -> str:
    """The :data:`HEAVY_MODULES` loaded so far, for the servers' debug line at their first answer."""
    return ", ".join(m for m in HEAVY_MODULES if m in sys.modules) or "none"


def server_info() -> dict[str, str]:
    """Who answers: ACP's ``agentInfo`` and MCP's ``serverInfo`` (one source, so the two never disagree)."""
    return {"name": "awaken-stdio", "title": "awaken-stdio", "version": __version__}
