"""What the stdio servers know before their first answer (the config as read, the store URL, the working directory,
what the raw config says about the default model), and how they open the app after it (:class:`DeferredApp`).

``awaken-stdio acp`` and ``awaken-stdio mcp`` answer their first request from a :class:`Startup` (TOML read by
``config_file.py``, nothing validated by pydantic) and only then build the full :class:`~awaken_stdio.app.app.Settings`
(``Startup.settings``). So a file that is not TOML, or a malformed store URL, still exits 2 before serving, while a
config that fails validation is found after the first answer: each server answers the requests waiting for it with
-32603 and its text, then exits 2 with one stderr line (``lifecycle.py``). :class:`DeferredApp` is that order,
written once for both servers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from awaken_stdio._version import __version__
from awaken_stdio.app.config_file import ConfigFile, read_config_file, store_url
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.providers.families import SCRIPTED_MEDIA_INPUT, family_capabilities

if TYPE_CHECKING:
    from awaken_stdio.app.app import App, Settings

__all__ = [
    "HEAVY_MODULES",
    "DeferredApp",
    "Startup",
    "default_model",
    "loaded_heavy_modules",
    "model_problem",
    "prompt_capabilities",
    "server_info",
]

# None of these may be loaded when a first answer is given (a test checks the servers' debug log line).
HEAVY_MODULES = ("pydantic", "awaken_stdio.app.config", "aiosqlite", "asyncpg", "mcp", "openai", "anthropic")
_KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}

log = logging.getLogger(__name__)


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
        return (
            "no model is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or add [models] and [agents] to "
            f"{file.path or 'a config file (awaken-stdio config example)'}"
        )
    model_id, model = default
    if model.get("provider") == "scripted" or model.get("base_url"):
        return None
    variable = model.get("api_key_env") or _KEY_VARIABLES.get(model.get("provider", ""))
    if variable and not os.environ.get(variable):
        return f"model {model_id!r} needs an API key: set {variable}"
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
    ) -> None:
        self._settings = settings
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
        """Close the app, leaving ``run``; if it was never wanted, ``run`` returns without opening it."""
        self._closing.set()
        self._wanted.set()

    async def run(self) -> None:
        """Open the app once wanted and keep it open until ``close()`` (or cancellation)."""
        await self._wanted.wait()
        # The answer that made it wanted may be queued but not written yet: yield so the writer puts it on the wire
        # before the imports below hold the event loop.
        for _ in range(2):
            await anyio.lowlevel.checkpoint()
        if self._closing.is_set():
            return
        try:
            settings = self._settings()
        except ConfigError as exc:
            self._problem = str(exc)
            self._settled.set()
            self._on_config_error(exc)
            return
        from awaken_stdio.app.app import open_app

        try:
            async with open_app(settings) as app, self._serving(app, settings):
                self._app = app
                self._settled.set()
                await self._closing.wait()
        except Exception as exc:
            log.exception("could not open the app")
            self._problem = str(exc)
        finally:
            self._app = None
            self._settled.set()


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
