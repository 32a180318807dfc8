"""Registry evidence invariants and key validity (spec 6.4, stage 4)."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.trust.registry import RegistryEvidence, RegistryEvidenceError
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import b64url_encode, parse_timestamp

ORG = "urn:example:organization:test"


def _binding(
    key_id: str = "urn:example:key:a",
    principal_id: str = "urn:example:agent:a",
    public_key: bytes | None = None,
    history: list[dict[str, Any]] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    binding = {
        "keyId": key_id,
        "principal": {"type": "agent", "id": principal_id},
        "algorithm": "Ed25519",
        "publicKey": b64url_encode(public_key or SigningKey.generate().public_key),
        "validFrom": "2026-01-01T00:00:00Z",
        "validityHistory": history or [],
    }
    binding.update(overrides)
    return binding


def _evidence(*bindings: dict[str, Any], org: str = ORG) -> RegistryEvidence:
    return RegistryEvidence.from_json({"organizationId": org, "bindings": list(bindings)})


def _reason(*bindings: dict[str, Any], org: str = ORG) -> str:
    with pytest.raises(RegistryEvidenceError) as info:
        _evidence(*bindings, org=org)
    return info.value.reason


def test_valid_evidence_resolves_its_keys() -> None:
    evidence = _evidence(_binding(), _binding("urn:example:key:b", "urn:example:agent:b"))
    assert evidence.resolve("urn:example:key:b").principal.id == "urn:example:agent:b"
    with pytest.raises(RegistryEvidenceError):
        evidence.resolve("urn:example:key:unknown")


def test_key_id_reuse_with_other_material_is_rejected() -> None:
    assert _reason(_binding(), _binding()) == "key-id-reuse"


def test_identical_binding_declared_twice_is_one_logical_binding() -> None:
    key = SigningKey.generate().public_key
    first = _binding(
        public_key=key, history=[{"sequence": 1, "recordedAt": "2026-02-01T00:00:00Z"}]
    )
    again = _binding(
        public_key=key,
        history=[
            {
                "sequence": 2,
                "recordedAt": "2026-03-01T00:00:00Z",
                "revokedAt": "2026-03-01T00:00:00Z",
            }
        ],
    )
    evidence = _evidence(first, again)
    assert len(evidence.resolve("urn:example:key:a").history) == 2


def test_public_key_under_another_principal_is_rejected() -> None:
    key = SigningKey.generate().public_key
    other = _binding("urn:example:key:b", "urn:example:agent:b", public_key=key)
    assert _reason(_binding(public_key=key), other) == "public-key-alias"


def test_same_principal_and_key_under_another_key_id_is_an_alias() -> None:
    key = SigningKey.generate().public_key
    alias = _binding("urn:example:key:b", public_key=key)
    assert _reason(_binding(public_key=key), alias) == "public-key-alias"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"keyId": "urn:example:key:a\n"}, "key-id"),
        ({"keyId": "keys/a"}, "key-id"),
        ({"principal": {"type": "agent", "id": "urn:example:agent:%GG"}}, "principal-id"),
        ({"principal": {"type": "robot", "id": "urn:example:agent:a"}}, "principal-shape"),
        ({"algorithm": "Ed448"}, "algorithm"),
        ({"publicKey": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "public-key-point"),
        ({"publicKey": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "public-key-length"),
        ({"publicKey": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, "public-key-encoding"),
        ({"validFrom": "2026-01-01T00:00:60Z"}, "validity-timestamp"),
    ],
)
def test_one_bad_unrelated_binding_fails_all_resolution(
    overrides: dict[str, Any], reason: str
) -> None:
    bad = _binding("urn:example:key:bad", "urn:example:agent:bad", **overrides)
    assert _reason(_binding(), bad) == reason


def test_relative_organization_id_is_rejected() -> None:
    assert _reason(_binding(), org="organizations/acme") == "organization-id"


def test_validity_boundary_may_move_earlier_but_never_later() -> None:
    earlier = [
        {"sequence": 1, "recordedAt": "2026-02-01T00:00:00Z", "validUntil": "2026-06-01T00:00:00Z"},
        {"sequence": 2, "recordedAt": "2026-03-01T00:00:00Z", "validUntil": "2026-05-01T00:00:00Z"},
    ]
    evidence = _evidence(_binding(history=earlier))
    validity = evidence.resolve("urn:example:key:a").validity()
    assert validity.valid_until is not None
    assert validity.valid_until.text == "2026-05-01T00:00:00Z"
    later = [earlier[1], {**earlier[0], "sequence": 3}]
    assert _reason(_binding(history=later)) == "validity-boundary-moved-later"


def test_history_sequences_must_ascend() -> None:
    history = [
        {"sequence": 2, "recordedAt": "2026-02-01T00:00:00Z"},
        {"sequence": 1, "recordedAt": "2026-03-01T00:00:00Z"},
    ]
    assert _reason(_binding(history=history)) == "validity-history-order"


@pytest.mark.parametrize(
    ("moment", "valid"),
    [
        ("2025-12-31T23:59:59.999999999Z", False),
        ("2026-01-01T00:00:00Z", True),
        ("2026-01-01T01:00:00+01:00", True),
        ("2026-04-30T23:59:59.9999999Z", True),
        ("2026-05-01T00:00:00Z", False),
        ("2026-05-01T00:00:00.0000000001Z", False),
    ],
)
def test_validity_is_half_open_and_compared_as_instants(moment: str, valid: bool) -> None:
    history = [
        {"sequence": 1, "recordedAt": "2026-02-01T00:00:00Z", "revokedAt": "2026-05-01T00:00:00Z"}
    ]
    validity = _evidence(_binding(history=history)).resolve("urn:example:key:a").validity()
    assert validity.contains(parse_timestamp(moment)) is valid


def test_evidence_round_trips_through_json() -> None:
    evidence = _evidence(_binding(history=[{"sequence": 1, "recordedAt": "2026-02-01T00:00:00Z"}]))
    assert RegistryEvidence.from_json(evidence.to_json()) == evidence
