"""The bearer token ``serve`` demands of every request: ``AWAKEN_STDIO_TOKEN`` when set, else one made on the first
start and kept, readable by its owner only, in the user data directory (``doctor`` shows where). Standard library and
platformdirs only: ``doctor`` imports it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["TOKEN_ENV", "describe_token", "load_token", "token_path"]

TOKEN_ENV = "AWAKEN_STDIO_TOKEN"
_MIN_LENGTH = 16  # a shorter AWAKEN_STDIO_TOKEN is refused: it could be guessed


def token_path() -> Path:
    """Where the made token is kept (e.g. ``~/.local/share/awaken-stdio/serve-token`` on Linux)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("awaken-stdio", appauthor=False)) / "serve-token"


def load_token() -> tuple[str, str]:
    """The token and where it comes from (the variable's name or the file's path); the file is made when missing.

    Raises ``ValueError`` for a token too short to be secret, or a file others may read.
    """
    given = os.environ.get(TOKEN_ENV)
    if given:
        if len(given) < _MIN_LENGTH:
            raise ValueError(f"{TOKEN_ENV} is shorter than {_MIN_LENGTH} characters")
        return given, TOKEN_ENV
    path = token_path()
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return _make(path), str(path)
    with os.fdopen(fd) as file:
        if os.fstat(file.fileno()).st_mode & 0o077:
            raise ValueError(f"{path} may be read by other users: chmod 600 it (or delete it to get a new token)")
        token = file.read().strip()
    if len(token) < _MIN_LENGTH:
        raise ValueError(f"{path} holds no usable token: delete it to get a new one")
    return token, str(path)


def describe_token() -> tuple[bool, str]:
    """Where ``serve`` takes its token from, for ``doctor`` (never the token itself); False when it would refuse it."""
    if os.environ.get(TOKEN_ENV):
        return True, f"from {TOKEN_ENV}"
    path = token_path()
    if not path.exists():
        return True, f"{path} (made by the first `awaken-stdio serve`)"
    try:
        load_token()
    except (OSError, ValueError) as exc:
        return False, str(exc)
    return True, f"{path} (mode 600)"


def _make(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use that one
        return load_token()[0]
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
    return token
