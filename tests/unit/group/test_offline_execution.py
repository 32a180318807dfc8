"""Bounded offline execution (spec 11.5, MWP-WRK-020 to 022): a checkpoint a Worker buffered
while the Group was unreachable carries the critical bounded-offline-execution binding and is
re-signed under the Worker's new Session on reconnect. The Group takes it only as the truth
about the lease the run held, inside that lease and the grace, and charges the offline usage in
the same decision; anything else is refused and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import replay
from mwp.core.group.api import RULES_LEDGER
from mwp.core.group.clock import plus_seconds
from mwp.core.group.offline_execution import MAX_GRACE_SECONDS, OFFLINE_EXTENSION
from mwp.core.group.resource_usage import RECORDED_KIND
from tests.unit.group.harness import (
    GROUP,
    W1,
    W2,
    item_id,
    mission_harness,
    progress,
)

CHECKPOINT = "work.checkpoint"


class Offline:
    """WorkItem ``a`` active under W1's lease; the connection is lost ``lost_after`` seconds in."""

    def __init__(self, lost_after: int = 10) -> None:
        self.h = mission_harness()
        self.h.drive("a", "active")
        lease = self.h.view("a")["executionLease"]
        self.lease_id: str = lease["leaseId"]
        self.expires_at: str = lease["expiresAt"]
        self.started_at: str = lease["startsAt"]
        self.disconnected_at = self.h.advance(lost_after)

    def binding(self, buffered_at: str, **overrides: Any) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agentId": W1.id,
            "groupId": GROUP,
            "workItemId": item_id("a"),
            "sessionEpoch": 1,
            "ownershipEpoch": 1,
            "executionLeaseId": self.lease_id,
            "disconnectedAt": self.disconnected_at,
            "bufferedAt": buffered_at,
            "graceDeadline": min(plus_seconds(self.disconnected_at, 120), self.expires_at),
            "executionLeaseExpiresAt": self.expires_at,
            "resourceUsageDelta": {"modelTokenLimit": 300},
        }
        data.update(overrides)
        return data

    def buffered(self, **overrides: Any) -> dict[str, Any]:
        """A checkpoint buffered now, offline (its binding as ``overrides`` change it)."""
        return self.binding(self.h.now, **overrides)

    def reconcile(
        self, binding: dict[str, Any], *, session: int = 2, **payload: Any
    ) -> dict[str, Any]:
        """The buffered checkpoint, re-signed now under the Worker's Session ``session``."""
        self.h.sessions[W1.id] = session
        return self.h.command(
            W1,
            CHECKPOINT,
            {
                "ownershipEpoch": 1,
                "leaseId": self.lease_id,
                "progress": progress(),
                **payload,
            },
            workItemId=item_id("a"),
            extensions={OFFLINE_EXTENSION: {"version": "0.1.0", "critical": True, "data": binding}},
        )


def test_after_reconnecting_the_buffered_checkpoint_is_charged_and_applied_at_once() -> None:
    run = Offline()
    run.h.advance(20)
    binding = run.buffered()
    run.h.advance(60)  # the Worker reconnects: a new Session, which revokes the old lease
    run.h.sessions[W1.id] = 2
    revoked = run.h.revoke_replaced_sessions()
    assert revoked is not None and run.h.view("a")["state"] == "queued"

    outcome = run.h.send(run.reconcile(binding))

    charge, checkpoint = outcome.events
    assert [charge["kind"], checkpoint["kind"]] == [RECORDED_KIND, "work.checkpointed"]
    assert charge["payload"]["sessionEpoch"] == 1  # the historical execution Session
    assert charge["payload"]["reconciliation"] == {
        "sessionEpoch": 2,
        "disconnectedAt": binding["disconnectedAt"],
        "bufferedAt": binding["bufferedAt"],
        "graceDeadline": binding["graceDeadline"],
    }
    assert charge["payload"]["delta"] == {"modelTokenLimit": 300}
    assert checkpoint["payload"]["leaseId"] == run.lease_id
    view = run.h.view("a")
    assert view["state"] == "queued" and view["checkpoint"]["leaseId"] == run.lease_id
    assert view["resourceUsage"]["cumulative"] == {"modelTokenLimit": 300}
    # A second buffered checkpoint of the same run is taken too; then the run restarts under
    # a new lease, after which nothing buffered under the old one is.
    run.h.send(run.reconcile(run.binding(plus_seconds(binding["bufferedAt"], 5))))
    run.h.start("a", W1)
    late = run.reconcile(run.binding(plus_seconds(binding["bufferedAt"], 6)))
    error = run.h.refuse(late, ErrorCode.WORK_LEASE_EXPIRED)
    assert (error.details or {})["reason"] == "offline_lease"
    assert replay(run.h.events).work_item_view(item_id("a")) == run.h.view("a")


def test_a_lease_the_group_never_revoked_takes_the_checkpoint_and_is_released() -> None:
    run = Offline()
    run.h.advance(5)
    binding = run.buffered(resourceUsageDelta={})
    outcome = run.h.send(run.reconcile(binding))
    assert [e["kind"] for e in outcome.events] == ["work.checkpointed"]  # nothing spent offline
    assert run.h.view("a")["state"] == "queued" and "executionLease" not in run.h.view("a")


@pytest.mark.parametrize(
    ("case", "code", "reason"),
    [
        ("buffered before the disconnection", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered at the grace deadline", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered before the lease", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("grace past the lease", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("grace past policy", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered in the future", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered after the revocation", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("another lease", ErrorCode.WORK_LEASE_EXPIRED, "offline_lease"),
        ("another session", ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("another lease expiry", ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("another agent", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("another group", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("another work item", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("another ownership epoch", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("a missing member", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("a malformed time", ErrorCode.INVALID_COMMAND, "offline_binding"),
    ],
)
def test_progress_outside_the_lease_and_grace_or_not_bound_to_it_is_refused(
    case: str, code: ErrorCode, reason: str
) -> None:
    run = Offline()
    run.h.advance(20)
    now = run.h.now
    grace = plus_seconds(run.disconnected_at, 120)
    binding = {
        "buffered before the disconnection": lambda: run.binding(
            plus_seconds(run.disconnected_at, -1)
        ),
        "buffered at the grace deadline": lambda: run.binding(grace, graceDeadline=grace),
        "buffered before the lease": lambda: run.binding(
            plus_seconds(run.started_at, -1), disconnectedAt=plus_seconds(run.started_at, -2)
        ),
        "grace past the lease": lambda: run.binding(
            now, graceDeadline=plus_seconds(run.expires_at, 1)
        ),
        "grace past policy": lambda: run.binding(
            now, graceDeadline=plus_seconds(run.disconnected_at, MAX_GRACE_SECONDS + 1)
        ),
        "buffered in the future": lambda: run.binding(plus_seconds(now, 1)),
        "buffered after the revocation": lambda: run.binding(now),
        "another lease": lambda: run.buffered(executionLeaseId="urn:example:lease:other"),
        "another session": lambda: run.buffered(sessionEpoch=2),
        "another lease expiry": lambda: run.buffered(
            executionLeaseExpiresAt=plus_seconds(run.expires_at, 60)
        ),
        "another agent": lambda: run.buffered(agentId=W2.id),
        "another group": lambda: run.buffered(groupId="urn:example:group:beta"),
        "another work item": lambda: run.buffered(workItemId=item_id("b")),
        "another ownership epoch": lambda: run.buffered(ownershipEpoch=2),
        "a missing member": lambda: {
            k: v for k, v in run.buffered().items() if k != "graceDeadline"
        },
        "a malformed time": lambda: run.buffered(bufferedAt="yesterday"),
    }[case]()
    if case == "buffered after the revocation":
        run.h.sessions[W1.id] = 2
        assert run.h.revoke_replaced_sessions() is not None  # revoked at `now`, not after
    command = run.reconcile(binding)
    if case == "another lease":
        command["payload"]["leaseId"] = "urn:example:lease:other"
    error = run.h.refuse(command, code)
    assert (error.details or {})["reason"] == reason


def test_a_lease_its_owner_closed_or_an_owner_fenced_reconciles_nothing() -> None:
    closed = Offline()
    closed.h.advance(20)
    binding = closed.buffered()
    closed.h.submit(  # the owner itself checkpointed online: the lease is over
        W1, CHECKPOINT, closed.h.owner_payload("a", progress=progress()), workItemId=item_id("a")
    )
    error = closed.h.refuse(closed.reconcile(binding, session=1), ErrorCode.WORK_LEASE_EXPIRED)
    assert (error.details or {})["reason"] == "offline_lease"

    fenced = Offline()
    fenced.h.advance(20)
    binding = fenced.buffered()
    [timer] = [t for t in fenced.h.authority.timers() if t.kind == "execution_lease"]
    fenced.h.now = fenced.expires_at
    assert fenced.h.fire(item_id("a"), "execution_lease", timer.token) is not None
    fenced.h.refuse(fenced.reconcile(binding), ErrorCode.WORK_STALE_OWNERSHIP)


def test_an_offline_delta_over_budget_refuses_charge_and_checkpoint() -> None:
    run = Offline()
    run.h.advance(20)
    over = run.buffered(resourceUsageDelta={"modelTokenLimit": 1001})
    run.h.refuse(run.reconcile(over), ErrorCode.BUDGET_EXCEEDED)
    assert run.h.view("a")["state"] == "active"
    zero = run.buffered(resourceUsageDelta={"modelTokenLimit": 0})
    run.h.refuse(run.reconcile(zero), ErrorCode.INVALID_COMMAND)
    effect = run.buffered(resourceUsageDelta={"externalSideEffectLimit": 1})
    error = run.h.refuse(run.reconcile(effect), ErrorCode.AUTH_FORBIDDEN)
    assert (error.details or {})["reason"] == "offline_side_effect"


def test_the_binding_is_interpreted_on_checkpoints_under_current_rules_only() -> None:
    run = Offline()
    run.h.advance(20)
    on_renewal = run.reconcile(run.buffered(), session=1)
    on_renewal["kind"] = "ext.missionweaveprotocol.core.execution_lease_renew"
    error = run.h.refuse(on_renewal, ErrorCode.UNKNOWN_CRITICAL_EXTENSION)
    assert (error.details or {})["extensions"] == [OFFLINE_EXTENSION]
    run.h.rules = RULES_LEDGER
    run.h.refuse(run.reconcile(run.buffered()), ErrorCode.UNKNOWN_CRITICAL_EXTENSION)
