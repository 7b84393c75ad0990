"""The speed tricks that lean on CPython's private names, in one room, each beside the plain code it stands for.

Nothing else in the package reaches into a library's private names (``tests/contract/test_speed.py`` lists the tricks
in :data:`TRICKS`, runs each fallback and checks that no other module uses one). Each trick gives what its fallback
gives, only sooner, and falls back by itself where the private name is missing (another interpreter, a later
CPython). Figures and the commands that measure them: ``bench/README.md`` (start-up and encoding).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _random import Random

__all__ = ["TRICKS", "compact_json", "random_generator"]

# each trick: the private name it uses -> the public one it falls back to
TRICKS = {
    "_random.Random": "random.Random",
    "json.encoder.c_make_encoder": "json.JSONEncoder.encode",
}


def random_generator() -> Random:
    """A Mersenne Twister seeded from the OS: ``random.Random()``, without importing ``random`` (its module and
    the ``bisect``/``hashlib`` it pulls in cost 1.2 ms of start-up, on CLI commands that load nothing else needing
    it). ``random.Random`` is a subclass of this one C generator: the draws are the same."""
    try:
        from _random import Random
    except ImportError:
        from random import Random
    return Random()


def compact_json() -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode``: compact ASCII-only JSON that refuses
    NaN. ``encode`` builds CPython's C encoder anew for every value; built once here, with the same settings, it
    writes the same text about 30% sooner (a checkpoint encodes every new message)."""
    import json
    from json import encoder as json_encoder

    plain = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
    # None without the C accelerator; not in typeshed
    make_c_encoder: Any = getattr(json_encoder, "c_make_encoder", None)
    if make_c_encoder is None:
        return plain.encode
    c_encode: Any = make_c_encoder(
        None, plain.default, json_encoder.encode_basestring_ascii, None, ":", ",", False, False, False
    )

    def dumps(value: Any) -> str:
        try:
            return "".join(c_encode(value, 0))
        except RecursionError:  # it does not look for cycles (``json`` does, for this error): a cycle never ends
            raise ValueError("Circular reference detected") from None

    return dumps
