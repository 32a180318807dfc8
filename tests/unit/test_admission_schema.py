"""The core's dedicated First-Admission Record check agrees with the normative JSON Schema.

The core validates records without reading schema files; this pins it to
``schemas/first-admission-record.schema.json`` over generated mutations of a valid record,
and lists the few places where the core is deliberately stricter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mwp.conformance import bundle
from mwp.core.trust.admission import record_schema_violation

SCHEMA = "schemas/first-admission-record.schema.json"
VALID: dict[str, Any] = {
    "protocolVersion": "0.1",
    "admissionRecordId": "urn:example:admission-record:1",
    "organizationId": "urn:example:organization:acme",
    "documentKind": "command",
    "signingHash": "sha256:" + "ab" * 32,
    "keyId": "urn:example:key:1",
    "principal": {"type": "agent", "id": "urn:example:agent:a"},
    "trustedAcceptedAt": "2026-07-15T00:05:00Z",
    "acceptedBy": {"type": "service", "id": "urn:example:service:admission"},
}

IDS = [
    "urn:example:x",
    "https://example.com/a/b?c=d#e",
    "urn:example:%41",
    "relative/path",
    "urn:example:a b",
    "urn:example:é",
    "",
    "1urn:x",
    "urn:" + "a" * 508,
    "urn:" + "a" * 509,
    42,
    None,
]
TIMES = [
    "2026-07-15T00:05:00Z",
    "2026-07-15t00:05:00z",
    "2026-07-15T08:05:00+08:00",
    "2026-07-15T00:05:00.123456789Z",
    "2026-07-15T00:05:00",
    "2026-02-30T00:05:00Z",
    "2026-07-15 00:05:00Z",
    "not-a-timestamp",
    1,
]
PRINCIPALS = [
    {"type": "agent", "id": "urn:example:agent:a"},
    {"type": "service", "id": "urn:example:service:s"},
    {"type": "human", "id": "urn:example:human:h"},
    {"type": "robot", "id": "urn:example:agent:a"},
    {"type": "agent"},
    {"type": "agent", "id": "urn:example:agent:a", "extra": True},
    {"type": "agent", "id": "relative"},
    ["agent", "urn:example:agent:a"],
]
VALUES: dict[str, list[Any]] = {
    "protocolVersion": ["0.1", "0.2", 0.1, None],
    "admissionRecordId": IDS,
    "organizationId": IDS,
    "keyId": IDS,
    "documentKind": ["command", "event", "group-snapshot", "message", "Command", 1],
    "signingHash": [
        "sha256:" + "0" * 64,
        "sha256:" + "A" * 64,
        "sha256:" + "0" * 63,
        "sha512:" + "0" * 64,
        None,
    ],
    "principal": PRINCIPALS,
    "trustedAcceptedAt": TIMES,
    "acceptedBy": PRINCIPALS,
}


@pytest.fixture(scope="module")
def normative(protocol_root_path: Path) -> Any:
    schemas = bundle.load_schemas(protocol_root_path)
    return lambda value: not schemas.errors(SCHEMA, value)


def test_the_reference_record_is_valid(normative: Any) -> None:
    assert normative(VALID) and record_schema_violation(VALID) is None


@settings(max_examples=400, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from(sorted(VALUES)),
        st.one_of(st.none(), st.integers(0, 11)),
        max_size=3,
    ),
    extra=st.booleans(),
)
def test_core_check_agrees_with_the_schema(
    protocol_root_path: Path, changes: dict[str, int | None], extra: bool
) -> None:
    schemas = bundle.load_schemas(protocol_root_path)
    value = dict(VALID)
    for name, index in changes.items():
        if index is None:
            del value[name]  # a missing member
        else:
            options = VALUES[name]
            value[name] = options[index % len(options)]
    if extra:
        value["signature"] = {"algorithm": "Ed25519"}
    assert (record_schema_violation(value) is None) == (not schemas.errors(SCHEMA, value))


@pytest.mark.parametrize(
    ("member", "value"),
    [
        # ECMA-262 `$` ends the string; Python's `re` lets `$` match before a final newline.
        ("signingHash", "sha256:" + "0" * 64 + "\n"),
        # The protocol timestamp profile excludes what plain RFC 3339 allows.
        ("trustedAcceptedAt", "2026-07-15T23:59:60Z"),
        ("trustedAcceptedAt", "2026-07-15T00:05:00-00:00"),
    ],
)
def test_where_the_core_is_deliberately_stricter(member: str, value: str) -> None:
    # The Python JSON Schema toolchain may accept these; the protocol does not.
    assert record_schema_violation({**VALID, member: value}) is not None
