"""The configuration before validation: where the file is found, its TOML as read, the defaults without one.

Light on purpose (the standard library, plus platformdirs for the default paths, only when they are needed): the
protocol servers read the config here and answer their first request from the raw data before pydantic loads;
``config.py`` validates the same :class:`ConfigFile` into its models afterwards. A file that cannot be read or is
not TOML is a ``ConfigError`` here already; a wrong field only in ``config.py``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from awaken_stdio.contract.errors import ConfigError

__all__ = [
    "CONFIG_ENV",
    "PROJECT_CONFIG",
    "STORE_ENV",
    "ConfigCandidate",
    "ConfigFile",
    "config_candidates",
    "default_config_data",
    "default_config_path",
    "missing_agent",
    "read_config_file",
    "store_url",
]

CONFIG_ENV = "AWAKEN_STDIO_CONFIG"
STORE_ENV = "AWAKEN_STDIO_STORE"
PROJECT_CONFIG = ".awaken-stdio.toml"  # a project's own config, found from the working directory upward


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigFile:
    """The config as read: TOML data not yet validated, or the defaults from the environment."""

    data: dict[str, Any]
    path: Path | None  # resolved; None: no config file, the defaults from the environment
    source: str  # how errors name it

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()


def default_config_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir("awaken-stdio", appauthor=False)) / "config.toml"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigCandidate:
    """One place the config file is looked for: ``source`` names it, ``path`` is None when it is not set."""

    source: str
    path: Path | None
    required: bool  # given explicitly: a missing file is an error, not "use the defaults"
    unset: str = "not set"  # what ``doctor`` says when ``path`` is None


def config_candidates(path: str | os.PathLike[str] | None = None) -> list[ConfigCandidate]:
    """Where the config is looked for, in order; the first one set is the one used (``doctor`` prints them all)."""
    return list(_candidates(path))


def _candidates(path: str | os.PathLike[str] | None) -> Iterator[ConfigCandidate]:
    """Lazily: the project file is searched for, and the user config file's place (platformdirs) looked up, only
    when no earlier one is set."""
    env = os.environ.get(CONFIG_ENV)
    yield ConfigCandidate(source="--config", path=Path(path).expanduser() if path else None, required=True)
    yield ConfigCandidate(source=f"${CONFIG_ENV}", path=Path(env).expanduser() if env else None, required=True)
    cwd = Path.cwd()
    yield ConfigCandidate(
        source=f"project config file ({PROJECT_CONFIG} in {cwd} or above)",
        path=project_config(cwd),
        required=False,
        unset="none found",
    )
    yield ConfigCandidate(source="user config file", path=default_config_path(), required=False)


def project_config(start: Path) -> Path | None:
    """The nearest ``.awaken-stdio.toml`` in ``start`` or a directory above it, as git finds ``.git``."""
    for directory in (start, *start.parents):
        candidate = directory / PROJECT_CONFIG
        if candidate.is_file():
            return candidate
    return None


def read_config_file(path: str | os.PathLike[str] | None = None) -> ConfigFile:
    """``path``, else ``$AWAKEN_STDIO_CONFIG``, else the nearest project file, else the user config file if it
    exists, else the defaults. One file is read, never a merge of several: relative paths in it (scripts, tool
    modules) resolve against its own directory, and what it says is all there is (as ruff's nearest config)."""
    chosen = next(c for c in _candidates(path) if c.path is not None)
    file = chosen.path
    assert file is not None
    if not file.is_file():
        if chosen.required:
            raise ConfigError(f"config file not found: {file}")
        return ConfigFile(data=default_config_data(), path=None, source="<no config file>")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read it: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}") from exc
    return ConfigFile(data=_with_default_agent(data), path=file.resolve(), source=str(file))


def _with_default_agent(data: dict[str, Any]) -> dict[str, Any]:
    """A config with one model and no ``[agents]``: that model serves the agent ``default``, as the environment's
    model does without a config file (a newcomer's first config is often just a model). With several models
    nothing is guessed: :func:`missing_agent` says what to add."""
    models, agents = data.get("models"), data.get("agents")
    if agents or not isinstance(models, dict) or len(models) != 1:
        return data
    [model_id] = models
    return data | {"agents": {"default": {"model": model_id, "expose_mcp": True}}}


def missing_agent(file: ConfigFile) -> str | None:
    """What to add when the config defines no agent (``None`` when it does): one line for ``doctor`` and ``chat``."""
    if file.data.get("agents"):
        return None
    models = file.data.get("models")
    if file.path is None:
        return (
            "no model is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY, run `awaken-stdio login`, or write a "
            "config file with [models]"
        )
    if not isinstance(models, dict) or not models:
        return f"no model is configured: add [models.<id>] to {file.path} (awaken-stdio config example shows one)"
    names = " and ".join(repr(m) for m in models)
    return (
        f"no agent: {file.path} defines the models {names} and no [agents]: add [agents.default] with "
        f'model = "{next(iter(models))}" (or another of them)'
    )


def default_config_data(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """No config file: one agent ``default`` whose model comes from the environment, or from the key ``awaken-stdio
    login`` saved (none if no key is set)."""
    env = os.environ if env is None else env
    saved: set[str] = set()
    if env is os.environ:  # the keys `awaken-stdio login` saved count as set
        from awaken_stdio.providers.credentials import saved_variables

        saved = saved_variables()

    def has(variable: str) -> bool:
        return bool(env.get(variable)) or variable in saved

    if has("ANTHROPIC_API_KEY"):
        model = {"provider": "anthropic", "model": "claude-sonnet-4-6", "api_key_env": "ANTHROPIC_API_KEY"}
    elif env.get("OPENAI_BASE_URL") and has("OPENAI_API_KEY"):  # the server's only model: no model set
        model = {"provider": "openai", "base_url": env["OPENAI_BASE_URL"], "api_key_env": "OPENAI_API_KEY"}
    elif has("OPENAI_API_KEY"):
        model = {"provider": "openai", "model": "gpt-4.1", "api_key_env": "OPENAI_API_KEY"}
    else:
        return {}
    return {"models": {"default": model}, "agents": {"default": {"model": "default", "expose_mcp": True}}}


def store_url(explicit: str | None, file: ConfigFile) -> str:
    """``explicit`` (``--store``), else ``$AWAKEN_STDIO_STORE``, else the config's, else the default SQLite file.

    Checked without touching the disk or network: a malformed URL raises ``ConfigError`` now, not at first use.
    """
    from awaken_stdio.stores import default_store_url, parse_store_url

    store = file.data.get("store")
    configured = store.get("url") if isinstance(store, dict) else None
    url = explicit or os.environ.get(STORE_ENV) or (configured if isinstance(configured, str) else None)
    url = url or default_store_url()
    parse_store_url(url)
    return url
