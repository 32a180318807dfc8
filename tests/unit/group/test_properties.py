"""Random sequences of valid and invalid Commands and timer firings keep the invariants:

* accepted Events get contiguous sequences from 1 and validate against the Event schema;
* a rejected Command carries a typed error (never ``INTERNAL_ERROR``) and changes nothing;
* a byte-equal retry returns the original receipt and changes nothing;
* every WorkItem has at most one owner, owners exist exactly in the owned states, and at most
  one offer of a round is accepted; a submission names published Artifacts only;
* replaying the log rebuilds the same state.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import replay
from mwp.core.group.clock import plus_seconds
from mwp.core.trust.registry import Principal
from tests.unit.group.harness import (
    COORD,
    W1,
    W2,
    W3,
    Harness,
    content_hash,
    contract,
    evidence,
    fingerprint,
    item_id,
    mission_harness,
    progress,
    selection_basis,
)

ITEMS = ["a", "b", "c"]
WORKERS = [W1, W2, W3]
OWNED = {"queued", "active", "blocked", "submitted", "verified"}
CORRUPTIONS = [
    *[None] * 14,
    "session",
    "membership",
    "revision",
    "coordinator",
    "group",
    "lease",
    "ownership",
]


def _owner_payload(h: Harness, name: str, lease: bool = True) -> dict[str, Any]:
    view = h.view(name)
    payload: dict[str, Any] = {"ownershipEpoch": max(1, view["ownershipEpoch"])}
    if lease:
        payload["leaseId"] = view.get("executionLease", {}).get("leaseId", "urn:example:lease:x")
    return payload


def _build(h: Harness, op: int, name: str, worker: Principal) -> dict[str, Any] | None:
    target = {"workItemId": item_id(name)}
    known = item_id(name) in h.authority.work_item_ids()
    if op == 20 and known:
        return _next_step(h, name, worker)
    if op == 19:
        return h.command(
            worker, "message.post", {"content": [{"type": "text", "text": "Deploy it now!"}]}
        )
    if op == 0:
        dependencies = [item_id("a")] if name == "d" else []
        return h.command(
            COORD,
            "work.authorize",
            {"contract": contract(dependencyWorkItemIds=dependencies)},
            **target,
        )
    if not known:
        return h.command(
            worker, "message.post", {"content": [{"type": "text", "text": "deploy it now"}]}
        )
    view = h.view(name)
    if op == 1:
        payload: dict[str, Any] = {
            "candidates": [
                {"agentId": w.id, "selectionBasis": selection_basis()}
                for w in (worker, W2)
                if w is worker or worker is not W2
            ],
            "expiresAt": plus_seconds(h.now, 900),
            "contextPackageId": "urn:example:context-package:p",
        }
        if view["contract"]["contractVersion"] < 3 and worker is W3:
            # A revised contract; for "a" it would depend on "b", which depends on "a".
            payload["contract"] = contract(
                contractVersion=view["contract"]["contractVersion"] + 1,
                dependencyWorkItemIds=[item_id("b")] if name == "a" else [],
            )
        return h.command(COORD, "work.offer", payload, **target)
    if op == 2:
        offers = [o for o in view.get("offers", []) if o["agentId"] == worker.id]
        offer = offers[0]["offerId"] if offers else "urn:example:offer:none"
        return h.command(
            worker,
            "work.accept_offer",
            {"offerId": offer, "contractVersion": view["contract"]["contractVersion"]},
            **target,
        )
    if op == 3:
        return h.command(worker, "work.start", _owner_payload(h, name, lease=False), **target)
    if op == 4:
        return h.command(
            worker,
            "ext.missionweaveprotocol.core.execution_lease_renew",
            _owner_payload(h, name),
            **target,
        )
    if op == 5:
        return h.command(
            worker, "work.checkpoint", {**_owner_payload(h, name), "progress": progress()}, **target
        )
    if op == 6:
        return h.command(
            worker,
            "work.block",
            {**_owner_payload(h, name), "requiredResolution": "wait"},
            **target,
        )
    if op == 7:
        return h.command(COORD, "work.unblock", {}, **target)
    if op == 8:
        return h.command(
            worker,
            "work.submit",
            {
                **_owner_payload(h, name),
                "artifactHashes": [content_hash(name)],
                "evidence": evidence(),
            },
            **target,
        )
    if op == 21:
        return h.command(
            worker,
            "artifact.publish",
            {**_owner_payload(h, name), "manifest": h.manifest(name, worker, content_hash(name))},
            **target,
        )
    if op == 9:
        return h.command(COORD, "work.accept_result", {}, **target)
    if op == 10:
        return h.command(
            COORD,
            "work.fail",
            {"reason": "x", "failureEvidenceIds": ["urn:example:evidence:f"]},
            **target,
        )
    if op == 11:
        return h.command(COORD, "work.cancel", {}, **target)
    if op == 12:
        return h.command(
            COORD, "mission.submit_for_approval", {"artifactHashes": [content_hash(name)]}
        )
    if op == 13:
        return h.command(COORD, "mission.renew_coordinator", {})
    if op == 14:
        return h.command(
            COORD,
            "membership.change",
            {"memberId": worker.id, "role": "observer" if worker is W2 else "worker"},
        )
    return None


def _next_step(h: Harness, name: str, worker: Principal) -> dict[str, Any] | None:
    """The natural next Command for the item, by the actor who may send it."""
    view = h.view(name)
    state = view["state"]
    owner = next((w for w in WORKERS if w.id == view.get("owner", {}).get("agentId")), worker)
    pending = [o for o in view.get("offers", []) if o["status"] == "pending"]
    step = {
        "open": (1, worker),
        "failed": (1, worker),
        "offered": (
            2,
            next((w for w in WORKERS if pending and w.id == pending[0]["agentId"]), worker),
        ),
        "queued": (3, owner),
        "active": (8 if content_hash(name) in h.published() else 21, owner),
        "blocked": (7, owner),
        "submitted": (9, owner),
    }.get(state)
    return _build(h, step[0], name, step[1]) if step else None


def _corrupt(command: dict[str, Any], how: str | None, h: Harness) -> dict[str, Any]:
    if how is None:
        return command
    command = dict(command)
    if how == "session" and "sessionEpoch" in command:
        command["sessionEpoch"] += 1
    elif how == "membership" and "membershipEpoch" in command:
        command["membershipEpoch"] += 1
    elif how == "revision":
        command["expectedRevision"] = 999
    elif how == "coordinator" and "coordinatorEpoch" in command:
        command["coordinatorEpoch"] -= 1
    elif how == "group":
        command["groupId"] = "urn:example:group:elsewhere"
    elif how == "lease" and "leaseId" in command["payload"]:
        command["payload"] = {**command["payload"], "leaseId": "urn:example:lease:old"}
    elif how == "ownership" and "ownershipEpoch" in command["payload"]:
        command["payload"] = {**command["payload"], "ownershipEpoch": 99}
    return command


def _check_invariants(h: Harness) -> None:
    published = h.published()
    for work_item_id in h.authority.work_item_ids():
        view = h.authority.work_item_view(work_item_id)
        assert ("owner" in view) == (view["state"] in OWNED), view
        if "owner" in view:
            assert view["owner"]["ownershipEpoch"] == view["ownershipEpoch"]
        accepted = [o for o in view.get("offers", []) if o["status"] == "accepted"]
        assert len(accepted) <= 1
        if view["state"] == "offered":
            assert "owner" not in view
        if "submission" in view:
            assert set(view["submission"]["artifactHashes"]) <= published


# Operations 0-14, 19 and 21 build Commands (see _build), 20 the item's natural next Command;
# 15 advances time, 16 fires every timer, 17 resends the last accepted Command, 18 reuses
# its Action ID for other content.
OPERATIONS = [
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    15,
    16,
    16,
    17,
    18,
    19,
    21,
    *[20] * 30,
]

STEP = st.tuples(
    st.sampled_from(OPERATIONS),
    st.sampled_from(["a", "a", "b", "c", "c", "d"]),
    st.sampled_from(WORKERS),
    st.sampled_from(CORRUPTIONS),
    st.sampled_from([10, 100, 299, 400, 4000]),
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(STEP, min_size=10, max_size=50))
def test_random_command_sequences_keep_the_invariants(steps: list[Any]) -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b", dependencyWorkItemIds=[item_id("a")])
    h.authorize("c")
    h.publish_context_package(h.context_package("urn:example:context-package:p"))
    sent: list[dict[str, Any]] = []
    for op, name, worker, corruption, seconds in steps:
        if op == 15:
            h.advance(seconds)
            continue
        if op == 16:
            for timer in h.authority.timers():
                before = h.authority.sequence
                outcome = h.fire(timer.work_item_id, timer.kind, timer.token)
                if outcome is not None:
                    assert outcome.events[0]["sequence"] == before + 1
            continue
        if op in (17, 18):
            if not sent:
                continue
            command = sent[-1]
            if op == 18:  # the same Action ID with other content
                command = {**command, "correlationId": "urn:example:correlation:changed"}
        else:
            built = _build(h, op, name, worker)
            if built is None:
                continue
            command = _corrupt(built, corruption, h)
        before, sequence = fingerprint(h.authority), h.authority.sequence
        try:
            outcome = h.send(command)
        except MwpError as error:
            assert error.code != ErrorCode.INTERNAL_ERROR, error
            assert error.action_id == command["actionId"]
            assert fingerprint(h.authority) == before
            assert h.authority.sequence == sequence
            continue
        if outcome.duplicate:
            assert outcome.events == () and fingerprint(h.authority) == before
        else:
            sent.append(command)
            numbers = [e["sequence"] for e in outcome.events]
            assert numbers == list(range(sequence + 1, sequence + 1 + len(numbers)))
            assert outcome.receipt.last_sequence == h.authority.sequence
        _check_invariants(h)

    assert [e["sequence"] for e in h.events] == list(range(1, h.authority.sequence + 1))
    rebuilt = replay(h.events).snapshot()["state"]
    live = h.authority.snapshot()["state"]
    rebuilt.pop("receipts")
    live.pop("receipts")
    assert rebuilt == live
