"""First admission and historical trust over six-stage evidence (spec 6.4), one rule per test.

The verified evidence is built directly, so these tests need no signing and pin the admission
layer alone: every failure must be AUTH_INVALID_SIGNATURE at stage ``admission`` with a stable
reason that never reaches the wire.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mwp.core.errors import ErrorCode
from mwp.core.trust.admission import (
    AdmissionError,
    AdmissionLog,
    AdmissionReason,
    AppendCommitted,
    AppendExisting,
    AppendResult,
    FirstAdmissionRecord,
    InMemoryAdmissionLog,
    LogFailed,
    LogFailure,
    LookupAbsent,
    LookupFound,
    LookupResult,
    TrustedContext,
    TrustedContextUnavailable,
    admit_first,
    parse_record,
    prepare_candidate,
    record_json,
    record_schema_violation,
    validate_record,
    verify_historical,
)
from mwp.core.trust.registry import KeyValidity, Principal
from mwp.core.trust.signed_document import VerifiedDocument
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import (
    Instant,
    Timestamp,
    format_utc,
    instant_to_datetime,
    parse_timestamp,
)

ORG = "urn:example:organization:acme"
KEY_ID = "urn:example:key:coordinator-1"
SIGNER = Principal("agent", "urn:example:agent:coordinator")
ADMISSION = Principal("service", "urn:example:service:admission")
OTHER_SERVICE = Principal("service", "urn:example:service:other")
VALID_FROM = "2026-07-15T00:00:00Z"
VALID_UNTIL = "2026-07-16T00:00:00Z"
ACCEPTED_AT = "2026-07-15T00:05:00Z"
COMMAND = {"kind": "mission.submit", "issuedAt": "2026-07-15T00:00:00Z", "payload": {"n": 1}}


def verified_document(
    *,
    profile_id: str = "command",
    document: dict[str, Any] | None = None,
    valid_until: str | None = VALID_UNTIL,
    revoked_at: str | None = None,
) -> VerifiedDocument:
    """Six-stage evidence as :func:`verify` would return it."""
    signed = dict(document if document is not None else COMMAND)
    signed.setdefault("signature", {"algorithm": "Ed25519", "keyId": KEY_ID})
    unsigned = {k: v for k, v in signed.items() if k != "signature"}
    signing_bytes = canonicalize(unsigned)
    values: dict[str, Any] = {
        "profile_id": profile_id,
        "document": signed,
        "organization_id": ORG,
        "signing_bytes": signing_bytes,
        "signing_hash": sha256_ref(signing_bytes),
        "key_id": KEY_ID,
        "principal": SIGNER,
        "protected_time": "2026-07-15T00:00:00Z",
        "key_validity": KeyValidity(
            parse_timestamp(VALID_FROM),
            parse_timestamp(valid_until) if valid_until else None,
            parse_timestamp(revoked_at) if revoked_at else None,
        ),
        "signature": b"\x00" * 64,
    }
    names = {f.name for f in dataclasses.fields(VerifiedDocument)}
    return VerifiedDocument(**{k: v for k, v in values.items() if k in names})


def record_for(
    verified: VerifiedDocument,
    *,
    record_id: str = "urn:example:admission-record:1",
    accepted_at: str = ACCEPTED_AT,
    accepted_by: Principal = ADMISSION,
    **overrides: Any,
) -> dict[str, Any]:
    value = record_json(
        admission_record_id=record_id,
        organization_id=verified.organization_id,
        document_kind=verified.profile_id,
        signing_hash=verified.signing_hash,
        key_id=verified.key_id,
        principal=verified.principal,
        trusted_accepted_at=accepted_at,
        accepted_by=accepted_by,
    )
    value.update(overrides)
    return value


def encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=2).encode()


def context(
    accepted_at: str = ACCEPTED_AT,
    *,
    record_id: str = "urn:example:admission-record:1",
    accepted_by: Principal = ADMISSION,
) -> Callable[[VerifiedDocument], TrustedContext | TrustedContextUnavailable]:
    def source(_: VerifiedDocument) -> TrustedContext:
        return TrustedContext(record_id, accepted_at, accepted_by)

    return source


def never_asked(_: VerifiedDocument) -> TrustedContext:
    raise AssertionError("trusted context must not be requested here")


class ScriptedLog:
    """Answers with fixed typed (or deliberately untyped) results and records every call."""

    def __init__(self, lookup: Any = None, append: Any = None) -> None:
        self.lookup_result = LookupAbsent() if lookup is None else lookup
        self.append_result = append
        self.appended: list[bytes] = []

    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
        result: LookupResult = self.lookup_result
        return result

    def append_or_return_existing(
        self, organization_id: str, signing_hash: str, candidate: bytes
    ) -> AppendResult:
        self.appended.append(candidate)
        if self.append_result is None:
            raise AssertionError("append must not be called here")
        result: AppendResult = self.append_result
        return result


def rejected(reason: AdmissionReason, action: Callable[[], object]) -> AdmissionError:
    with pytest.raises(AdmissionError) as caught:
        action()
    error = caught.value
    assert error.code is ErrorCode.AUTH_INVALID_SIGNATURE
    assert error.diagnostic is not None
    assert (error.diagnostic.stage, error.diagnostic.reason) == ("admission", reason.value)
    assert error.reason is reason
    return error


# --- first admission ------------------------------------------------------------------------


def test_first_admission_commits_a_canonical_record_bound_to_the_evidence() -> None:
    verified = verified_document()
    log = InMemoryAdmissionLog(ADMISSION)
    record = admit_first(verified, log, context())
    assert len(log) == 1
    assert record.raw == canonicalize(record.to_json())
    assert (record.organization_id, record.document_kind, record.signing_hash) == (
        ORG,
        "command",
        verified.signing_hash,
    )
    assert (record.key_id, record.principal, record.accepted_by) == (KEY_ID, SIGNER, ADMISSION)
    assert isinstance(log.lookup(ORG, verified.signing_hash), LookupFound)


def test_trusted_time_spelling_is_retained_and_compared_as_an_instant() -> None:
    # 08:05+08:00 is 00:05Z: inside the interval, and its own spelling is what gets stored.
    record = admit_first(
        verified_document(), InMemoryAdmissionLog(ADMISSION), context("2026-07-15T08:05:00+08:00")
    )
    assert record.trusted_accepted_at.text == "2026-07-15T08:05:00+08:00"
    assert json.loads(record.raw)["trustedAcceptedAt"] == "2026-07-15T08:05:00+08:00"


def test_idempotent_retry_returns_the_found_record_without_appending() -> None:
    verified = verified_document()
    log = InMemoryAdmissionLog(ADMISSION)
    first = admit_first(verified, log, context())
    again = admit_first(verified, log, never_asked)
    assert again == first
    assert len(log) == 1
    scripted = ScriptedLog(LookupFound(first.raw, ADMISSION))
    assert admit_first(verified, scripted, never_asked).raw == first.raw
    assert scripted.appended == []


def test_concurrent_winner_may_differ_in_id_and_time_and_is_validated() -> None:
    verified = verified_document()
    winner = encode(
        record_for(verified, record_id="urn:example:admission-record:w", accepted_at=VALID_FROM)
    )
    log = ScriptedLog(append=AppendExisting(winner, ADMISSION))
    record = admit_first(verified, log, context())
    assert record.raw == winner and record.admission_record_id.endswith(":w")
    assert len(log.appended) == 1  # the losing candidate was offered once, never retried


def test_returned_record_is_validated_not_the_candidate() -> None:
    verified = verified_document()
    wrong = encode(record_for(verified, keyId="urn:example:key:other"))
    log = ScriptedLog(append=AppendCommitted(wrong, ADMISSION))
    rejected(AdmissionReason.RECORD_BINDING_MISMATCH, lambda: admit_first(verified, log, context()))


def test_candidate_is_prepared_only_after_authoritative_absence() -> None:
    verified = verified_document()
    for answer in (LogFailed(LogFailure.UNAVAILABLE), LogFailed(LogFailure.INDETERMINATE)):
        log = ScriptedLog(answer)
        with pytest.raises(AdmissionError):
            admit_first(verified, log, never_asked)
        assert log.appended == []


def test_unavailable_trusted_context_fails_closed() -> None:
    verified = verified_document()

    def unavailable(_: VerifiedDocument) -> TrustedContextUnavailable:
        return TrustedContextUnavailable("clock down")

    def broken(_: VerifiedDocument) -> TrustedContext:
        raise RuntimeError("clock down")

    sources: list[Callable[[VerifiedDocument], Any]] = [unavailable, broken, lambda _: True]
    for source in sources:
        log = ScriptedLog()
        with pytest.raises(AdmissionError) as caught:
            admit_first(verified, log, source)
        assert caught.value.reason is AdmissionReason.TRUSTED_CONTEXT_UNAVAILABLE
        assert log.appended == []


@pytest.mark.parametrize(
    "text", ["not-a-timestamp", "2026-07-15T00:05:60Z", "2026-07-15 00:05Z", ""]
)
def test_malformed_trusted_time_is_refused_before_append(text: str) -> None:
    log = ScriptedLog()
    rejected(
        AdmissionReason.MALFORMED_TRUSTED_TIME,
        lambda: admit_first(verified_document(), log, context(text)),
    )
    assert log.appended == []


def test_candidate_with_a_non_service_acceptor_is_refused_before_append() -> None:
    log = ScriptedLog()
    human = Principal("human", "urn:example:human:operator")
    rejected(
        AdmissionReason.CANDIDATE_INVALID,
        lambda: admit_first(verified_document(), log, context(accepted_by=human)),
    )
    assert log.appended == []


# --- the half-open key interval, evaluated at trustedAcceptedAt -----------------------------


@pytest.mark.parametrize(
    ("accepted_at", "revoked_at", "admitted"),
    [
        ("2026-07-14T23:59:59Z", None, False),  # before validFrom
        ("2026-07-14T23:59:59.999999999Z", None, False),
        (VALID_FROM, None, True),  # validFrom is inclusive
        ("2026-07-15T08:00:00+08:00", None, True),  # the same instant, another spelling
        ("2026-07-15T23:59:59.999999999Z", None, True),
        (VALID_UNTIL, None, False),  # validUntil is exclusive
        ("2026-07-16T08:00:00+08:00", None, False),  # equal to validUntil as an instant
        ("2026-07-16T00:00:01Z", None, False),
        ("2026-07-15T00:59:59Z", "2026-07-15T01:00:00Z", True),
        ("2026-07-15T01:00:00Z", "2026-07-15T01:00:00Z", False),  # revokedAt is exclusive
        ("2026-07-15T01:00:01Z", "2026-07-15T01:00:00Z", False),
    ],
)
def test_trusted_time_interval_boundaries(
    accepted_at: str, revoked_at: str | None, admitted: bool
) -> None:
    verified = verified_document(revoked_at=revoked_at)
    # Both the candidate check and the check of a record found in the log apply the rule.
    found = ScriptedLog(
        LookupFound(encode(record_for(verified, accepted_at=accepted_at)), ADMISSION)
    )
    if admitted:
        admit_first(verified, InMemoryAdmissionLog(ADMISSION), context(accepted_at))
        verify_historical(verified, found)
    else:
        reason = AdmissionReason.TRUSTED_TIME_OUTSIDE_KEY_INTERVAL
        log = ScriptedLog()
        rejected(reason, lambda: admit_first(verified, log, context(accepted_at)))
        assert log.appended == []
        rejected(reason, lambda: verify_historical(verified, found))


def _instant(seconds: int) -> Timestamp:
    return Timestamp(f"t+{seconds}", Instant(seconds, Decimal(0)))


@given(
    start=st.integers(0, 10_000),
    length=st.integers(1, 10_000),
    revoke=st.one_of(st.none(), st.integers(0, 20_000)),
    moment=st.integers(-1_000, 30_000),
)
def test_interval_rule_is_exactly_half_open(
    start: int, length: int, revoke: int | None, moment: int
) -> None:
    base = parse_timestamp(VALID_FROM).instant.seconds
    validity = KeyValidity(
        _instant(base + start),
        _instant(base + start + length),
        None if revoke is None else _instant(base + revoke),
    )
    verified = dataclasses.replace(verified_document(), key_validity=validity)
    when = parse_timestamp("2026-07-15T00:00:00Z").instant.seconds + moment
    text = _format(when)
    end = start + length if revoke is None else min(start + length, revoke)
    inside = start <= moment < end
    try:
        prepare_candidate(verified, TrustedContext("urn:example:r:1", text, ADMISSION))
    except AdmissionError as exc:
        assert not inside and exc.reason is AdmissionReason.TRUSTED_TIME_OUTSIDE_KEY_INTERVAL
    else:
        assert inside


def _format(seconds: int) -> str:
    return format_utc(instant_to_datetime(Instant(seconds, Decimal(0))))


# --- historical replay ----------------------------------------------------------------------


def test_historical_replay_survives_a_later_revocation() -> None:
    anchored = verified_document()
    log = InMemoryAdmissionLog(ADMISSION)
    record = admit_first(anchored, log, context())
    # Re-verified later against history that now revokes the key after both instants.
    later = verified_document(revoked_at="2026-07-15T01:00:00Z")
    assert verify_historical(later, log) == record


def test_historical_replay_rejects_when_revocation_precedes_trusted_time() -> None:
    log = InMemoryAdmissionLog(ADMISSION)
    admit_first(verified_document(), log, context())
    earlier = verified_document(revoked_at="2026-07-15T00:05:00Z")
    rejected(
        AdmissionReason.TRUSTED_TIME_OUTSIDE_KEY_INTERVAL, lambda: verify_historical(earlier, log)
    )


def test_historical_replay_with_absent_record_never_admits() -> None:
    log = ScriptedLog(LookupAbsent())
    rejected(AdmissionReason.RECORD_MISSING, lambda: verify_historical(verified_document(), log))
    assert log.appended == []


# --- record validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "override",
    [
        {"organizationId": "urn:example:organization:other"},
        {"documentKind": "event"},
        {"signingHash": "sha256:" + "0" * 64},
        {"keyId": "urn:example:key:other"},
        {"principal": {"type": "agent", "id": "urn:example:agent:other"}},
        {"principal": {"type": "human", "id": SIGNER.id}},
    ],
)
def test_every_binding_must_equal_the_evidence(override: dict[str, Any]) -> None:
    verified = verified_document()
    data = encode(record_for(verified, **override))
    for path in (
        lambda: verify_historical(verified, ScriptedLog(LookupFound(data, ADMISSION))),
        lambda: admit_first(verified, ScriptedLog(LookupFound(data, ADMISSION)), never_asked),
    ):
        rejected(AdmissionReason.RECORD_BINDING_MISMATCH, path)


def test_record_for_the_same_content_under_another_kind_is_not_reused() -> None:
    as_command = verified_document(profile_id="command")
    as_evidence = dataclasses.replace(as_command, profile_id="evidence")
    data = encode(record_for(as_command))
    rejected(
        AdmissionReason.RECORD_BINDING_MISMATCH,
        lambda: verify_historical(as_evidence, ScriptedLog(LookupFound(data, ADMISSION))),
    )


def test_accepted_by_must_be_the_service_the_log_authenticated() -> None:
    verified = verified_document()
    data = encode(record_for(verified))
    rejected(
        AdmissionReason.ACCEPTING_SERVICE_MISMATCH,
        lambda: verify_historical(verified, ScriptedLog(LookupFound(data, OTHER_SERVICE))),
    )
    agent = Principal("agent", ADMISSION.id)
    rejected(
        AdmissionReason.LOG_AUTHENTICATION_FAILED,
        lambda: verify_historical(verified, ScriptedLog(LookupFound(data, agent))),
    )


def _without(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda value: {k: v for k, v in value.items() if k != name}


def _with(**members: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda value: {**value, **members}


SCHEMA_BREAKS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "accepted-by-human": _with(acceptedBy={"type": "human", "id": ADMISSION.id}),
    "signature-member": _with(signature={"algorithm": "Ed25519"}),
    "extra-member": _with(note="x"),
    "missing-admission-record-id": _without("admissionRecordId"),
    "missing-accepted-by": _without("acceptedBy"),
    "protocol-version": _with(protocolVersion="0.2"),
    "protocol-version-number": _with(protocolVersion=0.1),
    "relative-record-id": _with(admissionRecordId="record-1"),
    "record-id-with-space": _with(admissionRecordId="urn:example:a b"),
    "unknown-kind": _with(documentKind="message"),
    "upper-case-hash": _with(signingHash="sha256:" + "A" * 64),
    "hash-trailing-newline": _with(signingHash="sha256:" + "a" * 64 + "\n"),
    "principal-extra": _with(principal={"type": "agent", "id": SIGNER.id, "x": 1}),
    "principal-type": _with(principal={"type": "robot", "id": SIGNER.id}),
    "leap-second": _with(trustedAcceptedAt="2026-07-15T23:59:60Z"),
    "no-offset": _with(trustedAcceptedAt="2026-07-15T00:05:00"),
    "minus-zero-offset": _with(trustedAcceptedAt="2026-07-15T00:05:00-00:00"),
    "time-number": _with(trustedAcceptedAt=1),
}


@pytest.mark.parametrize("name", sorted(SCHEMA_BREAKS))
def test_schema_invalid_records_are_refused(name: str) -> None:
    verified = verified_document()
    value = SCHEMA_BREAKS[name](record_for(verified))
    assert record_schema_violation(value) is not None
    rejected(
        AdmissionReason.RECORD_SCHEMA_INVALID,
        lambda: verify_historical(verified, ScriptedLog(LookupFound(encode(value), ADMISSION))),
    )


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"\xef\xbb\xbf{}",
        b'{"a":1,"a":2}',
        b"{} {}",
        b'{"protocolVersion":"0.1"',
        b"\xff",
    ],
)
def test_record_bytes_are_strictly_parsed(data: bytes) -> None:
    rejected(
        AdmissionReason.RECORD_UNPARSEABLE,
        lambda: verify_historical(verified_document(), ScriptedLog(LookupFound(data, ADMISSION))),
    )


def test_a_valid_record_passes_with_a_typed_answer() -> None:
    verified = verified_document()
    data = encode(record_for(verified))
    assert validate_record(verified, data, ADMISSION).raw == data
    assert verify_historical(verified, ScriptedLog(LookupFound(data, ADMISSION))).raw == data


UNTYPED_ANSWERS = [True, "found", None, {"status": "found", "authenticated": True}]


@pytest.mark.parametrize("answer", [*UNTYPED_ANSWERS, b"record bytes"])
def test_record_bytes_or_booleans_never_replace_a_typed_lookup(answer: Any) -> None:
    log = ScriptedLog()
    log.lookup_result = answer
    rejected(AdmissionReason.LOG_INDETERMINATE, lambda: verify_historical(verified_document(), log))


@pytest.mark.parametrize("answer", [*UNTYPED_ANSWERS[:2], {"committed": True}])
def test_caller_booleans_never_replace_typed_append_results(answer: Any) -> None:
    log = ScriptedLog(append=answer)
    rejected(
        AdmissionReason.LOG_INDETERMINATE, lambda: admit_first(verified_document(), log, context())
    )


def test_untyped_failure_kind_and_raising_adapter_fail_closed() -> None:
    verified = verified_document()
    rejected(
        AdmissionReason.LOG_INDETERMINATE,
        lambda: verify_historical(verified, ScriptedLog(LogFailed("conflict"))),  # type: ignore[arg-type]
    )

    class Exploding:
        def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
            raise OSError("disk gone")

        def append_or_return_existing(self, o: str, s: str, c: bytes) -> AppendResult:
            raise OSError("disk gone")

    rejected(AdmissionReason.LOG_INDETERMINATE, lambda: verify_historical(verified, Exploding()))
    rejected(
        AdmissionReason.LOG_INDETERMINATE,
        lambda: admit_first(verified, _AbsentThenExplode(), context()),
    )


class _AbsentThenExplode:
    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
        return LookupAbsent()

    def append_or_return_existing(self, o: str, s: str, c: bytes) -> AppendResult:
        raise TimeoutError("commit outcome unknown")


# --- typed log failures ---------------------------------------------------------------------

LOOKUP_FAILURES = {
    LogFailure.UNAUTHENTICATED: AdmissionReason.LOG_AUTHENTICATION_FAILED,
    LogFailure.UNAUTHORIZED: AdmissionReason.LOG_WRITE_UNAUTHORIZED,
    LogFailure.INTEGRITY_FAILED: AdmissionReason.APPEND_INTEGRITY_NOT_ESTABLISHED,
    LogFailure.UNAVAILABLE: AdmissionReason.LOG_UNAVAILABLE,
    LogFailure.INDETERMINATE: AdmissionReason.LOG_INDETERMINATE,
    LogFailure.CONFLICT: AdmissionReason.RECORD_CONFLICT,
    LogFailure.COMMIT_FAILED: AdmissionReason.COMMIT_FAILED,
}


@pytest.mark.parametrize("failure", list(LogFailure))
def test_every_lookup_failure_fails_closed_on_both_paths(failure: LogFailure) -> None:
    verified = verified_document()
    reason = LOOKUP_FAILURES[failure]
    log = ScriptedLog(LogFailed(failure))
    rejected(reason, lambda: verify_historical(verified, log))
    rejected(reason, lambda: admit_first(verified, log, never_asked))
    assert log.appended == []


@pytest.mark.parametrize("failure", list(LogFailure))
def test_every_append_failure_fails_closed(failure: LogFailure) -> None:
    log = ScriptedLog(LookupAbsent(), LogFailed(failure))
    rejected(LOOKUP_FAILURES[failure], lambda: admit_first(verified_document(), log, context()))
    assert len(log.appended) == 1


# --- Event self-anchoring -------------------------------------------------------------------

EVENT = {
    "eventId": "urn:example:event:1",
    "occurredAt": "2026-07-15T00:00:00Z",
    "acceptedBy": {"type": "service", "id": "urn:example:service:group-authority"},
    "payload": {},
}


@pytest.mark.parametrize("with_signature", [True, False])
def test_an_event_cannot_be_its_own_admission_record(with_signature: bool) -> None:
    verified = verified_document(profile_id="event", document=EVENT)
    itself = dict(verified.document) if with_signature else dict(EVENT)
    data = encode(itself)
    rejected(
        AdmissionReason.EVENT_SELF_ANCHORING,
        lambda: verify_historical(verified, ScriptedLog(LookupFound(data, ADMISSION))),
    )
    rejected(
        AdmissionReason.EVENT_SELF_ANCHORING,
        lambda: admit_first(verified, ScriptedLog(LookupFound(data, ADMISSION)), never_asked),
    )
    via_append = ScriptedLog(LookupAbsent(), AppendCommitted(data, ADMISSION))
    rejected(
        AdmissionReason.EVENT_SELF_ANCHORING, lambda: admit_first(verified, via_append, context())
    )


def test_an_event_with_a_separate_record_is_admitted() -> None:
    verified = verified_document(profile_id="event", document=EVENT)
    record = admit_first(verified, InMemoryAdmissionLog(ADMISSION), context())
    assert record.document_kind == "event"


# --- the wire never tells --------------------------------------------------------------------


def test_wire_error_is_generic_for_every_reason() -> None:
    messages = set()
    for reason in AdmissionReason:
        wire = AdmissionError(reason).to_wire("2026-07-15T00:00:00Z")
        assert wire["code"] == "AUTH_INVALID_SIGNATURE"
        assert reason.value not in json.dumps(wire) and "admission" not in json.dumps(wire)
        messages.add(wire["message"])
    assert len(messages) == 1


# --- the in-memory log ----------------------------------------------------------------------


def _candidate(verified: VerifiedDocument, **kwargs: Any) -> bytes:
    return canonicalize(record_for(verified, **kwargs))


def test_in_memory_log_append_or_return_existing() -> None:
    verified = verified_document()
    log: AdmissionLog = InMemoryAdmissionLog(ADMISSION)
    first = log.append_or_return_existing(ORG, verified.signing_hash, _candidate(verified))
    assert isinstance(first, AppendCommitted)
    retry = log.append_or_return_existing(
        ORG, verified.signing_hash, _candidate(verified, record_id="urn:example:r:2")
    )
    assert retry == AppendExisting(first.record, ADMISSION)


@pytest.mark.parametrize(
    "override",
    [
        {"keyId": "urn:example:key:other"},
        {"documentKind": "evidence"},
        {"principal": {"type": "agent", "id": "urn:example:agent:other"}},
    ],
)
def test_in_memory_log_refuses_a_conflicting_binding(override: dict[str, Any]) -> None:
    verified = verified_document()
    log = InMemoryAdmissionLog(ADMISSION)
    log.append_or_return_existing(ORG, verified.signing_hash, _candidate(verified))
    conflicting = canonicalize(record_for(verified, record_id="urn:example:r:2", **override))
    result = log.append_or_return_existing(ORG, verified.signing_hash, conflicting)
    assert result == LogFailed(LogFailure.CONFLICT, result.detail)  # type: ignore[union-attr]
    held = log.lookup(ORG, verified.signing_hash)
    assert isinstance(held, LookupFound) and held.record == _candidate(verified)
    # Through admission, the same situation is a record-conflict.
    rejected(
        AdmissionReason.RECORD_CONFLICT,
        lambda: admit_first(
            verified,
            ScriptedLog(LookupAbsent(), result),
            context(),
        ),
    )


def test_in_memory_log_refuses_a_record_id_reused_under_another_key() -> None:
    one = verified_document()
    two = verified_document(document={**COMMAND, "payload": {"n": 2}})
    log = InMemoryAdmissionLog(ADMISSION)
    assert isinstance(
        log.append_or_return_existing(ORG, one.signing_hash, _candidate(one)), AppendCommitted
    )
    reused = log.append_or_return_existing(ORG, two.signing_hash, _candidate(two))
    assert isinstance(reused, LogFailed) and reused.failure is LogFailure.CONFLICT
    assert isinstance(log.lookup(ORG, two.signing_hash), LookupAbsent)


def test_in_memory_log_guards_its_writes() -> None:
    verified = verified_document()
    log = InMemoryAdmissionLog(ADMISSION)
    foreign = log.append_or_return_existing(
        ORG, verified.signing_hash, _candidate(verified, accepted_by=OTHER_SERVICE)
    )
    assert isinstance(foreign, LogFailed) and foreign.failure is LogFailure.UNAUTHORIZED
    misfiled = log.append_or_return_existing(ORG, "sha256:" + "1" * 64, _candidate(verified))
    assert isinstance(misfiled, LogFailed) and misfiled.failure is LogFailure.COMMIT_FAILED
    garbage = log.append_or_return_existing(ORG, verified.signing_hash, b"{}")
    assert isinstance(garbage, LogFailed) and garbage.failure is LogFailure.COMMIT_FAILED
    reader = InMemoryAdmissionLog(ADMISSION, may_append=False)
    refused = reader.append_or_return_existing(ORG, verified.signing_hash, _candidate(verified))
    assert isinstance(refused, LogFailed) and refused.failure is LogFailure.UNAUTHORIZED
    assert len(log) == 0 and len(reader) == 0


def test_parsed_record_round_trips() -> None:
    verified = verified_document()
    data = _candidate(verified, accepted_at="2026-07-15t00:05:00.5+00:00")
    record = parse_record(data)
    assert isinstance(record, FirstAdmissionRecord)
    assert canonicalize(record.to_json()) == data
    assert record.protocol_version == "0.1"
    assert record.trusted_accepted_at.text == "2026-07-15t00:05:00.5+00:00"
