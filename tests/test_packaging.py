"""What registries and package indexes read about us: the wheel's metadata, ``server.json`` (MCP registry) and
``agent.json`` (ACP registry), each checked against the registry's official schema vendored in ``schemas/registry``.
"""

from __future__ import annotations

import json
import tomllib
from importlib.metadata import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from awaken_stdio import __version__
from awaken_stdio.cli import build_parser

ROOT = Path(__file__).parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REPOSITORY = PROJECT["urls"]["Repository"]


def _json(name: str) -> Any:
    return json.loads((ROOT / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("manifest", "schema"),
    [("server.json", "mcp-server.schema.json"), ("agent.json", "acp-agent.schema.json")],
)
def test_each_registry_manifest_fits_the_official_schema(manifest: str, schema: str) -> None:
    validator = jsonschema.Draft7Validator(
        _json(f"schemas/registry/{schema}"), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(_json(manifest))]
    assert errors == []


def test_the_mcp_registry_entry_names_this_release() -> None:
    server = _json("server.json")
    [package] = server["packages"]
    assert server["version"] == package["version"] == PROJECT["version"] == __version__
    assert (package["registryType"], package["identifier"]) == ("pypi", PROJECT["name"])
    assert server["repository"]["url"] == REPOSITORY
    owner, name = REPOSITORY.removeprefix("https://github.com/").split("/")
    assert server["name"] == f"io.github.{owner}/{name}"  # the namespace GitHub login proves
    # PyPI ownership: the registry looks for this line in the package's README
    assert f"mcp-name: {server['name']}" in (ROOT / "README.md").read_text(encoding="utf-8")
    args = [a["value"] for a in package["packageArguments"]]
    assert build_parser().parse_args(args).command == "mcp"


def test_the_acp_registry_entry_names_this_release() -> None:
    agent = _json("agent.json")
    assert agent["version"] == PROJECT["version"]
    assert agent["distribution"]["uvx"]["package"] == f"{PROJECT['name']}=={PROJECT['version']}"
    assert (agent["repository"], agent["license"]) == (REPOSITORY, PROJECT["license"])
    assert build_parser().parse_args(agent["distribution"]["uvx"]["args"]).command == "acp"


def test_the_wheel_metadata_is_complete() -> None:
    meta = metadata("awaken-stdio")
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert f"Repository, {REPOSITORY}" in (meta.get_all("Project-URL") or [])
    assert "Typing :: Typed" in (meta.get_all("Classifier") or [])
    assert meta["Keywords"] and meta["Author"]
    base = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    requires = {r.split(">")[0].split("=")[0].split("[")[0].strip() for r in base}
    assert {"openai", "anthropic", "jsonschema"} <= requires  # a plain install reaches a model
    assert "jsonrpcserver" not in requires  # the tests' reference only
