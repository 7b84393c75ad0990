"""The package is one straight stack: cli -> protocols -> app -> runtime -> {tools, providers, stores} -> contract.

Each module may import its own layer and the layers below it, never one above; ``tools``, ``providers`` and
``stores`` are siblings that do not import one another. The protocols import only the app, the contract and their own
modules (the JSON-RPC peer among them): where a run runs is a ``RunEnvironment`` they build, and whatever else they
need of the layers below reaches them through the app. Two checks: every ``import`` statement of the source (those
inside functions and under ``TYPE_CHECKING`` too, which no import at run time would reveal), and a fresh interpreter
per layer that imports all of its modules and finds nothing of a higher layer loaded (package ``__init__`` files and
re-exports included, which the statements alone do not show).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "awaken_stdio"

# (layer, its top-level modules and packages), lowest first; siblings share a rank.
LAYERS: list[tuple[str, int, tuple[str, ...]]] = [
    ("contract", 0, ("contract", "_version")),
    ("stores", 1, ("stores",)),
    ("providers", 1, ("providers",)),
    ("tools", 1, ("tools",)),
    ("runtime", 2, ("runtime",)),
    ("app", 3, ("app",)),
    ("protocols", 4, ("protocols",)),
    ("cli", 5, ("cli", "cli_parser", "doctor", "logs", "login", "chat", "__main__")),
]
_BY_TOP = {top: (name, rank) for name, rank, tops in LAYERS for top in tops}
# layers whose import statements may name only these layers (their own included), whatever lies below them
NARROW: dict[str, frozenset[str]] = {"protocols": frozenset({"protocols", "app", "contract"})}


def _layer(module: str) -> tuple[str, int] | None:
    """The layer of ``awaken_stdio.<top>...``; ``None`` for the package root (``awaken_stdio/__init__.py``, the
    public API, which every module loads as its parent and which imports only ``_version`` itself)."""
    parts = module.split(".")
    if parts[0] != "awaken_stdio" or len(parts) == 1:
        return None
    if parts[1] not in _BY_TOP:
        raise AssertionError(f"{module}: not in any layer of tests/test_layers.py; add it to LAYERS")
    return _BY_TOP[parts[1]]


def _may_import(source: tuple[str, int], target: tuple[str, int]) -> bool:
    return target[0] == source[0] or target[1] < source[1]


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if "data" in rel.parts:  # the chat demo's sample project, not the package
            continue
        parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
        found.append((".".join(parts), path))
    return found


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every ``awaken_stdio`` module a file imports, wherever the statement is."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "awaken_stdio" else [node.module]
            out += [(node.lineno, name) for name in names]
    return [(line, name) for line, name in out if name.split(".")[0] == "awaken_stdio"]


def test_no_import_statement_runs_up_the_stack() -> None:
    wrong = []
    for module, path in _modules():
        source = _layer(module)
        for line, target in _imports(path):
            to = _layer(target)
            if source is None:  # the root: its imports at start-up are checked below, the rest are lazy names
                continue
            if to is None:
                wrong.append(f"{module}:{line} imports the package root ({target}); import the defining module")
            elif not _may_import(source, to) or to[0] not in NARROW.get(source[0], {to[0]}):
                wrong.append(f"{module}:{line} ({source[0]}) imports {target} ({to[0]})")
    assert not wrong, "\n".join(wrong)


def test_the_package_root_loads_only_the_version() -> None:
    code = "import sys, awaken_stdio; print(sorted(m for m in sys.modules if m.startswith('awaken_stdio')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(["awaken_stdio", "awaken_stdio._version"])


@pytest.mark.parametrize(("name", "rank", "tops"), LAYERS, ids=[name for name, _, _ in LAYERS])
def test_a_layer_loads_nothing_above_it(name: str, rank: int, tops: tuple[str, ...]) -> None:
    # ``__main__`` is left out: importing it runs the CLI (its one import is checked above)
    modules = [m for m, _ in _modules() if m != "awaken_stdio.__main__" and m.partition(".")[2].split(".")[0] in tops]
    code = f"import importlib, json, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
    code += "print(json.dumps(list(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    loaded = [m for m in json.loads(out.stdout) if m.startswith("awaken_stdio.")]
    above = [m for m in loaded if (to := _layer(m)) is not None and not _may_import((name, rank), to)]
    assert modules, name
    assert not above, f"importing the {name} layer loads {above}"


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = {stack.pop()}
                while node not in group:
                    group.add(stack.pop())
                if len(group) > 1:
                    found.append(frozenset(m.removeprefix("awaken_stdio.") for m in group))
    return found


def test_no_import_circle_between_modules() -> None:
    """Wherever the statement is (in a function, under ``TYPE_CHECKING``): a circle is a cut in the wrong place."""
    modules = dict(_modules())
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, target in _imports(path):
            while target not in modules and "." in target:  # ``from a.b import Name``: the module a.b
                target = target.rpartition(".")[0]
            if target in modules and target != module:
                graph[module].add(target)
    circles = _circles(graph)
    assert not circles, f"import circles: {sorted(map(sorted, circles))}"
