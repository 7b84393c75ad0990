"""Logging for the CLI and the stdio servers: stdout is the protocol, so logs go to stderr or a file.

:func:`setup_logging` installs one line per record (newlines in messages escaped, so a log can be grepped and
tailed by editors' log panes), with every secret masked on the way out: the values of environment variables whose
name says they are secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``), bearer tokens, ``sk-``/``sk-ant-``
API keys and ``api_key=``-style assignments. Redaction works on the final text, so arguments, exception messages and
tracebacks are covered whichever logger produced them.

A record with an exception keeps a self-contained first line (``message [ExcType: exc message]``); the traceback
follows, indented, only in the log file and at debug level, where someone is looking for it. A log file this creates
is readable by its owner only (0600, as the database): prompts, file contents and commands end up in it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping
from typing import TextIO

from awaken_stdio.contract.errors import UsageError

__all__ = ["LEVELS", "LineFormatter", "Redactor", "parse_level", "setup_logging"]

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_MIN_SECRET = 8  # shorter values ("1", "true") are settings, and masking them everywhere would garble the log
MASK = "***"
_PATTERNS = [
    (re.compile(r"\b(sk-ant-)[A-Za-z0-9_-]{8,}"), r"\1" + MASK),
    (re.compile(r"\b(sk-)[A-Za-z0-9_-]{16,}"), r"\1" + MASK),
    (re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE), r"\1" + MASK),
    (
        re.compile(
            r"""(\b(?:x-)?api[-_]?key["']?\s*[:=]\s*["']?|\b(?:access_|refresh_)?token["']?\s*[:=]\s*["']?)"""
            r"""[^\s"'&,;]{4,}""",
            re.IGNORECASE,
        ),
        r"\1" + MASK,
    ),
]


class Redactor:
    """Masks secrets in text: the given values (longest first), then the known key and token shapes."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)
        self._values = re.compile("|".join(map(re.escape, values))) if values else None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        env = os.environ if environ is None else environ
        return cls(value for name, value in env.items() if _SECRET_NAME.search(name))

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(MASK, text)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text


class LineFormatter(logging.Formatter):
    """``2025-01-02T03:04:05.678Z WARNING name[pid]: message``, redacted, one line (plus an optional traceback)."""

    converter = time.gmtime

    def __init__(self, redact: Redactor, *, tracebacks: bool) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
        self.redact = redact
        self.tracebacks = tracebacks

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created)) + f".{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        record.message = _one_line(record.getMessage())
        record.asctime = self.formatTime(record)
        line = self.formatMessage(record)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            detail = _one_line(str(exc))
            line += f" [{type(exc).__qualname__}: {detail}]" if detail else f" [{type(exc).__qualname__}]"
            if self.tracebacks:
                line += "\n" + _indent(self.formatException(record.exc_info))
        if record.stack_info and self.tracebacks:
            line += "\n" + _indent(self.formatStack(record.stack_info))
        return self.redact(line)


def parse_level(level: str | int) -> int:
    """A level name (``debug``, ``info``, ``warning``/``warn``, ``error``, any case) or number."""
    if isinstance(level, int):
        return level
    name = level.strip().lower()
    if name == "warn":
        name = "warning"
    if name.isdigit():
        return int(name)
    if name not in LEVELS:
        raise UsageError(f"unknown log level {level!r} (use one of: {', '.join(LEVELS)})")
    return LEVELS[name]


def setup_logging(
    level: str | int = "warning",
    log_file: str | None = None,
    *,
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Replace the root logger's handlers: stderr, or ``log_file`` (appended) plus warnings and errors on stderr.

    With a file the chatty levels stay out of stderr, which editors show to people; the file gets everything at
    ``level``, tracebacks included. ``stream`` (default ``sys.stderr``) and ``environ`` (the secrets to mask,
    default ``os.environ`` now) are for tests. Raises ``UsageError`` for an unknown level.
    """
    threshold = parse_level(level)
    redact = Redactor.from_environ(environ)
    debug = threshold <= logging.DEBUG
    console = logging.StreamHandler(stream if stream is not None else sys.stderr)
    console.setFormatter(LineFormatter(redact, tracebacks=debug))
    handlers: list[logging.Handler] = [console]
    if log_file:
        console.setLevel(max(threshold, logging.WARNING))
        os.close(os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # created 0600; kept if there
        file = logging.FileHandler(log_file, encoding="utf-8")
        file.setFormatter(LineFormatter(redact, tracebacks=True))
        handlers.append(file)
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(threshold)


def _one_line(text: str) -> str:
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
