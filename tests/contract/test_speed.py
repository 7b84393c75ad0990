"""The speed tricks on CPython's private names: named in ``contract/_speed.py``, used nowhere else, and each one's
plain fallback gives the same as the trick when the private name is missing."""

from __future__ import annotations

import ast
import json
import math
import random
import sys
from json import encoder as json_encoder
from pathlib import Path
from typing import Any

import pytest

import awaken_stdio
from awaken_stdio.contract import _speed

PACKAGE = Path(awaken_stdio.__file__).parent
# names that are private although they do not start with an underscore (undocumented accelerators)
UNDOCUMENTED = {"c_make_encoder", "c_encode_basestring", "c_encode_basestring_ascii", "c_scanstring", "make_scanner"}


def _private_uses(tree: ast.AST) -> set[str]:
    """The private names of other packages a module uses: modules named ``_x`` (or with a ``_x`` part) it imports,
    ``_x`` attributes of a module it imported, and the undocumented names above however they are reached."""
    imported: set[str] = set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            names = [module] if module else [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] not in ("awaken_stdio", "__future__"):
                    found.update(part for part in name.split(".") if part.startswith("_"))
            if module.split(".")[0] != "awaken_stdio":
                imported.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                found.add(node.attr)
        elif isinstance(node, ast.Constant) and node.value in UNDOCUMENTED:
            found.add(node.value)
        elif isinstance(node, ast.Attribute) and node.attr in UNDOCUMENTED:
            found.add(node.attr)
    return found


def test_the_tricks_are_these_two_and_live_in_one_module() -> None:
    assert _speed.TRICKS == {
        "_random.Random": "random.Random",
        "json.encoder.c_make_encoder": "json.JSONEncoder.encode",
    }
    uses = {
        path.relative_to(PACKAGE).as_posix(): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := _private_uses(ast.parse(path.read_text())))
    }
    assert uses == {"contract/_speed.py": {"_random", "c_make_encoder"}}


def test_the_id_generator_is_random_s_own_without_its_module() -> None:
    fast = _speed.random_generator()
    assert type(fast).__module__ == "_random"  # the trick is in use here
    fast.seed(7)
    plain = random.Random(7)
    assert [fast.getrandbits(62) for _ in range(5)] == [plain.getrandbits(62) for _ in range(5)]


def test_without_the_c_generator_random_s_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "_random", None)  # what importing it meets where it does not exist
    generator = _speed.random_generator()
    assert type(generator) is random.Random
    assert 0 <= generator.getrandbits(62) < 1 << 62


VALUES: list[Any] = [
    {"role": "user", "content": [{"type": "text", "text": 'h\u00e9llo \ud83d\ude00 "q" \\ </'}], "n": [1, 2.5, None]},
    "plain",
    [True, False, 0, -1, 1e300, {"": {}}],
]


def test_the_prebuilt_encoder_writes_what_json_encoder_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _speed.compact_json()
    monkeypatch.setattr(json_encoder, "c_make_encoder", None)  # as CPython sets it without the accelerator
    plain = _speed.compact_json()
    assert isinstance(getattr(plain, "__self__", None), json.JSONEncoder)  # the fallback is the encoder's own
    for value in VALUES:
        assert fast(value) == plain(value)
    cycle: list[Any] = []
    cycle.append(cycle)
    for dumps in (fast, plain):
        with pytest.raises(ValueError):
            dumps({"x": math.nan})
        with pytest.raises(ValueError, match="Circular reference"):
            dumps(cycle)
        with pytest.raises(TypeError):
            dumps({"x": object()})
