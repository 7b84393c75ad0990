"""Calls that read: records take keywords, and no call passes five or more values by position.

A reader should not count commas to learn which value is which. ``ast`` scans ``awaken_stdio/``; pyright strict then
keeps every construction site honest once a record is keyword-only.

What a positional count leaves out, because something else already names the order:
- a printf-style format (``log.info("run %s step %d", ...)``): the format's placeholders;
- a SQL statement with its parameters (``tx.execute(q.thread_save, ...)``, ``self._all(sql, ...)``): its placeholders;
- a callable handed on with its arguments (``anyio.run``, ``start_soon``, ``to_thread.run_sync``, ``partial``): the
  values count as a call of that callable, one fewer;
- ``*values`` counts as one value (one thing read);
- foreign functions that take no keywords (``FOREIGN``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "awaken_stdio"
MOST_POSITIONAL = 4
FORWARDERS = {"run", "start", "start_soon", "run_sync", "partial", "_run"}
FOREIGN = {
    "prctl": "libc's prctl through ctypes: C arguments, by position only",
    "make_c_encoder": "json's C encoder factory takes its nine settings by position only",
}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text(encoding="utf-8"))


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_dataclass(decorator: ast.expr) -> bool:
    return _name(decorator.func if isinstance(decorator, ast.Call) else decorator) == "dataclass"


def _keyword_only(cls: ast.ClassDef, decorator: ast.expr) -> bool:
    if isinstance(decorator, ast.Call) and any(
        k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True for k in decorator.keywords
    ):
        return True
    return any(isinstance(s, ast.AnnAssign) and _name(s.annotation) == "KW_ONLY" for s in cls.body)


def _is_sql(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "sql" or node.id.isupper()
    return isinstance(node, ast.Attribute) and _name(node.value) == "q"


def _positional(call: ast.Call) -> int:
    """How many values ``call`` passes by position that nothing else names."""
    args = call.args
    if not args or _name(call.func) in FOREIGN:
        return 0
    first = args[0]
    if (isinstance(first, ast.Constant) and isinstance(first.value, str) and "%" in first.value) or _is_sql(first):
        return 0
    if _name(call.func) in FORWARDERS:
        args = args[1:]
    return len(args)


def records_without_keywords() -> list[str]:
    return [
        f"{where}:{cls.lineno} {cls.name}"
        for where, module in _modules()
        for cls in ast.walk(module)
        if isinstance(cls, ast.ClassDef)
        for decorator in cls.decorator_list
        if _is_dataclass(decorator) and not _keyword_only(cls, decorator)
    ]


def positional_calls() -> list[str]:
    return [
        f"{where}:{call.lineno} {ast.unparse(call.func)}(...) passes {_positional(call)} values by position"
        for where, module in _modules()
        for call in ast.walk(module)
        if isinstance(call, ast.Call) and _positional(call) > MOST_POSITIONAL
    ]


def test_every_record_takes_keywords_only() -> None:
    assert records_without_keywords() == []


def test_no_call_passes_five_values_by_position() -> None:
    assert positional_calls() == []


def test_the_scan_sees_what_it_forbids() -> None:
    """Each rule fires on a made-up offender and lets its exceptions through."""
    module = ast.parse(
        "@dataclass(frozen=True)\nclass A: x: int\n"
        "@dataclass(kw_only=True)\nclass B: x: int\n"
        "@dataclass\nclass C:\n    x: int\n    _: KW_ONLY\n    y: int\n"
    )
    classes = [c for c in module.body if isinstance(c, ast.ClassDef)]
    assert [_keyword_only(c, c.decorator_list[0]) for c in classes] == [False, True, True]

    def count(source: str) -> int:
        call = ast.parse(source).body[0]
        assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
        return _positional(call.value)

    assert count("f(a, b, c, d, e)") == 5
    assert count("f(a, b, *rest, d, e)") == 5
    assert count("f(a, b, c, d, e=e)") == 4
    assert count("log.info('%s %s %s %s %s', a, b, c, d, e)") == 0
    assert count("reply(None, CODE, 'no such method', None, batch)") == 5
    assert count("tx.execute(q.thread_save, a, b, c, d, e)") == count("self._all(SELECT, a, b, c, d, e)") == 0
    assert count("tg.start_soon(serve, a, b, c, d)") == 4
    assert count("tg.start_soon(serve, a, b, c, d, e)") == 5


MOST_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """A module past 600 lines holds more than one job: cut it where the jobs part (issue 29's rule)."""
    long = [
        f"{path.relative_to(PACKAGE.parent)}: {n} lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    ]
    assert not long, long
