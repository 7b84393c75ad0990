"""A default plus an optional pydantic type: what state keys and profile keys share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from pydantic import TypeAdapter

V = TypeVar("V")


class TypedValue(Generic[V]):
    """``default`` is a value or a factory; with ``value_type``, JSON goes through a (lazily built) TypeAdapter."""

    __slots__ = ("_adapter", "_default", "value_type")

    def __init__(self, default: V | Callable[[], V] | None, value_type: Any) -> None:
        self._default = default
        self.value_type = value_type
        self._adapter: TypeAdapter[Any] | None = None

    def default(self) -> V:
        d = self._default
        return cast(V, d() if callable(d) else d)

    def _type_adapter(self) -> TypeAdapter[Any]:
        if self._adapter is None:
            from pydantic import TypeAdapter

            self._adapter = TypeAdapter(self.value_type)
        return self._adapter

    def dump_json(self, value: V) -> Any:
        return self._type_adapter().dump_python(value, mode="json") if self.value_type is not None else value

    def load_json(self, data: Any) -> V:
        return cast(V, self._type_adapter().validate_python(data)) if self.value_type is not None else cast(V, data)
