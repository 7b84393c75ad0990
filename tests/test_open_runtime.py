"""From a config file to a runtime that persists where the config says (``[store] url``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awaken_stdio import ConfigError, RunActivation, build_runtime, load_config, open_runtime, open_store
from awaken_stdio.contract.messages import Message

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path, store: Path) -> Path:
    (tmp_path / "script.json").write_text(json.dumps({"turns": [{"text": "stored"}]}))
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[store]
url = "sqlite://{store}"
[models.m]
provider = "scripted"
script = "script.json"
[models.m.pricing]
input = 3.0
output = 15.0
[agents.default]
model = "m"
"""
    )
    return path


async def test_open_runtime_persists_in_the_configured_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWAKEN_STDIO_STORE", raising=False)
    db = tmp_path / "data" / "awaken.db"
    config = load_config(_config(tmp_path, db))

    async with open_runtime(config) as runtime:
        result = await runtime.run_to_completion(RunActivation(messages=[Message.user("hi")], thread_id="t"))
        assert result.response == "stored"

    assert db.exists()
    async with open_store(f"sqlite://{db}") as store:
        loaded = await store.load_thread("t")
    assert loaded is not None and [m.text for m in loaded.messages] == ["hi", "stored"]


def test_build_runtime_refuses_to_drop_a_configured_store_silently(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, tmp_path / "awaken.db"))

    with pytest.raises(ConfigError, match=r"\[store\] url.*open_runtime"):
        build_runtime(config)


def test_model_pricing_from_the_config_prices_usage(tmp_path: Path) -> None:
    from awaken_stdio import TokenUsage
    from awaken_stdio.stores.memory import MemoryStore

    runtime = build_runtime(load_config(_config(tmp_path, tmp_path / "awaken.db")), store=MemoryStore())

    assert runtime.cost("m", TokenUsage(input_tokens=1_000_000, output_tokens=100_000)) == pytest.approx(4.5)
