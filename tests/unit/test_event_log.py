"""The signed Group Event log as pure data: sealing, the hash chain, and every kind of tamper."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mwp.core.errors import ErrorCode
from mwp.core.log.event_log import (
    CHAIN_EXTENSION,
    ChainVerifier,
    EntryError,
    LogEntry,
    LogFaultReason,
    chain_link,
    entry_key,
    events_prefix,
    group_segment,
    seal,
    sequence_of_key,
    unsealed,
    verify_entries,
)
from mwp.core.trust.signed_document import sign, signing_hash
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import b64url_decode, b64url_encode
from tests.event_log_samples import (
    AUTHORITY,
    AUTHORITY_KEY,
    EVIDENCE,
    GROUP,
    KEY_ID,
    OTHER_KEY,
    OTHER_KEY_ID,
    OTHER_SERVICE,
    chain,
    event,
)


def _verify(entries: list[LogEntry] | list[bytes], **options: Any) -> Any:
    return verify_entries(entries, GROUP, EVIDENCE, **options)


def _resign(
    document: dict[str, Any], key_id: str = KEY_ID, key: SigningKey = AUTHORITY_KEY
) -> bytes:
    unsigned = {k: v for k, v in document.items() if k != "signature"}
    return canonicalize(sign(unsigned, "event", key_id, key))


# --- sealing --------------------------------------------------------------------------------


def test_a_sealed_chain_verifies_and_reports_its_head() -> None:
    entries = chain(5)
    verdict = _verify(entries)
    assert verdict.ok and verdict.fault is None
    assert (verdict.verified, verdict.first_sequence, verdict.last_sequence) == (5, 1, 5)
    assert verdict.head_hash == entries[-1].signing_hash
    assert verdict.anchored


def test_each_entry_links_to_the_signing_hash_of_the_one_before() -> None:
    entries = chain(3)
    assert entries[0].previous_hash is None
    assert chain_link(entries[0].event) is None
    for before, after in itertools.pairwise(entries):
        assert after.previous_hash == before.signing_hash == signing_hash(before.event)
    extension = entries[1].event["extensions"][CHAIN_EXTENSION]
    assert extension == {
        "version": "0.1.0",
        "critical": False,
        "data": {"previousSigningHash": entries[0].signing_hash},
    }


def test_sealing_is_deterministic_and_stores_the_jcs_bytes() -> None:
    first, again = chain(4), chain(4)
    assert [e.data for e in first] == [e.data for e in again]
    for entry in first:
        assert entry.data == canonicalize(entry.event)
        assert LogEntry.from_bytes(entry.data) == entry


def test_unsealed_gives_back_the_accepted_event() -> None:
    original = event(
        1, extensions={"urn:example:ext": {"version": "1.0.0", "critical": False, "data": 1}}
    )
    entry = seal(original, None, KEY_ID, AUTHORITY_KEY)
    assert unsealed(entry.event) == original
    assert unsealed(chain(1)[0].event) == event(1)


@pytest.mark.parametrize(
    ("unsigned", "previous", "reason"),
    [
        (event(1), "sha256:" + "0" * 64, "genesis-link"),
        (event(2), None, "previous-hash-required"),
        ({**event(1), "signature": {}}, None, "already-signed"),
        (
            event(
                1, extensions={CHAIN_EXTENSION: {"version": "0.1.0", "critical": False, "data": {}}}
            ),
            None,
            "already-chained",
        ),
        ({k: v for k, v in event(1).items() if k != "groupId"}, None, "not-a-group-event"),
        (event(1, kind="not.a.kind"), None, "schema"),
        (event(1, occurredAt="2026-11-29T10:00:00+00:00"), None, "unsignable"),
    ],
)
def test_seal_refuses_what_cannot_be_a_log_entry(
    unsigned: dict[str, Any], previous: str | None, reason: str
) -> None:
    with pytest.raises(EntryError) as raised:
        seal(unsigned, previous, KEY_ID, AUTHORITY_KEY)
    assert raised.value.code is ErrorCode.PROTOCOL_VIOLATION
    assert raised.value.reason.startswith(reason)
    assert not raised.value.retryable


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "unreadable"),
        (b"[1]", "not-an-object"),
        (canonicalize(event(1)), "chain-missing"),
        (canonicalize({k: v for k, v in event(1).items() if k != "sequence"}), "not-a-group-event"),
    ],
)
def test_stored_bytes_that_are_no_entry_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(EntryError) as raised:
        LogEntry.from_bytes(data)
    assert raised.value.reason == reason


# --- object keys ----------------------------------------------------------------------------


def test_entry_keys_are_zero_padded_under_an_escaped_group_segment() -> None:
    assert entry_key(GROUP, 7) == "groups/urn%3Amwp%3Agroup%3Aalpha/events/000000000007.json"
    assert sequence_of_key(events_prefix(GROUP), entry_key(GROUP, 7)) == 7
    keys = [entry_key(GROUP, n) for n in (1, 2, 10, 99, 100, 123456)]
    assert sorted(keys) == keys  # lexical order is Group order


def test_group_segments_are_injective_and_file_name_sized() -> None:
    assert group_segment("urn:a/b") != group_segment("urn:a%2Fb")
    assert "/" not in group_segment("https://example.com/groups/1?x=y#z")
    long_id = "urn:mwp:group:" + "x" * 400
    segment = group_segment(long_id)
    assert segment.startswith("sha256-") and len(segment) == 71
    assert segment != group_segment(long_id + "y")


@pytest.mark.parametrize("sequence", [0, -1, 10**12])
def test_entry_key_refuses_sequences_outside_the_padded_range(sequence: int) -> None:
    with pytest.raises(ValueError):
        entry_key(GROUP, sequence)


@pytest.mark.parametrize(
    "key",
    [
        "groups/x/events/000000000000.json",
        "groups/x/events/00000000001.json",
        "groups/x/events/0000000000011.json",
        "groups/x/events/00000000000a.json",
        "groups/x/events/000000000001.tmp",
        "groups/y/events/000000000001.json",
    ],
)
def test_other_keys_name_no_sequence(key: str) -> None:
    assert sequence_of_key("groups/x/events/", key) is None


# --- tamper ---------------------------------------------------------------------------------


def test_a_changed_payload_is_detected_at_its_sequence() -> None:
    entries = chain(4)
    document = json.loads(entries[2].data)
    document["payload"]["content"][0]["text"] = "rewritten"
    data = [e.data for e in entries]
    data[2] = canonicalize(document)
    verdict = _verify(data)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (3, LogFaultReason.SIGNATURE)
    assert "AUTH_INVALID_SIGNATURE at stage signature" in verdict.fault.detail
    assert (verdict.verified, verdict.last_sequence) == (2, 2)
    assert verdict.head_hash == entries[1].signing_hash


def test_a_changed_signature_is_detected() -> None:
    entries = chain(3)
    document = json.loads(entries[1].data)
    raw = bytearray(b64url_decode(document["signature"]["value"]))
    raw[40] ^= 0x01
    document["signature"]["value"] = b64url_encode(bytes(raw))
    data = [e.data for e in entries]
    data[1] = canonicalize(document)
    verdict = _verify(data)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.SIGNATURE)


def test_a_signature_by_a_key_outside_the_evidence_is_detected() -> None:
    stranger = SigningKey(bytes(range(2, 34)))
    entries = chain(2)
    document = json.loads(entries[1].data)
    data = [entries[0].data, _resign(document, "urn:mwp:key:unknown", stranger)]
    verdict = _verify(data)
    assert verdict.fault is not None
    assert verdict.fault.reason is LogFaultReason.SIGNATURE
    assert "key-resolution" in verdict.fault.detail


def test_swapped_entries_are_detected() -> None:
    entries = chain(4)
    swapped = [entries[0], entries[2], entries[1], entries[3]]
    verdict = _verify(swapped)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.GAP)
    backwards = [entries[0], entries[1], entries[0]]
    verdict = _verify(backwards)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (1, LogFaultReason.OUT_OF_ORDER)


def test_a_missing_entry_is_a_gap_at_its_sequence() -> None:
    entries = chain(5)
    verdict = _verify([entries[0], entries[1], entries[3], entries[4]])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (3, LogFaultReason.GAP)
    assert verdict.last_sequence == 2


def test_a_validly_signed_entry_with_a_wrong_link_breaks_the_chain() -> None:
    entries = chain(3)
    forged = seal(event(3), entries[0].signing_hash, KEY_ID, AUTHORITY_KEY)  # skips entry 2
    verdict = _verify([entries[0], entries[1], forged])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (3, LogFaultReason.CHAIN_BROKEN)


def test_a_rewritten_earlier_entry_breaks_the_link_of_the_next() -> None:
    entries = chain(3)
    rewritten = seal(
        event(2, payload={"content": []}), entries[0].signing_hash, KEY_ID, AUTHORITY_KEY
    )
    verdict = _verify([entries[0], rewritten, entries[2]])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (3, LogFaultReason.CHAIN_BROKEN)


def test_an_entry_of_another_group_is_detected() -> None:
    other = chain(2, "urn:mwp:group:beta")
    verdict = _verify([chain(1)[0], other[1]])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.WRONG_GROUP)


def test_an_entry_without_chain_link_is_detected() -> None:
    first = chain(1)[0]
    unlinked = canonicalize(sign(event(2), "event", KEY_ID, AUTHORITY_KEY))
    verdict = _verify([first.data, unlinked])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.CHAIN_MISSING)


def test_non_canonical_bytes_are_detected_even_when_they_verify() -> None:
    entries = chain(2)
    pretty = json.dumps(entries[1].event, indent=2).encode()
    verdict = _verify([entries[0].data, pretty])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.NOT_CANONICAL)


def test_unreadable_bytes_are_detected() -> None:
    verdict = _verify([chain(1)[0].data, b"\xef\xbb\xbf{}"])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.UNREADABLE)


def test_a_reused_event_id_is_detected() -> None:
    first = chain(1)[0]
    second = seal(event(2, eventId=first.event_id), first.signing_hash, KEY_ID, AUTHORITY_KEY)
    verdict = _verify([first, second])
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.DUPLICATE_EVENT_ID)


def test_an_entry_accepted_by_another_service_is_detected_when_the_authority_is_known() -> None:
    first = chain(1)[0]
    impostor = seal(
        event(2, acceptedBy=OTHER_SERVICE.to_json()), first.signing_hash, OTHER_KEY_ID, OTHER_KEY
    )
    assert _verify([first, impostor]).ok  # validly signed by its own acceptedBy
    verdict = _verify([first, impostor], authority=AUTHORITY)
    assert verdict.fault is not None
    assert (verdict.fault.sequence, verdict.fault.reason) == (2, LogFaultReason.WRONG_AUTHORITY)


def test_an_object_key_naming_another_sequence_is_detected() -> None:
    entries = chain(2)
    verifier = ChainVerifier(GROUP, EVIDENCE)
    assert verifier.feed(entries[0].data, key_sequence=1) is None
    fault = verifier.feed(entries[0].data, key_sequence=2)
    assert fault is not None and fault.reason is LogFaultReason.SEQUENCE_MISMATCH
    assert verifier.feed(entries[1].data, key_sequence=2) is fault  # stays stopped


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_single_byte_change_is_detected_at_that_entry(data: st.DataObject) -> None:
    entries = chain(3)
    index = data.draw(st.integers(0, 2))
    raw = bytearray(entries[index].data)
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[position]))
    stored = [e.data for e in entries]
    stored[index] = bytes(raw)
    verdict = _verify(stored)
    assert verdict.fault is not None
    assert verdict.fault.sequence == index + 1
    assert verdict.verified == index


# --- starting later -------------------------------------------------------------------------


def test_a_suffix_verifies_against_its_anchor() -> None:
    entries = chain(5)
    suffix = entries[2:]
    anchored = _verify(suffix, start_sequence=3, previous_hash=entries[1].signing_hash)
    assert anchored.ok and anchored.anchored and anchored.first_sequence == 3
    wrong = _verify(suffix, start_sequence=3, previous_hash=entries[0].signing_hash)
    assert wrong.fault is not None and wrong.fault.reason is LogFaultReason.CHAIN_BROKEN
    trusted = _verify(suffix, start_sequence=3)
    assert trusted.ok and not trusted.anchored and trusted.last_sequence == 5


def test_a_log_from_sequence_one_must_start_at_the_genesis_entry() -> None:
    entries = chain(3)
    verdict = _verify(entries[1:])
    assert verdict.fault is not None and verdict.fault.reason is LogFaultReason.GAP
    with pytest.raises(ValueError):
        ChainVerifier(GROUP, EVIDENCE, previous_hash=entries[0].signing_hash)


def test_an_empty_run_verifies_nothing() -> None:
    verdict = _verify([])
    assert verdict.ok and verdict.verified == 0 and verdict.head_hash is None
