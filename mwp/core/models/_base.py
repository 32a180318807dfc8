"""The base of every wire model and the helpers its conditional rules are written with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

CLAUSES: tuple[str, ...] = ("MWP-EXT-010",)

T = TypeVar("T")


class WireModel(BaseModel):
    """A durable protocol object as it appears on the wire.

    Members are lowerCamelCase, unknown members are rejected, nothing is coerced, and a
    validated object is immutable. Python callers may construct models by field name; wire
    validation (:func:`mwp.core.models.validate_document`) accepts wire names only.
    """

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        # Free-form members may hold out-of-range numbers (rejected later, by JCS); a JSON-mode
        # dump must hand them back as numbers rather than rewrite them to null.
        ser_json_inf_nan="constants",
    )

    # Wire names of members whose schema admits any JSON value, null included.
    nullable_members: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _reject_null_members(cls, data: Any) -> Any:
        # Optional members are typed `X | None` so that absence is representable; a JSON null
        # is still not an `X`, so it must be refused before the union could accept it.
        if type(data) is dict and None in data.values():
            for name, value in data.items():
                if value is None and name not in cls.nullable_members:
                    raise ValueError(f"member {name!r} must not be null")
        return data

    def _wire_name(self, field: str) -> str:
        alias = type(self).model_fields[field].alias
        return alias if alias is not None else field

    def _require(self, *fields: str, when: str) -> None:
        """Fail unless every named member is present."""
        missing = [self._wire_name(f) for f in fields if getattr(self, f) is None]
        if missing:
            raise ValueError(f"{', '.join(missing)} required when {when}")

    def _forbid(self, *fields: str, when: str) -> None:
        """Fail if any named member is present."""
        present = [self._wire_name(f) for f in fields if getattr(self, f) is not None]
        if present:
            raise ValueError(f"{', '.join(present)} not allowed when {when}")


def unique_items(items: list[T]) -> list[T]:
    """JSON Schema `uniqueItems`: no two items are equal as JSON values."""
    try:
        if len(set(items)) == len(items):
            return items
    except TypeError:
        # Objects holding arrays are unhashable; compare them pairwise (lists stay short).
        if not _has_duplicate(items):
            return items
    raise ValueError("items must be unique")


def _has_duplicate(items: Sequence[object]) -> bool:
    return any(items[i] == items[j] for i in range(len(items)) for j in range(i))
