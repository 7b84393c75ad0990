"""The config file: parsing, errors that name the field, defaults from the environment, runtime building."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awaken_stdio.app.assemble import build_runtime
from awaken_stdio.app.config import (
    config_json_schema,
    default_config,
    example_config,
    load_config,
    parse_config,
)
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.stores.memory import MemoryStore

SCHEMAS = Path(__file__).parent.parent / "schemas"
SCRIPT = {"turns": [{"text": "hello from the script"}]}


def _write(tmp_path: Path, toml: str) -> Path:
    (tmp_path / "demo.json").write_text(json.dumps(SCRIPT))
    path = tmp_path / "config.toml"
    path.write_text(toml)
    return path


GOOD = """
default_agent = "coder"
[models.demo]
provider = "scripted"
script = "demo.json"
[agents.coder]
model = "demo"
system_prompt = "Be brief."
delegates = ["helper"]
max_rounds = 4
[agents.helper]
model = "demo"
"""


def test_committed_schema_is_current() -> None:
    assert json.loads((SCHEMAS / "config.schema.json").read_text()) == config_json_schema()


def test_example_config_is_valid() -> None:
    import tomllib

    parse_config(tomllib.loads(example_config()), "example")


@pytest.mark.anyio
async def test_builds_a_runtime_whose_scripted_model_resolves_relative_to_the_file(tmp_path: Path) -> None:
    runtime = build_runtime(load_config(_write(tmp_path, GOOD)), store=MemoryStore())
    assert runtime.default_agent_id() == "coder"
    assert runtime.agents["coder"].max_rounds == 4
    assert "agent_run_helper" in runtime.resolve("coder").tools
    result = await runtime.run_to_completion("hi")
    assert result.response == "hello from the script"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[models.m]\nprovider = 'nope'\n", "models.m.provider"),
        ("[agents.a]\nmodel = 'missing'\n", "agents.a.model: no model 'missing'"),
        ("[models.m]\nprovider = 'scripted'\n", "models.m: a scripted model needs `script`"),
        ("[models.m]\nprovider = 'openai'\n", "models.m: `model` (the upstream model id) is required"),
        ("unknown_key = 1\n", "unknown_key: unknown field"),
        ("default_agent = 'ghost'\n", "default_agent: no agent 'ghost'"),
        ("[mcp_servers.s]\nargs = []\n", "mcp_servers.s: give exactly one of `command` or `url`"),
        ("[agents.a\n", "invalid TOML"),
    ],
)
def test_errors_name_the_file_and_field(tmp_path: Path, toml: str, message: str) -> None:
    path = _write(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_env_var_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWAKEN_STDIO_CONFIG", str(_write(tmp_path, GOOD)))
    assert load_config().config.default_agent == "coder"


@pytest.mark.parametrize(
    ("env", "provider", "base_url"),
    [
        ({"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}, "anthropic", None),
        (
            {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"},
            "openai",
            "http://127.0.0.1:11434/v1",
        ),
        ({}, None, None),
    ],
)
def test_no_config_default_comes_from_the_environment(
    env: dict[str, str], provider: str | None, base_url: str | None
) -> None:
    config = default_config(env)
    if provider is None:
        assert config.models == {} and config.agents == {}
        return
    assert config.models["default"].provider == provider
    assert config.models["default"].base_url == base_url
    assert config.agents["default"].model == "default"
