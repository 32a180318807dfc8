"""The wire models against the protocol bundle's own verdicts and the value rules.

* every structural conformance vector gets its expected verdict;
* every signed-document vector passes or fails the schema stage exactly as the cryptography
  manifest says (a later-stage fault must not be stopped here);
* validated documents dump back to the same JSON value;
* each lexical value rule and conditional rule rejects what it must and accepts its edge.

The comparison with a Draft 2020-12 validator is in ``test_models_json_schema.py``.
"""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from mwp.core.models import SCHEMA_MODELS, Command, DocumentInvalid, validate_document
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import OutOfRangeNumber, parse_bytes

REPO = Path(__file__).resolve().parents[2]


def _protocol_root() -> Path:
    # MWP_PROTOCOL_ROOT may be relative (the Makefile exports it relative to the repo root).
    root = Path(os.environ.get("MWP_PROTOCOL_ROOT") or "../shared/mwp-0.1")
    if not root.is_absolute():
        root = REPO / root
    root = root.resolve()
    if not (root / "conformance" / "manifest.json").is_file():
        raise RuntimeError(f"protocol bundle not found at {root}; set MWP_PROTOCOL_ROOT")
    return root


ROOT = _protocol_root()


def load(relative: str) -> Any:
    return parse_bytes((ROOT / relative).read_bytes())


def file_name(relative: str) -> str:
    return relative.rpartition("/")[2]


def verdict(schema: str, value: object) -> bool:
    try:
        validate_document(schema, value)
    except DocumentInvalid:
        return False
    return True


# --- the bundle's own verdicts --------------------------------------------------------------

CONFORMANCE: list[dict[str, Any]] = load("conformance/manifest.json")
CRYPTO: dict[str, Any] = load("cryptography/manifest.json")
PROFILE_SCHEMAS = {p["profileId"]: file_name(p["schema"]) for p in CRYPTO["profiles"]}


def _signed_document_evaluations() -> list[tuple[str, str, str]]:
    """(document, schema, expected stage) for every parseable signed-document evaluation."""
    seen: dict[tuple[str, str], str] = {}
    for case in CRYPTO["cases"]:
        for evaluation in case["evaluations"]:
            stage = evaluation.get("expect", {}).get("stage")
            if "document" not in evaluation or stage == "parse":
                continue
            key = (evaluation["document"], PROFILE_SCHEMAS[evaluation["profileId"]])
            # A document reused by later-stage faults still passes the schema stage.
            if seen.get(key) != "schema":
                seen[key] = "schema" if stage == "schema" else seen.get(key, stage)
    return [(doc, schema, stage) for (doc, schema), stage in sorted(seen.items())]


SIGNED = _signed_document_evaluations()
VALID_SIGNED_DIR = "cryptography/vectors/signed-documents/valid"


def test_bundle_has_58_structural_vectors() -> None:
    assert len(CONFORMANCE) == 58
    assert {file_name(c["schema"]) for c in CONFORMANCE} == set(SCHEMA_MODELS)


@pytest.mark.parametrize("case", CONFORMANCE, ids=[c["name"] for c in CONFORMANCE])
def test_conformance_vector(case: dict[str, Any]) -> None:
    assert verdict(case["schema"], load(case["instance"])) is case["valid"]


@pytest.mark.parametrize(
    ("document", "schema", "stage"), SIGNED, ids=[f"{d.rpartition('/')[2]}" for d, _, _ in SIGNED]
)
def test_signed_document_schema_stage(document: str, schema: str, stage: str) -> None:
    # Leap seconds, year 0000, -00:00, padding and a foreign algorithm stop here; nonzero pad
    # bits, 1e400, unpaired surrogates and every key or signature fault must get through.
    assert verdict(schema, load(document)) is (stage != "schema")


def test_every_valid_signed_document_validates() -> None:
    profile_of = {doc: schema for doc, schema, _ in SIGNED}
    files = sorted((ROOT / VALID_SIGNED_DIR).glob("*.json"))
    assert len(files) == 11
    for path in files:
        relative = f"{VALID_SIGNED_DIR}/{path.name}"
        validate_document(profile_of[relative], load(relative))


# --- round trip -----------------------------------------------------------------------------

ROUND_TRIP = [(c["schema"], c["instance"]) for c in CONFORMANCE if c["valid"]] + [
    (schema, doc) for doc, schema, _ in SIGNED if doc.startswith(VALID_SIGNED_DIR)
]


@pytest.mark.parametrize(("schema", "instance"), ROUND_TRIP, ids=[i for _, i in ROUND_TRIP])
def test_round_trip(schema: str, instance: str) -> None:
    value = load(instance)
    model = validate_document(schema, value)
    dumped = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert dumped == value
    assert canonicalize(dumped) == canonicalize(value)
    assert validate_document(schema, dumped) == model


def test_timestamps_keep_their_exact_text() -> None:
    doc = load("conformance/vectors/valid/command.json")
    doc["issuedAt"] = "2026-07-15t01:30:00.1200+01:30"
    command = validate_document("command.schema.json", doc)
    assert isinstance(command, Command)
    assert command.issued_at == "2026-07-15t01:30:00.1200+01:30"
    assert command.model_dump(by_alias=True, mode="json")["issuedAt"] == doc["issuedAt"]


def test_free_form_members_are_held_as_received() -> None:
    doc = load("conformance/vectors/valid/command.json")
    doc["payload"] = {"huge": OutOfRangeNumber("1e400"), "n": 1.5, "none": None}
    command = validate_document("command.schema.json", doc)
    assert isinstance(command, Command)
    assert command.payload is doc["payload"]
    assert command.model_dump(mode="json")["payload"] == doc["payload"]


def test_integral_float_is_an_integer_and_dumps_as_the_same_number() -> None:
    doc = load("conformance/vectors/valid/command.json")
    doc["expectedRevision"] = 4.0
    command = validate_document("command.schema.json", doc)
    assert isinstance(command, Command)
    assert command.expected_revision == 4
    assert type(command.expected_revision) is int
    assert canonicalize(command.model_dump(exclude_unset=True, mode="json")) == canonicalize(doc)


def test_python_callers_construct_by_field_name_but_the_wire_needs_wire_names() -> None:
    doc = load("conformance/vectors/valid/command.json")
    command = Command.model_validate(doc)
    # None is never a member value: Python callers omit an absent member, as the wire does.
    assert Command(**{name: getattr(command, name) for name in command.model_fields_set}) == command
    with pytest.raises(ValueError, match="must not be null"):
        Command(**dict(command))
    snake = {("action_id" if k == "actionId" else k): v for k, v in doc.items()}
    assert not verdict("command.schema.json", snake)


def test_unknown_schema_name_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        validate_document("common.schema.json", {})
    assert validate_document(
        "schemas/group.schema.json", load("conformance/vectors/valid/group.json")
    )


def test_invalid_document_reason_names_the_member() -> None:
    doc = load("conformance/vectors/valid/command.json")
    doc["actor"]["type"] = "robot"
    with pytest.raises(DocumentInvalid) as raised:
        validate_document("command.schema.json", doc)
    assert raised.value.schema_name == "command.schema.json"
    assert "/actor/type" in raised.value.reason


# --- value rules, by hand -------------------------------------------------------------------

DROP = object()  # an edit that removes the member


def edited(value: Any, edits: dict[str, Any]) -> Any:
    """A deep copy of ``value`` with each JSON-pointer-like path set (or dropped)."""
    result = copy.deepcopy(value)
    for pointer, new in edits.items():
        *parents, last = [int(p) if p.isdigit() else p for p in pointer.split("/")[1:]]
        target = result
        for step in parents:
            target = target[step]
        if new is DROP:
            del target[last]
        else:
            target[last] = new
    return result


SAFE_MAX = 2**53 - 1
URN_512 = "urn:" + "a" * 508
HASH = "sha256:" + "a" * 64
# (id, document under conformance/vectors/valid, edits, valid); the schema is the document's.
VALUE_RULES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("id-relative", "command", {"/actionId": "actions/one"}, False),
    ("id-network-path", "command", {"/actionId": "//example.com/a"}, False),
    ("id-iri-only", "command", {"/actionId": "https://例え.テスト/a"}, False),
    ("id-percent-encoded", "command", {"/actionId": "https://x.test/%E4%BE%8B"}, True),
    ("id-bad-percent", "command", {"/actionId": "urn:a%zz"}, False),
    ("id-inner-space", "command", {"/actionId": "urn:a b"}, False),
    ("id-leading-space", "command", {"/actionId": " urn:a"}, False),
    ("id-trailing-lf", "command", {"/actionId": "urn:a\n"}, False),
    ("id-trailing-crlf", "command", {"/actionId": "urn:a\r\n"}, False),
    ("id-tab", "command", {"/actionId": "urn:a\tb"}, False),
    ("id-control", "command", {"/actionId": "urn:a\x00"}, False),
    ("id-512", "command", {"/actionId": URN_512}, True),
    ("id-513", "command", {"/actionId": URN_512 + "a"}, False),
    ("id-fragment", "command", {"/actionId": "https://x.test/a?b=c#d"}, True),
    ("id-empty-hier-part", "command", {"/actionId": "example:"}, True),
    ("id-nested-actor", "command", {"/actor/id": "coordinator"}, False),
    ("id-not-string", "command", {"/actionId": 5}, False),
    ("ts-leap-second", "command", {"/issuedAt": "2026-06-30T23:59:60Z"}, False),
    ("ts-year-0000", "command", {"/issuedAt": "0000-01-01T00:00:00Z"}, False),
    ("ts-unknown-offset", "command", {"/issuedAt": "2026-07-15T00:00:00-00:00"}, False),
    ("ts-plus-zero", "command", {"/issuedAt": "2026-07-15T00:00:00+00:00"}, True),
    ("ts-max-offset", "command", {"/issuedAt": "2026-07-15T00:00:00-23:59"}, True),
    ("ts-offset-24", "command", {"/issuedAt": "2026-07-15T00:00:00+24:00"}, False),
    ("ts-lowercase", "command", {"/issuedAt": "2026-07-15t00:00:00z"}, True),
    ("ts-fraction", "command", {"/issuedAt": "2026-07-15T00:00:00.1234567Z"}, True),
    ("ts-no-offset", "command", {"/issuedAt": "2026-07-15T00:00:00"}, False),
    ("ts-feb-30", "command", {"/issuedAt": "2026-02-30T00:00:00Z"}, False),
    ("ts-space", "command", {"/issuedAt": "2026-07-15 00:00:00Z"}, False),
    ("ts-trailing-lf", "command", {"/issuedAt": "2026-07-15T00:00:00Z\n"}, False),
    ("ts-signature", "command", {"/signature/createdAt": "0000-01-01T00:00:00Z"}, False),
    ("sha-upper", "event", {"/commandHash": "sha256:" + "A" * 64}, False),
    ("sha-short", "event", {"/commandHash": "sha256:" + "a" * 63}, False),
    ("sha-prefix", "event", {"/commandHash": "SHA256:" + "a" * 64}, False),
    ("sha-lower", "event", {"/commandHash": "sha256:" + "0f" * 32}, True),
    ("int-negative", "command", {"/expectedRevision": -1}, False),
    ("int-unsafe", "command", {"/expectedRevision": SAFE_MAX + 1}, False),
    ("int-max-safe", "command", {"/expectedRevision": SAFE_MAX}, True),
    ("int-zero", "command", {"/expectedRevision": 0}, True),
    ("int-bool", "command", {"/expectedRevision": True}, False),
    ("int-string", "command", {"/expectedRevision": "4"}, False),
    ("int-fraction", "command", {"/expectedRevision": 4.5}, False),
    ("int-integral-float", "command", {"/expectedRevision": 4.0}, True),
    ("int-out-of-range", "command", {"/expectedRevision": OutOfRangeNumber("1e400")}, False),
    ("epoch-zero", "command", {"/sessionEpoch": 0}, False),
    ("sequence-zero", "event", {"/sequence": 0}, False),
    ("sequence-one", "event", {"/sequence": 1}, True),
    ("unknown-member", "command", {"/permissions": []}, False),
    ("unknown-nested", "command", {"/signature/note": "x"}, False),
    ("unknown-in-payload", "command", {"/payload/anything": {"x": 1}}, True),
    ("version-other", "command", {"/protocolVersion": "0.2"}, False),
    ("version-number", "command", {"/protocolVersion": 0.1}, False),
    ("version-missing", "command", {"/protocolVersion": DROP}, False),
    ("null-optional", "command", {"/expectedRevision": None}, False),
    ("null-required", "command", {"/payload": None}, False),
    ("null-in-payload", "command", {"/payload/x": None}, True),
    ("payload-array", "command", {"/payload": []}, False),
    ("b64-padded", "command", {"/signature/value": "c2lnbmF0dXJlAA=="}, False),
    ("b64-one-char", "command", {"/signature/value": "A"}, False),
    ("b64-pad-bits", "command", {"/signature/value": "AB"}, True),
    ("b64-std-alphabet", "command", {"/signature/value": "ab+/"}, False),
    ("b64-4096", "command", {"/signature/value": "A" * 4096}, True),
    ("b64-4097", "command", {"/signature/value": "A" * 4097}, False),
    ("alg-other", "command", {"/signature/algorithm": "ed25519"}, False),
    ("kind-ext", "command", {"/kind": "ext.acme.tools.run"}, True),
    ("kind-ext-short", "command", {"/kind": "ext.acme.run"}, False),
    ("kind-unknown-core", "command", {"/kind": "mission.fly"}, False),
    ("error-code-internal", "error", {"/code": "AUTH_STALE_COORDINATOR "}, False),
    ("error-retryable-int", "error", {"/retryable": 1}, False),
    ("authority-zero", "message", {"/authority": 0}, False),
    ("budget-negative", "mission", {"/budget/financialLimit": -0.5}, False),
    ("budget-bool", "mission", {"/budget/financialLimit": True}, False),
    ("budget-fraction", "mission", {"/budget/financialLimit": 12.5}, True),
]

GRANT = {
    "grantId": "urn:missionweaveprotocol:grant:one",
    "granteeAgentId": "urn:missionweaveprotocol:agent:developer-one",
    "missionId": "urn:missionweaveprotocol:mission:one",
    "groupId": "urn:missionweaveprotocol:group:mission-one",
    "targetWorkItemId": "urn:missionweaveprotocol:work-item:implementation",
    "allowedCapabilities": [{"id": "code.review", "version": "1.0.0"}],
    "budget": {
        "currency": "USD",
        "financialLimit": 5,
        "modelTokenLimit": 1000,
        "toolCallLimit": 10,
        "computeSecondsLimit": 60,
        "wallClockSecondsLimit": 600,
        "externalSideEffectLimit": 0,
    },
    "maxDescendantDepth": 1,
    "granteeMembershipEpoch": 1,
    "coordinatorEpoch": 4,
    "grantedBy": {"type": "agent", "id": "urn:missionweaveprotocol:agent:coordinator"},
    "grantedAt": "2026-07-15T00:00:00Z",
    "expiresAt": "2026-07-15T01:00:00Z",
}
AGENT_TO_SERVICE = {"/actor/type": "service", "/sessionEpoch": DROP, "/kind": "work.propose"}
UNFENCED = {"/coordinatorEpoch": DROP, "/membershipEpoch": DROP}
SCHEDULE = {
    "estimatedStart": "2026-07-15T00:00:00Z",
    "estimatedCompletion": "2026-07-15T01:00:00Z",
    "confidence": 1.5,
    "capacityStatus": "queued",
    "lastCalculatedAt": "2026-07-15T00:00:00Z",
}
CREATE = "human-mission-create-command"
ORG_COMMAND = "service-session-open-command"
ORG_EVENT = "organization-session-opened-event"
CONDITIONALS: list[tuple[str, str, dict[str, Any], bool]] = [
    ("create-by-agent", CREATE, {"/actor/type": "agent"}, False),
    ("create-with-membership-epoch", CREATE, {"/membershipEpoch": 1}, False),
    (
        "follow-up-by-agent",
        CREATE,
        {"/kind": "mission.create_follow_up", "/actor/type": "agent"},
        False,
    ),
    ("org-command-with-group", ORG_COMMAND, {"/groupId": "urn:g:1"}, False),
    ("org-command-by-human", ORG_COMMAND, {"/actor/type": "human"}, False),
    ("terminate-by-agent", "command", {"/kind": "mission.terminate"}, True),
    (
        "terminate-unfenced",
        "command",
        {"/kind": "mission.terminate", "/coordinatorEpoch": DROP},
        False,
    ),
    (
        "terminate-by-human",
        "command",
        {
            "/kind": "mission.terminate",
            "/actor/type": "human",
            "/sessionEpoch": DROP,
            "/coordinatorEpoch": DROP,
        },
        False,
    ),
    ("service-with-membership", "command", {**AGENT_TO_SERVICE, "/coordinatorEpoch": DROP}, False),
    ("service-group-command", "command", {**AGENT_TO_SERVICE, **UNFENCED}, True),
    ("service-without-group", "command", {**AGENT_TO_SERVICE, **UNFENCED, "/groupId": DROP}, False),
    (
        "human-group-command",
        "command",
        {**AGENT_TO_SERVICE, "/actor/type": "human", "/coordinatorEpoch": DROP},
        True,
    ),
    (
        "human-without-membership",
        "command",
        {**AGENT_TO_SERVICE, **UNFENCED, "/actor/type": "human"},
        False,
    ),
    (
        "coordinator-kind-by-human",
        "command",
        {"/actor/type": "human", "/sessionEpoch": DROP},
        False,
    ),
    ("org-event-with-sequence", ORG_EVENT, {"/sequence": 1}, False),
    ("org-event-by-agent", ORG_EVENT, {"/actor/type": "agent"}, False),
    ("lease-execution-start-by", "lease", {"/startBy": "2026-07-15T00:00:00Z"}, False),
    ("lease-execution-grace", "lease", {"/graceExpiresAt": "2026-07-15T00:55:00Z"}, False),
    ("lease-execution-coordinator-epoch", "lease", {"/coordinatorEpoch": 4}, False),
    ("lease-coordinator-unfenced", "lease", {"/leaseType": "coordinator"}, False),
    (
        "lease-coordinator",
        "lease",
        {
            "/leaseType": "coordinator",
            "/coordinatorEpoch": 4,
            "/workItemId": DROP,
            "/ownershipEpoch": DROP,
        },
        True,
    ),
    ("lease-ownership-no-start-by", "lease", {"/leaseType": "ownership"}, False),
    ("lease-blocked-no-work-item", "lease", {"/leaseType": "blocked", "/workItemId": DROP}, False),
    ("lease-never-renewed-with-time", "lease", {"/renewalCount": 0}, False),
    ("lease-never-renewed", "lease", {"/renewalCount": 0, "/lastRenewedAt": DROP}, True),
    ("lease-active-closed", "lease", {"/state": "active"}, False),
    ("lease-closed-without-reason", "lease", {"/closureReason": DROP}, False),
    ("lease-blank-reason", "lease", {"/closureReason": " \t\u3000"}, False),
    ("group-active-archived-at", "group", {"/archivedAt": "2026-07-15T00:00:00Z"}, False),
    ("approval-revoked-unnamed", "approval", {"/decision": "revoked"}, False),
    ("approval-final-no-artifacts", "approval", {"/artifactHashes": []}, False),
    (
        "approval-child-no-artifacts",
        "approval",
        {"/kind": "child_mission", "/artifactHashes": []},
        False,
    ),
    (
        "approval-denied-no-artifacts",
        "approval",
        {"/decision": "denied", "/artifactHashes": []},
        True,
    ),
    ("approval-duplicate-hashes", "approval", {"/artifactHashes": [HASH, HASH]}, False),
    (
        "approval-work-without-item",
        "approval",
        {"/kind": "work_execution", "/approver/type": "agent"},
        False,
    ),
    ("conversation-restricted-open", "conversation", {"/type": "restricted"}, False),
    ("conversation-no-members", "conversation", {"/access": {"mode": "restricted"}}, False),
    ("membership-active-no-time", "membership", {"/state": "active"}, False),
    ("membership-ended-no-time", "membership", {"/state": "ended"}, False),
    (
        "membership-ended",
        "membership",
        {"/state": "ended", "/endedAt": "2026-07-15T02:00:00Z"},
        True,
    ),
    ("membership-grant", "membership", {"/delegationGrants": [GRANT]}, True),
    ("membership-duplicate-grant", "membership", {"/delegationGrants": [GRANT, GRANT]}, False),
    (
        "membership-partial-grant-budget",
        "membership",
        {"/delegationGrants": [GRANT], "/delegationGrants/0/budget/toolCallLimit": DROP},
        False,
    ),
    (
        "membership-grant-by-human",
        "membership",
        {"/delegationGrants": [GRANT], "/delegationGrants/0/grantedBy/type": "human"},
        False,
    ),
    ("mission-top-level-agent-owner", "mission", {"/missionOwner/type": "agent"}, False),
    ("mission-child-human-owner", "child-mission", {"/missionOwner/type": "human"}, False),
    ("mission-budget-empty", "mission", {"/budget": {}}, False),
    ("mission-money-no-currency", "mission", {"/budget": {"financialLimit": 10}}, False),
    ("mission-money", "mission", {"/budget": {"financialLimit": 10.5, "currency": "EUR"}}, True),
    (
        "mission-duplicate-profiles",
        "mission",
        {"/pinnedProfiles": [{"profileUri": "urn:p:1", "majorVersion": 1}] * 2},
        False,
    ),
    (
        "message-correction-no-reason",
        "message",
        {"/kind": "correction", "/targetMessageId": "urn:m:0"},
        False,
    ),
    ("message-unknown-content", "message", {"/content": [{"type": "audio", "text": "x"}]}, False),
    (
        "message-data-null",
        "message",
        {"/content": [{"type": "data_ref", "schema": "urn:s", "data": None}]},
        True,
    ),
    ("work-item-submitted-bare", "work-item", {"/state": "submitted"}, False),
    ("work-item-confidence", "work-item", {"/scheduleEstimate": SCHEDULE}, False),
    ("frame-hello-no-phase", "websocket-frame", {"/frameType": "HELLO"}, False),
]


def vector(document: str) -> Any:
    return load(f"conformance/vectors/valid/{document}.json")


def schema_of(document: str) -> str:
    instance = f"conformance/vectors/valid/{document}.json"
    (schema,) = {file_name(c["schema"]) for c in CONFORMANCE if c["instance"] == instance}
    return schema


@pytest.mark.parametrize(
    ("document", "edits", "valid"), [c[1:] for c in VALUE_RULES], ids=[c[0] for c in VALUE_RULES]
)
def test_value_rule(document: str, edits: dict[str, Any], valid: bool) -> None:
    assert verdict(schema_of(document), edited(vector(document), edits)) is valid


@pytest.mark.parametrize(
    ("document", "edits", "valid"), [c[1:] for c in CONDITIONALS], ids=[c[0] for c in CONDITIONALS]
)
def test_conditional_rule(document: str, edits: dict[str, Any], valid: bool) -> None:
    value = edited(vector(document), edits)
    assert validator(schema_of(document)).is_valid(value) is valid, "the case itself is wrong"
    assert verdict(schema_of(document), value) is valid


def test_patterns_follow_ecma_262_not_python_re() -> None:
    # Python's `$` also matches before a final line feed, so `re.search`-based validators
    # accept this; the schema's pattern (ECMA-262) does not.
    assert not verdict(
        "command.schema.json", edited(vector("command"), {"/signature/value": "c2lnbmF0dXJl\n"})
    )
    # ECMA-262 counts U+FEFF as white space (Python does not), so it alone is not `\S`;
    # U+001F is white space to Python but not to ECMA-262.
    lease = vector("lease")
    assert not verdict("lease.schema.json", edited(lease, {"/closureReason": "\ufeff "}))
    assert verdict("lease.schema.json", edited(lease, {"/closureReason": "\x1f"}))


def test_models_are_immutable() -> None:
    command = validate_document("command.schema.json", vector("command"))
    with pytest.raises(ValueError, match="frozen"):
        command.kind = "work.start"  # type: ignore[attr-defined]


@cache
def validator(schema_name: str) -> Draft202012Validator:
    """A Draft 2020-12 validator with format assertion and every schema registered by $id."""
    schemas = [load(f"schemas/{p.name}") for p in sorted((ROOT / "schemas").glob("*.json"))]
    registry: Registry[Any] = Registry().with_resources(
        (s["$id"], Resource.from_contents(s)) for s in schemas
    )
    return Draft202012Validator(
        load(f"schemas/{schema_name}"), registry=registry, format_checker=FormatChecker()
    )
