"""Value rules of spec section 2: base64url, timestamps, identifiers, hashes, safe integers."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

CLAUSES: tuple[str, ...] = ("MWP-FND-004", "MWP-FND-005", "MWP-FND-007", "MWP-FND-008")

MAX_SAFE_INTEGER = 2**53 - 1

_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


class ValueRuleError(ValueError):
    """A value breaks one of the protocol's lexical rules."""


def b64url_decode(text: str) -> bytes:
    """Decode canonical unpadded base64url; reject any other spelling of the same bytes."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueRuleError("not canonical unpadded base64url")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueRuleError("not canonical unpadded base64url") from exc
    if b64url_encode(raw) != text:
        raise ValueRuleError("base64url has nonzero unused pad bits")
    return raw


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def is_sha256_ref(text: str) -> bool:
    return _SHA256.fullmatch(text) is not None


def is_safe_integer(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


# --- timestamps -----------------------------------------------------------------------------

_TIMESTAMP = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[Tt]"
    r"(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})(?:\.(?P<f>[0-9]+))?"
    r"(?P<off>[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_EPOCH = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, order=True)
class Instant:
    """An exact instant: whole seconds since 0001-01-01T00:00:00Z plus an exact fraction."""

    seconds: int
    fraction: Decimal


@dataclass(frozen=True)
class Timestamp:
    """A protocol timestamp: its text exactly as received and the instant it names."""

    text: str
    instant: Instant

    @property
    def is_utc_z(self) -> bool:
        return self.text.endswith("Z")


def parse_timestamp(text: str) -> Timestamp:
    """Parse an RFC 3339 date-time under the protocol timestamp profile (spec section 2)."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise ValueRuleError("not an RFC 3339 date-time")
    year, month, day = int(match["y"]), int(match["mo"]), int(match["d"])
    hour, minute, second = int(match["h"]), int(match["mi"]), int(match["s"])
    if year < 1:
        raise ValueRuleError("year 0000 is outside the profile")
    try:
        day_number = date(year, month, day).toordinal()
    except ValueError as exc:
        raise ValueRuleError("invalid Gregorian date") from exc
    if hour > 23 or minute > 59:
        raise ValueRuleError("invalid time of day")
    if second > 59:
        raise ValueRuleError("leap seconds are not supported in v0.1")
    offset = match["off"]
    offset_seconds = 0
    if offset not in ("Z", "z"):
        if offset == "-00:00":
            raise ValueRuleError("unknown local offset -00:00 is not permitted")
        off_h, off_m = int(offset[1:3]), int(offset[4:6])
        if off_h > 23 or off_m > 59:
            raise ValueRuleError("invalid offset")
        offset_seconds = (off_h * 3600 + off_m * 60) * (1 if offset[0] == "+" else -1)
    seconds = (day_number - 1) * 86400 + hour * 3600 + minute * 60 + second - offset_seconds
    fraction = Decimal("0." + match["f"]) if match["f"] else Decimal(0)
    return Timestamp(text, Instant(seconds, fraction))


def is_profile_timestamp(text: str) -> bool:
    try:
        parse_timestamp(text)
    except ValueRuleError:
        return False
    return True


def format_utc(moment: datetime) -> str:
    """Serialize an aware datetime in the protocol's canonical UTC-Z spelling."""
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def instant_to_datetime(instant: Instant) -> datetime:
    """Nearest microsecond datetime for an instant (for clocks, never for verification)."""
    micros = int((instant.fraction * 1_000_000).to_integral_value())
    return _EPOCH + timedelta(seconds=instant.seconds, microseconds=micros)


# --- identifiers ----------------------------------------------------------------------------

# RFC 3986 absolute-URI, matched against the complete string (fullmatch, never `$`).
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT = rf"{_PCHAR}*"
_SEGMENT_NZ = rf"{_PCHAR}+"
_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = (
    rf"(?:(?:{_H16}:){{6}}{_LS32}"
    rf"|::(?:{_H16}:){{5}}{_LS32}"
    rf"|(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}"
    rf"|(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}"
    rf"|(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}"
    rf"|(?:(?:{_H16}:){{0,6}}{_H16})?::)"
)
_IPVFUTURE = rf"v[0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
_HOST = rf"(?:\[(?:{_IPV6}|{_IPVFUTURE})\]|{_IPV4}|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*)"
_AUTHORITY = rf"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?{_HOST}(?::[0-9]*)?"
_HIER_PART = (
    rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*"
    rf"|/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
    rf"|{_SEGMENT_NZ}(?:/{_SEGMENT})*"
    r"|)"
)
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_URI = re.compile(rf"[A-Za-z][A-Za-z0-9+.\-]*:{_HIER_PART}(?:\?{_QUERY})?(?:#{_QUERY})?")


def is_absolute_uri(text: str) -> bool:
    """An absolute RFC 3986 URI (fragment allowed), ASCII only, nothing trailing."""
    return text.isascii() and _URI.fullmatch(text) is not None


def is_identifier(text: str, *, max_length: int | None = 512) -> bool:
    """A protocol identifier: absolute URI within the schema's length bound."""
    if max_length is not None and len(text) > max_length:
        return False
    return is_absolute_uri(text)
