"""Model providers. Each SDK-backed provider is imported only when a model of its kind is first used.

``create_executor`` returns at once: for an SDK-backed provider it returns a :class:`LazyExecutor` that imports the
provider module (and its SDK, hundreds of milliseconds) on the first ``stream`` call, so building a runtime from a
config never slows the protocol servers' first answer.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from awaken_stdio.contract.errors import ConfigError

if TYPE_CHECKING:  # annotations only: the ACP server imports ``providers.families`` before its first answer
    from collections.abc import AsyncIterator

    from awaken_stdio.contract.agent import ModelSpec
    from awaken_stdio.contract.inference import InferenceRequest, LlmExecutor, ModelCapabilities, StreamChunk
    from awaken_stdio.providers._common import SdkExecutor

__all__ = ["LazyExecutor", "create_executor", "load_provider"]

# provider name -> (module, the SDK package it needs)
_PROVIDERS: dict[str, tuple[str, str | None]] = {
    "openai": ("awaken_stdio.providers.openai", "openai"),
    "anthropic": ("awaken_stdio.providers.anthropic", "anthropic"),
}


def create_executor(spec: ModelSpec, base_dir: Path) -> LlmExecutor:
    """The executor of one configured model. Relative paths in its options resolve against ``base_dir``."""
    if spec.provider == "scripted":
        from awaken_stdio.providers.scripted import ScriptedModel

        script = Path(spec.options["script"])
        return ScriptedModel.from_file(script if script.is_absolute() else base_dir / script)
    if spec.provider == "mcp_sampling":
        from awaken_stdio.providers.mcp_sampling import McpSamplingModel

        options = spec.options
        return McpSamplingModel(
            spec.model, max_output_tokens=options.get("max_output_tokens"), context_window=options.get("context_window")
        )
    if spec.provider not in _PROVIDERS:
        raise ConfigError(f"models.{spec.id}: unknown provider {spec.provider!r}")
    return LazyExecutor(spec, base_dir)


def load_provider(spec: ModelSpec, base_dir: Path) -> SdkExecutor:
    """Import the provider module now and build its executor (``doctor`` uses this to check a model)."""
    module_name, extra = _PROVIDERS[spec.provider]
    try:
        module = importlib.import_module(module_name)
        return module.create_executor(spec, base_dir)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigError(f"models.{spec.id}: provider {spec.provider!r} is not available in this build") from exc
        from awaken_stdio.providers._common import install_hint

        raise ConfigError(f"models.{spec.id}: {install_hint(extra or spec.provider, exc)}") from exc


class LazyExecutor:
    """Builds the real executor on first use; capabilities come from the config until then."""

    def __init__(self, spec: ModelSpec, base_dir: Path) -> None:
        self.spec = spec
        self.base_dir = base_dir
        self._executor: LlmExecutor | None = None

    @property
    def executor(self) -> LlmExecutor:
        if self._executor is None:
            self._executor = load_provider(self.spec, self.base_dir)
        return self._executor

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        return self.executor.stream(request)

    def capabilities(self, model: str) -> ModelCapabilities:
        if self._executor is not None:
            return self._executor.capabilities(model)
        from awaken_stdio.providers._common import capabilities_for  # no SDK import: family defaults only

        return capabilities_for(self.spec.model or model, self.spec.options)
