"""`mwp demo --codec`: a signed Command through six-stage verification and First Admission.

This is the foundation's demonstration: everything runs in-process on the pure core and a
durable SQLite Admission Log under the state folder. It exits 0 only if every step ends the
way the protocol requires (accepted Commands admitted once; bad ones refused with their
typed error and no record written).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mwp.core.errors import MwpError
from mwp.core.trust.admission import AdmissionError, TrustedContext, admit_first
from mwp.core.trust.registry import KeyBinding, Principal, RegistryEvidence
from mwp.core.trust.signed_document import VerifiedDocument, sign, verify
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import format_utc, parse_timestamp
from mwp.stores.admission_log import ServiceCredential, SqliteAdmissionLog, provision_service

ORGANIZATION = "urn:mwp:organization:demo"
OWNER = Principal("human", "urn:mwp:human:mission-owner")
COORDINATOR = Principal("agent", "urn:mwp:agent:coordinator")
ADMISSION = Principal("service", "urn:mwp:service:admission")


@dataclass
class Identity:
    principal: Principal
    key_id: str
    key: SigningKey


def _identity(principal: Principal) -> Identity:
    name = principal.id.rsplit(":", 1)[-1]
    return Identity(principal, f"urn:mwp:key:{name}:{uuid.uuid4()}", SigningKey.generate())


def _now() -> str:
    return format_utc(datetime.now(UTC).replace(microsecond=0))


def _mission_create(owner: Identity, issued_at: str) -> dict[str, Any]:
    mission = uuid.uuid4()
    command = {
        "protocolVersion": "0.1",
        "actionId": f"urn:uuid:{uuid.uuid4()}",
        "actor": owner.principal.to_json(),
        "groupId": f"urn:mwp:group:{mission}",
        "kind": "mission.create",
        "correlationId": f"urn:uuid:{uuid.uuid4()}",
        "issuedAt": issued_at,
        "payload": {
            "missionId": f"urn:mwp:mission:{mission}",
            "groupId": f"urn:mwp:group:{mission}",
            "coordinatorAgentId": COORDINATOR.id,
        },
    }
    return sign(command, "command", owner.key_id, owner.key)


def run_demo(state: Path, out: Callable[[str], None] = print) -> bool:
    state.mkdir(parents=True, exist_ok=True)
    owner, coordinator = _identity(OWNER), _identity(COORDINATOR)
    valid_from = parse_timestamp("2020-01-01T00:00:00Z")
    registry = RegistryEvidence.from_bindings(
        ORGANIZATION,
        [
            KeyBinding(i.key_id, i.principal, "Ed25519", i.key.public_key, valid_from, ())
            for i in (owner, coordinator)
        ],
    )
    out(f"Registry for {ORGANIZATION}: {len(registry.bindings)} signing-key bindings")

    log_path = state / "admission-log.sqlite"
    secret = os.urandom(32)
    provision_service(log_path, ORGANIZATION, ADMISSION, secret)
    log = SqliteAdmissionLog(log_path, ServiceCredential(ORGANIZATION, ADMISSION, secret))

    def trusted_context(_: VerifiedDocument) -> TrustedContext:
        return TrustedContext(f"urn:uuid:{uuid.uuid4()}", _now(), ADMISSION)

    command = _mission_create(owner, _now())
    wire = json.dumps(command, indent=2).encode()
    verified = verify(wire, "command", registry)
    out(f"1. mission.create signed by {owner.principal.id}")
    out(f"   six stages passed; signing hash {verified.signing_hash}")
    record = admit_first(verified, log, trusted_context)
    out(f"   first admission {record.admission_record_id} at {record.trusted_accepted_at.text}")

    again = admit_first(verify(wire, "command", registry), log, trusted_context)
    retried_once = again.admission_record_id == record.admission_record_id
    outcome = "same record returned, nothing appended" if retried_once else "NEW RECORD (wrong)"
    out(f"2. the same bytes again: {outcome}")

    ok = retried_once
    tampered = dict(
        command, payload={**command["payload"], "coordinatorAgentId": "urn:mwp:agent:x"}
    )
    impostor = sign(
        dict(command, actionId=f"urn:uuid:{uuid.uuid4()}"),
        "command",
        coordinator.key_id,
        coordinator.key,
    )
    refusals: list[tuple[str, bytes, str]] = [
        ("3. payload changed after signing", canonicalize(tampered), "AUTH_INVALID_SIGNATURE"),
        (
            "4. the coordinator's key signing as the human",
            canonicalize(impostor),
            "AUTH_INVALID_SIGNATURE",
        ),
        (
            "5. a duplicated member name",
            wire.replace(b'"kind"', b'"kind": "x", "kind"', 1),
            "PROTOCOL_VIOLATION",
        ),
        ("6. unknown member", canonicalize({**command, "note": "hi"}), "SCHEMA_VALIDATION_FAILED"),
    ]
    for label, data, expected in refusals:
        try:
            admit_first(verify(data, "command", registry), log, trusted_context)
        except (MwpError, AdmissionError) as exc:
            stage = exc.diagnostic.stage if exc.diagnostic else "?"
            wire_error = json.dumps(exc.to_wire(_now()))
            verdict = "ok" if exc.code.value == expected else f"WRONG (wanted {expected})"
            out(f"{label}: refused {verdict}")
            out(f"   wire: {wire_error}")
            out(f"   protected audit diagnostic: stage={stage}")
            ok = ok and exc.code.value == expected
        else:
            out(f"{label}: ACCEPTED (wrong)")
            ok = False
    out(f"Admission Log {log_path}: chain {'intact' if log.verify_chain() is None else 'BROKEN'}")
    out("PASS: every step ended as MWP 0.1 requires" if ok else "FAIL: see the steps above")
    return ok
