"""Forged, replayed and malformed workflow-to-workflow messages on a real dev server.

Anyone who reaches the authority namespace can signal its workflows. Each test here sends
what such an attacker (or a buggy sender) could, straight to the signal, and shows the message
is refused, recorded (the ``refused_messages`` query, the registry's view), changes neither
the Group's sequence nor its state, and leaves the workflow answering and working.

"Genuine" seals below come from the stack worker's own keyring (what a compromised sender, or
a replay of a real message taken from history, would carry); "attacker" seals use a key the
worker never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mwp.activities.seal import ServiceSealer
from mwp.client import MwpClient, utc_now
from mwp.contracts.messages import (
    CHILD_SETTLED,
    MISSION_APPROVED,
    PARENT_CLOSED,
    REGISTRY_NOTICE,
    REGISTRY_UNSUBSCRIBE,
    WORK_ITEM_TRANSITION,
    SealRequest,
    group_authority,
    registry_subscribers,
)
from mwp.contracts.mission import (
    QUERY_REFUSED_MESSAGES,
    SIGNAL_CHILD_SETTLED,
    SIGNAL_PARENT_CLOSED,
    SIGNAL_TIMER_FIRED,
    mission_workflow_id,
)
from mwp.contracts.organization import (
    QUERY_NOTICE,
    SIGNAL_MISSION_APPROVED,
    SIGNAL_REGISTRY_CHANGED,
    SIGNAL_SUBSCRIBE,
    SIGNAL_UNSUBSCRIBE,
    organization_workflow_id,
)
from mwp.contracts.work_item import (
    QUERY_TIMERS,
    QUERY_WORK_ITEM,
    SIGNAL_TRANSITION,
    work_item_workflow_id,
)
from mwp.core.errors import ErrorCode
from mwp.core.trust.service_message import seal
from mwp.core.wire.ed25519 import SigningKey
from mwp.dev.scenario import definition_of_done, mission_budget
from tests.integration.conftest import stack_keyring
from tests.integration.missions_helper import MissionRig, eventually, new_mission, refused
from tests.integration.test_child_and_follow_up_missions import _approve, _promote


def _request(message_type: str, sender: str, recipient: str, body: Mapping[str, Any]) -> Any:
    return SealRequest("", message_type, sender, recipient, utc_now(), dict(body))


async def genuine(
    organization_id: str,
    message_type: str,
    sender: str,
    recipient: str,
    body: Mapping[str, Any],
) -> dict[str, Any]:
    """Sealed with the Organization's real key (as the worker would)."""
    request = _request(message_type, sender, recipient, body)
    request.signer_id = group_authority(organization_id).id
    return await ServiceSealer(stack_keyring()).seal_message(request)


def attacker(
    message_type: str,
    sender: str,
    recipient: str,
    body: Mapping[str, Any],
    *,
    key_id: str = "urn:mwp:key:attacker",
) -> dict[str, Any]:
    """Sealed with a key the worker never trusted (under any key ID the attacker likes)."""
    return seal(
        message_type,
        sender=sender,
        recipient=recipient,
        sent_at=utc_now(),
        body=dict(body),
        key_id=key_id,
        key=SigningKey.generate(),
    )


def real_key_id(organization_id: str) -> str:
    identity = stack_keyring().get(group_authority(organization_id).id)
    assert identity is not None
    return identity.key_id


async def signal(client: MwpClient, workflow_id: str, name: str, arg: Any) -> None:
    await client.temporal.get_workflow_handle(workflow_id).signal(name, arg)


async def refusals(client: MwpClient, workflow_id: str) -> dict[str, int]:
    record: dict[str, Any] = await client.query(workflow_id, QUERY_REFUSED_MESSAGES)
    counts: dict[str, int] = record["counts"]
    return counts


async def until_refused(client: MwpClient, workflow_id: str, expected: dict[str, int]) -> None:
    """Wait until the workflow has refused exactly ``expected`` (type:reason -> count)."""

    async def recorded() -> bool:
        return await refusals(client, workflow_id) == expected

    await eventually(recorded, timeout=15)


async def test_forged_and_replayed_registry_notices_are_refused_and_the_real_registry_counts(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    crew = rig.crew
    org = crew.organization.organization_id
    registry = organization_workflow_id(org)
    notice: dict[str, Any] = await mwp_client.query(registry, QUERY_NOTICE)
    before = await rig.state()

    # The finding: a notice whose evidence binds an attacker's key to the owner, one revision
    # ahead. Unsealed, sealed with an unknown key, and under the real key ID with another key.
    forged = {**notice, "revision": notice["revision"] + 100}
    forged["evidence"] = {**notice["evidence"], "revision": notice["revision"] + 100}
    subscribers = registry_subscribers(org)
    await signal(mwp_client, rig.workflow_id, SIGNAL_REGISTRY_CHANGED, forged)
    await signal(
        mwp_client,
        rig.workflow_id,
        SIGNAL_REGISTRY_CHANGED,
        attacker(REGISTRY_NOTICE, registry, subscribers, forged),
    )
    await signal(
        mwp_client,
        rig.workflow_id,
        SIGNAL_REGISTRY_CHANGED,
        attacker(REGISTRY_NOTICE, registry, subscribers, forged, key_id=real_key_id(org)),
    )
    # Genuine seals that are still not for this Mission: from a Mission, not the registry;
    # for one Mission only; of another message type; malformed inside.
    other_sender = await genuine(org, REGISTRY_NOTICE, rig.workflow_id, subscribers, forged)
    for_one = await genuine(org, REGISTRY_NOTICE, registry, "mwp-mission/elsewhere", forged)
    wrong_type = await genuine(org, PARENT_CLOSED, registry, subscribers, forged)
    malformed = await genuine(org, REGISTRY_NOTICE, registry, subscribers, {"revision": "x"})
    for message in (other_sender, for_one, wrong_type, malformed):
        await signal(mwp_client, rig.workflow_id, SIGNAL_REGISTRY_CHANGED, message)
    await until_refused(
        mwp_client,
        rig.workflow_id,
        {
            f"{REGISTRY_NOTICE}:unsealed": 1,
            f"{REGISTRY_NOTICE}:untrusted-key": 1,
            f"{REGISTRY_NOTICE}:bad-signature": 1,
            f"{REGISTRY_NOTICE}:wrong-sender": 1,
            f"{REGISTRY_NOTICE}:wrong-recipient": 1,
            f"{REGISTRY_NOTICE}:wrong-type": 1,
            f"{REGISTRY_NOTICE}:malformed": 1,
        },
    )
    assert await rig.state() == before

    # The real registry still counts: a new Session of the Coordinator reaches the Mission,
    # and a Command under it is accepted (the finding's victim got AUTH_STALE_SESSION).
    await rig.renew_session(crew.coordinator)
    await rig.authorize("Write the report")

    # A genuine notice replayed after a newer one: refused as out of order.
    old = await genuine(org, REGISTRY_NOTICE, registry, subscribers, notice)
    await signal(mwp_client, rig.workflow_id, SIGNAL_REGISTRY_CHANGED, old)

    async def out_of_order() -> bool:
        counts = await refusals(mwp_client, rig.workflow_id)
        return counts.get(f"{REGISTRY_NOTICE}:out-of-order") == 1

    await eventually(out_of_order, timeout=15)


async def test_a_forged_parent_closure_cancels_no_mission(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client, spares=1)
    org = rig.crew.organization.organization_id
    item = await rig.authorize("Write the report")
    child, _ = await _promote(rig, item)

    for target in (rig, child):
        before = await target.state()
        wid = target.workflow_id
        await signal(mwp_client, wid, SIGNAL_PARENT_CLOSED, "urn:uuid:forged")
        await signal(
            mwp_client,
            wid,
            SIGNAL_PARENT_CLOSED,
            attacker(PARENT_CLOSED, rig.workflow_id, wid, {"eventId": "urn:uuid:forged"}),
        )
        # Genuinely sealed, but from a Mission that is not this one's parent.
        stranger = mission_workflow_id("urn:uuid:not-the-parent")
        await signal(
            mwp_client,
            wid,
            SIGNAL_PARENT_CLOSED,
            await genuine(org, PARENT_CLOSED, stranger, wid, {"eventId": "urn:uuid:forged"}),
        )
        await until_refused(
            mwp_client,
            wid,
            {
                f"{PARENT_CLOSED}:unsealed": 1,
                f"{PARENT_CLOSED}:untrusted-key": 1,
                f"{PARENT_CLOSED}:wrong-sender": 1,
            },
        )
        assert await target.state() == before
        assert before[1]["state"] == "active"

    # The real closure still works: cancelling the parent item cancels the child.
    await rig.coordinate("work.cancel", {"reason": "replanned"}, work_item_id=item.work_item_id)

    async def cancelled() -> bool:
        return (await child.mission.view())["state"] == "cancelled"

    await eventually(cancelled, timeout=20)


async def test_forged_and_malformed_child_reports_leave_the_parent_item_waiting(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, spares=1)
    org = rig.crew.organization.organization_id
    item = await rig.authorize("Write the report")
    child, _ = await _promote(rig, item)
    child_id = child.mission.mission_id
    report = {
        "childMissionId": child_id,
        "state": "approved",
        "eventId": "urn:uuid:forged",
        "actor": rig.crew.coordinator.principal.to_json(),
        "approval": {"artifactHashes": ["sha256:" + "0" * 64]},
    }
    before = await rig.state()
    await signal(mwp_client, rig.workflow_id, SIGNAL_CHILD_SETTLED, report)
    await signal(
        mwp_client,
        rig.workflow_id,
        SIGNAL_CHILD_SETTLED,
        attacker(CHILD_SETTLED, child.workflow_id, rig.workflow_id, report),
    )
    # The finding's malformed report (an approval without artifactHashes), genuinely sealed:
    # it used to raise in the workflow task.
    no_hashes = {**report, "approval": {}}
    await signal(
        mwp_client,
        rig.workflow_id,
        SIGNAL_CHILD_SETTLED,
        await genuine(org, CHILD_SETTLED, child.workflow_id, rig.workflow_id, no_hashes),
    )
    # A real seal from another Mission, claiming to speak for this child.
    other = mission_workflow_id("urn:uuid:another-child")
    await signal(
        mwp_client,
        rig.workflow_id,
        SIGNAL_CHILD_SETTLED,
        await genuine(org, CHILD_SETTLED, other, rig.workflow_id, report),
    )
    await until_refused(
        mwp_client,
        rig.workflow_id,
        {
            f"{CHILD_SETTLED}:unsealed": 1,
            f"{CHILD_SETTLED}:untrusted-key": 1,
            f"{CHILD_SETTLED}:malformed": 1,
            f"{CHILD_SETTLED}:wrong-sender": 1,
        },
    )
    assert await rig.state() == before
    assert (await rig.mission.work_item(item.work_item_id))["state"] == "blocked"

    # The child's real approval still verifies the parent item.
    await _approve(child, rig.crew.coordinator)

    async def verified() -> bool:
        return (await rig.mission.work_item(item.work_item_id))["state"] == "verified"

    await eventually(verified, timeout=20)


async def test_a_forged_approval_notice_does_not_open_follow_ups(mwp_client: MwpClient) -> None:
    rig = await new_mission(mwp_client)
    crew = rig.crew
    org = crew.organization.organization_id
    registry = organization_workflow_id(org)
    report = {"missionId": rig.mission.mission_id, "ownerId": crew.owner.principal.id}
    await signal(mwp_client, registry, SIGNAL_MISSION_APPROVED, report)
    await signal(
        mwp_client,
        registry,
        SIGNAL_MISSION_APPROVED,
        attacker(MISSION_APPROVED, rig.workflow_id, registry, report),
    )
    # A real seal, but from a Mission other than the one it claims approved.
    other = mission_workflow_id("urn:uuid:some-other-mission")
    await signal(
        mwp_client,
        registry,
        SIGNAL_MISSION_APPROVED,
        await genuine(org, MISSION_APPROVED, other, registry, report),
    )

    async def refused_three() -> bool:
        view = await crew.organization.registry.view()
        return view["refusedMessages"]["counts"] == {
            f"{MISSION_APPROVED}:unsealed": 1,
            f"{MISSION_APPROVED}:untrusted-key": 1,
            f"{MISSION_APPROVED}:wrong-sender": 1,
        }

    await eventually(refused_three, timeout=15)
    early = await refused(
        rig.missions.create(
            crew.owner,
            objective="Fix what the review found",
            coordinator_agent_id=crew.coordinator.principal.id,
            definition_of_done=definition_of_done("Fixed."),
            budget=mission_budget(),
            deadline=utc_now(),
            follow_up_to=rig.mission.mission_id,
        )
    )
    assert early.code in (ErrorCode.INVALID_COMMAND, ErrorCode.SCHEMA_VALIDATION_FAILED)


async def test_forged_subscription_changes_do_not_cut_a_mission_off(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    crew = rig.crew
    org = crew.organization.organization_id
    registry = organization_workflow_id(org)
    # Unsubscribe the Mission (unsealed, then sealed by an attacker as the Mission), and
    # subscribe a workflow of the attacker's choosing.
    await signal(mwp_client, registry, SIGNAL_UNSUBSCRIBE, rig.workflow_id)
    await signal(
        mwp_client,
        registry,
        SIGNAL_UNSUBSCRIBE,
        attacker(REGISTRY_UNSUBSCRIBE, rig.workflow_id, registry, {}),
    )
    await signal(mwp_client, registry, SIGNAL_SUBSCRIBE, "attacker-workflow")

    async def refused_three() -> bool:
        view = await crew.organization.registry.view()
        return sum(view["refusedMessages"]["counts"].values()) == 3

    await eventually(refused_three, timeout=15)
    view = await crew.organization.registry.view()
    assert rig.workflow_id in view["subscribers"]
    assert "attacker-workflow" not in view["subscribers"]
    # The Mission still hears of registry changes.
    await rig.renew_session(crew.coordinator)


async def _work_item_child(rig: MissionRig, work_item_id: str) -> str:
    child = work_item_workflow_id(rig.mission.mission_id, work_item_id)

    async def running() -> bool:
        try:
            view: dict[str, Any] = await rig.client.query(child, QUERY_WORK_ITEM)
        except Exception:
            return False
        return bool(view)

    await eventually(running, timeout=15)
    return child


async def test_forged_and_replayed_transitions_leave_a_work_item_child_as_it_was(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    org = rig.crew.organization.organization_id
    first = await rig.authorize("Write the report")
    second = await rig.authorize("Check the figures")
    child = await _work_item_child(rig, first.work_item_id)
    other_child = await _work_item_child(rig, second.work_item_id)
    offer = await rig.offer(first, rig.crew.workers[0])

    async def offered() -> bool:
        view: dict[str, Any] = await mwp_client.query(child, QUERY_WORK_ITEM)
        return view["state"] == "offered"

    await eventually(offered, timeout=15)
    held: dict[str, Any] = await mwp_client.query(child, QUERY_WORK_ITEM)
    # The genuine transitions the Mission sent, as recorded in the child's history.
    sent = [
        e.workflow_execution_signaled_event_attributes
        for e in (await mwp_client.temporal.get_workflow_handle(child).fetch_history()).events
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert sent, "the Mission sent the offer as a sealed transition"

    forged_view = {**held, "state": "verified", "revision": held["revision"] + 10}
    update = {"view": forged_view, "timers": [], "searchAttributes": {}, "final": forged_view}
    await signal(mwp_client, child, SIGNAL_TRANSITION, update)
    await signal(
        mwp_client,
        child,
        SIGNAL_TRANSITION,
        attacker(WORK_ITEM_TRANSITION, rig.workflow_id, child, update),
    )
    # A real seal for this child's sibling, and an older state of this one, replayed.
    sibling = await genuine(org, WORK_ITEM_TRANSITION, rig.workflow_id, other_child, update)
    older = {**update, "view": {**held, "state": "queued", "revision": held["revision"] - 1}}
    replayed = await genuine(org, WORK_ITEM_TRANSITION, rig.workflow_id, child, older)
    bad_timer = {**update, "view": held, "timers": [{"kind": "x", "token": "t", "due_at": 1}]}
    malformed = await genuine(org, WORK_ITEM_TRANSITION, rig.workflow_id, child, bad_timer)
    for message in (sibling, replayed, malformed):
        await signal(mwp_client, child, SIGNAL_TRANSITION, message)
    await until_refused(
        mwp_client,
        child,
        {
            f"{WORK_ITEM_TRANSITION}:unsealed": 1,
            f"{WORK_ITEM_TRANSITION}:untrusted-key": 1,
            f"{WORK_ITEM_TRANSITION}:wrong-recipient": 1,
            f"{WORK_ITEM_TRANSITION}:out-of-order": 1,
            f"{WORK_ITEM_TRANSITION}:malformed": 1,
        },
    )
    assert await mwp_client.query(child, QUERY_WORK_ITEM) == held
    # A forged timer report for the offer's real token changes nothing before it is due,
    # and a malformed one is refused without failing the Mission's task.
    before = await rig.state()
    timers: list[dict[str, str]] = await mwp_client.query(child, QUERY_TIMERS)
    assert timers, "an offer is timed"
    for timer in timers:
        await signal(
            mwp_client,
            rig.workflow_id,
            SIGNAL_TIMER_FIRED,
            {"work_item_id": first.work_item_id, "kind": timer["kind"], "token": timer["token"]},
        )
    await signal(
        mwp_client,
        rig.workflow_id,
        SIGNAL_TIMER_FIRED,
        {"work_item_id": first.work_item_id, "kind": 7, "token": ["x"]},
    )
    await until_refused(mwp_client, rig.workflow_id, {"timer-fired:malformed": 1})
    assert await rig.state() == before
    # The child still follows the Mission: the offer is accepted and the child sees it.
    await rig.accept(rig.crew.workers[0], first, offer["offers"][0]["offerId"])

    async def owned() -> bool:
        view: dict[str, Any] = await mwp_client.query(child, QUERY_WORK_ITEM)
        return view["state"] in ("queued", "active")

    await eventually(owned, timeout=15)
