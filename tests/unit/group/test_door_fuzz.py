"""Fuzzing the door (issue 12): signed Commands mutated at byte and member level.

For every case the shell's path (``verify``, then ``check`` and ``submit`` of a real Group with
real keys; for text, ``encode_wire_text`` first) ends in one of two ways: the mutated document is
still valid and accepted, or a typed ``MwpError`` whose code is in ``error.schema.json`` (never
``INTERNAL_ERROR``, which the Authority gives only for a defect) refuses it and the Group's
snapshot and sequence are unchanged. Any other exception is a bug. ``check`` and ``submit`` must
agree.

The runs are derandomized (the same cases in CI every time) and add up to ``TOTAL_CASES``; the
mutations of one case come from a generator seeded by one drawn integer, which keeps a case
cheap. An exhaustive type swap of every member of every seed runs beside them.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import GroupAuthority, Outcome
from mwp.core.group.api import CURRENT_RULES, RULES_0_1_0, RULES_DOOR, AuthorityContext
from mwp.core.group.kinds import RULES
from mwp.core.models import validate_document
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import sign
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import OutOfRangeNumber, encode_wire_text
from mwp.core.wire.values import b64url_encode
from tests.protocol_root import protocol_root
from tests.unit.group.harness import (
    ARTIFACT_B,
    CONTEXT_PACKAGE,
    COORD,
    COORD2,
    OWNER,
    W1,
    W2,
    W3,
    Harness,
    assert_valid_event,
    contract,
    evidence,
    fingerprint,
    item_id,
    mission_harness,
    progress,
    selection_basis,
)
from tests.unit.group.signing import KEYS, admit, key_id, signed, wire

ERROR_CODES = frozenset(
    json.loads((protocol_root() / "schemas" / "error.schema.json").read_text("utf-8"))[
        "properties"
    ]["code"]["enum"]
)

# Pydantic warns before it refuses to serialize data nested past its limit (a typed refusal).
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")

# Examples per test; their sum is what one run of this file tries.
CASES = {"bytes": 4000, "members": 3000, "unknown": 1000, "deep": 500, "text": 1500}
TOTAL_CASES = sum(CASES.values())
SWAPPED_CASES = 4000  # at least, in the exhaustive test beside them


def _profile(cases: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=cases,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


# --- the Group every case starts from -------------------------------------------------------------


@dataclass
class World:
    snapshot: dict[str, Any]
    ctx: AuthorityContext
    seeds: list[dict[str, Any]]  # unsigned Commands (dummy signature), each accepted alone
    signed: list[dict[str, Any]]
    wires: list[bytes]
    authority: GroupAuthority

    def reset(self) -> None:
        self.authority = GroupAuthority.restore(copy.deepcopy(self.snapshot))


def _seeds(h: Harness) -> list[dict[str, Any]]:
    a, b = {"workItemId": item_id("a")}, {"workItemId": item_id("b")}
    owner = h.owner_payload("a")
    text = [{"type": "text", "text": "Résumé 東京 🚀"}]
    return [
        h.command(COORD, "message.post", {"content": text, "mentions": [W1.to_json()]}),
        h.command(
            W1,
            "message.post",
            {"content": [{"type": "data_ref", "schema": "urn:example:schema:x", "data": [1]}]},
            extensions={
                "urn:example:ext:note": {"version": "1.0.0", "critical": False, "data": {}}
            },
        ),
        h.command(COORD, "work.propose", {"title": "t", "goal": "g", "draftContract": {"k": 1}}),
        h.command(COORD, "work.authorize", {"contract": contract()}, workItemId=item_id("c")),
        h.command(
            COORD,
            "work.offer",
            {
                "candidates": [{"agentId": W2.id, "selectionBasis": selection_basis()}],
                "expiresAt": "2026-07-15T01:00:00Z",
                "contextPackageId": CONTEXT_PACKAGE,
            },
            **b,
        ),
        h.command(
            W1,
            "ext.missionweaveprotocol.core.execution_lease_renew",
            {**owner, "leaseSeconds": 600, "progress": progress(), "checkpointRef": ARTIFACT_B},
            **a,
        ),
        h.command(W1, "work.checkpoint", {**owner, "progress": progress()}, **a),
        h.command(W1, "work.block", {**owner, "requiredResolution": "Need credentials."}, **a),
        h.command(
            W1,
            "work.submit",
            {**owner, "artifactHashes": [h.published().pop()], "evidence": evidence()},
            **a,
        ),
        h.command(W1, "artifact.publish", h.publish_payload("a", content=ARTIFACT_B), **a),
        h.command(COORD, "membership.change", {"memberId": W3.id, "role": "worker"}),
        h.command(OWNER, "mission.assign_coordinator", {"agentId": COORD2.id}),
        h.command(OWNER, "mission.cancel", {"reason": "enough"}),
        h.command(
            COORD,
            "work.fail",
            {"reason": "no", "failureEvidenceIds": ["urn:example:evidence:f"]},
            **b,
        ),
    ]


@cache
def world() -> World:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    h.accept("a", W1)
    h.start("a", W1)
    h.publish("a", W1)
    h.authorize("b")
    accepted = h.command(COORD, "message.post", {"content": [{"type": "text", "text": "once"}]})
    h.authority.submit(admit(wire(accepted)), h.ctx())  # its mutations meet a receipt
    seeds = [*_seeds(h), accepted]
    snapshot = copy.deepcopy(h.authority.snapshot())
    documents = [signed(s) for s in seeds]
    wires = [canonicalize(d) for d in documents]
    return World(snapshot, h.ctx(), seeds, documents, wires, h.authority)


# --- the property ---------------------------------------------------------------------------------


def _typed(error: MwpError) -> None:
    assert error.code in ERROR_CODES and error.code != ErrorCode.INTERNAL_ERROR, error
    validate_document("error.schema.json", error.to_wire("2026-07-15T00:00:00Z"))


def decide(data: bytes, rules: int = CURRENT_RULES) -> Outcome | MwpError:
    """The shell's path for one wire document; asserts the property and returns what happened."""
    w = world()
    try:
        envelope = admit(data)
    except MwpError as error:
        _typed(error)
        return error
    ctx = replace(w.ctx, rules=rules)
    before, sequence = fingerprint(w.authority), w.authority.sequence
    try:
        w.authority.check(envelope, ctx)
    except MwpError as error:
        _typed(error)
        with pytest.raises(MwpError) as submitted:
            w.authority.submit(envelope, ctx)
        assert submitted.value.code == error.code
        assert fingerprint(w.authority) == before
        assert w.authority.sequence == sequence
        return error
    try:
        outcome = w.authority.submit(envelope, ctx)
        _still_valid(envelope.command, outcome, rules)
    finally:
        w.reset()
    return outcome


def _still_valid(command: dict[str, Any], outcome: Outcome, rules: int) -> None:
    for event in outcome.events:
        assert_valid_event(event)
    if rules >= RULES_DOOR and not outcome.duplicate:
        assert RULES[command["kind"]].payload.unknown(command["payload"]) is None
        assert "cooperationOverrideGrantId" not in command
        assert not any(e["critical"] for e in command.get("extensions", {}).values())


def test_every_seed_is_accepted_alone_under_both_rules() -> None:
    w = world()
    for rules in (RULES_0_1_0, RULES_DOOR):
        outcomes = [decide(data, rules) for data in w.wires]
        assert [type(o).__name__ for o in outcomes] == ["Outcome"] * len(w.wires)
        assert [o.duplicate for o in outcomes if isinstance(o, Outcome)][-1]


# --- byte level -----------------------------------------------------------------------------------

TOKENS = [
    b'"',
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b" ",
    b"\x00",
    b"\xff",
    b"\xef\xbb\xbf",  # a byte-order mark
    b"\xed\xa0\x80",  # a surrogate in CESU-8: not UTF-8
    b"\\ud800",
    b"\\udc00\\ud800",
    b"1e400",
    b"-0",
    b"9" * 5000,
    b"-" + b"1" * 4301,
    b"0." + b"0" * 400 + b"1",
    b"NaN",
    b"Infinity",
    b"null",
    b"true",
    b'"actionId":"urn:example:x",',
    b'"payload":{},',
    b'{"a":' * 50,
]

BYTE_OPERATIONS = ["flip", "insert", "insert-token", "replace", "delete", "truncate"]


def _byte_operations(rng: random.Random) -> list[tuple[str, int, Any]]:
    """One to three byte-level mutations, drawn from one seeded generator (cheap per case)."""
    ops: list[tuple[str, int, Any]] = []
    for _ in range(rng.randint(1, 3)):
        name, where = rng.choice(BYTE_OPERATIONS), rng.randrange(1 << 20)
        if name == "flip":
            ops.append((name, where, rng.randrange(256)))
        elif name == "insert":
            ops.append((name, where, rng.randbytes(rng.randint(1, 8))))
        elif name in ("insert-token", "replace"):
            ops.append((name.removesuffix("-token"), where, rng.choice(TOKENS)))
        else:
            ops.append((name, where, rng.randint(1, 64)))
    return ops


def _apply_bytes(data: bytes, op: tuple[str, int, Any]) -> bytes:
    name, where, arg = op
    at = where % (len(data) + 1)
    if name == "flip":
        return data[:at] + bytes([arg]) + data[at + 1 :]
    if name == "insert":
        return data[:at] + arg + data[at:]
    if name == "replace":
        return data[:at] + arg + data[at + len(arg) :]
    if name == "delete":
        return data[:at] + data[at + arg :]
    return data[:at]


@_profile(CASES["bytes"])
@given(st.integers(0, 1 << 10), st.integers(0, 1 << 63))
def test_byte_level_mutations_get_typed_errors_and_change_nothing(
    seed: int, mutations: int
) -> None:
    w = world()
    data = w.wires[seed % len(w.wires)]
    ops = _byte_operations(random.Random(mutations))
    note(f"operations: {ops!r}"[:2000])
    for op in ops:
        data = _apply_bytes(data, op)
    decide(data)


# --- member level ---------------------------------------------------------------------------------

Path = tuple[str | int, ...]

# JSON values of every type, edge cases among them.
SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**53 - 1,
    2**53,
    -(2**63),
    10**308,
    10**309,
    OutOfRangeNumber("1e400"),
    OutOfRangeNumber("-1e999"),
    0.5,
    -0.0,
    1e-7,
    1.7976931348623157e308,
    "",
    " ",
    "\ud800",
    "a\udfffb",
    "\u0000",
    "urn:example:x",
    "2026-07-15T00:00:00Z",
    "sha256:" + "0" * 64,
    "Résumé 🚀",
    "x" * 300,
]
POOL: list[Any] = [
    *SCALARS,
    *([v] for v in SCALARS[::3]),
    *({"k": v} for v in SCALARS[1::3]),
    [],
    {},
    [[[]]],
    {"a": {"b": {"c": [1, {"d": None}]}}},
    {"actionId": "urn:example:x", "critical": True},
    {"version": "1.0.0", "critical": True, "data": {}},
]


def _paths(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _at(doc: Any, path: Path) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _apply_member(doc: dict[str, Any], op: tuple[str, int, int, Any, str], dups: set[Path]) -> None:
    """One member-level mutation of ``doc`` in place; ``dups`` collects members to repeat."""
    name, where, which, value, member = op
    paths = [p for p, _ in _paths(doc)]
    path = paths[where % len(paths)]
    if name == "replace" and path:
        _at(doc, path[:-1])[path[-1]] = value
        return
    objects = [p for p in paths if isinstance(_at(doc, p), dict)]
    target = _at(doc, objects[where % len(objects)])
    members = list(target)
    if name == "add":
        target[member] = value
    elif members and name == "drop":
        del target[members[which % len(members)]]
    elif members and name == "rename":
        target[member] = target.pop(members[which % len(members)])
    elif members and name == "duplicate":
        dups.add((*objects[where % len(objects)], members[which % len(members)]))


OPERATIONS = ["replace", "add", "drop", "rename", "duplicate"]
CONTAINERS: list[Any] = [[], {}, [[]], {"k": {}}]
NAME_POOL = ["actionId", "kind", "payload", "signature", "extensions", "critical", "", "~", "é"]


def _value(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.5:
        return copy.deepcopy(rng.choice(POOL))
    if pick < 0.75:
        return copy.deepcopy(rng.choice(CONTAINERS))
    if pick < 0.9:
        return rng.randint(-(2**64), 2**64)
    return "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(0, 8)))


def _name(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(NAME_POOL)
    return "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 6)))


def _operations(rng: random.Random) -> list[tuple[str, int, int, Any, str]]:
    """One to three member-level mutations. Drawing them from one seeded generator rather
    than one strategy per field keeps a case cheap enough for thousands per run."""
    return [
        (
            rng.choice(OPERATIONS),
            rng.randrange(1 << 10),
            rng.randrange(1 << 10),
            _value(rng),
            _name(rng),
        )
        for _ in range(rng.randint(1, 3))
    ]


def render(value: Any, dups: frozenset[Path] | set[Path] = frozenset(), path: Path = ()) -> str:
    """JSON text of any value the strategies make: members in ``dups`` appear twice, lone
    surrogates as escapes, out-of-range numbers as their text."""
    if isinstance(value, OutOfRangeNumber):
        return value.text
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            member = f"{json.dumps(key)}:{render(item, dups, (*path, key))}"
            parts += [member, member] if (*path, key) in dups else [member]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list):
        return "[" + ",".join(render(v, dups, (*path, i)) for i, v in enumerate(value)) + "]"
    return json.dumps(value)


def resign(doc: dict[str, Any]) -> None:
    """Sign ``doc`` in place with its actor's key when it still can be signed."""
    actor = doc.get("actor")
    principal = actor.get("id") if isinstance(actor, dict) else None
    key = KEYS.get(principal if isinstance(principal, str) else "", KEYS[COORD.id])
    try:
        kind = actor["type"] if isinstance(actor, dict) else "agent"
        doc.update(sign(doc, "command", key_id(Principal(str(kind), str(principal))), key))
    except (ValueError, TypeError, KeyError, AttributeError):
        pass  # no Z issuedAt, or content JCS refuses: the old signature stays


@_profile(CASES["members"])
@given(
    st.integers(0, 1 << 10),
    st.integers(0, 1 << 63),
    st.sampled_from([True, True, True, False]),
    st.sampled_from([RULES_DOOR, RULES_DOOR, RULES_0_1_0]),
)
def test_member_level_mutations_get_typed_errors_and_change_nothing(
    seed: int, mutations: int, sign_again: bool, rules: int
) -> None:
    w = world()
    doc = copy.deepcopy(w.signed[seed % len(w.seeds)])
    dups: set[Path] = set()
    ops = _operations(random.Random(mutations))
    note(f"operations: {ops!r}"[:2000])
    for op in ops:
        _apply_member(doc, op, dups)
    if sign_again:
        resign(doc)
    decide(render(doc, dups).encode("utf-8", "surrogatepass"), rules)


# Values of other types for every member (JSON Schema's near misses for integers included).
SWAPS: list[Any] = [
    None,
    True,
    0,
    4.5,
    -1,
    "",
    "x",
    [],
    [[]],
    {},
    {"x": {}},
    OutOfRangeNumber("1e400"),
]


def test_every_member_of_every_seed_swapped_for_every_type_gets_a_typed_answer() -> None:
    """Exhaustive where the random runs sample: each member at any depth of each seed,
    replaced by a value of each type, signed again."""
    w = world()
    cases = 0
    for document in w.signed:
        for path, _ in list(_paths(document)):
            if not path or path[0] == "signature":
                continue
            for value in SWAPS:
                doc = json.loads(json.dumps(document))
                _at(doc, path[:-1])[path[-1]] = copy.deepcopy(value)
                resign(doc)
                decide(render(doc).encode())
                cases += 1
    assert cases >= SWAPPED_CASES


# Payload members whose content is free by design or by its schema: anything may be added there.
FREE = frozenset({"draftContract", "data", "constraints", "extensions"})


# Names no schema and no kind defines.
UNKNOWN_NAMES = st.one_of(st.just(""), st.text(max_size=8).map(lambda text: "~" + text))


@_profile(CASES["unknown"])
@given(st.integers(0, 1 << 10), st.integers(0, 1 << 10), UNKNOWN_NAMES, st.integers(0, 1 << 63))
def test_a_member_added_anywhere_in_a_payload_is_refused(
    seed: int, where: int, name: str, values: int
) -> None:
    w = world()
    value = _value(random.Random(values))
    doc = copy.deepcopy(w.seeds[seed % len(w.seeds)])
    objects = [p for p, v in _paths(doc["payload"]) if isinstance(v, dict)]
    path = objects[where % len(objects)]
    target = _at(doc["payload"], path)
    if name in target:
        return
    target[name] = value
    try:
        data = wire(doc)
    except ValueError:  # a value JCS refuses: the shell could not have received it signed
        return
    outcome = decide(data)
    if isinstance(outcome, Outcome):
        assert FREE & {str(step) for step in path}, (path, name)


@_profile(CASES["deep"])
@given(
    st.integers(0, 1 << 10),
    st.integers(0, 1 << 10),
    st.sampled_from([2, 50, 500, 900, 950, 980, 995, 1000, 1500, 5000]),
    st.sampled_from(['{"x":', "["]),
)
def test_deeply_nested_values_anywhere_get_typed_errors(
    seed: int, where: int, depth: int, opener: str
) -> None:
    """Nested far deeper than the strategies above make (the issue's 950 levels), signed for
    real: JCS of a nested value is the nesting of its JCS, so the bytes are built as text."""
    w = world()
    doc = copy.deepcopy(w.seeds[seed % len(w.seeds)])
    doc.pop("signature")
    paths = [p for p, _ in _paths(doc) if p and p[0] not in ("issuedAt", "actor")]
    path = paths[where % len(paths)]
    _at(doc, path[:-1])[path[-1]] = "DEEP-PLACEHOLDER"
    closer = "}" if opener.startswith("{") else "]"
    deep = (opener * depth + "1" + closer * depth).encode()
    unsigned = canonicalize(doc).replace(b'"DEEP-PLACEHOLDER"', deep)
    actor = Principal(doc["actor"]["type"], doc["actor"]["id"])
    doc["signature"] = {
        "algorithm": "Ed25519",
        "keyId": key_id(actor),
        "createdAt": doc["issuedAt"],
        "value": b64url_encode(KEYS[actor.id].sign(unsigned)),
    }
    decide(canonicalize(doc).replace(b'"DEEP-PLACEHOLDER"', deep))


# --- the Update's text ----------------------------------------------------------------------------


@_profile(CASES["text"])
@given(
    st.integers(0, 1 << 10),
    st.integers(0, 1 << 20),
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\udc00\ud800", "\ud83d"]),
)
def test_a_lone_surrogate_anywhere_in_the_text_is_a_typed_protocol_violation(
    seed: int, where: int, surrogate: str
) -> None:
    w = world()
    text = w.wires[seed % len(w.wires)].decode("utf-8")
    at = where % (len(text) + 1)
    with pytest.raises(MwpError) as raised:
        decide(encode_wire_text(text[:at] + surrogate + text[at:]))
    assert raised.value.code == ErrorCode.PROTOCOL_VIOLATION
    _typed(raised.value)


def test_the_runs_add_up_to_at_least_ten_thousand_cases() -> None:
    assert TOTAL_CASES >= 10_000
