"""Every package the code imports is declared, and each extra brings what its feature needs."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]).lower()


def _imported_top_level() -> dict[str, str]:
    """Top-level module -> a file importing it, over the whole package (lazy imports included)."""
    found: dict[str, str] = {}
    for path in (ROOT / "awaken_stdio").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_package_the_code_imports_is_declared() -> None:
    optional = PROJECT["optional-dependencies"]
    declared = {_name(r) for r in PROJECT["dependencies"]}
    declared |= {_name(r) for extra in ("postgres", "otel", "keyring") for r in optional[extra]}
    providers = importlib.metadata.packages_distributions()
    undeclared = {
        module: where
        for module, where in _imported_top_level().items()
        if module not in sys.stdlib_module_names
        and module not in ("awaken_stdio", "__future__")
        and not {_name(d) for d in providers.get(module, [module])} & declared
    }
    assert undeclared == {}


def test_the_otel_extra_exports_traces_over_otlp() -> None:
    """``OTEL_TRACES_EXPORTER=otlp`` (default protocol http/protobuf) needs the exporter the extra installs."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from awaken_stdio.runtime.otel import otel_from_env

    provider = otel_from_env({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert provider is not None
    processors = provider._active_span_processor._span_processors  # the SDK keeps them there
    exporters = [p.span_exporter for p in processors]
    provider.shutdown()
    assert [type(e) for e in exporters] == [OTLPSpanExporter]
