"""The proof of the tester's restart (`scheduling.queues_rebuilt`): its status counts only once
read after its Scheduler applied the Group's revocation of the dead runtime's lease; read
before, it is what the dead runtime left, and a run once read it with nothing running or
queued (the scene now waits for that revocation, within a bound)."""

from __future__ import annotations

import json
from typing import Any

from mwp.demo import cast
from mwp.demo.groups import GroupEvents
from mwp.demo.proofs import LEASE_REVOKED, Injected, _restart
from mwp.demo.report import Report

Json = dict[str, Any]
TESTER = cast.agent_id("tester")
ITEM = "urn:uuid:killed"
KILLED_AT = 1_800_000_000.0  # 2027-01-15T08:00:00Z: the tester dies 2 s later


def event(sequence: int, kind: str, second: int, **fields: Any) -> Json:
    return {
        "sequence": sequence,
        "kind": kind,
        "eventId": f"urn:uuid:e{sequence}",
        "occurredAt": f"2027-01-15T08:00:{second:02d}+00:00",
        "actor": {"id": TESTER},
        "payload": fields.pop("payload", {}),
        **fields,
    }


def small_log() -> GroupEvents:
    member = {"membership": {"member": {"id": TESTER}}}
    return GroupEvents(
        [
            event(3, "membership.changed", 0, payload=member),
            event(10, "work.authorized", 0, workItemId=ITEM),
            event(12, "work.started", 0, workItemId=ITEM),
            event(20, LEASE_REVOKED, 5, workItemId=ITEM),
            event(22, "work.started", 6, workItemId=ITEM),
            event(30, "work.submitted", 8, workItemId=ITEM),
        ]
    )


def rebuilt(applied_through: int) -> Json:
    status = {"groups": 1, "running": 1, "queued": 2, "sessionEpoch": 3}
    injected = Injected(
        killed=ITEM,
        killed_at=KILLED_AT + 2,
        tester_status=json.dumps(status),
        tester_rebuilt_to=applied_through,
        replaced={},
        expired="",
        preempted="",
        offline="",
        disconnection={},
        arrived_at=KILLED_AT + 3,
    )
    report = Report(lambda _: None)
    _restart(report, {"small": small_log()}, injected)
    (check,) = (c for c in report.to_json()["checks"] if c["name"] == "scheduling.queues_rebuilt")
    found: Json = check
    return found


def test_a_status_read_after_the_scheduler_took_the_revocation_counts() -> None:
    check = rebuilt(applied_through=20)
    assert check["passed"], check
    assert check["proof"]["revokedAt"] == 20


def test_a_status_read_before_the_scheduler_took_the_revocation_does_not() -> None:
    assert not rebuilt(applied_through=19)["passed"]
    assert not rebuilt(applied_through=0)["passed"]  # never got there within the bound
