"""Strict JSON parsing: exactly one UTF-8 JSON value, no BOM, no duplicate member names.

Numbers keep enough of their text to classify a later data-model failure at its own stage:
a syntactically valid number outside finite binary64 parses to :class:`OutOfRangeNumber`
(an infinite ``float`` that remembers its text), which JCS then rejects (spec 6.4 stage 5).
That holds for integers too long for Python's ``int`` parser: such a number is at least
10**4300, far outside binary64.
"""

from __future__ import annotations

import json
from typing import Any

from mwp.core.errors import Diagnostic, ErrorCode, MwpError

CLAUSES: tuple[str, ...] = ("MWP-EVT-012", "MWP-SDV-015", "MWP-SDV-016")

JsonValue = Any  # None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]


class JsonSyntaxError(ValueError):
    """The bytes are not exactly one strict UTF-8 JSON value."""


class OutOfRangeNumber(float):
    """A JSON number whose value is outside the finite binary64 domain."""

    text: str

    def __new__(cls, text: str) -> OutOfRangeNumber:
        number = super().__new__(cls, float("-inf") if text.startswith("-") else float("inf"))
        number.text = text
        return number

    def __reduce__(self) -> tuple[type[OutOfRangeNumber], tuple[str]]:
        return OutOfRangeNumber, (self.text,)  # copies keep their text (float's would not)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        return OutOfRangeNumber(text)
    return value


# Python's own int-parsing limit (sys.get_int_max_str_digits) is process-wide and settable;
# this one is not, so a long integer parses the same everywhere, and never quadratically.
_MAX_INT_DIGITS = 4300


def _parse_int(text: str) -> int | float:
    if len(text) - text.startswith("-") > _MAX_INT_DIGITS:
        return OutOfRangeNumber(text)
    try:
        return int(text)
    except ValueError:  # a lower process-wide limit: still a number, still out of range
        return OutOfRangeNumber(text)


def _reject_constant(name: str) -> None:
    raise JsonSyntaxError(f"{name} is not a JSON value")


def _object(pairs: list[tuple[str, JsonValue]]) -> dict[str, JsonValue]:
    obj: dict[str, JsonValue] = {}
    for key, value in pairs:
        if key in obj:
            raise JsonSyntaxError(f"duplicate member name {key!r}")
        obj[key] = value
    return obj


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object,
    parse_float=_parse_float,
    parse_int=_parse_int,
    parse_constant=_reject_constant,
)


def encode_wire_text(text: str) -> bytes:
    """The UTF-8 bytes of a document that arrived as text (a Temporal Update's argument).

    A text holding a lone surrogate code point has no UTF-8 form: it is refused as invalid
    UTF-8 is, ``PROTOCOL_VIOLATION`` at the parse stage (spec 6.4 stage 1). A surrogate
    spelled as a JSON escape is different: it parses, and JCS refuses it at stage 5.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MwpError(
            ErrorCode.PROTOCOL_VIOLATION,
            diagnostic=Diagnostic("parse", f"utf-8: lone surrogate at offset {exc.start}"),
        ) from None


def parse_bytes(data: bytes) -> JsonValue:
    """Parse ``data`` strictly (spec 6.4 stage 1, 17.4)."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise JsonSyntaxError("byte-order mark")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise JsonSyntaxError(f"invalid UTF-8 at byte {exc.start}") from exc
    return parse_text(text)


def parse_text(text: str) -> JsonValue:
    """Parse an already decoded document strictly."""
    if text.startswith("\ufeff"):
        raise JsonSyntaxError("byte-order mark")
    try:
        value, end = _DECODER.raw_decode(text, _skip_ws(text, 0))
    except json.JSONDecodeError as exc:
        raise JsonSyntaxError(str(exc)) from exc
    except RecursionError as exc:
        raise JsonSyntaxError("nesting too deep") from exc
    if _skip_ws(text, end) != len(text):
        raise JsonSyntaxError(f"trailing data at offset {end}")
    return value


def _skip_ws(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\n\r":
        index += 1
    return index
