"""The stores' JSON encoder (``_codec.dumps``) writes exactly what ``json`` writes with the same settings: it only
keeps one C encoder instead of building one per value (issue 16), and refuses what ``json`` refuses."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from awaken_stdio.stores._codec import dumps

REFERENCE = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize(
    "value",
    [
        {"id": "m1", "content": [{"type": "text", "text": 'é\u2028"quoted"\n😀'}], "n": 3, "f": -0.5, "ok": True},
        [1, 2.0, 1e300, None, [], {}, "", {"nested": [{"deep": [False]}]}],
        {7: "int key", 2.5: "float key", False: "bool key", None: "none key"},
        "plain",
        12345678901234567890,
    ],
)
def test_writes_what_json_writes(value: Any) -> None:
    assert dumps(value) == REFERENCE.encode(value)
    assert dumps(value) == dumps(value)  # nothing carried over from one value to the next


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    "value", [{"x": math.nan}, [math.inf], {"x": object()}, {(1, 2): "tuple key"}, _cycle(), {"in": [_cycle()]}]
)
def test_refuses_what_json_refuses_and_goes_on(value: Any) -> None:
    """NaN and infinities, unknown types, keys JSON cannot have, and a cycle (as ``ValueError``, as ``json``)."""
    with pytest.raises((ValueError, TypeError)):
        REFERENCE.encode(value)
    with pytest.raises((ValueError, TypeError)):
        dumps(value)
    assert dumps({"after": [1]}) == '{"after":[1]}'
