"""The signed Group Event log, as pure data: sealing entries and verifying a chain of them.

A log entry is one accepted Group Event signed by its Group Authority (the Event profile of
the Signed Document codec: the signer is ``acceptedBy``), stored as its exact JCS bytes. No
I/O happens here; :mod:`mwp.log.group_log` puts entries into an object store.

**Where the hash chain lives.** The Event envelope allows no member of our own
(``additionalProperties: false``) and ``commandHash`` already names the causing Command, so the
link to the previous entry goes into the envelope's one extension slot, ``extensions``, under
:data:`CHAIN_EXTENSION`. It is inside the signed content, so the signature covers the link. It
is marked non-critical: the link adds tamper evidence to the log without changing what the
Event means, so a peer that does not know this profile may still process the Event, whereas a
critical marker would make such a peer refuse every mirrored Event. The first entry of a Group
(sequence 1) links to nothing (``previousSigningHash: null``).

**Determinism.** Ed25519 signatures are deterministic, so sealing the same Event with the same
key after the same previous entry always yields the same bytes: a mirror that crashes and seals
the batch again writes byte-identical objects, and a log rebuilt from workflow history matches
the mirrored one byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any
from urllib.parse import quote

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.trust.signed_document import (
    PROFILES,
    VerificationError,
    sign,
    signing_hash,
    verify_value,
)
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes

CLAUSES: tuple[str, ...] = ("MWP-MSN-009",)

CHAIN_EXTENSION = "urn:mwp:extension:group-event-chain"
CHAIN_EXTENSION_VERSION = "0.1.0"
PREVIOUS_MEMBER = "previousSigningHash"

# Zero-padded so that the lexical order of object keys is the Group order.
SEQUENCE_DIGITS = 12
MAX_LOG_SEQUENCE = 10**SEQUENCE_DIGITS - 1
# File systems limit one name to 255 bytes; a longer escaped Group ID is replaced by its hash.
_MAX_SEGMENT = 200

_EVENT_PROFILE = PROFILES["event"]


class EntryError(MwpError):
    """An Event cannot be sealed, or stored bytes are not a log entry (never retryable)."""

    def __init__(self, reason: str, *, group_id: str | None = None) -> None:
        super().__init__(
            ErrorCode.PROTOCOL_VIOLATION,
            f"not a Group Event log entry: {reason}",
            retryable=False,
            group_id=group_id,
            details={"reason": reason},
        )
        self.reason = reason


# --- object keys ----------------------------------------------------------------------------


def group_segment(group_id: str) -> str:
    """The Group ID as one URL-safe key segment, injective over Group IDs.

    Percent-encoding keeps it readable (``urn%3Amwp%3Agroup%3A...``). Every Group ID is an
    absolute URI, so its escaped form contains ``%3A``; a ``sha256-<hex>`` segment (used when
    the escaped form is too long for a file name) therefore never collides with one.
    """
    escaped = quote(group_id, safe="")
    if len(escaped) <= _MAX_SEGMENT:
        return escaped
    return "sha256-" + hashlib.sha256(group_id.encode("utf-8")).hexdigest()


def events_prefix(group_id: str) -> str:
    return f"groups/{group_segment(group_id)}/events/"


def entry_key(group_id: str, sequence: int) -> str:
    """``groups/<group>/events/<sequence, 12 digits>.json``."""
    if not 1 <= sequence <= MAX_LOG_SEQUENCE:
        raise ValueError(f"sequence {sequence} is outside 1..{MAX_LOG_SEQUENCE}")
    return f"{events_prefix(group_id)}{sequence:0{SEQUENCE_DIGITS}d}.json"


def sequence_of_key(prefix: str, key: str) -> int | None:
    """The sequence an entry key under ``prefix`` names, or None for any other key."""
    if not key.startswith(prefix) or not key.endswith(".json"):
        return None
    digits = key[len(prefix) : -len(".json")]
    if len(digits) != SEQUENCE_DIGITS or not digits.isdigit() or not digits.isascii():
        return None
    sequence = int(digits)
    return sequence if sequence >= 1 else None


# --- entries --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogEntry:
    """One stored entry: the exact bytes and what they say (not yet verified)."""

    data: bytes
    event: dict[str, Any]
    group_id: str
    sequence: int
    event_id: str
    previous_hash: str | None

    @cached_property
    def signing_hash(self) -> str:
        """Where the next entry links (computed on first use: readers may never need it)."""
        try:
            return signing_hash(self.event)
        except JcsDataModelError:
            raise EntryError("not-jcs", group_id=self.group_id) from None

    @classmethod
    def from_bytes(cls, data: bytes) -> LogEntry:
        """Strictly parse stored bytes; :class:`EntryError` if they cannot be an entry."""
        try:
            event = parse_bytes(data)
        except JsonSyntaxError:
            raise EntryError("unreadable") from None
        return cls.from_event(event, data)

    @classmethod
    def from_event(cls, event: Any, data: bytes | None = None) -> LogEntry:
        if not isinstance(event, dict):
            raise EntryError("not-an-object")
        group_id, sequence, event_id = (event.get(m) for m in ("groupId", "sequence", "eventId"))
        if not isinstance(group_id, str) or not isinstance(event_id, str):
            raise EntryError("not-a-group-event")
        if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 1:
            raise EntryError("not-a-group-event", group_id=group_id)
        previous = chain_link(event)
        if data is None:
            try:
                data = canonicalize(event)
            except JcsDataModelError:
                raise EntryError("not-jcs", group_id=group_id) from None
        return cls(data, event, group_id, sequence, event_id, previous)


def chain_link(event: Mapping[str, Any]) -> str | None:
    """The previous entry's signing hash an Event declares (None: the genesis entry)."""
    extensions = event.get("extensions")
    entry = extensions.get(CHAIN_EXTENSION) if isinstance(extensions, Mapping) else None
    data = entry.get("data") if isinstance(entry, Mapping) else None
    if not isinstance(data, Mapping) or set(data) != {PREVIOUS_MEMBER}:
        raise EntryError("chain-missing")
    previous = data[PREVIOUS_MEMBER]
    if previous is not None and not (
        isinstance(previous, str) and previous.startswith("sha256:") and len(previous) == 71
    ):
        raise EntryError("chain-malformed")
    return previous if isinstance(previous, str) else None


def seal(
    event: Mapping[str, Any], previous_hash: str | None, key_id: str, key: SigningKey
) -> LogEntry:
    """Link an accepted, unsigned Group Event to the previous entry and sign it.

    ``key`` is the Group Authority's (``acceptedBy``). Sequence 1 must link to nothing, every
    later one to ``previous_hash``. The result is validated against the Event schema, so a
    sealed entry always verifies given Registry evidence for ``key_id``.
    """
    if "signature" in event:
        raise EntryError("already-signed")
    group_id, sequence = event.get("groupId"), event.get("sequence")
    if not isinstance(group_id, str) or not isinstance(sequence, int) or sequence < 1:
        raise EntryError("not-a-group-event")
    if (sequence == 1) != (previous_hash is None):
        raise EntryError(
            "genesis-link" if sequence == 1 else "previous-hash-required", group_id=group_id
        )
    if sequence > MAX_LOG_SEQUENCE:
        raise EntryError("sequence-too-large", group_id=group_id)
    extensions = dict(event.get("extensions") or {})
    if CHAIN_EXTENSION in extensions:
        raise EntryError("already-chained", group_id=group_id)
    extensions[CHAIN_EXTENSION] = {
        "version": CHAIN_EXTENSION_VERSION,
        "critical": False,
        "data": {PREVIOUS_MEMBER: previous_hash},
    }
    try:
        signed = sign({**event, "extensions": extensions}, "event", key_id, key)
    except (ValueError, JcsDataModelError) as exc:
        raise EntryError(f"unsignable: {exc}", group_id=group_id) from None
    from mwp.core.models import DocumentInvalid, validate_document

    try:
        validate_document(_EVENT_PROFILE.schema, signed)
    except DocumentInvalid as exc:
        raise EntryError(f"schema: {exc.reason}", group_id=group_id) from None
    return LogEntry.from_event(signed)


def unsealed(event: Mapping[str, Any]) -> dict[str, Any]:
    """The accepted Event as the Authority produced it: without signature and chain link."""
    plain = {k: v for k, v in event.items() if k != "signature"}
    extensions = {k: v for k, v in (plain.get("extensions") or {}).items() if k != CHAIN_EXTENSION}
    if extensions:
        plain["extensions"] = extensions
    else:
        plain.pop("extensions", None)
    return plain


# --- verification ---------------------------------------------------------------------------


class LogFaultReason(StrEnum):
    UNREADABLE = "unreadable"  # not strict JSON, or not a Group Event at all
    NOT_CANONICAL = "not-canonical"  # verifies, but is not the JCS bytes the mirror writes
    SIGNATURE = "signature"  # six-stage verification failed
    WRONG_GROUP = "wrong-group"
    WRONG_AUTHORITY = "wrong-authority"
    SEQUENCE_MISMATCH = "sequence-mismatch"  # the object key names another sequence
    GAP = "gap"  # an expected sequence is missing
    OUT_OF_ORDER = "out-of-order"  # a sequence at or below one already seen
    CHAIN_MISSING = "chain-missing"
    CHAIN_BROKEN = "chain-broken"  # the link is not the previous entry's signing hash
    DUPLICATE_EVENT_ID = "duplicate-event-id"
    UNEXPECTED_OBJECT = "unexpected-object"  # a stored object that names no entry


@dataclass(frozen=True)
class LogFault:
    """The first thing wrong with a log: at which sequence, and why."""

    sequence: int
    reason: LogFaultReason
    detail: str = ""

    def __str__(self) -> str:
        tail = f": {self.detail}" if self.detail else ""
        return f"sequence {self.sequence}: {self.reason.value}{tail}"


@dataclass(frozen=True)
class ChainVerdict:
    """What verifying a run of entries established, up to the first fault."""

    verified: int  # entries verified before the fault (or all of them)
    first_sequence: int | None
    last_sequence: int | None  # of the last verified entry
    head_hash: str | None  # its signing hash: where the next entry must link
    anchored: bool  # False when the first link was taken on trust (a log not starting at 1)
    fault: LogFault | None

    @property
    def ok(self) -> bool:
        return self.fault is None


class ChainVerifier:
    """Verifies entries one at a time, in Group order, and stops at the first fault.

    Every entry passes the six stages against ``evidence`` from its exact bytes, is the
    canonical JCS of itself, belongs to ``group_id``, has the next sequence, links to the
    previous entry's signing hash and has an Event ID not seen before. With ``authority``,
    every ``acceptedBy`` must be that Principal.

    A log normally starts at sequence 1, whose entry links to nothing. Verifying from a later
    ``start_sequence`` (a compacted log, or resuming after a checked prefix) uses
    ``previous_hash`` as the anchor; without one, the first entry's own link is taken on trust
    and the verdict says ``anchored=False``.
    """

    def __init__(
        self,
        group_id: str,
        evidence: RegistryEvidence,
        *,
        start_sequence: int = 1,
        previous_hash: str | None = None,
        authority: Principal | None = None,
    ) -> None:
        if start_sequence < 1:
            raise ValueError("sequences start at 1")
        if start_sequence == 1 and previous_hash is not None:
            raise ValueError("the entry at sequence 1 links to nothing")
        self.group_id = group_id
        self.evidence = evidence
        self.authority = authority
        self._expected = start_sequence
        self._previous = previous_hash
        self._anchored = start_sequence == 1 or previous_hash is not None
        self._first: int | None = None
        self._event_ids: set[str] = set()
        self._verified = 0
        self._fault: LogFault | None = None

    @property
    def expected_sequence(self) -> int:
        return self._expected

    @property
    def fault(self) -> LogFault | None:
        return self._fault

    def missing(self, through: int | None = None) -> LogFault:
        """Record that the expected entry is absent (``through``: the next one stored)."""
        detail = f"no entry for sequence {self._expected}"
        if through is not None:
            detail += f" (next stored: {through})"
        return self.reject(LogFaultReason.GAP, detail)

    def reject(self, reason: LogFaultReason, detail: str = "") -> LogFault:
        """Stop at the expected sequence for a reason found outside the entry's bytes."""
        return self._stop(LogFault(self._expected, reason, detail))

    def feed(self, stored: bytes | LogEntry, key_sequence: int | None = None) -> LogFault | None:
        """Check the next entry: its stored bytes, or a :class:`LogEntry` parsed from them
        (whose strict parse is then reused). ``key_sequence``: what its object key says."""
        if self._fault is not None:
            return self._fault
        data = stored.data if isinstance(stored, LogEntry) else stored
        position = self._expected if key_sequence is None else key_sequence
        if key_sequence is not None and key_sequence != self._expected:
            reason = (
                LogFaultReason.GAP if key_sequence > self._expected else LogFaultReason.OUT_OF_ORDER
            )
            if reason is LogFaultReason.GAP:
                return self.missing(key_sequence)
            return self._stop(LogFault(position, reason, f"expected {self._expected}"))
        if isinstance(stored, LogEntry):
            document: Any = stored.event
        else:
            try:
                document = parse_bytes(data)
            except JsonSyntaxError as exc:
                return self._stop(LogFault(position, LogFaultReason.UNREADABLE, str(exc)))
        try:
            verified = verify_value(document, _EVENT_PROFILE, self.evidence)
        except VerificationError as exc:
            detail = f"{exc.code.value} at stage {exc.stage} ({exc.reason})"
            return self._stop(LogFault(position, LogFaultReason.SIGNATURE, detail))
        event = verified.document
        if canonicalize(event) != data:
            return self._stop(LogFault(position, LogFaultReason.NOT_CANONICAL))
        if event.get("groupId") != self.group_id:
            return self._stop(
                LogFault(position, LogFaultReason.WRONG_GROUP, f"groupId {event.get('groupId')}")
            )
        sequence = event.get("sequence")
        if sequence != self._expected:
            if key_sequence is not None:
                return self._stop(
                    LogFault(
                        position, LogFaultReason.SEQUENCE_MISMATCH, f"the Event says {sequence}"
                    )
                )
            assert isinstance(sequence, int)  # a schema-valid Group Event has one
            if sequence > self._expected:
                return self.missing(sequence)
            return self._stop(
                LogFault(sequence, LogFaultReason.OUT_OF_ORDER, f"expected {self._expected}")
            )
        if self.authority is not None and verified.principal != self.authority:
            return self._stop(
                LogFault(
                    position, LogFaultReason.WRONG_AUTHORITY, f"acceptedBy {verified.principal.id}"
                )
            )
        try:
            link = chain_link(event)
        except EntryError as exc:
            return self._stop(LogFault(position, LogFaultReason.CHAIN_MISSING, exc.reason))
        # An unanchored run takes its first link on trust; every later one must match.
        if (self._anchored or self._verified) and link != self._previous:
            detail = f"links to {link}, previous entry is {self._previous}"
            return self._stop(LogFault(position, LogFaultReason.CHAIN_BROKEN, detail))
        event_id = event["eventId"]
        if event_id in self._event_ids:
            return self._stop(LogFault(position, LogFaultReason.DUPLICATE_EVENT_ID, event_id))
        self._event_ids.add(event_id)
        if self._first is None:
            self._first = sequence
        self._previous = verified.signing_hash
        self._expected += 1
        self._verified += 1
        return None

    def verdict(self) -> ChainVerdict:
        return ChainVerdict(
            verified=self._verified,
            first_sequence=self._first,
            last_sequence=self._expected - 1 if self._verified else None,
            head_hash=self._previous if self._verified else None,
            anchored=self._anchored,
            fault=self._fault,
        )

    def _stop(self, fault: LogFault) -> LogFault:
        self._fault = fault
        return fault


def verify_entries(
    entries: Iterable[bytes | LogEntry],
    group_id: str,
    evidence: RegistryEvidence,
    *,
    start_sequence: int = 1,
    previous_hash: str | None = None,
    authority: Principal | None = None,
) -> ChainVerdict:
    """Verify a run of entries given in Group order (see :class:`ChainVerifier`)."""
    verifier = ChainVerifier(
        group_id,
        evidence,
        start_sequence=start_sequence,
        previous_hash=previous_hash,
        authority=authority,
    )
    for entry in entries:
        if verifier.feed(entry) is not None:
            break
    return verifier.verdict()
