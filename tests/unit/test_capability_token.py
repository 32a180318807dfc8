"""Capability tokens (spec 12, 11.3): issued under one Execution Lease, capped by the contract
and what remains, refused when forged, from another issuer, expired, revoked, bound to
anything but the presenter's current Session, ownership and lease, or asked for more than it
grants; never printed, and found wherever it leaks into a JSON value."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.allocation import DIMENSIONS as BUDGET_DIMENSIONS
from mwp.core.trust.capability_token import (
    DIMENSIONS,
    TOKEN_TYPE,
    AuthorizationService,
    Binding,
    CapabilityToken,
    Claims,
    ExecutionLease,
    Grant,
    ToolCall,
    check,
    contains_token,
    issue,
    rotate,
    token_paths,
)
from mwp.core.trust.registry import (
    KeyBinding,
    Principal,
    RegistryEvidence,
    ValidityStatus,
)
from mwp.core.trust.service_message import TrustedKey, seal
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import b64url_encode, parse_timestamp

ISSUED = "2026-12-01T10:00:00Z"
LEASE_END = "2026-12-01T10:15:00Z"
BEFORE_END = "2026-12-01T10:14:59.999Z"
AFTER_END = "2026-12-01T10:15:00.001Z"
EXPIRES = "2026-12-01T10:10:00Z"

AUTHZ_ID = "urn:example:service:authorization"
AUTHZ = AuthorizationService(AUTHZ_ID, "urn:example:key:authorization", SigningKey.generate())
OTHER = AuthorizationService(
    "urn:example:service:policy", "urn:example:key:policy", SigningKey.generate()
)
TRUSTED = TrustedKey(AUTHZ.key_id, AUTHZ.key.public_key)

BOUND = Binding(
    agent_id="urn:example:agent:worker-one",
    session_epoch=3,
    mission_id="urn:example:mission:alpha",
    group_id="urn:example:group:alpha",
    work_item_id="urn:example:work-item:one",
    ownership_epoch=2,
    lease_id="urn:example:lease:one",
)
LEASE = ExecutionLease(BOUND, LEASE_END)
GRANT = Grant(
    tools=frozenset({"repo.read", "repo.write"}),
    resources=frozenset({"repo:acme/api"}),
    data=frozenset({"source-code"}),
    operations=frozenset({"read", "write"}),
)
CONTRACT_BUDGET: dict[str, Any] = {
    "currency": "USD",
    "financialLimit": 10,
    "modelTokenLimit": 1000,
    "toolCallLimit": 10,
    "computeSecondsLimit": 60,
    "wallClockSecondsLimit": 600,
    "externalSideEffectLimit": 2,
}
REMAINING = {d: Decimal(1_000_000) for d in DIMENSIONS}  # the contract binds, not the ledger
CALL = ToolCall("repo.read", "read", frozenset({"repo:acme/api"}), frozenset({"source-code"}))


def token(grant: Grant = GRANT, **changes: Any) -> CapabilityToken:
    args: dict[str, Any] = {
        "lease": LEASE,
        "contract_budget": CONTRACT_BUDGET,
        "remaining": REMAINING,
        "token_id": "urn:example:token:one",
        "issued_at": ISSUED,
        "expires_at": EXPIRES,
        "issuer": AUTHZ,
    }
    args.update(changes)
    return issue(grant, **args)


def checked(presented: CapabilityToken | Mapping[str, Any], **changes: Any) -> Claims:
    args: dict[str, Any] = {
        "presented_by": BOUND,
        "for_call": CALL,
        "now": "2026-12-01T10:05:00Z",
        "revoked": frozenset(),
        "trusted": TRUSTED,
        "issuer": AUTHZ_ID,
    }
    args.update(changes)
    return check(presented, **args)


def refusal(presented: CapabilityToken | Mapping[str, Any], **changes: Any) -> MwpError:
    with pytest.raises(MwpError) as refused:
        checked(presented, **changes)
    return refused.value


def why(error: MwpError) -> tuple[ErrorCode, str, str]:
    assert error.diagnostic is not None
    return error.code, error.diagnostic.stage, error.diagnostic.reason


def resealed(presented: CapabilityToken, by: AuthorizationService = AUTHZ, **body: Any) -> Any:
    """The token's document with ``body`` changes, signed again by ``by`` (an issuer's fault
    when ``by`` is the Authorization Service itself)."""
    doc = presented.document
    return seal(
        TOKEN_TYPE,
        sender=doc["from"],
        recipient=doc["to"],
        sent_at=doc["sentAt"],
        body={**doc["body"], **body},
        key_id=by.key_id,
        key=by.key,
    )


# --- issuing -------------------------------------------------------------------------------------


def test_an_issued_token_binds_the_lease_and_is_accepted_for_a_granted_call() -> None:
    # given a token issued under the current lease
    issued = token()
    # when its Worker presents it for a granted call
    claims = checked(issued)
    # then its claims are the lease's binding and the grant
    assert claims.binding == BOUND
    assert claims.token_id == "urn:example:token:one" and claims.issuer == AUTHZ_ID
    assert (claims.expires_at, claims.lease_expires_at) == (EXPIRES, LEASE_END)
    assert claims.grant.tools == GRANT.tools and claims.grant.data == GRANT.data
    assert claims.grant.currency == "USD"


def test_the_dimensions_are_the_budget_ledgers() -> None:
    assert DIMENSIONS == BUDGET_DIMENSIONS


def test_limits_are_capped_by_the_contract_budget() -> None:
    # given a request for more than the contract allows in every dimension
    asked = {d: Decimal(10_000) for d in DIMENSIONS}
    # when a token is issued
    limits = token(dataclasses.replace(GRANT, limits=asked)).claims.grant.limits
    # then each limit is the contract's
    assert limits == {d: Decimal(str(CONTRACT_BUDGET[d])) for d in DIMENSIONS}


def test_limits_are_capped_by_what_remains_and_by_what_is_asked() -> None:
    # given a ledger that leaves less than the contract in two dimensions
    remaining = {"toolCallLimit": Decimal(3), "financialLimit": Decimal("0.3")}
    asked = {"modelTokenLimit": Decimal(50)}
    # when a token is issued
    grant = token(dataclasses.replace(GRANT, limits=asked), remaining=remaining).claims.grant
    # then the least of asked, contract and remaining binds, dimension by dimension
    assert grant.limits["toolCallLimit"] == 3
    assert grant.limits["financialLimit"] == Decimal("0.3")
    assert grant.limits["modelTokenLimit"] == 50
    assert grant.limits["externalSideEffectLimit"] == 2


def test_an_exhausted_dimension_is_limited_to_nothing_and_an_unlimited_one_stays_out() -> None:
    # given a contract that limits tool calls only, and a ledger with none left (or less)
    tools_only = {"toolCallLimit": 5}
    for left in (Decimal(0), Decimal(-1)):
        exhausted = token(contract_budget=tools_only, remaining={"toolCallLimit": left})
        # then the token limits tool calls to nothing and names no currency
        assert exhausted.claims.grant.limits == {"toolCallLimit": Decimal(0)}
        assert exhausted.claims.grant.currency is None
        call = ToolCall("repo.read", "read", spend={"toolCallLimit": 1})
        assert why(refusal(exhausted, for_call=call)) == (
            ErrorCode.BUDGET_EXCEEDED,
            "limit",
            "toolCallLimit",
        )
    # and a dimension nothing limits is not limited by the token either
    unlimited = token(contract_budget=tools_only, remaining={})
    big = ToolCall("repo.read", "read", spend={"toolCallLimit": 5, "modelTokenLimit": 10**9})
    assert checked(unlimited, for_call=big)


def test_a_token_expiring_at_the_lease_boundary_is_issued_one_past_it_is_refused() -> None:
    assert token(expires_at=LEASE_END).claims.expires_at == LEASE_END
    with pytest.raises(MwpError) as refused:
        token(expires_at=AFTER_END)
    assert why(refused.value) == (ErrorCode.AUTH_FORBIDDEN, "issue", "expiry-past-lease")


def test_no_token_is_issued_once_the_lease_is_over_or_with_a_bad_request() -> None:
    cases: dict[tuple[ErrorCode, str, str], dict[str, Any]] = {
        (ErrorCode.WORK_LEASE_EXPIRED, "issue", "lease-over"): {"issued_at": LEASE_END},
        (ErrorCode.INVALID_COMMAND, "issue", "expiry-not-after-issuance"): {"expires_at": ISSUED},
        (ErrorCode.INVALID_COMMAND, "expires-at", "timestamp"): {"expires_at": "soon"},
    }
    for expected, changes in cases.items():
        with pytest.raises(MwpError) as refused:
            token(**changes)
        assert why(refused.value) == expected
    with pytest.raises(MwpError) as refused:
        token(dataclasses.replace(GRANT, limits={"gpuLimit": Decimal(1)}))
    assert why(refused.value) == (ErrorCode.INVALID_COMMAND, "issue", "unknown-dimension")


# --- checking: authenticity, issuer, revocation, expiry ------------------------------------------


def test_a_forged_or_altered_token_is_refused() -> None:
    issued = token()
    altered = {**issued.to_json(), "body": {**issued.document["body"], "tools": ["shell"]}}
    assert why(refusal(altered)) == (ErrorCode.AUTH_INVALID_SIGNATURE, "signature", "bad-signature")
    forged_key = resealed(issued, AuthorizationService(AUTHZ_ID, AUTHZ.key_id, OTHER.key))
    assert why(refusal(forged_key))[:2] == (ErrorCode.AUTH_INVALID_SIGNATURE, "signature")
    zeroed = {**issued.document["signature"], "value": b64url_encode(bytes(64))}
    assert why(refusal({**issued.to_json(), "signature": zeroed}))[0] == (
        ErrorCode.AUTH_INVALID_SIGNATURE
    )
    assert why(refusal({"tokenId": issued.token_id}))[0] == ErrorCode.AUTH_INVALID_SIGNATURE


def test_a_token_from_another_issuer_is_refused() -> None:
    theirs = token(issuer=OTHER)
    assert why(refusal(theirs)) == (ErrorCode.AUTH_INVALID_SIGNATURE, "issuer", "untrusted-key")
    # the right key, but a body naming another issuer
    named_other = token(issuer=AuthorizationService(OTHER.service_id, AUTHZ.key_id, AUTHZ.key))
    assert why(refusal(named_other)) == (ErrorCode.AUTH_INVALID_SIGNATURE, "issuer", "wrong-sender")


def evidence(*bindings: KeyBinding) -> RegistryEvidence:
    return RegistryEvidence.from_bindings("urn:example:org:acme", list(bindings))


def key_binding(
    service: AuthorizationService, revoked_at: str | None = None, valid_from: str = ISSUED
) -> KeyBinding:
    history: tuple[ValidityStatus, ...] = ()
    if revoked_at is not None:
        at = parse_timestamp(revoked_at)
        history = (ValidityStatus(1, at, None, at),)
    principal = Principal("service", service.service_id)
    return KeyBinding(
        service.key_id,
        principal,
        "Ed25519",
        service.key.public_key,
        parse_timestamp(valid_from),
        history,
    )


def test_against_registry_evidence_only_the_issuers_valid_key_is_trusted() -> None:
    both = evidence(key_binding(AUTHZ), key_binding(OTHER))
    assert checked(token(), trusted=both).token_id == "urn:example:token:one"
    assert why(refusal(token(issuer=OTHER), trusted=both)) == (
        ErrorCode.AUTH_INVALID_SIGNATURE,
        "issuer",
        "not-the-issuer",
    )
    assert why(refusal(token(), trusted=evidence(key_binding(OTHER)))) == (
        ErrorCode.AUTH_INVALID_SIGNATURE,
        "issuer",
        "unknown-key",
    )
    # a key revoked after issuance no longer vouches for its tokens; one valid only later
    # never did
    revoked = evidence(key_binding(AUTHZ, revoked_at="2026-12-01T10:01:00Z"))
    late = evidence(key_binding(AUTHZ, valid_from="2026-12-01T10:01:00Z"))
    for trusted in (revoked, late):
        assert why(refusal(token(), trusted=trusted)) == (
            ErrorCode.AUTH_INVALID_SIGNATURE,
            "issuer",
            "key-interval",
        )


def test_a_revoked_token_is_refused_and_others_are_not() -> None:
    issued = token()
    assert why(refusal(issued, revoked={issued.token_id})) == (
        ErrorCode.AUTH_FORBIDDEN,
        "revocation",
        "revoked",
    )
    assert checked(issued, revoked={"urn:example:token:other"}).token_id == issued.token_id


def test_a_token_is_refused_at_and_after_its_expiry_and_the_lease_boundary() -> None:
    short, full = token(), token(expires_at=LEASE_END)
    expired = (ErrorCode.AUTH_FORBIDDEN, "expiry", "expired")
    assert checked(short, now="2026-12-01T10:09:59.999Z")
    assert why(refusal(short, now=EXPIRES)) == expired
    assert why(refusal(short, now="2026-12-01T10:10:00.001Z")) == expired
    assert checked(full, now=BEFORE_END)
    assert why(refusal(full, now=LEASE_END)) == expired
    assert why(refusal(full, now=AFTER_END)) == expired


def test_an_authentic_token_that_outlives_its_lease_is_refused() -> None:
    # given the issuer signed a token past the lease it names (an issuer's fault)
    faulty = resealed(token(), expiresAt=AFTER_END)
    # when it is presented well within both, then it is refused all the same
    assert why(refusal(faulty)) == (ErrorCode.AUTH_FORBIDDEN, "expiry", "past-lease")


def test_an_authentic_token_of_the_wrong_shape_is_refused() -> None:
    issued = token()
    for body in ({"ownershipEpoch": "2"}, {"tools": "repo.read"}, {"limits": {"gpu": 1}}):
        assert why(refusal(resealed(issued, **body))) == (
            ErrorCode.SCHEMA_VALIDATION_FAILED,
            "token",
            "body-shape",
        )
    extra = resealed(issued, scope="all")
    assert why(refusal(extra)) == (ErrorCode.SCHEMA_VALIDATION_FAILED, "token", "body-members")


# --- checking: each binding in turn --------------------------------------------------------------

MISMATCHES = [
    ("agent_id", "urn:example:agent:worker-two", ErrorCode.AUTH_FORBIDDEN, "agent"),
    ("session_epoch", 4, ErrorCode.AUTH_STALE_SESSION, "session-epoch"),
    ("session_epoch", 2, ErrorCode.AUTH_STALE_SESSION, "session-epoch"),
    ("work_item_id", "urn:example:work-item:two", ErrorCode.AUTH_FORBIDDEN, "work-item"),
    ("ownership_epoch", 3, ErrorCode.WORK_STALE_OWNERSHIP, "ownership-epoch"),
    ("lease_id", "urn:example:lease:two", ErrorCode.WORK_LEASE_EXPIRED, "lease"),
    ("group_id", "urn:example:group:beta", ErrorCode.AUTH_FORBIDDEN, "group"),
    ("mission_id", "urn:example:mission:beta", ErrorCode.AUTH_FORBIDDEN, "mission"),
]


@pytest.mark.parametrize(("member", "current", "code", "name"), MISMATCHES)
def test_each_bound_field_mismatched_in_turn_is_refused_by_name(
    member: str, current: Any, code: ErrorCode, name: str
) -> None:
    # given a token bound to the lease, when the presenter's current value of one binding
    # differs, then the token is refused naming that binding
    presenter = dataclasses.replace(BOUND, **{member: current})
    assert why(refusal(token(), presented_by=presenter)) == (code, "binding", name)


# --- checking: the grant and the limits ----------------------------------------------------------


def test_a_call_outside_the_grant_is_refused_by_what_it_asks_for() -> None:
    cases = {
        "tool": ToolCall("shell.exec", "read"),
        "operation": ToolCall("repo.read", "delete"),
        "resource": ToolCall("repo.read", "read", frozenset({"repo:acme/billing"})),
        "data": ToolCall("repo.read", "read", data=frozenset({"customer-pii"})),
    }
    issued = token()
    for name, call in cases.items():
        assert why(refusal(issued, for_call=call)) == (ErrorCode.AUTH_FORBIDDEN, "grant", name)
    assert checked(issued, for_call=ToolCall("repo.write", "write"))


@pytest.mark.parametrize("dimension", DIMENSIONS)
def test_a_call_whose_spend_would_pass_a_limit_is_refused(dimension: str) -> None:
    # given a token with the contract's limit in every dimension and part of it spent
    issued, limit = token(), Decimal(str(CONTRACT_BUDGET[dimension]))
    spent = {dimension: limit - 1}

    def call(spend: Decimal | int) -> ToolCall:  # a financial amount in the token's currency
        return ToolCall("repo.read", "read", spend={dimension: spend}, currency="USD")

    # when a call would reach the limit exactly it is allowed; one past it is refused
    assert checked(issued, for_call=call(1), spent=spent)
    assert why(refusal(issued, for_call=call(2), spent=spent)) == (
        ErrorCode.BUDGET_EXCEEDED,
        "limit",
        dimension,
    )
    assert why(refusal(issued, for_call=call(limit + 1))) == (
        ErrorCode.BUDGET_EXCEEDED,
        "limit",
        dimension,
    )


def test_decimal_spend_adds_exactly_and_bad_spend_is_refused() -> None:
    issued = token(remaining={"financialLimit": Decimal("0.3")})
    call = ToolCall("repo.read", "read", spend={"financialLimit": Decimal("0.2")}, currency="USD")
    assert checked(issued, for_call=call, spent={"financialLimit": Decimal("0.1")})
    bad = {
        "unknown-dimension": {"gpuLimit": 1},
        "negative-spend": {"toolCallLimit": -1},
    }
    for reason, spend in bad.items():
        error = refusal(issued, for_call=ToolCall("repo.read", "read", spend=spend))
        assert why(error) == (ErrorCode.INVALID_COMMAND, "call", reason)
    assert why(refusal(issued, now="noon")) == (ErrorCode.INVALID_COMMAND, "now", "timestamp")


# --- rotation and narrowing (MWP-WRK-014) --------------------------------------------------------

NARROW = Grant(
    tools=frozenset({"repo.read"}),
    resources=frozenset({"repo:acme/api"}),
    data=frozenset({"source-code"}),
    operations=frozenset({"read"}),
    limits={"toolCallLimit": Decimal(2)},
)


def rotated(previous: CapabilityToken, grant: Grant = NARROW, **changes: Any) -> CapabilityToken:
    args: dict[str, Any] = {
        "lease": LEASE,
        "contract_budget": CONTRACT_BUDGET,
        "remaining": REMAINING,
        "token_id": "urn:example:token:two",
        "issued_at": "2026-12-01T10:05:00Z",
        "expires_at": LEASE_END,
        "issuer": AUTHZ,
    }
    args.update(changes)
    return rotate(previous, grant, **args)


def test_a_narrower_token_for_the_same_lease_is_valid_and_narrower() -> None:
    # given a token, and a narrower one rotated in under the same lease
    first = token()
    second = rotated(first)
    # when the first is revoked, then the second still works within its narrower grant
    revoked = {first.token_id}
    assert why(refusal(first, revoked=revoked))[2] == "revoked"
    assert checked(second, revoked=revoked).token_id == "urn:example:token:two"
    write = ToolCall("repo.write", "write")
    assert checked(first, for_call=write)
    assert why(refusal(second, for_call=write)) == (ErrorCode.AUTH_FORBIDDEN, "grant", "tool")
    over = ToolCall("repo.read", "read", spend={"toolCallLimit": 1})
    assert why(refusal(second, for_call=over, spent={"toolCallLimit": 2}))[0] == (
        ErrorCode.BUDGET_EXCEEDED
    )


def test_a_rotation_never_widens_nor_outlives_the_lease_nor_moves_to_another() -> None:
    first = token()
    wider = dataclasses.replace(NARROW, tools=frozenset({"repo.read", "shell.exec"}))
    more = dataclasses.replace(NARROW, limits={})  # lifts the first token's tool-call limit
    for grant in (wider, more):
        with pytest.raises(MwpError) as refused:
            rotated(rotated(first), grant)
        assert why(refused.value) == (ErrorCode.AUTH_FORBIDDEN, "rotate", "wider-than-previous")
    with pytest.raises(MwpError) as refused:
        rotated(first, expires_at=AFTER_END)
    assert why(refused.value) == (ErrorCode.AUTH_FORBIDDEN, "issue", "expiry-past-lease")
    other = dataclasses.replace(BOUND, lease_id="urn:example:lease:two")
    renewed = ExecutionLease(other, "2026-12-01T10:30:00Z")
    with pytest.raises(MwpError) as refused:
        rotated(first, lease=renewed)
    assert why(refused.value) == (ErrorCode.WORK_LEASE_EXPIRED, "rotate", "another-lease")


# --- secrets -------------------------------------------------------------------------------------


def test_a_token_never_prints_its_signature() -> None:
    issued = token()
    for text in (repr(issued), str(issued), f"{issued}", repr([issued]), repr(AUTHZ)):
        assert issued.signature not in text
    assert issued.token_id in repr(issued)
    assert AUTHZ.key.seed().hex() not in repr(AUTHZ)


def test_the_scanner_finds_a_token_wherever_it_is_in_a_json_value() -> None:
    issued = token()
    sig = issued.signature
    clean = {"kind": "work.progress", "payload": {"notes": ["read the repo"], "n": 3}}
    assert not contains_token(clean, [issued])
    places = {
        "/payload/notes/1": {"payload": {"notes": ["ok", f"Bearer {sig}"]}},
        "/token": {"token": issued.to_json()["body"]["tokenId"]},
        "/headers/" + issued.token_id.replace("/", "~1"): {"headers": {issued.token_id: 1}},
        "/0/embedded": [{"embedded": json.dumps(issued.to_json())}],
        "/signature/value": issued.to_json(),
    }
    for path, leaked in places.items():
        assert contains_token(leaked, [issued]), path
        assert path in list(token_paths(leaked, [issued]))
    # token IDs alone, and nothing to look for finds nothing
    assert contains_token({"a": [None, True, 1.5, issued.token_id]}, [issued.token_id])
    assert not contains_token({"a": issued.token_id}, [])
