"""API keys saved by ``awaken-stdio login``: in the OS keyring when the ``keyring`` package is importable and has a
usable backend, else in ``credentials.json`` in the user config directory (mode 0600).

A key is saved under the environment variable the provider reads (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, or a
model's ``api_key_env``), and the environment always wins: :func:`env_key` is the variable's value, else the saved
key. The file lists every saved variable, also those whose key is in the keyring (``{"keyring": true}``), so knowing
which keys exist (:func:`saved_variables`, asked before the protocol servers' first answer) reads one small file and
never imports ``keyring``; only reading a key kept there does. Keys are never logged.

Standard library only (``platformdirs`` for the default place, as ``app/config_file.py``; ``keyring`` lazily).
``AWAKEN_STDIO_CREDENTIALS`` names another file; ``AWAKEN_STDIO_KEYRING=off`` keeps keys out of the keyring.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CREDENTIALS_ENV",
    "KEYRING_ENV",
    "KEYRING_SERVICE",
    "credentials_path",
    "env_key",
    "forget_keys",
    "keyring_backend",
    "save_key",
    "saved_key",
    "saved_variables",
]

CREDENTIALS_ENV = "AWAKEN_STDIO_CREDENTIALS"
KEYRING_ENV = "AWAKEN_STDIO_KEYRING"
KEYRING_SERVICE = "awaken-stdio"


def credentials_path() -> Path:
    """``$AWAKEN_STDIO_CREDENTIALS``, else ``credentials.json`` beside the user config file."""
    explicit = os.environ.get(CREDENTIALS_ENV)
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("awaken-stdio", appauthor=False)) / "credentials.json"


def _read() -> dict[str, Any]:
    try:
        data = json.loads(credentials_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    keys = data.get("keys") if isinstance(data, dict) else None
    return keys if isinstance(keys, dict) else {}


def _write(keys: dict[str, Any]) -> Path:
    """Replace the file atomically, created 0600 (never readable by others, not even for a moment)."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"keys": keys}, out, indent=2)
            out.write("\n")
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    os.replace(temp, path)
    return path


def saved_variables() -> set[str]:
    """The variables with a saved key (the file only: the keyring is not asked)."""
    return {name for name, entry in _read().items() if isinstance(entry, dict) and entry}


def keyring_backend() -> Any:
    """The ``keyring`` module when it is importable, has a usable backend and is not switched off; else ``None``."""
    if os.environ.get(KEYRING_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return None
    try:
        import keyring  # pyright: ignore[reportMissingImports]
        from keyring.backends import fail  # pyright: ignore[reportMissingImports]
    except Exception:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:
        return None
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    return keyring


def saved_key(variable: str) -> str | None:
    """The key saved for ``variable``: from the file, or from the keyring when it was saved there."""
    entry = _read().get(variable)
    if not isinstance(entry, dict):
        return None
    key = entry.get("key")
    if isinstance(key, str) and key.strip():
        return key.strip()
    if entry.get("keyring"):
        keyring = keyring_backend()
        if keyring is None:
            return None
        try:
            value = keyring.get_password(KEYRING_SERVICE, variable)
        except Exception:
            return None
        return value.strip() if isinstance(value, str) and value.strip() else None
    return None


def env_key(env: Mapping[str, str], variable: str) -> str:
    """``env[variable]``, else (for the process environment only) the key ``login`` saved for it; ``""`` without.

    A mapping other than ``os.environ`` is a caller's own environment (tests, embedding programs): it is taken as
    it is."""
    value = env.get(variable, "").strip()
    if value or env is not os.environ:
        return value
    return saved_key(variable) or ""


def save_key(variable: str, key: str, *, use_keyring: bool = True) -> str:
    """Save ``key`` for ``variable``; where it went (``the OS keyring`` or the file's path)."""
    keys = _read()
    keyring = keyring_backend() if use_keyring else None
    if keyring is not None:
        try:
            keyring.set_password(KEYRING_SERVICE, variable, key)
        except Exception:
            keyring = None
        else:
            keys[variable] = {"keyring": True}
            _write(keys)
            return "the OS keyring"
    keys[variable] = {"key": key}
    return str(_write(keys))


def forget_keys() -> list[str]:
    """Remove every saved key (from the keyring too); the variables they were saved for."""
    keys = _read()
    if not keys:
        return []
    keyring = None
    for variable, entry in keys.items():
        if isinstance(entry, dict) and entry.get("keyring"):
            keyring = keyring or keyring_backend()
            if keyring is not None:
                try:
                    keyring.delete_password(KEYRING_SERVICE, variable)
                except Exception:
                    pass
    credentials_path().unlink(missing_ok=True)
    return sorted(keys)
