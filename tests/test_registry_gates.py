"""The registries' gates (``scripts/registry_gates.py``): the checks themselves, and the source tree through them.

``make registry-gates`` runs the same gates against the built wheel launched by ``uvx`` with an empty cache; here the
agent is this tree's ``python -m awaken_stdio``, so the suite needs neither network nor uv.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("registry_gates", ROOT / "scripts" / "registry_gates.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gates = _load()
GOOD_ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">'
    '<path fill="currentColor" d="M0 0h16v16H0z"/></svg>'
)


def test_the_repository_passes_the_static_registry_gates() -> None:
    failing = {g.name: g.problems for g in gates.static_gates() if not g.ok}
    assert failing == {}


@pytest.mark.parametrize(
    ("svg", "problem"),
    [
        (GOOD_ICON.replace('"currentColor"', '"#FF0000"'), "hard-coded fill='#FF0000'"),
        (GOOD_ICON.replace('fill="currentColor"', 'style="stroke: red"'), "hard-coded stroke='red'"),
        (GOOD_ICON.replace('"16"', '"24"').replace("0 0 16 16", "0 0 24 24"), "icon is 24x24"),
        (GOOD_ICON.replace('width="16" height="16" ', "").replace("0 0 16 16", "0 0 16 12"), "icon is 16x12"),
        (GOOD_ICON.replace('fill="currentColor"', 'fill="none" stroke="inherit"'), "currentColor is not used"),
        (GOOD_ICON.replace('width="16" height="16" viewBox="0 0 16 16"', ""), "neither width/height nor a viewBox"),
    ],
)
def test_the_icon_rules_reject_what_the_acp_registry_rejects(svg: str, problem: str) -> None:
    assert gates.icon_problems(GOOD_ICON) == []
    assert any(p.startswith(problem) for p in gates.icon_problems(svg)), gates.icon_problems(svg)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"id": "Awaken"}, "id 'Awaken': lowercase"),
        ({"id": "awaken"}, "id 'awaken' must equal the registry directory"),
        ({"version": "1.0"}, "version '1.0' is not semver"),
        ({"distribution": {"uvx": {"package": "awaken-stdio==0.0.9"}}}, "uvx package 'awaken-stdio==0.0.9' is not"),
        ({"distribution": {"uvx": {"package": "awaken-stdio@latest"}}}, "uvx package 'awaken-stdio@latest' uses"),
    ],
)
def test_the_manifest_rules_reject_what_the_acp_registry_rejects(change: dict[str, Any], problem: str) -> None:
    agent = {
        "id": "awaken-stdio",
        "name": "awaken-stdio",
        "version": "0.1.0",
        "description": "d",
        "distribution": {"uvx": {"package": "awaken-stdio==0.1.0", "args": ["acp"]}},
    }
    assert gates.agent_problems(agent, "awaken-stdio") == []
    problems = gates.agent_problems(agent | change, "awaken-stdio")
    assert any(p.startswith(problem) for p in problems), problems


def test_auth_types_are_read_as_the_registry_reads_them() -> None:
    methods = [{"id": "a"}, {"id": "b", "type": "env_var"}, {"id": "c", "_meta": {"terminal-auth": {}}}]
    assert gates.auth_types({"authMethods": methods}) == ["agent", "env_var", "terminal"]


@pytest.fixture(scope="module")
def protocol_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    launch = gates.Launch((sys.executable, "-m", "awaken_stdio"), gates.agent_args())
    sandbox = tmp_path_factory.mktemp("registry")
    found = [gates.launch_gate(launch, sandbox), *gates.protocol_gates(launch, sandbox)]
    return {g.name: g for g in found}


PROTOCOL_GATES = [
    "launch (verify_agents.py)",
    "auth check (no model)",
    "session/new asks for auth (no model)",
    "auth check (a model configured)",
    "session/new (a model configured)",
    "session/list (matrix)",
    "session/fork (matrix)",
    "session/resume (matrix)",
    "session/close (matrix)",
]


def test_every_protocol_gate_ran(protocol_results: dict[str, Any]) -> None:
    assert sorted(protocol_results) == sorted(PROTOCOL_GATES)


@pytest.mark.parametrize("name", PROTOCOL_GATES)
def test_the_agent_passes_the_registry_protocol_gate(protocol_results: dict[str, Any], name: str) -> None:
    gate = protocol_results[name]
    assert gate.problems == ()


@pytest.mark.parametrize(
    ("method", "problem"),
    [
        ({"id": "login", "type": "terminal", "args": ["runs", "list"]}, None),
        ({"id": "login", "_meta": {"terminal-auth": {"args": ["runs", "list"]}}}, None),
        ({"id": "login", "type": "terminal", "args": ["no-such-command"]}, "terminal auth login: `no-such-command"),
        ({"id": "login", "type": "terminal"}, "terminal auth login: ` --help`"),
    ],
)
def test_a_terminal_auth_method_must_start_a_command_we_accept(
    tmp_path: Path, method: dict[str, Any], problem: str | None
) -> None:
    launch = gates.Launch((sys.executable, "-m", "awaken_stdio"), gates.agent_args())
    problems = gates._terminal_args_problems({"authMethods": [method]}, launch, tmp_path, dict(os.environ))
    assert [p.startswith(problem) for p in problems] == ([] if problem is None else [True]), problems
