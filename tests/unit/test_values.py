"""Lexical value rules of spec section 2."""

from __future__ import annotations

import pytest

from mwp.core.wire.values import (
    ValueRuleError,
    b64url_decode,
    b64url_encode,
    is_absolute_uri,
    is_safe_integer,
    is_sha256_ref,
    parse_timestamp,
)


@pytest.mark.parametrize(
    "text",
    [
        "urn:uuid:00000000-0000-4000-8000-000000000001",
        "urn:",
        "https://a.example/p?q=1#f",
        "mailto:a@b.example",
        "urn:caf%C3%A9",
        "http://[::1]:8080/x",
    ],
)
def test_absolute_uris_are_identifiers(text: str) -> None:
    assert is_absolute_uri(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "relative/path",
        "//host/x",
        "urn:x\n",
        "urn:x y",
        "urn:\tx",
        "urn:caf\u00e9",
        "https://\u4f8b\u3048.test/",
        "urn:%GG",
        "urn:%4",
        "1urn:x",
        "urn:x\u0000",
    ],
)
def test_non_uris_and_iri_only_spellings_are_rejected(text: str) -> None:
    assert not is_absolute_uri(text)


@pytest.mark.parametrize(
    "text",
    [
        "2026-07-15T00:00:00Z",
        "2026-07-15t00:00:00z",
        "2026-07-15T00:00:00.123456789Z",
        "2026-07-15T00:00:00+23:59",
        "2026-07-15T00:00:00-23:59",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "2024-02-29T12:00:00+05:30",
    ],
)
def test_profile_timestamps_keep_their_text(text: str) -> None:
    assert parse_timestamp(text).text == text


@pytest.mark.parametrize(
    "text",
    [
        "2026-07-15T00:00:60Z",
        "0000-01-01T00:00:00Z",
        "2026-07-15T00:00:00-00:00",
        "2026-02-29T00:00:00Z",
        "2026-07-15T24:00:00Z",
        "2026-07-15T00:00:00",
        "2026-07-15 00:00:00Z",
        "2026-07-15T00:00:00.Z",
        "2026-07-15T00:00:00+24:00",
        "2026-07-15T00:00:00Z\n",
    ],
)
def test_timestamps_outside_the_profile_are_rejected(text: str) -> None:
    with pytest.raises(ValueRuleError):
        parse_timestamp(text)


def test_fractional_seconds_compare_exactly_without_rounding() -> None:
    a = parse_timestamp("2026-07-15T00:00:00.1234560000000000001Z").instant
    b = parse_timestamp("2026-07-15T00:00:00.123456Z").instant
    c = parse_timestamp("2026-07-15T00:00:00.1234560Z").instant
    assert b < a
    assert b == c


def test_offsets_name_the_same_instant() -> None:
    assert (
        parse_timestamp("2026-07-15T08:00:00+08:00").instant
        == parse_timestamp("2026-07-15T00:00:00Z").instant
    )


def test_base64url_is_canonical_and_unpadded() -> None:
    assert b64url_decode("YWI") == b"ab"
    assert b64url_encode(b"ab") == "YWI"
    for bad in ["YWI=", "YWJ", "Y", "YW+I", "YW/I", "YW I"]:
        with pytest.raises(ValueRuleError):
            b64url_decode(bad)


def test_hash_and_integer_rules() -> None:
    assert is_sha256_ref("sha256:" + "a" * 64)
    assert not is_sha256_ref("sha256:" + "A" * 64)
    assert not is_sha256_ref("sha512:" + "a" * 64)
    assert is_safe_integer(0) and is_safe_integer(2**53 - 1)
    assert not is_safe_integer(-1)
    assert not is_safe_integer(2**53)
    assert not is_safe_integer(True)
    assert not is_safe_integer(1.0)
