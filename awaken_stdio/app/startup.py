"""What the stdio servers know before their first answer: the config as read, the store URL, the working directory,
what the raw config says about the default model.

``awaken-stdio acp`` and ``awaken-stdio mcp`` answer their first request from a :class:`Startup` (TOML read by
``config_file.py``, nothing validated by pydantic) and only then build the full :class:`~awaken_stdio.app.app.Settings`
(``Startup.settings``). So a file that is not TOML, or a malformed store URL, still exits 2 before serving, while a
config that fails validation is found after the first answer: each server answers the requests waiting for it with
-32603 and its text, then exits 2 with one stderr line (``lifecycle.py``); ``deferred.py`` is that order, written
once for both servers. Standard library only: ACP's first answer is given from here before the event loop exists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awaken_stdio._version import __version__
from awaken_stdio.app.config_file import ConfigFile, missing_agent, read_config_file, store_url
from awaken_stdio.providers.families import SCRIPTED_MEDIA_INPUT, family_capabilities

if TYPE_CHECKING:
    from awaken_stdio.app.app import Settings

__all__ = [
    "HEAVY_MODULES",
    "Startup",
    "default_model",
    "loaded_heavy_modules",
    "model_problem",
    "prompt_capabilities",
    "server_info",
]

# None of these may be loaded when a first answer is given (a test checks the servers' debug log line).
HEAVY_MODULES = ("pydantic", "awaken_stdio.app.config", "sqlite3", "asyncpg", "mcp", "openai", "anthropic")
_EVENT_LOOP = ("asyncio", "anyio")
_KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Startup:
    """The command line resolved without validating the config: enough for a server's first answer."""

    file: ConfigFile
    store_url: str
    cwd: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Startup:
        """``--config`` read (``ConfigError`` for a missing file or bad TOML), ``--store`` checked, ``--cwd``."""
        file = read_config_file(args.config)
        return cls(
            file=file,
            store_url=store_url(args.store, file),
            cwd=os.path.abspath(getattr(args, "cwd", None) or os.getcwd()),
        )

    def settings(self) -> Settings:
        """The full settings: the config validated (pydantic); a wrong field raises ``ConfigError``."""
        from awaken_stdio.app.app import Settings
        from awaken_stdio.app.config import validate_config

        return Settings(loaded=validate_config(self.file), store_url=self.store_url, cwd=self.cwd)


def loaded_heavy_modules() -> str:
    """The :data:`HEAVY_MODULES` loaded so far, and the event loop's modules (a first answer given before the loop
    starts comes without them), for the servers' debug line at their first answer."""
    heavy = ", ".join(m for m in HEAVY_MODULES if m in sys.modules) or "none"
    return f"{heavy} (event loop: {', '.join(m for m in _EVENT_LOOP if m in sys.modules) or 'not loaded'})"


def server_info() -> dict[str, str]:
    """Who answers: ACP's ``agentInfo`` and MCP's ``serverInfo`` (one source, so the two never disagree)."""
    return {"name": "awaken-stdio", "title": "awaken-stdio", "version": __version__}


def _table(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def default_model(data: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The default agent's model id and table from raw config data; ``None`` when no agent is configured.

    A config the validation will reject gives an empty table: its error is reported after the first answer.
    """
    agents = _table(data, "agents")
    if not agents:
        return None
    name = data.get("default_agent")
    agent = (agents.get(name) if isinstance(name, str) else None) or next(iter(agents.values()))
    model_id = agent.get("model") if isinstance(agent, dict) else None
    if not isinstance(model_id, str):
        return "", {}
    model = _table(data, "models").get(model_id)
    return model_id, model if isinstance(model, dict) else {}


def model_problem(file: ConfigFile) -> str | None:
    """Why no model can answer (what to set), or ``None`` when the default agent's model is usable."""
    default = default_model(file.data)
    if default is None:
        return missing_agent(file)
    model_id, model = default
    if model.get("provider") == "scripted" or model.get("base_url"):
        return None
    variable = model.get("api_key_env") or _KEY_VARIABLES.get(model.get("provider", ""))
    if variable and not os.environ.get(variable):
        from awaken_stdio.providers.credentials import saved_variables

        if variable not in saved_variables():
            return f"model {model_id!r} needs an API key: set {variable}, or run `awaken-stdio login` in a terminal"
    return None


def prompt_capabilities(file: ConfigFile) -> dict[str, bool]:
    """``promptCapabilities``: what the default agent's model accepts, known without loading any provider."""
    image = audio = False
    default = default_model(file.data)
    if default is not None:
        model_id, model = default
        if model.get("provider") == "scripted":
            declared = _script_capabilities(file, model.get("script"))
            image = bool(declared.get("image_input", SCRIPTED_MEDIA_INPUT))
            audio = bool(declared.get("audio_input", SCRIPTED_MEDIA_INPUT))
        else:
            image = family_capabilities(str(model.get("model") or model_id), model)[2]
    return {"image": image, "audio": audio, "embeddedContext": True}


def _script_capabilities(file: ConfigFile, script: Any) -> dict[str, Any]:
    """The ``capabilities`` a scripted model's script declares; ``{}`` when it cannot be read (reported later)."""
    if not isinstance(script, str):
        return {}
    path = Path(script)
    try:
        data = json.loads((path if path.is_absolute() else file.base_dir / path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    caps = data.get("capabilities") if isinstance(data, dict) else None
    return caps if isinstance(caps, dict) else {}
