"""First Admission on the Group's Command path (spec 6.4, MWP-ADM-010): a newly presented
Command is admitted only if its key is valid at the Authority's clock, not just at the
signer's ``issuedAt``; an admitted Command keeps its receipt on retry, across continue-as-new
and on a replay of the same decisions. Under the 0.1.0 rules nothing of this applies.

Commands are signed for real and verified against Registry evidence whose validity history
the test chooses, then decided, as the MissionWorkflow does.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import Envelope, GroupAuthority, Outcome
from mwp.core.group.admission import GroupAdmissionLog, record_id
from mwp.core.group.api import RULES_0_1_0, RULES_DOOR, AuthorityContext
from mwp.core.group.clock import plus_seconds
from mwp.core.trust.admission import (
    AppendExisting,
    LogFailed,
    LogFailure,
    LookupFound,
    parse_record,
)
from mwp.core.trust.evidence import evidence_unavailable
from mwp.core.trust.registry import (
    KeyBinding,
    Principal,
    RegistryEvidence,
    RegistryEvidenceError,
    ValidityStatus,
)
from mwp.core.trust.signed_document import VerificationError, verify
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import parse_timestamp
from tests.unit.group.harness import (
    AUTHORITY,
    T0,
    W1,
    W2,
    Harness,
    fingerprint,
    mission_harness,
)
from tests.unit.group.signing import KEYS, ORG, PRINCIPALS, key_id, wire

TEXT = {"content": [{"type": "text", "text": "Status."}]}


def evidence(
    *,
    revoked_at: str | None = None,
    valid_until: str | None = None,
    valid_from: str = "2020-01-01T00:00:00Z",
) -> RegistryEvidence:
    """Every harness principal's key valid from 2020; W1's with the given boundaries."""
    bindings = []
    for principal in PRINCIPALS:
        history: tuple[ValidityStatus, ...] = ()
        start = "2020-01-01T00:00:00Z"
        if principal == W1:
            start = valid_from
            if revoked_at or valid_until:
                boundary = ValidityStatus(
                    1,
                    parse_timestamp(T0),
                    parse_timestamp(valid_until) if valid_until else None,
                    parse_timestamp(revoked_at) if revoked_at else None,
                )
                history = (boundary,)
        bindings.append(
            KeyBinding(
                key_id(principal),
                principal,
                "Ed25519",
                KEYS[principal.id].public_key,
                parse_timestamp(start),
                history,
            )
        )
    return RegistryEvidence.from_bindings(ORG, bindings)


def envelope(command: dict[str, Any], registry: RegistryEvidence) -> Envelope:
    """The shell's path: verify the exact bytes, then hand the core what verification found."""
    verified = verify(wire(command), "command", registry)
    document = verified.document
    return Envelope(document, verified.signing_hash, sha256_ref(canonicalize(document)), verified)


def context(h: Harness, rules: int = RULES_DOOR) -> AuthorityContext:
    return replace(h.ctx(), rules=rules)


def present(
    h: Harness, command: dict[str, Any], registry: RegistryEvidence, rules: int = RULES_DOOR
) -> Outcome:
    """Validator, then handler, as an Update runs."""
    sent = envelope(command, registry)
    h.authority.check(sent, context(h, rules))
    return h.authority.submit(sent, context(h, rules))


def refused(h: Harness, sent: Envelope, rules: int = RULES_DOOR) -> MwpError:
    """Refused alike by check() and submit(), with the Action ID, and nothing changed."""
    before, sequence = fingerprint(h.authority), h.authority.sequence
    with pytest.raises(MwpError) as checked:
        h.authority.check(sent, context(h, rules))
    with pytest.raises(MwpError) as submitted:
        h.authority.submit(sent, context(h, rules))
    assert checked.value.code == submitted.value.code == ErrorCode.AUTH_INVALID_SIGNATURE
    assert checked.value.diagnostic == submitted.value.diagnostic
    assert submitted.value.action_id == sent.command["actionId"]
    assert (fingerprint(h.authority), h.authority.sequence) == (before, sequence)
    return submitted.value


def held_records(authority: GroupAuthority) -> GroupAdmissionLog:
    return GroupAdmissionLog.from_json(authority.snapshot().get("admissions"))


# --- the trusted acceptance time decides ------------------------------------------------------


def test_a_command_signed_before_its_key_was_revoked_and_presented_after_is_refused() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)  # issued at T0, while the key was valid
    h.advance(20)
    revoked = evidence(revoked_at=plus_seconds(T0, 10))

    error = refused(h, envelope(command, revoked))  # stage 4 passed: T0 is before revokedAt

    assert error.diagnostic is not None
    assert (error.diagnostic.stage, error.diagnostic.reason) == (
        "admission",
        "trusted-time-outside-key-interval",
    )
    wire_error = error.to_wire(h.now)
    assert wire_error["message"] == "The signed document could not be verified."
    assert "admission" not in json.dumps(wire_error)  # the reason stays protected


@pytest.mark.parametrize(("after", "accepted"), [(-1, True), (0, False)])
def test_the_revocation_instant_itself_is_outside_the_key_interval(
    after: int, accepted: bool
) -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    revoked_at = plus_seconds(T0, 10)
    h.now = plus_seconds(revoked_at, after)
    sent = envelope(command, evidence(revoked_at=revoked_at))
    if accepted:
        outcome = h.authority.submit(sent, context(h))
        assert outcome.events[0]["kind"] == "message.posted"
    else:
        refused(h, sent)


def test_a_key_past_its_valid_until_is_refused_though_the_command_was_issued_before() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    h.advance(60)
    refused(h, envelope(command, evidence(valid_until=plus_seconds(T0, 30))))


def test_a_key_not_yet_valid_at_the_authoritys_clock_is_refused() -> None:
    # Issued 20 s ahead of the Authority's clock (within the skew) and after the key's
    # validFrom, which the Authority's clock has not reached.
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT, issuedAt=plus_seconds(T0, 20))
    registry = evidence(valid_from=plus_seconds(T0, 10))
    error = refused(h, envelope(command, registry))
    assert error.diagnostic is not None and error.diagnostic.stage == "admission"
    h.now = plus_seconds(T0, 10)  # from validFrom on
    assert h.authority.submit(envelope(command, registry), context(h)).events


def test_under_the_0_1_0_rules_the_revoked_key_command_is_accepted_as_before() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    h.advance(20)
    records = len(held_records(h.authority))
    outcome = present(h, command, evidence(revoked_at=plus_seconds(T0, 10)), RULES_0_1_0)
    assert outcome.events[0]["kind"] == "message.posted"
    assert len(held_records(h.authority)) == records  # no record under the old rules


# --- what is kept -------------------------------------------------------------------------------


def test_an_accepted_command_leaves_its_first_admission_record() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    sent = envelope(command, evidence())
    h.authority.submit(sent, context(h))

    found = held_records(h.authority).lookup(ORG, sent.signing_hash)
    assert isinstance(found, LookupFound) and found.authenticated_service == AUTHORITY
    record = parse_record(found.record)
    assert record.to_json() == {
        "protocolVersion": "0.1",
        "admissionRecordId": record_id(ORG, sent.signing_hash),
        "organizationId": ORG,
        "documentKind": "command",
        "signingHash": sent.signing_hash,
        "keyId": key_id(W1),
        "principal": W1.to_json(),
        "trustedAcceptedAt": T0,
        "acceptedBy": AUTHORITY.to_json(),
    }
    assert found.record == canonicalize(record.to_json())  # the exact bytes, canonical


def test_the_validator_and_a_refused_command_leave_no_record() -> None:
    h = mission_harness()
    registry = evidence()
    before = fingerprint(h.authority)
    h.authority.check(envelope(h.command(W1, "message.post", TEXT), registry), context(h))
    stale = h.command(W2, "message.post", TEXT, membershipEpoch=99)
    with pytest.raises(MwpError) as error:
        h.authority.submit(envelope(stale, registry), context(h))
    assert error.value.code == ErrorCode.MEMBERSHIP_STALE
    assert fingerprint(h.authority) == before


def test_admission_comes_before_the_checks_that_authorize() -> None:
    # A revoked key learns nothing about the Group's state: the same refusal whether or not
    # its Command would otherwise pass Membership.
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT, membershipEpoch=99)
    h.advance(20)
    refused(h, envelope(command, evidence(revoked_at=plus_seconds(T0, 10))))


@pytest.mark.parametrize(("seconds", "kept"), [(330, True), (331, False)])
def test_a_record_is_kept_while_its_command_could_still_be_presented_as_new(
    seconds: int, kept: bool
) -> None:
    # 300 s freshness window plus 30 s skew: a Command accepted at T0 was issued by T0 + 30.
    h = mission_harness()
    registry = evidence()
    first = envelope(h.command(W1, "message.post", TEXT), registry)
    h.authority.submit(first, context(h))
    h.advance(seconds)
    second = envelope(h.command(W1, "message.post", TEXT), registry)
    h.authority.submit(second, context(h))

    records = held_records(h.authority)
    assert isinstance(records.lookup(ORG, first.signing_hash), LookupFound) is kept
    assert isinstance(records.lookup(ORG, second.signing_hash), LookupFound)
    if not kept:
        assert len(records) == 1  # the mission's own Commands at T0 went too


def test_a_record_leaves_with_its_receipt_when_the_receipt_window_is_full() -> None:
    h = Harness(GroupAuthority(receipt_window=4))
    h.create_mission()
    h.admit(W1)
    registry = evidence()

    def post() -> Envelope:
        h.advance(31)  # each issued after the newest evicted receipt's time and the skew
        sent = envelope(h.command(W1, "message.post", TEXT), registry)
        h.authority.submit(sent, context(h))
        return sent

    first = post()
    for _ in range(3):
        post()
    assert isinstance(held_records(h.authority).lookup(ORG, first.signing_hash), LookupFound)
    post()

    # Its receipt was evicted: the freshness horizon refuses it as new, so no lookup needs it.
    records = held_records(h.authority)
    assert not isinstance(records.lookup(ORG, first.signing_hash), LookupFound)
    assert len(records) == 4


# --- retry, continue-as-new and replay ----------------------------------------------------------


def test_a_command_accepted_before_the_revocation_gets_its_receipt_when_resent_after() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    original = present(h, command, evidence())
    h.advance(20)
    revoked = evidence(revoked_at=plus_seconds(T0, 10))

    again = present(h, command, revoked)
    assert again.duplicate and again.receipt == original.receipt and again.events == ()
    # ... and after continue-as-new.
    h.authority = GroupAuthority.restore(json.loads(json.dumps(h.authority.snapshot())))
    assert present(h, command, revoked).receipt == original.receipt


def test_replaying_the_same_decisions_gives_the_same_outcomes() -> None:
    # On a worker restart Temporal replays each Update with the clock and Registry evidence
    # of its history: the same Commands are admitted, the same one refused.
    def run(h: Harness) -> list[Any]:
        results: list[Any] = []
        registry = evidence()
        for step in range(3):
            h.now = plus_seconds(T0, step)
            results.append(present(h, h.command(W1, "message.post", TEXT), registry))
        late = h.command(W1, "message.post", TEXT, issuedAt=T0)
        h.now = plus_seconds(T0, 20)
        with pytest.raises(MwpError) as error:
            h.authority.submit(
                envelope(late, evidence(revoked_at=plus_seconds(T0, 10))), context(h)
            )
        results.append((error.value.code, error.value.diagnostic))
        return results

    first, second = mission_harness(), mission_harness()
    assert run(first) == run(second)
    assert fingerprint(first.authority) == fingerprint(second.authority)


def test_a_snapshot_from_before_first_admission_restores_and_admits() -> None:
    h = mission_harness()
    # What every earlier snapshot looked like: no records.
    old = json.loads(json.dumps(h.authority.snapshot()))
    del old["admissions"]
    assert set(old) == {"format", "state"}

    h.authority = GroupAuthority.restore(old)
    assert h.authority.snapshot() == old
    present(h, h.command(W1, "message.post", TEXT), evidence())
    carried = json.loads(json.dumps(h.authority.snapshot()))
    assert len(carried["admissions"]["records"]) == 1
    assert GroupAuthority.restore(carried).snapshot() == carried


# --- without evidence ---------------------------------------------------------------------------


def test_without_six_stage_evidence_the_command_fails_stage_4() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    bare = replace(h.envelope(command), verified=None)

    error = refused(h, bare)
    assert error.diagnostic is not None
    assert (error.diagnostic.stage, error.diagnostic.reason) == (
        "key-resolution",
        "registry-evidence-unavailable",
    )
    assert h.authority.submit(bare, context(h, RULES_0_1_0)).events  # the old rules ignore it


def test_evidence_for_another_document_is_refused() -> None:
    h = mission_harness()
    registry = evidence()
    other = envelope(h.command(W1, "message.post", TEXT), registry)
    sent = replace(envelope(h.command(W1, "message.post", TEXT), registry), verified=other.verified)
    error = refused(h, sent)
    assert error.diagnostic is not None and error.diagnostic.reason == "record-binding-mismatch"


def test_evidence_unavailable_is_an_unknown_key_on_the_wire() -> None:
    unavailable = evidence_unavailable()
    with pytest.raises(VerificationError) as unknown:
        try:
            evidence().resolve("urn:example:key:nobody")
        except RegistryEvidenceError as exc:  # what verify() turns an unknown key into
            raise VerificationError(
                ErrorCode.AUTH_INVALID_SIGNATURE, "key-resolution", exc.reason
            ) from None
    assert unavailable.code == ErrorCode.AUTH_INVALID_SIGNATURE and not unavailable.retryable
    assert unavailable.to_wire(T0) == unknown.value.to_wire(T0)
    assert (unavailable.stage, unavailable.reason) == (
        "key-resolution",
        "registry-evidence-unavailable",
    )


# --- the log itself -----------------------------------------------------------------------------


def test_the_log_keeps_one_record_per_key_and_refuses_what_it_could_not_give_back() -> None:
    h = mission_harness()
    sent = envelope(h.command(W1, "message.post", TEXT), evidence())
    h.authority.submit(sent, context(h))
    log = held_records(h.authority)
    found = log.lookup(ORG, sent.signing_hash)
    assert isinstance(found, LookupFound)
    held = parse_record(found.record).to_json()

    def append(record: dict[str, Any], writer: Principal = AUTHORITY) -> object:
        return log.would_append(ORG, sent.signing_hash, canonicalize(record), writer)

    # The same binding again: the record held, nothing appended.
    later = {**held, "trustedAcceptedAt": plus_seconds(T0, 5)}
    assert append(later) == AppendExisting(found.record, AUTHORITY)
    # Another key of the same Principal under the same signing hash: a conflict.
    conflict = append({**held, "keyId": "urn:example:key:other"})
    assert isinstance(conflict, LogFailed) and conflict.failure == LogFailure.CONFLICT
    # Only the Authority writes its Group's records, and only as itself.
    other = Principal("service", "urn:example:service:other")
    written = append({**held, "acceptedBy": other.to_json()})
    assert isinstance(written, LogFailed) and written.failure == LogFailure.UNAUTHORIZED

    # A record it could not give back byte for byte: an ID of the writer's choosing (IDs are
    # derived from the key), or bytes that are not canonical.
    fresh = GroupAdmissionLog()
    chosen = {**held, "admissionRecordId": "urn:example:record:chosen"}
    for candidate in (canonicalize(chosen), json.dumps(held).encode()):
        result = fresh.would_append(ORG, sent.signing_hash, candidate, AUTHORITY)
        assert isinstance(result, LogFailed) and result.failure == LogFailure.COMMIT_FAILED
