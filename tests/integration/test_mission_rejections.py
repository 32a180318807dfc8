"""Typed rejections on the Temporal path change nothing; byte-equal replays return receipts.

Every refused Command below must come back as its MWP error code (a ``RemoteMwpError`` carrying
the wire error object), and the Mission's ``sequence`` query and view must read exactly as
before it. Raw wire text goes straight to the ``command`` Update, so nothing on the client side
can repair or pre-reject it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from mwp.client import Identity, MwpClient, new_id
from mwp.client.missions import in_seconds
from mwp.core.errors import ErrorCode
from mwp.core.trust.signed_document import sign, signing_hash
from mwp.dev.scenario import work_contract
from tests.integration.missions_helper import (
    MissionRig,
    admit_workers,
    event_of,
    membership_epoch_of,
    new_mission,
    raw,
    refused,
)
from tests.integration.test_coordinator_handover import handover_package

POST = "message.post"


def text(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}]}


def unsigned(command: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in command.items() if k != "signature"}


def resigned(
    command: dict[str, Any], signer: Identity, key_id: str | None = None
) -> dict[str, Any]:
    """``command``'s content signed with ``signer``'s private key under ``key_id``."""
    return sign(unsigned(command), "command", key_id or signer.key_id, signer.key)


# --- signature and wire format -------------------------------------------------------------------


async def test_an_unsigned_command_fails_schema_validation(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    command = await rig.command(rig.crew.coordinator, POST, text("hello"))
    await rig.assert_refused(
        lambda: rig.send_wire(raw(unsigned(command))), ErrorCode.SCHEMA_VALIDATION_FAILED
    )
    # The same Command, signed, is accepted: only the signature was missing.
    result = await rig.mission.send_signed(command)
    assert [e["kind"] for e in result["events"]] == ["message.posted"]


async def test_a_mis_signed_command_is_refused(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    coordinator, worker = rig.crew.coordinator, rig.crew.workers[0]
    command = await rig.command(coordinator, POST, text("hello"))

    # Signed by another registered key (the Worker's binding is not the actor's).
    by_other_key = resigned(command, worker)
    # The actor's key ID, but another key's signature.
    forged = resigned(command, worker, key_id=coordinator.key_id)
    # A correctly signed Command altered after signing.
    tampered = {**command, "payload": text("goodbye")}
    # A key the registry never bound.
    stranger = Identity.generate(coordinator.principal)
    unbound = resigned(command, stranger)
    for document in (by_other_key, forged, tampered, unbound):
        await rig.assert_refused(
            partial(rig.send_wire, raw(document)), ErrorCode.AUTH_INVALID_SIGNATURE
        )
    await rig.mission.send_signed(command)  # the genuine one is accepted


async def test_malformed_wire_text_is_a_protocol_violation(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    wire = raw(await rig.command(rig.crew.coordinator, POST, text("hello")))
    first_member = wire[1 : wire.index(",")]
    surrogate = wire.replace('"text":"hello"', '"text":"hello\\ud800"', 1)
    assert surrogate != wire
    for malformed in (
        "",
        "{",
        "not json",
        wire[:-1],  # truncated
        wire + "}",  # trailing data
        "{" + first_member + "," + wire[1:],  # a duplicate member name
        surrogate,  # JSON-legal, but outside the JCS data model
        "{'actionId': 1}",
    ):
        await rig.assert_refused(partial(rig.send_wire, malformed), ErrorCode.PROTOCOL_VIOLATION)
    for not_an_object in ("[]", "null", "1", '"command"'):
        await rig.assert_refused(
            partial(rig.send_wire, not_an_object), ErrorCode.SCHEMA_VALIDATION_FAILED
        )


async def test_a_command_issued_outside_the_freshness_window_is_refused(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    coordinator = rig.crew.coordinator
    command = await rig.command(coordinator, POST, text("from the future"))
    # Signed for a minute ahead (the window allows 30 s of skew): the six stages pass, the
    # freshness check does not. (A Command from before the Crew's keys were bound would fail
    # key validity first, with the same wire code.)
    ahead = resigned({**command, "issuedAt": in_seconds(60)}, coordinator)
    await rig.assert_refused(partial(rig.send_wire, raw(ahead)), ErrorCode.AUTH_INVALID_SIGNATURE)
    within = resigned({**command, "issuedAt": in_seconds(10)}, coordinator)
    result = await rig.mission.send_signed(within)
    assert [e["kind"] for e in result["events"]] == ["message.posted"]


# --- epochs --------------------------------------------------------------------------------------


async def test_a_command_from_a_superseded_session_is_stale(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    old = rig.crew.session(worker)
    assert old is not None
    await rig.post(worker, "from the first session")

    new = await rig.renew_session(worker)
    assert new == old + 1
    await rig.assert_refused(
        lambda: rig.post(worker, "from the old session", session_epoch=old),
        ErrorCode.AUTH_STALE_SESSION,
    )
    # An epoch the Organization never issued is refused the same way.
    await rig.assert_refused(
        lambda: rig.post(worker, "from the future", session_epoch=new + 1),
        ErrorCode.AUTH_STALE_SESSION,
    )
    await rig.post(worker, "from the new session")  # the current session is accepted


async def test_a_command_under_a_superseded_membership_epoch_is_stale(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    worker = rig.crew.workers[0]
    member_id = worker.principal.id
    await rig.coordinate("membership.change", {"memberId": member_id, "role": "worker"})
    assert membership_epoch_of(await rig.mission.view(), member_id) == 1
    await rig.post(worker, "as a worker")

    # A role change gives the Membership its next epoch: the old one is stale.
    await rig.coordinate("membership.change", {"memberId": member_id, "role": "reviewer"})
    assert membership_epoch_of(await rig.mission.view(), member_id) == 2
    await rig.assert_refused(
        lambda: rig.post(worker, "as a worker again", membership_epoch=1),
        ErrorCode.MEMBERSHIP_STALE,
    )
    await rig.post(worker, "as a reviewer")

    # An ended Membership fences every epoch of it.
    await rig.coordinate("membership.end", {"memberId": member_id, "reason": "done"})
    await rig.assert_refused(
        lambda: rig.post(worker, "after leaving", membership_epoch=2),
        ErrorCode.MEMBERSHIP_STALE,
    )


async def test_a_replaced_coordinator_is_stale(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client, spares=1)
    old, new = rig.crew.coordinator, rig.crew.spares[0]
    before = await rig.mission.view()
    package = await handover_package(rig, old)  # a replacement is handed one (MWP-MSN-005)
    assigned = await rig.send(
        rig.crew.owner,
        "mission.assign_coordinator",
        {"agentId": new.principal.id, "contextPackageId": package["contextPackageId"]},
    )
    payload = event_of(assigned, "mission.coordinator.assigned")["payload"]
    assert payload["coordinator"]["agentId"] == new.principal.id
    assert payload["coordinator"]["coordinatorEpoch"] == 2
    assert payload["previousCoordinator"] == {"agentId": old.principal.id, "coordinatorEpoch": 1}

    contract = work_contract("Write the report", deadline=in_seconds(86400))
    await rig.assert_refused(
        lambda: rig.send(
            old,
            "work.authorize",
            {"contract": contract},
            work_item_id=new_id(),
            coordinator_epoch=before["coordinator"]["coordinatorEpoch"],
        ),
        ErrorCode.AUTH_STALE_COORDINATOR,
    )
    # The replaced Coordinator keeps its Membership: it may still talk ...
    await rig.post(old, "handing over")
    # ... and the new Coordinator coordinates under the new epoch.
    authorized = await rig.send(
        new, "work.authorize", {"contract": contract}, work_item_id=new_id()
    )
    assert event_of(authorized, "work.authorized")["actor"]["id"] == new.principal.id


# --- idempotency, revisions, transitions, contracts ----------------------------------------------


async def test_a_wrong_expected_revision_is_a_conflict(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    revision = (await rig.mission.view())["revision"]
    contract = work_contract("Write the report", deadline=in_seconds(86400))
    error = await rig.assert_refused(
        lambda: rig.coordinate(
            "work.authorize",
            {"contract": contract},
            work_item_id=new_id(),
            expected_revision=revision + 1,
        ),
        ErrorCode.REVISION_CONFLICT,
    )
    assert (error.expected_revision, error.current_revision) == (revision + 1, revision)
    await rig.coordinate(
        "work.authorize", {"contract": contract}, work_item_id=new_id(), expected_revision=revision
    )


async def test_the_same_action_id_with_other_content_collides(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    coordinator = rig.crew.coordinator
    action = new_id()
    first = await rig.post(coordinator, "the original", action_id=action)
    error = await rig.assert_refused(
        lambda: rig.post(coordinator, "something else", action_id=action),
        ErrorCode.ACTION_ID_COLLISION,
    )
    assert error.action_id == action
    # The same Action ID from another actor is another key: accepted.
    other = await rig.post(rig.crew.owner, "the owner's", action_id=action)
    assert other["receipt"]["firstSequence"] == first["receipt"]["lastSequence"] + 1


async def test_forbidden_transitions_are_refused(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    item = await rig.authorize()
    # work.accept_result needs a submitted item; this one is open.
    await rig.assert_refused(lambda: rig.accept_result(item), ErrorCode.INVALID_STATE_TRANSITION)
    # A Mission with an unsettled WorkItem cannot be submitted for approval.
    artifact = rig.submission(item, 1, new_id())["artifactHashes"][0]
    error = await rig.assert_refused(
        lambda: rig.coordinate("mission.submit_for_approval", {"artifactHashes": [artifact]}),
        ErrorCode.INVALID_STATE_TRANSITION,
    )
    assert error.details == {"unsettledWorkItemIds": [item.work_item_id]}
    # The owner cannot approve an active Mission.
    revision = (await rig.mission.view())["revision"]
    await rig.assert_refused(
        lambda: rig.send(
            rig.crew.owner,
            "mission.approve",
            {"missionRevision": revision, "artifactHashes": [artifact]},
        ),
        ErrorCode.INVALID_STATE_TRANSITION,
    )
    # A Worker may not coordinate: a matter of role, whatever the state.
    await rig.assert_refused(
        lambda: rig.send(worker, "work.cancel", {}, work_item_id=item.work_item_id),
        ErrorCode.AUTH_FORBIDDEN,
    )
    # A verified item is terminal: neither cancelled nor offered again.
    await rig.complete(item, worker)
    await rig.assert_refused(
        lambda: rig.coordinate("work.cancel", {}, work_item_id=item.work_item_id),
        ErrorCode.INVALID_STATE_TRANSITION,
    )
    await rig.assert_refused(
        lambda: rig.offer(item, rig.crew.workers[1]), ErrorCode.INVALID_STATE_TRANSITION
    )


async def test_an_incomplete_work_contract_is_refused(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    complete = work_contract("Write the report", deadline=in_seconds(86400))
    incomplete: list[dict[str, Any]] = [
        {**complete, "goal": "   "},
        {k: v for k, v in complete.items() if k != "acceptanceCriteria"},
        {**complete, "businessImpact": ""},
        {**complete, "requiredCapabilities": complete["requiredCapabilities"] * 2},
    ]
    for contract in incomplete:
        await rig.assert_refused(
            partial(
                rig.coordinate, "work.authorize", {"contract": contract}, work_item_id=new_id()
            ),
            ErrorCode.WORK_CONTRACT_INCOMPLETE,
        )
    await rig.coordinate("work.authorize", {"contract": complete}, work_item_id=new_id())


async def test_a_byte_equal_replay_returns_the_original_receipt(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    command = await rig.command(
        rig.crew.coordinator,
        "work.authorize",
        {"contract": work_contract("Write the report", deadline=in_seconds(86400))},
        work_item_id=new_id(),
    )
    original = await rig.mission.send_signed(command)
    assert original["duplicate"] is False and original["events"]
    before = await rig.state()
    log = await rig.mission.events_this_run()

    # Same Update ID (the signing hash): Temporal hands back the completed Update's result.
    assert await rig.mission.send_signed(command) == original
    # A fresh Update ID: the Authority recognizes the byte-equal retry itself.
    replay = await rig.send_wire(raw(command))
    assert replay == {"receipt": original["receipt"], "events": [], "duplicate": True}
    assert replay["receipt"]["eventIds"] == [e["eventId"] for e in original["events"]]
    assert await rig.state() == before
    assert await rig.mission.events_this_run() == log


# --- the property --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """One bad (or replayed) Command, described independently of the live Group."""

    family: str
    variant: str
    actor: int  # index into the Crew's members (see ``Setting.members``)
    number: int  # a wrong epoch or revision, a cut position, a pool index
    words: str


FAMILIES = {
    "malformed": ErrorCode.PROTOCOL_VIOLATION,
    "unsigned": ErrorCode.SCHEMA_VALIDATION_FAILED,
    "mis-signed": ErrorCode.AUTH_INVALID_SIGNATURE,
    "stale-session": ErrorCode.AUTH_STALE_SESSION,
    "stale-membership": ErrorCode.MEMBERSHIP_STALE,
    "stale-coordinator": ErrorCode.AUTH_STALE_COORDINATOR,
    "wrong-revision": ErrorCode.REVISION_CONFLICT,
}

VARIANTS = {
    "malformed": ["truncated", "trailing", "duplicate-member", "garbage"],
    "unsigned": ["no-signature", "missing-member", "not-an-object"],
    "mis-signed": ["other-key", "forged", "tampered", "unbound-key"],
    "stale-session": ["post", "authorize"],
    "stale-membership": ["post"],
    "stale-coordinator": ["authorize", "post"],
    "wrong-revision": ["authorize", "post"],
    "replay": ["same-update-id", "fresh-update-id"],
}


def _not_json(value: str) -> bool:
    try:
        json.loads(value)
    except ValueError:
        return True
    return False


@st.composite
def faults(draw: st.DrawFn) -> Fault:
    family = draw(st.sampled_from(sorted(VARIANTS)))
    variant = draw(st.sampled_from(VARIANTS[family]))
    words = draw(st.text(min_size=1, max_size=40).filter(lambda w: w.strip() != ""))
    if family == "malformed" and variant == "garbage":
        words = draw(st.text(max_size=40).filter(_not_json))
    return Fault(
        family,
        variant,
        actor=draw(st.integers(0, 3)),
        number=draw(st.integers(0, 2**31)),
        words=words,
    )


@dataclass
class Setting:
    """The Group the property runs against: members, a stale session, accepted Commands."""

    rig: MissionRig
    members: list[Identity]  # owner, Coordinator, two Workers (all with Memberships)
    pool: list[tuple[dict[str, Any], dict[str, Any]]]  # accepted Commands and their results

    @property
    def agents(self) -> list[Identity]:
        return self.members[1:]


async def _setting(client: MwpClient) -> Setting:
    rig = await new_mission(client)
    await admit_workers(rig)
    crew = rig.crew
    await rig.renew_session(crew.workers[0])  # its first session is now a stale one
    members = [crew.owner, crew.coordinator, *crew.workers]
    pool = []
    for member in members:
        command = await rig.command(member, POST, text(f"hello from {member.principal.id}"))
        pool.append((command, await rig.mission.send_signed(command)))
    authorize = await rig.command(
        crew.coordinator,
        "work.authorize",
        {"contract": work_contract("Write the report", deadline=in_seconds(86400))},
        work_item_id=new_id(),
    )
    pool.append((authorize, await rig.mission.send_signed(authorize)))
    return Setting(rig, members, pool)


def _other(number: int, current: int | None) -> int:
    """A positive integer other than ``current``, chosen by ``number``."""
    wrong = number % 20 + 1
    return wrong if wrong != current else wrong + 20


async def _materialize(
    setting: Setting, fault: Fault, view: dict[str, Any]
) -> tuple[str, str | None, ErrorCode | None, dict[str, Any] | None]:
    """Wire text, Update ID (None: fresh), expected error or expected result."""
    rig = setting.rig
    member = setting.members[fault.actor]
    agent = setting.agents[fault.actor % 3]

    async def post(who: Identity, **envelope: Any) -> dict[str, Any]:
        return await rig.command(who, POST, text(fault.words), view=view, **envelope)

    async def authorize(**envelope: Any) -> dict[str, Any]:
        contract = work_contract(fault.words, deadline=in_seconds(86400))
        return await rig.command(
            rig.crew.coordinator,
            "work.authorize",
            {"contract": contract},
            work_item_id=new_id(),
            view=view,
            **envelope,
        )

    family, variant = fault.family, fault.variant
    if family == "replay":
        command, result = setting.pool[fault.number % len(setting.pool)]
        if variant == "same-update-id":
            return raw(command), signing_hash(command), None, result
        return raw(command), None, None, {**result, "events": [], "duplicate": True}
    expected = FAMILIES[family]
    if family == "malformed":
        wire = raw(await post(member))
        altered = {
            "truncated": wire[: fault.number % len(wire)],
            "trailing": wire + ["}", "x", ",", "{}", " 1"][fault.number % 5],
            "duplicate-member": "{" + wire[1 : wire.index(",")] + "," + wire[1:],
            "garbage": fault.words,
        }[variant]
        return altered, None, expected, None
    if family == "unsigned":
        command = await post(member)
        if variant == "no-signature":
            return raw(unsigned(command)), None, expected, None
        if variant == "missing-member":
            required = ["protocolVersion", "actionId", "actor", "kind", "correlationId"]
            missing = required[fault.number % len(required)]
            return raw({k: v for k, v in command.items() if k != missing}), None, expected, None
        return ["[]", "null", "1", '"x"', "true"][fault.number % 5], None, expected, None
    if family == "mis-signed":
        command = await post(member)
        other = setting.members[(fault.actor + 1) % 4]
        document = {
            "other-key": lambda: resigned(command, other),
            "forged": lambda: resigned(command, other, key_id=member.key_id),
            "tampered": lambda: {**command, "payload": text(fault.words + "!")},
            "unbound-key": lambda: resigned(command, Identity.generate(member.principal)),
        }[variant]()
        return raw(document), None, expected, None
    if family == "stale-session":
        current = rig.crew.session(agent)
        wrong = _other(fault.number, current)
        if variant == "authorize":
            return raw(await authorize(session_epoch=wrong)), None, expected, None
        return raw(await post(agent, session_epoch=wrong)), None, expected, None
    if family == "stale-membership":
        current = membership_epoch_of(view, member.principal.id)
        wrong = _other(fault.number, current)
        return raw(await post(member, membership_epoch=wrong)), None, expected, None
    if family == "stale-coordinator":
        wrong = _other(fault.number, view["coordinator"]["coordinatorEpoch"])
        if variant == "authorize":
            return raw(await authorize(coordinator_epoch=wrong)), None, expected, None
        return raw(await post(member, coordinator_epoch=wrong)), None, expected, None
    assert family == "wrong-revision"
    if variant == "authorize":
        wrong = fault.number if fault.number != view["revision"] else fault.number + 1
        return raw(await authorize(expected_revision=wrong)), None, expected, None
    # No Conversation has a revision near 2**31 in this Group.
    return raw(await post(member, expected_revision=2**31 + fault.number)), None, expected, None


@pytest.fixture
async def setting(mwp_client: MwpClient) -> Setting:
    """One Mission per run of the property: every Hypothesis example runs against it."""
    return await _setting(mwp_client)


TestFunction = TypeVar("TestFunction", bound=Callable[..., Any])


def with_every_variant(test: TestFunction) -> TestFunction:
    """Pin one explicit example per fault variant, so each run covers every one of them."""
    for family, variants in VARIANTS.items():
        for variant in variants:
            test = example(fault=Fault(family, variant, actor=2, number=7, words="hello"))(test)
    return test


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@with_every_variant
@given(fault=faults())
async def test_bad_and_replayed_commands_never_change_the_group(
    setting: Setting, fault: Fault
) -> None:
    event(f"{fault.family}/{fault.variant}")
    rig = setting.rig
    before = await rig.state()
    wire, update_id, code, expected_result = await _materialize(setting, fault, before[1])
    if code is not None:
        error = await refused(rig.send_wire(wire, update_id=update_id))
        assert error.code == code, f"{fault}: expected {code.value}, got {error.wire}"
    else:
        assert await rig.send_wire(wire, update_id=update_id) == expected_result
    assert await rig.state() == before, f"{fault} changed the Group"
