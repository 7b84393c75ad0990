import pytest


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: aiosqlite runs on asyncio futures."""
    return "asyncio"
