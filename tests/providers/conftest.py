"""Fixtures the provider tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_servers import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server
