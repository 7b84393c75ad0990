"""``awaken-stdio doctor``: is this installation able to serve? One check per line, each saying what to fix.

Checks the config file (and says every place it was looked for), the store (reachable, its schema version), every
``[tools] modules`` entry (imported, its tools counted), every model (its key set, its endpoint serving the model)
and every configured MCP server (started and listed). A failed config stops the checks that need it; every other
failure is reported and the rest still run. Each slow check is announced through ``progress`` with the time it
may take, and gives up after it: nothing sits silent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from awaken_stdio.app.config import LoadedConfig

__all__ = ["MCP_TIMEOUT_S", "MODEL_TIMEOUT_S", "Check", "checks"]

MODEL_TIMEOUT_S = 5.0
MCP_TIMEOUT_S = 10.0  # doctor's own limit per MCP server: a server's timeout_s may be longer (default 30 s)

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str
    notes: tuple[str, ...] = ()  # printed under the check's line


def _ignore(message: str) -> None:
    pass


async def checks(
    config: str | None = None, store: str | None = None, progress: Progress = _ignore
) -> AsyncIterator[Check]:
    """Each check as soon as it is done (the CLI prints them as they come)."""
    from awaken_stdio.app.app import load_settings
    from awaken_stdio.app.config_file import missing_agent
    from awaken_stdio.contract.errors import AwakenError

    looked = _config_places(config)
    try:
        settings = load_settings(config, store)
    except AwakenError as exc:
        yield Check(name="config", ok=False, detail=str(exc), notes=looked)
        return
    loaded = settings.loaded
    detail = str(loaded.path) if loaded.path else "no config file: defaults from the environment"
    yield Check(name="config", ok=True, detail=detail, notes=looked)
    yield await _check_store(settings.store_url)
    for check in _check_tool_modules(loaded):
        yield check
    async for check in _check_models(loaded, progress):
        yield check
    for check in await _check_mcp_servers(loaded, progress):
        yield check
    missing = missing_agent(loaded.file)
    if missing is not None:
        yield Check(name="agents", ok=False, detail=missing)
    yield _check_serve_token()


def _check_serve_token() -> Check:
    """Where ``awaken-stdio serve`` finds the bearer token it asks of every client."""
    from awaken_stdio.protocols.http.token import describe_token

    ok, detail = describe_token()
    return Check(name="serve token", ok=ok, detail=detail)


def _config_places(config: str | None) -> tuple[str, ...]:
    """Every place the config file is looked for, in order, and what was found there."""
    from awaken_stdio.app.config_file import config_candidates

    candidates = config_candidates(config)
    used = next(i for i, c in enumerate(candidates) if c.path is not None)
    notes = []
    for i, candidate in enumerate(candidates):
        if candidate.path is None:
            state = candidate.unset
        elif i > used:
            state = f"{candidate.path} (not read: {candidates[used].source} comes first)"
        elif candidate.path.is_file():
            state = f"{candidate.path} (used)"
        else:
            state = f"{candidate.path} (not found{'' if candidate.required else ': defaults from the environment'})"
        notes.append(f"{candidate.source}: {state}")
    return tuple(notes)


async def _check_store(url: str) -> Check:
    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.stores import open_store

    try:
        async with open_store(url) as store:
            version = getattr(store, "schema_version", None)
    except AwakenError as exc:
        return Check(name="store", ok=False, detail=str(exc))
    return Check(name="store", ok=True, detail=url if version is None else f"{url} (schema version {version})")


def _check_tool_modules(loaded: LoadedConfig) -> list[Check]:
    """Import each ``[tools] modules`` entry as the app will (beside the config first) and count its tools."""
    import sys

    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.tools.discovery import tools_from_module

    checks = []
    for name in loaded.config.tools.modules:
        try:
            found = tools_from_module(name, loaded.base_dir)
        except AwakenError as exc:
            checks.append(Check(name=f"tools module {name}", ok=False, detail=str(exc)))
            continue
        where = getattr(sys.modules.get(name), "__file__", None) or "namespace package"
        checks.append(
            Check(
                name=f"tools module {name}",
                ok=True,
                detail=f"{len(found)} tool{'' if len(found) == 1 else 's'} ({where})",
            )
        )
    return checks


async def _check_models(loaded: LoadedConfig, progress: Progress) -> AsyncIterator[Check]:
    from awaken_stdio.app.assemble import model_spec
    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.providers import create_executor, load_provider

    for model_id, model in loaded.config.models.items():
        name = f"model {model_id}"
        spec = model_spec(model_id, model)
        try:
            if model.provider == "scripted":
                from awaken_stdio.providers.scripted import ScriptedModel

                script = create_executor(spec, loaded.base_dir)
                assert isinstance(script, ScriptedModel)
                turns = len(script.script.turns)
                yield Check(name=name, ok=True, detail=f"scripted, {turns} turn{'' if turns == 1 else 's'}")
                continue
            if model.provider == "mcp_sampling":
                yield Check(
                    name=name, ok=True, detail="the MCP client's model, in `awaken-stdio mcp` when the client samples"
                )
                continue
            progress(f"checking {name} at its endpoint (gives up after {MODEL_TIMEOUT_S:g} s)...")
            executor = load_provider(spec, loaded.base_dir)
            try:
                detail = await executor.check(MODEL_TIMEOUT_S)
            finally:
                await executor.aclose()
        except AwakenError as exc:
            yield Check(name=name, ok=False, detail=str(exc))
        else:
            yield Check(name=name, ok=True, detail=detail)


async def _check_mcp_servers(loaded: LoadedConfig, progress: Progress) -> list[Check]:
    """Start every server at once, each bounded by ``MCP_TIMEOUT_S`` and tried once (no restarts)."""
    servers = loaded.config.mcp_servers
    if not servers:
        return []
    from awaken_stdio.app.assemble import configured_specs
    from awaken_stdio.contract.errors import AwakenError
    from awaken_stdio.tools.mcp import RestartPolicy, open_mcp_toolsets

    try:
        specs = [replace(s, timeout_s=min(s.timeout_s, MCP_TIMEOUT_S)) for s in configured_specs(servers)]
        names = ", ".join(s.name for s in specs)
        progress(f"starting MCP servers {names} (gives up on each after {MCP_TIMEOUT_S:g} s)...")
        async with open_mcp_toolsets(specs, restart=RestartPolicy(max_failures=0)) as toolsets:
            statuses = toolsets.statuses()
    except AwakenError as exc:
        return [Check(name="mcp servers", ok=False, detail=str(exc))]
    checks = []
    for status in statuses:
        name = f"mcp server {status.name}"
        if status.state == "ready":
            checks.append(Check(name=name, ok=True, detail=f"{len(status.tools)} tools"))
        else:
            checks.append(Check(name=name, ok=False, detail=status.error or status.state))
    return checks
