"""Model providers. Each SDK-backed provider is imported only when a model of its kind is first built."""

from __future__ import annotations

import importlib
from pathlib import Path

from awaken_stdio.contract.agent import ModelSpec
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.inference import LlmExecutor

__all__ = ["create_executor"]

# provider name -> (module, the extra that installs its SDK)
_PROVIDERS: dict[str, tuple[str, str | None]] = {
    "scripted": ("awaken_stdio.providers.scripted", None),
    "openai": ("awaken_stdio.providers.openai", "openai"),
    "anthropic": ("awaken_stdio.providers.anthropic", "anthropic"),
}


def create_executor(spec: ModelSpec, base_dir: Path) -> LlmExecutor:
    """Build the executor of one configured model. Relative paths in its options resolve against ``base_dir``."""
    if spec.provider == "scripted":
        from awaken_stdio.providers.scripted import ScriptedModel

        script = Path(spec.options["script"])
        return ScriptedModel.from_file(script if script.is_absolute() else base_dir / script)
    entry = _PROVIDERS.get(spec.provider)
    if entry is None:
        raise ConfigError(f"models.{spec.id}: unknown provider {spec.provider!r}")
    module_name, extra = entry
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigError(f"models.{spec.id}: provider {spec.provider!r} is not available in this build") from exc
        raise ConfigError(
            f"models.{spec.id}: provider {spec.provider!r} needs its SDK: pip install 'awaken-stdio[{extra}]'"
        ) from exc
    return module.create_executor(spec, base_dir)
