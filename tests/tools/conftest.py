"""Fixtures the tool tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project directory, resolved (``/tmp`` may be a symlink), with room beside it for paths outside."""
    (tmp_path / "proj").mkdir()
    return (tmp_path / "proj").resolve()
