"""First Admission of Commands on the Group path (spec 6.4), against this Group's part of its
Organization's Admission Log.

A Command names its Group, so that Group's Authority is the only service that first-admits it,
and the Group's own durable state (Temporal history, then the continue-as-new snapshot) holds
this part of the log: :class:`GroupAdmissionLog`, an
:class:`~mwp.core.trust.admission.AdmissionLog` in the pure core. :class:`Admission` runs
:func:`~mwp.core.trust.admission.admit_first` for one newly presented Command against it. The
trusted acceptance time is the Authority's clock (``ctx.now``), the accepting service the
Authority (``ctx.authority``), the key's validity what the six stages found in the Registry
evidence the shell verified against (``Envelope.verified``). So a Command signed while its key
was valid but presented after the key's revocation is refused: the signer's ``issuedAt``
cannot vouch for the moment the Authority accepts it.

A record is staged while the Authority decides and committed with the Command's Events, in the
same step: the validator's decision and a refused Command leave the log as it was. A byte-equal
retry of an accepted Command is answered from its receipt before this step (``decision.py``):
it is not accepted again, so it needs no new admission, and a later revocation cannot take its
receipt away.

How long a record is kept: while its Command could still be presented as new, because only
then can a lookup concern it. A Command accepted at ``t`` was issued at most the allowed skew
after ``t``; once the Authority's clock is past ``t`` plus the freshness window and the skew,
or the receipt horizon has reached ``t``, the freshness check refuses every new presentation of
it before First Admission (step 2b), and its record is dropped. The snapshot thus carries the
records of the last few minutes' Commands at most, never more than the receipt window. A
snapshot from before this module restores to an empty log, and so does ``replay``: Events carry
no admission anchors.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mwp.core.group.api import AuthorityContext, Envelope
from mwp.core.group.clock import instant
from mwp.core.group.ids import derive_id
from mwp.core.trust.admission import (
    AdmissionError,
    AdmissionReason,
    AppendCommitted,
    AppendExisting,
    AppendResult,
    FirstAdmissionRecord,
    HeldRecord,
    LogFailed,
    LogFailure,
    LookupAbsent,
    LookupFound,
    LookupResult,
    TrustedContext,
    admit_first,
    decide_append,
    record_json,
)
from mwp.core.trust.evidence import evidence_unavailable
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import FreshnessWindow, VerifiedDocument
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import b64url_decode, b64url_encode

CLAUSES: tuple[str, ...] = ("MWP-ADM-010",)

Json = dict[str, Any]


def record_id(organization_id: str, signing_hash: str) -> str:
    """A record's ID, derived from its logical key: one ID can never name two keys."""
    return derive_id(organization_id, "first-admission-record", signing_hash)


@dataclass(frozen=True, slots=True)
class _Anchor:
    """What the records of one signer's key share (so the snapshot holds it once)."""

    organization_id: str
    key_id: str
    principal: Principal
    accepted_by: Principal

    def to_json(self) -> list[str]:
        principal, accepted_by = self.principal, self.accepted_by
        return [
            self.organization_id,
            self.key_id,
            principal.type,
            principal.id,
            accepted_by.type,
            accepted_by.id,
        ]

    @classmethod
    def from_json(cls, value: list[str]) -> _Anchor:
        organization_id, key_id, kind, ident, by_kind, by_ident = value
        return cls(organization_id, key_id, Principal(kind, ident), Principal(by_kind, by_ident))


@dataclass(frozen=True, slots=True)
class _Held:
    anchor: _Anchor
    trusted_accepted_at: str  # the lexical spelling, retained


class GroupAdmissionLog:
    """This Group's records of first admission, oldest first, keyed (organizationId,
    signingHash). Records are held in parts and given back as their exact canonical bytes;
    the only writer is this Group's Authority."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: OrderedDict[tuple[str, str], _Held] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
        held = self._records.get((organization_id, signing_hash))
        if held is None:
            return LookupAbsent()
        ident = record_id(organization_id, signing_hash)
        record = _record_bytes(ident, organization_id, signing_hash, held)
        return LookupFound(record, held.anchor.accepted_by)

    def would_append(
        self, organization_id: str, signing_hash: str, candidate: bytes, writer: Principal
    ) -> FirstAdmissionRecord | AppendExisting | LogFailed:
        """What appending ``candidate`` would do, changing nothing (see ``commit``)."""
        ident = record_id(organization_id, signing_hash)
        held = self._records.get((organization_id, signing_hash))
        existing = None
        if held is not None:
            existing = HeldRecord(
                _record_bytes(ident, organization_id, signing_hash, held), held.anchor.accepted_by
            )
        decision = decide_append(
            organization_id,
            signing_hash,
            candidate,
            writer=writer,
            existing=existing,
            # IDs are derived from the key (checked below), so none can name another key.
            record_id_key=lambda _: None,
        )
        if not isinstance(decision, FirstAdmissionRecord):
            return decision
        if decision.admission_record_id != ident:
            return LogFailed(LogFailure.COMMIT_FAILED, "a record's ID is derived from its key")
        if _record_bytes(ident, organization_id, signing_hash, _held(decision)) != candidate:
            return LogFailed(LogFailure.COMMIT_FAILED, "only canonical records are held")
        return decision

    def commit(self, record: FirstAdmissionRecord) -> None:
        self._records[record.logical_key] = _held(record)

    def prune(self, now: str, window: FreshnessWindow, receipt_horizon: str) -> None:
        """Drop the records of Commands that can no longer be presented as new (see the
        module docstring); records are in acceptance order, so only the oldest go."""
        kept = window.max_age_seconds + window.max_skew_seconds
        current = instant(now)
        horizon = instant(receipt_horizon) if receipt_horizon else None
        while self._records:
            oldest = instant(next(iter(self._records.values())).trusted_accepted_at)
            age = (current.seconds - oldest.seconds) + (current.fraction - oldest.fraction)
            if age <= kept and (horizon is None or oldest > horizon):
                return
            self._records.popitem(last=False)

    def to_json(self) -> Json:
        anchors: dict[_Anchor, int] = {}
        records = []
        for (_, signing_hash), held in self._records.items():
            index = anchors.setdefault(held.anchor, len(anchors))
            digest = b64url_encode(bytes.fromhex(signing_hash.removeprefix("sha256:")))
            records.append([digest, index, held.trusted_accepted_at])
        return {"anchors": [a.to_json() for a in anchors], "records": records}

    @classmethod
    def from_json(cls, data: Json | None) -> GroupAdmissionLog:
        log = cls()
        if data is None:  # a snapshot from before First Admission on the Group path
            return log
        anchors = [_Anchor.from_json(a) for a in data["anchors"]]
        for digest, index, trusted_accepted_at in data["records"]:
            anchor = anchors[index]
            signing_hash = "sha256:" + b64url_decode(digest).hex()
            log._records[(anchor.organization_id, signing_hash)] = _Held(
                anchor, trusted_accepted_at
            )
        return log


def _held(record: FirstAdmissionRecord) -> _Held:
    anchor = _Anchor(record.organization_id, record.key_id, record.principal, record.accepted_by)
    return _Held(anchor, record.trusted_accepted_at.text)


def _record_bytes(ident: str, organization_id: str, signing_hash: str, held: _Held) -> bytes:
    anchor = held.anchor
    return canonicalize(
        record_json(
            admission_record_id=ident,
            organization_id=organization_id,
            document_kind="command",
            signing_hash=signing_hash,
            key_id=anchor.key_id,
            principal=anchor.principal,
            trusted_accepted_at=held.trusted_accepted_at,
            accepted_by=anchor.accepted_by,
        )
    )


class Admission:
    """First Admission of one presented Command: :meth:`admit` is the Authority step's 2c,
    :meth:`commit` runs when the Authority applies the Command.

    It is also the :class:`~mwp.core.trust.admission.AdmissionLog` that ``admit_first`` talks
    to: lookups read the Group's log, and an append is held here until ``commit``, so what the
    log returns is validated before anything is kept.
    """

    __slots__ = ("_ctx", "_envelope", "_log", "_staged")

    def __init__(self, log: GroupAdmissionLog, envelope: Envelope, ctx: AuthorityContext) -> None:
        self._log = log
        self._envelope = envelope
        self._ctx = ctx
        self._staged: FirstAdmissionRecord | None = None

    def admit(self) -> None:
        """Raise ``AUTH_INVALID_SIGNATURE`` (diagnostic stage ``admission``, or
        ``key-resolution`` without six-stage evidence) unless the Command may be admitted."""
        verified = self._envelope.verified
        if verified is None:  # the key's validity is unknown: fail closed, as at stage 4
            raise evidence_unavailable()
        if verified.profile_id != "command" or verified.signing_hash != self._envelope.signing_hash:
            raise AdmissionError(AdmissionReason.RECORD_BINDING_MISMATCH)
        admit_first(verified, self, self._trusted_context)

    def commit(self, receipt_horizon: str) -> None:
        if self._staged is not None:
            self._log.commit(self._staged)
            self._staged = None
        self._log.prune(self._ctx.now, self._ctx.freshness, receipt_horizon)

    def _trusted_context(self, verified: VerifiedDocument) -> TrustedContext:
        ctx = self._ctx
        return TrustedContext(
            record_id(verified.organization_id, verified.signing_hash), ctx.now, ctx.authority
        )

    # --- AdmissionLog -----------------------------------------------------------------------

    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
        return self._log.lookup(organization_id, signing_hash)

    def append_or_return_existing(
        self, organization_id: str, signing_hash: str, candidate: bytes
    ) -> AppendResult:
        writer = self._ctx.authority
        decision = self._log.would_append(organization_id, signing_hash, candidate, writer)
        if isinstance(decision, FirstAdmissionRecord):
            # Committed to this decision: the Group keeps it when it keeps the Events.
            self._staged = decision
            return AppendCommitted(decision.raw, writer)
        return decision
