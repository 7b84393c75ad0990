"""Logging set-up: levels, destinations, one line per record, secrets masked."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from awaken_stdio.contract.errors import UsageError
from awaken_stdio.logs import Redactor, parse_level, setup_logging

ENV = {
    "OPENAI_API_KEY": "opensesame-1234567890",
    "GITHUB_TOKEN": "ghp_abcdefghijklmnop",
    "DB_PASSWORD": "hunter2hunter2",
    "MY_CLIENT_SECRET": "s3cr3t-value-here",
    "SHORT_KEY": "1",  # too short to be a secret worth masking everywhere
    "HOME": "/home/someone",
}


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers[:]:
        root.removeHandler(handler)
        if handler not in handlers:
            handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def configure(level: str = "info", log_file: str | None = None) -> io.StringIO:
    stream = io.StringIO()
    setup_logging(level, log_file, stream=stream, environ=ENV)
    return stream


def test_levels_filter_and_each_record_is_one_line() -> None:
    stream = configure("info")
    log = logging.getLogger("awaken_stdio.test")
    log.debug("hidden")
    log.info("first\nsecond\r\nthird")
    log.warning("careful %s", "now")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(f" INFO awaken_stdio.test[{os.getpid()}]: first\\nsecond\\nthird")
    assert " WARNING awaken_stdio.test[" in lines[1] and lines[1].endswith(": careful now")
    assert lines[0][:24].endswith("Z") and lines[0][10] == "T"  # ISO 8601 UTC with milliseconds


def test_an_exception_keeps_a_self_contained_first_line_and_the_traceback_only_at_debug() -> None:
    log = logging.getLogger("awaken_stdio.test")
    for level, with_traceback in (("info", False), ("debug", True)):
        stream = configure(level)
        try:
            raise ValueError("bad value\nsecond line")
        except ValueError:
            log.exception("tool failed")
        first, *rest = stream.getvalue().splitlines()
        assert first.endswith("tool failed [ValueError: bad value\\nsecond line]")
        assert bool(rest) is with_traceback
        assert all(line.startswith("    ") for line in rest)
        if with_traceback:
            assert "Traceback (most recent call last):" in rest[0]


def test_with_a_log_file_stderr_keeps_only_warnings(tmp_path: Path) -> None:
    path = tmp_path / "awaken.log"
    stream = configure("debug", str(path))
    log = logging.getLogger("awaken_stdio.test")
    log.debug("details")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.warning("problem", exc_info=True)
    for handler in logging.getLogger().handlers:
        handler.flush()
    stderr = stream.getvalue().splitlines()
    assert stderr[0].endswith("problem [RuntimeError: boom]") and "details" not in stream.getvalue()
    assert stderr[1].strip() == "Traceback (most recent call last):"  # at debug level stderr shows it too
    text = path.read_text(encoding="utf-8")
    assert "details" in text and "problem [RuntimeError: boom]" in text and "Traceback" in text


def test_a_log_file_gets_the_traceback_even_above_debug(tmp_path: Path) -> None:
    path = tmp_path / "awaken.log"
    stream = configure("info", str(path))
    try:
        raise KeyError("k")
    except KeyError:
        logging.getLogger("x").error("lookup failed", exc_info=True)
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert len(stream.getvalue().splitlines()) == 1
    assert "Traceback" in path.read_text(encoding="utf-8")


def test_secrets_are_masked_in_messages_arguments_and_exceptions() -> None:
    stream = configure("debug")
    log = logging.getLogger("awaken_stdio.providers")
    log.info("key %s and token %s", ENV["OPENAI_API_KEY"], ENV["GITHUB_TOKEN"])
    log.info("db %s", {"password": ENV["DB_PASSWORD"], "secret": ENV["MY_CLIENT_SECRET"]})
    try:
        raise ConnectionError(f"401 with Authorization: Bearer {ENV['GITHUB_TOKEN']}")
    except ConnectionError:
        log.exception("request failed")
    log.info("value 1 stays; home %s stays", ENV["HOME"])
    text = stream.getvalue()
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "MY_CLIENT_SECRET"):
        assert ENV[name] not in text
    assert "Bearer ***" in text and "value 1 stays; home /home/someone stays" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-ant-api03-AbCdEfGh_ij-KLmnop", "key sk-ant-***"),
        ("key sk-proj-ABCDEFGHIJKLMNOPQRST1234", "key sk-***"),
        ("Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9.abc", "Authorization: Bearer ***"),
        ("GET /v1?api_key=abcd1234&x=1", "GET /v1?api_key=***&x=1"),
        ('{"x-api-key": "abcdefgh"}', '{"x-api-key": "***"}'),
        ("access_token=zzzzzzzz", "access_token=***"),
        (
            "max_tokens=100 input_tokens: 20 api_key_env=OPENAI_API_KEY",
            "max_tokens=100 input_tokens: 20 api_key_env=OPENAI_API_KEY",
        ),
        ("OPENAI_API_KEY is not set", "OPENAI_API_KEY is not set"),
        ("task-1234567890123456789", "task-1234567890123456789"),
    ],
)
def test_key_shapes_are_masked_and_ordinary_text_is_not(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


def test_the_longest_secret_wins_when_one_contains_another() -> None:
    redact = Redactor(["abcdefgh", "abcdefgh-and-more"])
    assert redact("x abcdefgh-and-more y abcdefgh") == "x *** y ***"


def test_levels_parse_by_name_or_number_and_reject_the_rest() -> None:
    assert parse_level("DEBUG") == logging.DEBUG
    assert parse_level("warn") == logging.WARNING
    assert parse_level("15") == 15
    assert parse_level(logging.ERROR) == logging.ERROR
    with pytest.raises(UsageError, match="unknown log level 'loud'"):
        parse_level("loud")


def test_a_new_log_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "agent.log"
    old_umask = os.umask(0o022)
    try:
        configure(log_file=str(path))
    finally:
        os.umask(old_umask)
    logging.getLogger("t").warning("hello")
    assert path.stat().st_mode & 0o777 == 0o600
    assert "hello" in path.read_text()


def test_an_existing_log_file_keeps_its_mode_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "agent.log"
    path.write_text("earlier\n")
    path.chmod(0o640)
    configure(log_file=str(path))
    logging.getLogger("t").warning("later")
    assert path.stat().st_mode & 0o777 == 0o640
    assert path.read_text().startswith("earlier\n") and "later" in path.read_text()
