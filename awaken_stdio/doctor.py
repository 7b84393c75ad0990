"""``awaken-stdio doctor``: is this installation able to serve? One check per line, each saying what to fix.

Checks the config file, the store (reachable, its schema version), every model (its key set, its endpoint serving
the model within a few seconds) and every configured MCP server (started and listed). A failed config stops the
checks that need it; every other failure is reported and the rest still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from awaken_stdio.config import LoadedConfig

__all__ = ["Check", "run_checks"]

MODEL_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


async def run_checks(config: str | None = None, store: str | None = None) -> list[Check]:
    from awaken_stdio.app import load_settings
    from awaken_stdio.contract.errors import AwakenError

    try:
        settings = load_settings(config, store)
    except AwakenError as exc:
        return [Check("config", False, str(exc))]
    loaded = settings.loaded
    checks = [
        Check("config", True, str(loaded.path) if loaded.path else "no config file: defaults from the environment")
    ]
    checks.append(await _check_store(settings.store_url))
    checks.extend(await _check_models(loaded))
    checks.extend(await _check_mcp_servers(loaded))
    if not loaded.config.agents:
        checks.append(
            Check("agents", False, "no agent: write a config file, or set ANTHROPIC_API_KEY or OPENAI_API_KEY")
        )
    return checks


async def _check_store(url: str) -> Check:
    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.stores import open_store

    try:
        async with open_store(url) as store:
            version = getattr(store, "schema_version", None)
    except AwakenError as exc:
        return Check("store", False, str(exc))
    return Check("store", True, url if version is None else f"{url} (schema version {version})")


async def _check_models(loaded: LoadedConfig) -> list[Check]:
    from awaken_stdio.config import model_spec
    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.providers import create_executor, load_provider

    checks = []
    for model_id, model in loaded.config.models.items():
        name = f"model {model_id}"
        spec = model_spec(model_id, model)
        try:
            if model.provider == "scripted":
                script = create_executor(spec, loaded.base_dir)
                turns = len(script.script.turns)  # type: ignore[attr-defined]
                checks.append(Check(name, True, f"scripted, {turns} turn{'' if turns == 1 else 's'}"))
                continue
            executor = load_provider(spec, loaded.base_dir)
            try:
                detail = await executor.check(MODEL_TIMEOUT_S)  # type: ignore[attr-defined]
            finally:
                await executor.aclose()  # type: ignore[attr-defined]
        except AwakenError as exc:
            checks.append(Check(name, False, str(exc)))
        else:
            checks.append(Check(name, True, detail))
    return checks


async def _check_mcp_servers(loaded: LoadedConfig) -> list[Check]:
    servers = loaded.config.mcp_servers
    if not servers:
        return []
    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.tools.mcp_client import configured_specs, open_mcp_toolsets

    try:
        async with open_mcp_toolsets(configured_specs(servers)) as toolsets:
            statuses = toolsets.statuses()
    except AwakenError as exc:
        return [Check("mcp servers", False, str(exc))]
    checks = []
    for status in statuses:
        name = f"mcp server {status.name}"
        if status.state == "ready":
            checks.append(Check(name, True, f"{len(status.tools)} tools"))
        else:
            checks.append(Check(name, False, status.error or status.state))
    return checks
