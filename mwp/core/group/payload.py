"""Typed reading of free-form Command payloads: a wrong member is ``INVALID_COMMAND``.

The Command schema leaves ``payload`` free-form; the payload of each kind is defined in
``docs/commands.md`` and declared beside its rule as :class:`Members`, so a member the kind
does not define is refused rather than dropped (spec 17.4). Readers here name the offending
member in the error details.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from mwp.core.group.rejection import invalid
from mwp.core.wire.values import (
    MAX_SAFE_INTEGER,
    is_identifier,
    is_profile_timestamp,
    is_sha256_ref,
)


class Payload:
    __slots__ = ("_data", "_path")

    def __init__(self, data: Mapping[str, Any], path: str = "payload") -> None:
        self._data = data
        self._path = path

    def _fail(self, name: str, reason: str) -> NoReturn:
        invalid(f"{self._path}.{name}: {reason}", member=f"{self._path}.{name}", reason=reason)

    @property
    def data(self) -> Mapping[str, Any]:
        return self._data

    def has(self, name: str) -> bool:
        return name in self._data

    def raw(self, name: str) -> Any:
        if name not in self._data:
            self._fail(name, "is required")
        return self._data[name]

    def id(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str) or not is_identifier(value):
            self._fail(name, "must be an absolute URI identifier")
        return str(value)

    def opt_id(self, name: str) -> str | None:
        return self.id(name) if name in self._data else None

    def text(self, name: str, *, max_length: int = 4000) -> str:
        value = self.raw(name)
        if not isinstance(value, str) or not value.strip() or len(value) > max_length:
            self._fail(name, f"must be non-blank text of at most {max_length} characters")
        return str(value)

    def opt_text(self, name: str, *, max_length: int = 4000) -> str | None:
        return self.text(name, max_length=max_length) if name in self._data else None

    def integer(
        self,
        name: str,
        *,
        minimum: int = 0,
        maximum: int = MAX_SAFE_INTEGER,
        default: int | None = None,
    ) -> int:
        if name not in self._data and default is not None:
            return default
        value = self.raw(name)
        if type(value) is not int or not minimum <= value <= maximum:
            self._fail(name, f"must be an integer from {minimum} to {maximum}")
        return int(value)

    def boolean(self, name: str, *, default: bool) -> bool:
        value = self._data.get(name, default)
        if not isinstance(value, bool):
            self._fail(name, "must be a boolean")
        return bool(value)

    def timestamp(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str) or not is_profile_timestamp(value):
            self._fail(name, "must be an RFC 3339 timestamp")
        return str(value)

    def choice(self, name: str, allowed: frozenset[str], *, default: str | None = None) -> str:
        if name not in self._data and default is not None:
            return default
        value = self.raw(name)
        if not isinstance(value, str) or value not in allowed:
            self._fail(name, f"must be one of {sorted(allowed)}")
        return str(value)

    def obj(self, name: str) -> dict[str, Any]:
        value = self.raw(name)
        if not isinstance(value, dict):
            self._fail(name, "must be an object")
        return dict(value)

    def opt_obj(self, name: str) -> dict[str, Any] | None:
        return self.obj(name) if name in self._data else None

    def objects(self, name: str, *, min_items: int = 0, max_items: int = 10_000) -> list[Payload]:
        value = self.raw(name)
        if not isinstance(value, list) or not min_items <= len(value) <= max_items:
            self._fail(name, f"must be an array of {min_items} to {max_items} objects")
        items = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                self._fail(f"{name}[{index}]", "must be an object")
            items.append(Payload(item, f"{self._path}.{name}[{index}]"))
        return items

    def id_list(self, name: str, *, min_items: int = 0, default: bool = False) -> list[str]:
        return self._unique_list(name, is_identifier, "identifiers", min_items, default)

    def sha256_list(self, name: str, *, min_items: int = 0, default: bool = False) -> list[str]:
        return self._unique_list(name, is_sha256_ref, "sha256 hashes", min_items, default)

    def _unique_list(
        self, name: str, valid: Callable[[str], bool], noun: str, min_items: int, default: bool
    ) -> list[str]:
        if default and name not in self._data:
            return []
        value = self.raw(name)
        if (
            not isinstance(value, list)
            or len(value) < min_items
            or not all(isinstance(v, str) and valid(v) for v in value)
            or len(set(value)) != len(value)
        ):
            self._fail(name, f"must be an array of at least {min_items} unique {noun}")
        return list(value)

    def text_list(self, name: str, *, max_length: int = 2000) -> list[str]:
        if name not in self._data:
            return []
        value = self.raw(name)
        if not isinstance(value, list) or not all(
            isinstance(v, str) and v.strip() and len(v) <= max_length for v in value
        ):
            self._fail(name, f"must be an array of non-blank texts (at most {max_length} chars)")
        return list(value)


# --- the members a payload may carry -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Members:
    """The members one payload object may carry. A member maps to ``None`` when its value is
    read whole: a core object that its own strict schema validates, a scalar or list of them,
    or data free-form by design. It maps to a nested :class:`Members` when the kind reads the
    object (or each object of the array) it holds member by member."""

    names: Mapping[str, Members | None]

    def unknown(self, value: Any, path: str = "payload") -> tuple[str, list[str]] | None:
        """The first object under ``value`` holding members not declared here, with those
        members; None when there is none. Values of the wrong type are the readers' concern."""
        if not isinstance(value, dict):
            return None
        extra = sorted(name for name in value if name not in self.names)
        if extra:
            return path, extra
        for name, nested in self.names.items():
            if nested is None or name not in value:
                continue
            inner = value[name]
            items = enumerate(inner) if isinstance(inner, list) else ((None, inner),)
            for index, item in items:
                at = f"{path}.{name}" if index is None else f"{path}.{name}[{index}]"
                found = nested.unknown(item, at)
                if found is not None:
                    return found
        return None


def members(*names: str, **nested: Members) -> Members:
    """``members("reason")``; ``members("ownershipEpoch", evidence=members("evidenceId"))``."""
    declared: dict[str, Members | None] = dict.fromkeys(names)
    declared.update(nested)
    return Members(declared)


NO_MEMBERS = members()
